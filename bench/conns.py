#!/usr/bin/env python3
"""Memory per client connection, Strata side by side with redis-server.

For each server (redis, strata --threads 1, strata --threads 2 by default) a fresh server is started and
--clients connections are opened; each sends one request and reads its reply (a PING, or with --value a
GET of a value of that many bytes, so that the reply buffer has held it). Then the server's RSS and INFO
used_memory are read twice: at once ("active") and after --idle seconds without traffic ("idle"), both
minus the same readings taken before the clients connected. Redis frees an idle client's query buffer
after 2 s (its client cron); so does Strata (read and reply buffers, see docs/architecture.md).

  RSS B/conn, used B/conn   growth divided by the number of clients
  ratio                     this server's idle RSS per client divided by redis's (below 1.00x: less)

The process's open-file limit must allow --clients + 50 descriptors (raise it with `ulimit -n`). Standard
library only; reuses bench.py's process helpers. See bench/README.md.
"""

import argparse
import os
import resource
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402


def read_reply(sock, want):
    """Reads until `want` bytes of reply arrived (the reply's exact length is known)."""
    got = 0
    while got < want:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("a client was closed by the server")
        got += len(chunk)


def measure(label, argv, args, workdir):
    server = common.Server(label, argv, workdir)
    try:
        if args.value:
            value = b"x" * args.value
            common.call(server.port, "SET", "bench:value", value)
            request = common.resp_command("GET", "bench:value")
            reply_len = len(b"$%d\r\n" % args.value) + args.value + 2
        else:
            request = common.resp_command("PING")
            reply_len = len(b"+PONG\r\n")
        time.sleep(0.5)
        rss0 = server.rss_bytes()
        used0 = server.info_field("memory", "used_memory")
        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(args.clients)]
        # Every request once all are connected: the active reading comes before any has idled 2 s.
        for s in socks:
            s.sendall(request)
        for s in socks:
            read_reply(s, reply_len)
        time.sleep(0.5)
        active = (server.rss_bytes() - rss0, server.info_field("memory", "used_memory") - used0)
        time.sleep(args.idle)
        idle = (server.rss_bytes() - rss0, server.info_field("memory", "used_memory") - used0)
        for s in socks:
            s.close()
        return active, idle
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", default="target/release/strata", help="path to the strata binary")
    p.add_argument("--threads", default="1,2", help="strata thread counts, comma-separated")
    p.add_argument("--clients", type=int, default=5000)
    p.add_argument("--value", type=int, default=0, help="GET a value of this many bytes instead of PING")
    p.add_argument("--idle", type=float, default=4.0, help="seconds without traffic before the idle reading")
    args = p.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.clients + 50
    if soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
        except (ValueError, OSError):
            pass
        if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
            sys.exit("open-file limit %d is below %d: raise it (ulimit -n) or pass fewer --clients" % (soft, need))

    configs = [common.redis_config()] + [common.strata_config(os.path.abspath(args.strata), int(t)) for t in args.threads.split(",")]
    workdir = tempfile.mkdtemp(prefix="bench-conns-")
    rows = []
    for label, argv in configs:
        try:
            rows.append((label, measure(label, argv, args, workdir)))
        except (RuntimeError, OSError) as e:
            print("%s: FAILED (%s)" % (label, str(e).splitlines()[0]))
    what = "GET of %d bytes" % args.value if args.value else "PING"
    print("\n%d clients, one %s each, then %.0f s idle" % (args.clients, what, args.idle))
    print("| server | RSS B/conn active | used B/conn active | RSS B/conn idle | used B/conn idle | idle RSS ratio |")
    print("|---|---|---|---|---|---|")
    base = next((idle[0] for label, (_, idle) in rows if label == "redis"), None)
    for label, (active, idle) in rows:
        ratio = "%.2fx" % (idle[0] / base) if base else "n/a"
        print("| %s | %d | %d | %d | %d | %s |" % (label, active[0] / args.clients, active[1] / args.clients,
                                                  idle[0] / args.clients, idle[1] / args.clients, ratio))


if __name__ == "__main__":
    main()
