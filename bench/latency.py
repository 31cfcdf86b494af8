#!/usr/bin/env python3
"""Tail latency at equal, moderate load: Strata (--threads 1 and the default) side by side with redis-server.

The issue's setting: 50 connections, 20K ops/s in total, SET:GET 1:4, on this machine. memtier is not
packaged in Debian, so the load comes from crates/loadgen (`strata-loadgen`): open-loop, one thread per
connection sending on a fixed schedule, latency measured from each command's scheduled time (a stall
shows in the tail instead of lowering the load). For each round, every server configuration gets a fresh
server, a warm-up that writes the keyspace, then the measured run; rounds interleave the configurations so
a noisy machine hurts them alike. The table shows medians over rounds and each row's ratio to Redis.

    python3 bench/latency.py                          # 3 rounds of 20 s per configuration
    python3 bench/latency.py --rounds 5 --seconds 30 --threads 1,2,4

Standard library only; builds `strata` and `strata-loadgen` with --release unless --strata/--loadgen given.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hops import free_port, wait_ready  # noqa: E402  (the same server start-up as the hop table)


def start(config, strata, tmp):
    port = free_port()
    if config == "redis":
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp]
    else:
        threads = config.split("t")[-1]
        cmd = [strata, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp,
               "--threads", threads]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, proc)
    return proc, port


def loadgen(binary, port, args):
    out = subprocess.run([binary, "--port", str(port)] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"strata-loadgen failed: {out.stderr.strip()}")
    return dict(kv.split("=") for kv in out.stdout.split())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", help="strata binary (default: build target/release/strata)")
    ap.add_argument("--loadgen", help="strata-loadgen binary (default: build it)")
    ap.add_argument("--threads", default="1,2", help="strata thread counts (default 1,2; 2 is the default here)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rate", type=int, default=20000)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--ratio", default="1:4")
    ap.add_argument("--keyspace", type=int, default=100000)
    a = ap.parse_args()

    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    if not os.path.isabs(target):
        target = os.path.join(ROOT, target)
    if not a.strata or not a.loadgen:
        subprocess.run(["cargo", "build", "--release", "-p", "strata", "-p", "strata-loadgen"],
                       cwd=ROOT, check=True)
    strata = os.path.abspath(a.strata or os.path.join(target, "release", "strata"))
    gen = os.path.abspath(a.loadgen or os.path.join(target, "release", "strata-loadgen"))

    configs = ["redis"] + [f"strata t{t}" for t in a.threads.split(",")]
    results = {c: [] for c in configs}
    common = ["--conns", str(a.conns), "--keyspace", str(a.keyspace)]
    for r in range(a.rounds):
        for c in configs:
            with tempfile.TemporaryDirectory() as tmp:
                proc, port = start(c, strata, tmp)
                try:
                    # Warm-up: write most of the keyspace, so GETs mostly hit.
                    loadgen(gen, port, common + ["--ratio", "1:0", "--rate", "50000", "--seconds", "3"])
                    res = loadgen(gen, port, common + ["--ratio", a.ratio, "--rate", str(a.rate),
                                                       "--seconds", str(a.seconds)])
                finally:
                    proc.kill()
                    proc.wait()
            results[c].append(res)
            print(f"round {r + 1} {c:10} " + " ".join(f"{k}={v}" for k, v in res.items()), flush=True)

    def med(c, k):
        return statistics.median(float(x[k]) for x in results[c])

    print(f"\n{a.conns} connections, {a.rate} ops/s, SET:GET {a.ratio}, {a.seconds:g} s per run, "
          f"median of {a.rounds} rounds (microseconds; ratio to redis)")
    print(f"{'server':12} {'rate':>8} {'p50':>14} {'p99':>14} {'p99.9':>14}")
    for c in configs:
        cells = []
        for k in ("p50", "p99", "p999"):
            v, base = med(c, k), med("redis", k)
            cells.append(f"{v:7.0f} {v / base:5.2f}x" if base else f"{v:7.0f}   -  ")
        print(f"{c:12} {med(c, 'rate'):8.0f} " + " ".join(f"{x:>14}" for x in cells))


if __name__ == "__main__":
    main()
