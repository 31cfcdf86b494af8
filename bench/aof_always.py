#!/usr/bin/env python3
"""SET throughput with `appendonly yes` and `appendfsync always`, redis-server and Strata side by
side, and the ratio. Every acknowledged write is fsynced on both: Redis fsyncs once per event-loop
iteration before it replies; Strata's AOF writer fsyncs once per batch of every thread's writes
and holds the replies until then (group commit).

    python3 bench/aof_always.py --strata target/release/strata [--threads 2] [--clients 50]

The workload is `redis-benchmark -t set -c <clients> -P <pipeline> -r 100000 -d 3 -n <requests>`,
each server in a fresh directory (on the same file system: /tmp unless --dir).
"""

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port, proc, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise RuntimeError("server did not answer PING")


def run(argv, port, args):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(port, proc)
        out = subprocess.run(
            ["redis-benchmark", "-p", str(port), "-t", "set", "-c", str(args.clients),
             "-P", str(args.pipeline), "-r", "100000", "-d", "3", "-n", str(args.requests), "-q"],
            check=True, capture_output=True, text=True).stdout
        m = re.search(r"([\d.]+) requests per second", out.replace("\r", "\n"))
        if not m:
            raise RuntimeError(f"no rate in {out!r}")
        return float(m.group(1))
    finally:
        proc.terminate()
        proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", required=True)
    p.add_argument("--threads", default="2")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--pipeline", type=int, default=1)
    p.add_argument("--requests", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the servers' directories go")
    a = p.parse_args()
    for tool in ("redis-server", "redis-benchmark", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    common = ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    best = {"redis": 0.0, "strata": 0.0}
    for _ in range(a.rounds):
        for name in ("redis", "strata"):
            d = tempfile.mkdtemp(prefix=f"aof-always-{name}-", dir=a.dir)
            port = free_port()
            if name == "redis":
                argv = ["redis-server", "--port", str(port), "--dir", d] + common
            else:
                argv = [a.strata, "--port", str(port), "--dir", d, "--threads", a.threads] + common
            rate = run(argv, port, a)
            best[name] = max(best[name], rate)
            shutil.rmtree(d, ignore_errors=True)
            print(f"{name}: {rate:,.0f} SET/s", flush=True)
    print(f"best of {a.rounds}: redis {best['redis']:,.0f}  strata {best['strata']:,.0f}  "
          f"ratio {best['strata'] / best['redis']:.2f}x  "
          f"(-c {a.clients} -P {a.pipeline}, strata --threads {a.threads})")


if __name__ == "__main__":
    main()
