#!/usr/bin/env python3
"""PUBLISH fan-out: messages delivered per second, Strata side by side with redis-server.

For each server (redis, strata --threads 1, strata with its default thread count) and each subscriber
count (1 and 100 by default), a fresh server is started, N subscriber connections SUBSCRIBE to one channel
(with several threads, the kernel spreads them over all threads), and redis-benchmark sends PUBLISHes to
that channel from 20 clients at pipeline 16. The subscribers are read by one process that only counts
messages; the run ends when every message has reached every subscriber. With --rounds N every run is
repeated N times (a fresh server each time) and medians are reported.

  delivered/s   PUBLISHes x subscribers / seconds from the first PUBLISH to the last delivery
  publish/s     redis-benchmark's PUBLISH rate
  CPU s/Mmsg    server CPU seconds per million delivered messages
  ratio         delivered/s divided by redis's for the same subscriber count

The pubsub output-buffer limit is lifted during the run (CONFIG SET client-output-buffer-limit
"pubsub 0 0 0"), so a subscriber that the counting process reads late is not disconnected. Standard library
only; reuses bench.py's process helpers. See bench/README.md.
"""

import argparse
import os
import selectors
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402

CHANNEL = "bench:channel"
# What every delivered message contains once: the end of `*3\r\n$7\r\nmessage\r\n` (the payload is
# made of 'x', so it cannot contain it).
MARK = b"$7\r\nmessage\r\n"


class Subscribers:
    """N subscribed connections and a thread that counts the messages they receive."""

    def __init__(self, port, n):
        self.socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(common.resp_command("SUBSCRIBE", CHANNEL))
            self.socks.append(s)
        for s in self.socks:
            got = b""
            while not got.endswith(b":1\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    raise RuntimeError("a subscriber was closed while subscribing")
                got += chunk
            s.setblocking(False)
        self.count = 0
        self.closed = 0
        self.stop = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        sel = selectors.DefaultSelector()
        tails = {}
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
            tails[s] = b""
        while not self.stop:
            for key, _ in sel.select(timeout=0.1):
                s = key.fileobj
                try:
                    chunk = s.recv(1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(s)
                    self.closed += 1
                    continue
                data = tails[s] + chunk
                # The tail is shorter than MARK, so every match here ends in the new bytes.
                self.count += data.count(MARK)
                tails[s] = data[-(len(MARK) - 1):]

    def close(self):
        self.stop = True
        self.thread.join()
        for s in self.socks:
            s.close()


def run(server, subscribers, publishes, size, timeout):
    common.call(server.port, "CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 0 0")
    subs = Subscribers(server.port, subscribers)
    try:
        expected = publishes * subscribers
        cpu0 = server.cpu_seconds()
        start = time.time()
        bench = subprocess.run(
            ["redis-benchmark", "-p", str(server.port), "-c", "20", "-P", "16", "-n", str(publishes), "--csv",
             "PUBLISH", CHANNEL, "x" * size],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        if bench.returncode != 0:
            raise RuntimeError("redis-benchmark failed: %s" % bench.stdout.decode(errors="replace")[-300:])
        publish_rate = None
        for line in bench.stdout.decode(errors="replace").splitlines():
            fields = [f.strip('"') for f in line.split(",")]
            if len(fields) > 1 and fields[0].upper().startswith("PUBLISH"):
                publish_rate = float(fields[1])
        deadline = time.time() + timeout
        while subs.count < expected and time.time() < deadline and subs.closed == 0:
            time.sleep(0.005)
        elapsed = time.time() - start
        cpu = server.cpu_seconds() - cpu0
        if subs.count < expected:
            raise RuntimeError("only %d of %d messages delivered (%d subscribers closed)" % (
                subs.count, expected, subs.closed))
        return {"delivered": expected / elapsed, "publish": publish_rate, "cpu": cpu / (expected / 1e6)}
    finally:
        subs.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subscribers", default="1,100", help="subscriber counts to run (default 1,100)")
    p.add_argument("--publishes", type=int, default=200000,
                   help="PUBLISHes per run with 1 subscriber (default 200000); runs with N subscribers send "
                        "publishes*10/N, at least 20000, so every run moves a similar volume")
    p.add_argument("--size", type=int, default=32, help="message payload bytes (default 32)")
    p.add_argument("--threads", default="1,0", help="strata --threads values (0: one per core; default 1,0)")
    p.add_argument("--timeout", type=float, default=120, help="seconds per run before giving up (default 120)")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat every run this many times and report the median (default 1)")
    p.add_argument("--strata", help="use this strata binary instead of building one")
    args = p.parse_args()

    binary = os.path.abspath(args.strata) if args.strata else common.build_strata()
    common.describe_machine()
    configs = [common.redis_config()]
    for t in [int(t) for t in args.threads.split(",") if t.strip()]:
        label, argv = common.strata_config(binary, t)
        if t == 0:
            label = "strata default (t%d)" % os.cpu_count()
        configs.append((label, argv))
    workdir = os.path.abspath(os.environ.get("TMPDIR", "/tmp"))
    results = {}
    for n in [int(s) for s in args.subscribers.split(",") if s.strip()]:
        publishes = args.publishes if n == 1 else max(20000, args.publishes * 10 // n)
        for label, argv in configs:
            runs = []
            for _ in range(args.rounds):
                try:
                    server = common.Server(label, argv, workdir)
                except RuntimeError as e:
                    print("%s: %s" % (label, e))
                    break
                try:
                    runs.append(run(server, n, publishes, args.size, args.timeout))
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                    print("%s, %d subscribers: FAILED: %s" % (label, n, e))
                    break
                finally:
                    server.stop()
            if len(runs) < args.rounds:
                results[(n, label)] = None
                continue
            results[(n, label)] = {k: common.median([r[k] or 0 for r in runs]) for k in runs[0]}

    print()
    print("| subscribers | server | delivered/s | publish/s | CPU s/Mmsg | ratio |")
    print("|---|---|---|---|---|---|")
    for n in [int(s) for s in args.subscribers.split(",") if s.strip()]:
        base = results.get((n, "redis"))
        for label, _ in configs:
            r = results.get((n, label))
            if r is None:
                print("| %d | %s | FAILED | | | |" % (n, label))
                continue
            ratio = "%.2fx" % (r["delivered"] / base["delivered"]) if base else "n/a"
            publish = "%.0f" % r["publish"] if r["publish"] else "n/a"
            print("| %d | %s | %.0f | %s | %.2f | %s |" % (n, label, r["delivered"], publish, r["cpu"], ratio))


if __name__ == "__main__":
    main()
