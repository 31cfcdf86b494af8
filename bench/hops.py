#!/usr/bin/env python3
"""The hop table: server CPU per operation at each --threads count relative to --threads 1.

On a machine with few cores, throughput at several threads says little (the client shares the cores);
CPU time per operation says what crossing threads costs. For every strata binary given (to compare a
change: --strata old,new) and every thread count, one fresh server is started and redis-benchmark
runs SET and GET at pipeline 1 and 32 against it; the server's CPU time (user + system, all threads,
from /proc/<pid>/stat) is divided by the requests served, and so are the wake-ups of one thread by
another (INFO strata's `shardN:...,wakeups=N`; "-" for a binary that does not report them). Rounds interleave the binaries and thread
counts so that a noisy machine hurts them alike; the table reports medians, and each row's ratio to
--threads 1 of the same binary.

    python3 bench/hops.py --strata target/release/strata --threads 1,2,4 --rounds 3
    python3 bench/hops.py --strata /tmp/strata-old,/tmp/strata-new --threads 1,2
    python3 bench/hops.py --strata target/release/strata --tests mget,mset --pipelines 1,16 --redis

`--tests` takes redis-benchmark test names, plus `mget` (MGET of 10 random keys, a custom command;
redis-benchmark's own `mset` sets 10). With `--redis`, redis-server runs the same tests in the same
rounds and each row also shows Strata's CPU per operation relative to it.

The machine's floor: once per round the script also runs `strata-wakecost` (crates/loadgen, built
beside the strata binary, or `--wakecost PATH`): two threads handing a token back and forth, each
sleeping in epoll_wait until the other's eventfd write wakes it, and again spinning on an atomic.
It prints the CPU time one such wake-up costs here, and, for every row above one thread, how many
of them the row's extra CPU per operation amounts to: a shared-nothing server pays at most one per
cross-thread message that reaches a sleeping thread, so this says how far a row's excess is the
machine's price for waking a thread rather than Strata's work.

Standard library only; needs redis-benchmark.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_ready(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"server exited early (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("server did not answer PING")


def wakeups(port):
    """Cross-thread wake-ups so far, summed over shards (None if INFO does not report them)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"INFO strata\r\n")
        data = b""
        while b"\r\n" not in data or len(data) < bulk_len(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    found = [int(f.split(b"=")[1]) for line in data.split(b"\r\n") if line.startswith(b"shard")
             for f in line.split(b":", 1)[1].split(b",") if f.startswith(b"wakeups=")]
    return sum(found) if found else None


def bulk_len(data):
    """Bytes of the whole bulk reply whose header starts `data`."""
    head = data.split(b"\r\n", 1)[0]
    return len(head) + 2 + int(head[1:]) + 2 if head.startswith(b"$") else 0


MGET10 = ["mget"] + ["key:__rand_int__"] * 10


def bench_args(test):
    """redis-benchmark's arguments selecting `test`."""
    return MGET10 if test == "mget" else ["-t", test]


def run_server(binary, threads, tests, args):
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        cmd = [binary, "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no"]
        if binary != "redis-server":
            cmd += ["--threads", str(threads)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, proc)
            out = {}
            for test, pipeline in tests:
                n = args.requests * (args.pipelined_factor if pipeline > 1 else 1)
                before, woken = cpu_seconds(proc.pid), wakeups(port)
                subprocess.run(
                    ["redis-benchmark", "-p", str(port), "-d", str(args.data_size),
                     "-r", "1000000", "-c", str(args.clients), "-P", str(pipeline), "-n", str(n),
                     "-q"] + bench_args(test),
                    check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                cpu = (cpu_seconds(proc.pid) - before) / n * 1e6
                after = wakeups(port)
                out[(test, pipeline)] = (cpu, None if woken is None else (after - woken) / n)
            return out
        finally:
            proc.terminate()
            proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", required=True, help="comma-separated strata binaries")
    p.add_argument("--threads", default="1,2", help="thread counts (1 is always included)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=200000, help="requests at -P 1")
    p.add_argument("--pipelined-factor", type=int, default=10)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--data-size", type=int, default=256)
    p.add_argument("--tests", default="set,get", help="redis-benchmark tests, or mget")
    p.add_argument("--pipelines", default="1,32", help="pipeline depths")
    p.add_argument("--redis", action="store_true", help="also run redis-server, for ratios to it")
    p.add_argument("--wakecost", help="the strata-wakecost binary (default: beside the first --strata)")
    args = p.parse_args()

    binaries = [os.path.abspath(b) for b in args.strata.split(",")]
    threads = sorted({1, *(int(t) for t in args.threads.split(","))})
    tests = [(t, int(pl)) for pl in args.pipelines.split(",") for t in args.tests.split(",")]
    wakecost = args.wakecost or os.path.join(os.path.dirname(binaries[0]), "strata-wakecost")
    if not os.access(wakecost, os.X_OK):
        print(f"({wakecost} not found: no wake-up floor; `cargo build --release -p strata-loadgen`)")
        wakecost = None
    samples, wakes, floor = {}, {}, {}
    for r in range(args.rounds):
        if wakecost:
            for mode, cpu in wake_floor(wakecost).items():
                floor.setdefault(mode, []).append(cpu)
            print(f"round {r + 1}: wake-up floor: "
                  + "  ".join(f"{m} {v[-1]:.2f} us" for m, v in floor.items()), flush=True)
        if args.redis:
            res = run_server("redis-server", 1, tests, args)
            for k, (cpu, _) in res.items():
                samples.setdefault(("redis-server", 1, k), []).append(cpu)
            print(f"round {r + 1}: redis-server: "
                  + "  ".join(f"{k[0]} P{k[1]} {v[0]:.2f}" for k, v in res.items()), flush=True)
        for b in binaries:
            for t in threads:
                res = run_server(b, t, tests, args)
                for k, (cpu, woke) in res.items():
                    samples.setdefault((b, t, k), []).append(cpu)
                    if woke is not None:
                        wakes.setdefault((b, t, k), []).append(woke)
                print(f"round {r + 1}: {os.path.basename(os.path.dirname(b)) + '/' + os.path.basename(b)} "
                      f"t{t}: " + "  ".join(f"{k[0]} P{k[1]} {v[0]:.2f}" for k, v in res.items()),
                      flush=True)

    print("\nServer CPU microseconds per operation (median of rounds), the ratio to --threads 1, and\n"
          "cross-thread wake-ups per operation")
    redis_col = f" {'redis':>7}" + "".join(f" {'t' + str(t) + '/redis':>9}" for t in threads)
    print(f"{'binary':<28} {'test':<5} {'P':>3} " + " ".join(f"{'t' + str(t):>19}" for t in threads)
          + (redis_col if args.redis else ""))
    for b in binaries:
        for k in tests:
            base = statistics.median(samples[(b, 1, k)])
            cells = []
            for t in threads:
                m = statistics.median(samples[(b, t, k)])
                w = wakes.get((b, t, k))
                cells.append(f"{m:6.2f} ({m / base:4.2f}x) " + (f"{statistics.median(w):4.2f}" if w else "   -"))
            name = b if len(b) <= 28 else "..." + b[-25:]
            line = f"{name:<28} {k[0].upper():<5} {k[1]:>3} " + " ".join(f"{c:>19}" for c in cells)
            if args.redis:
                r = statistics.median(samples[("redis-server", 1, k)])
                line += f" {r:7.2f}" + "".join(
                    f" {statistics.median(samples[(b, t, k)]) / r:8.2f}x" for t in threads)
            print(line)
    if floor.get("sleep"):
        wake = statistics.median(floor["sleep"])
        spin = statistics.median(floor.get("spin", [0.0]))
        print(f"\nWake-up floor (strata-wakecost, median of rounds): a thread woken from epoll_wait by an\n"
              f"eventfd write costs {wake:.2f} us of CPU per hand-over; handed over between spinning threads,\n"
              f"{spin:.2f} us. Each row's extra CPU per operation over --threads 1, in such wake-ups:")
        for b in binaries:
            for k in tests:
                base = statistics.median(samples[(b, 1, k)])
                cells = []
                for t in threads[1:]:
                    extra = statistics.median(samples[(b, t, k)]) - base
                    cells.append(f"t{t} +{extra:.2f} us = {extra / wake:.2f} wake-ups")
                name = b if len(b) <= 28 else "..." + b[-25:]
                print(f"{name:<28} {k[0].upper():<5} {k[1]:>3}   " + "   ".join(cells))


def wake_floor(binary):
    """CPU microseconds per hand-over of a token between two threads, by mode (sleep, spin)."""
    out = subprocess.run([binary], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split())
        found[fields["mode"]] = float(fields["cpu_us"])
    return found


if __name__ == "__main__":
    main()
