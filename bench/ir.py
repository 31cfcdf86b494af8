#!/usr/bin/env python3
"""Instructions per request under callgrind, side by side: redis-server and one or more Strata
binaries (an older build beside a newer one, say), each run under `valgrind --tool=callgrind` with
the same redis-benchmark workload. Instruction counts do not move with the machine's load the way
times do, so this is the figure to compare builds by on a shared 2-core machine.

For each server and test: start it under callgrind (persistence off), fill the keyspace with SETs,
run the test once to warm up, zero the counters (`callgrind_control -z`), run the test again, dump
(`callgrind_control -d`) and report the dump's instructions (all threads, user space) divided by the
requests. Ratios are against the first Strata binary, and against redis-server where it ran.

    python3 bench/ir.py --strata /tmp/strata-old,target/release/strata --threads 1,2 \\
        --tests get:1,get:32,set:32

Needs valgrind and redis-benchmark. The workload is
`redis-benchmark -t <test> -P <pipeline> -c 50 -r 100000 -d 3 -n <requests>`.
"""

import argparse
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port, proc, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.2)
    raise RuntimeError("server did not answer PING")


def bench(port, test, pipeline, requests):
    cmd = ["redis-benchmark", "-p", str(port), "-t", test, "-P", str(pipeline), "-c", "50",
           "-r", "100000", "-d", "3", "-n", str(requests), "-q"]
    subprocess.run(cmd, check=True, capture_output=True)


def total_ir(dump_dir):
    """Instructions of the newest dump in `dump_dir` (its `totals:` or `summary:` line)."""
    files = sorted(glob.glob(os.path.join(dump_dir, "cg.out*")), key=os.path.getmtime)
    if not files:
        raise RuntimeError("no callgrind dump")
    text = open(files[-1]).read()
    m = re.search(r"^(?:totals|summary):\s*(\d+)", text, flags=re.M)
    if not m:
        raise RuntimeError("no totals in the dump")
    return int(m.group(1))


def measure(argv, test, pipeline, requests):
    """Ir per request of one server command line `argv` (port appended by the caller)."""
    port = free_port()
    work = tempfile.mkdtemp(prefix="strata-ir-")
    out = os.path.join(work, "cg.out")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv(port, work)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_up(port, proc)
        bench(port, "set", 32, 100_000)
        bench(port, test, pipeline, requests)
        subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
        bench(port, test, pipeline, requests)
        for f in glob.glob(out + "*"):
            os.remove(f)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
        deadline = time.time() + 60
        while not glob.glob(out + "*") and time.time() < deadline:
            time.sleep(0.2)
        return total_ir(work) / requests
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", required=True,
                   help="comma-separated strata binaries (first = reference), each optionally PATH::EXTRA FLAGS")
    p.add_argument("--threads", default="1", help="strata --threads values (default 1)")
    p.add_argument("--tests", default="get:1,get:32,set:32", help="test:pipeline,... (default get:1,get:32,set:32)")
    p.add_argument("--requests", type=int, default=200_000, help="requests per measured run (default 200000)")
    p.add_argument("--no-redis", action="store_true", help="skip redis-server")
    a = p.parse_args()
    for tool in ("valgrind", "callgrind_control", "redis-benchmark", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")
    binaries = a.strata.split(",")
    tests = [(t.split(":")[0], int(t.split(":")[1])) for t in a.tests.split(",")]
    threads = [int(t) for t in a.threads.split(",")]
    header = ["test", "P", "t"] + ([] if a.no_redis else ["redis"]) + binaries
    print(" | ".join(header))
    for test, pipeline in tests:
        redis_ir = None
        if not a.no_redis:
            redis_ir = measure(lambda port, d: ["redis-server", "--port", str(port), "--save", "",
                                                "--appendonly", "no", "--dir", d],
                               test, pipeline, a.requests)
        for t in threads:
            row = [test.upper(), str(pipeline), str(t)]
            if redis_ir is not None:
                row.append(f"{redis_ir:,.0f}")
            first = None
            for spec in binaries:
                # `PATH::--flag value ...`: extra flags after the defaults (they win), e.g.
                # `target/release/strata::--appendonly yes --appendfsync everysec`.
                b, _, extra = spec.partition("::")
                ir = measure(lambda port, d, b=b, extra=extra: [b, "--port", str(port), "--threads", str(t),
                                                   "--save", "", "--appendonly", "no", "--dir", d]
                             + extra.split(),
                             test, pipeline, a.requests)
                cell = f"{ir:,.0f}"
                if first is None:
                    first = ir
                else:
                    cell += f" ({ir / first:.3f}x)"
                if redis_ir:
                    cell += f" [{ir / redis_ir:.2f}x redis]"
                row.append(cell)
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
