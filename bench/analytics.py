#!/usr/bin/env python3
"""Side-by-side benchmark of Strata's analytics commands (bitmaps, HyperLogLog) against redis-server.

Each row prefills the same data into a fresh server of each kind, then runs redis-benchmark with an
arbitrary command line (50 clients, pipeline 1) and reports ops/s, p50 latency and the server's CPU time
per operation (utime + stime from /proc/<pid>/stat over the run), with ratios against Redis:

  bitcount   BITCOUNT over one 1 MB bitmap of random bytes
  pfadd      PFADD hll:<one of 100 keys> <one of 100 elements> on 100 dense HLLs
  pfcount    PFCOUNT of all 100 dense HLLs in one command (a merge of 100 x 16384 registers)

Strata runs with --threads 1 by default, so both servers use one core for the data. Standard library
only; reuses bench.py's process helpers. Other rows (geo) can be added to ROWS.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402  (bench.py: Server, call, resp_command, build_strata, describe_machine)

HLL_KEYS = ["hll:%012d" % i for i in range(100)]


def send_all(port, commands):
    """Sends RESP commands on one connection and reads one reply per command (prefill)."""
    import socket
    payload = b"".join(common.resp_command(*c) for c in commands)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(payload)
        got, data = 0, b""
        while got < len(commands):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed during prefill")
            data += chunk
            got = data.count(b"\r\n")  # every prefill reply is one line (+OK / :n)
        if b"-" in data[:1] or b"\r\n-" in data:
            raise RuntimeError("prefill failed: %s" % data[:200])


def prefill_bitmap(port, size, seed):
    rnd = random.Random(seed)
    send_all(port, [["SET", "bm", bytes(rnd.getrandbits(8) for _ in range(size))]])


def prefill_hlls(port, elements, seed):
    rnd = random.Random(seed)
    commands = []
    for k in HLL_KEYS:
        for start in range(0, elements, 1000):
            commands.append(["PFADD", k] + ["e%d" % rnd.getrandbits(48) for _ in range(min(1000, elements - start))])
    send_all(port, commands)


class Row:
    def __init__(self, name, title, command, requests, keyspace, prefill):
        self.name, self.title, self.command = name, title, command
        self.requests, self.keyspace, self.prefill = requests, keyspace, prefill


def make_rows(scale, seed):
    return [
        Row("bitcount", "BITCOUNT, 1 MB bitmap", ["BITCOUNT", "bm"], int(20000 * scale), None,
            lambda port: prefill_bitmap(port, 1 << 20, seed)),
        Row("pfadd", "PFADD, 100 keys", ["PFADD", "hll:__rand_int__", "e__rand_int__"], int(200000 * scale), 100,
            lambda port: prefill_hlls(port, 20000, seed)),
        Row("pfcount", "PFCOUNT of 100 keys", ["PFCOUNT"] + HLL_KEYS, int(2000 * scale), None,
            lambda port: prefill_hlls(port, 20000, seed)),
    ]


def run_row(server, row, clients):
    r = {"server": server.label}
    try:
        row.prefill(server.port)
    except (OSError, RuntimeError) as e:
        r["error"] = "prefill: %s" % e
        return r
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-c", str(clients), "-n",
           str(row.requests), "--csv"]
    if row.keyspace:
        cmd += ["-r", str(row.keyspace)]
    cmd += row.command
    cpu0 = server.cpu_seconds()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    except subprocess.TimeoutExpired:
        r["error"] = "redis-benchmark timed out"
        return r
    cpu = server.cpu_seconds() - cpu0
    lines = [l for l in proc.stdout.decode(errors="replace").splitlines() if l.startswith('"')]
    if proc.returncode != 0 or len(lines) < 2:
        r["error"] = "redis-benchmark exit %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-300:])
        return r
    header = [h.strip('"') for h in lines[0].split(",")]
    values = dict(zip(header, [v.strip('"') for v in lines[1].split(",")]))
    r["rps"], r["p50"] = float(values["rps"]), float(values["p50_latency_ms"])
    r["cpu_us"] = cpu / row.requests * 1e6
    return r


def ratio(a, b):
    return "%.2fx" % (a / b) if b else ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every row's request count (default 1)")
    p.add_argument("--rows", default="bitcount,pfadd,pfcount", help="rows to run (default all)")
    p.add_argument("--threads", type=int, default=1, help="strata --threads (default 1)")
    p.add_argument("--clients", type=int, default=50, help="redis-benchmark -c (default 50)")
    p.add_argument("--seed", type=int, default=1, help="prefill data seed")
    p.add_argument("--strata", help="use this strata binary instead of building one")
    args = p.parse_args()
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            sys.exit("bench: %s not found: apt-get install -y redis-server redis-tools" % tool)
    binary = os.path.abspath(args.strata) if args.strata else common.build_strata()
    configs = [common.redis_config(), common.strata_config(binary, args.threads)]
    wanted = [w.strip() for w in args.rows.split(",") if w.strip()]
    rows = [r for r in make_rows(args.scale, args.seed) if r.name in wanted]
    common.describe_machine()
    print("redis-benchmark -c %d -P 1 <command>; strata --threads %d; CPU = server utime+stime per op"
          % (args.clients, args.threads))
    print()
    print("%-24s %-10s %12s %9s %9s %10s %9s" % ("row", "server", "ops/s", "p50 ms", "vs redis", "CPU us/op",
                                                 "vs redis"))
    workdir = tempfile.mkdtemp(prefix="bench-analytics-")
    try:
        for row in rows:
            results = []
            for label, argv in configs:
                server = common.Server(label, argv, workdir)
                try:
                    results.append(run_row(server, row, args.clients))
                finally:
                    server.stop()
                time.sleep(0.2)
            base = results[0]
            for r in results:
                if "error" in r:
                    print("%-24s %-10s FAILED: %s" % (row.title, r["server"], r["error"]))
                    continue
                ok = "error" not in base and r is not base
                print("%-24s %-10s %12.0f %9.3f %9s %10.2f %9s" % (
                    row.title, r["server"], r["rps"], r["p50"], ratio(r["rps"], base["rps"]) if ok else "",
                    r["cpu_us"], ratio(r["cpu_us"], base["cpu_us"]) if ok else ""))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
