#!/usr/bin/env python3
"""Instructions per operation for bench/txn.py's rows, under callgrind (a reproducible measure on
shared, noisy machines): redis-server and Strata each run under `valgrind --tool=callgrind`, the
counters are zeroed once the server is up and the clients are connected, a fixed workload runs, and
the server is shut down; Ir of the workload / operations is reported.

Rows (as in txn.py):
  txn1      MULTI, 5 SETs of keys sharing a hash tag, EXEC; --depth transactions pipelined per write
  txnN      the same with 5 keys on different shards
  pingpong  two clients, A: LPUSH ping / BLPOP pong, B: BLPOP ping / LPUSH pong; each BLPOP is sent
            --gap ms before the push that serves it, so it parks (as in the steady state of txn.py)

    python3 bench/txn_ir.py --strata target/release/strata --threads 1 --rows txn1,pingpong

Needs valgrind; Strata runs with --io-engine epoll (valgrind does not follow io_uring). After the workload
the server is left idle for as long again and that idle Ir (background timers, cron; it matters for the
ping-pong row, whose clients sleep) is subtracted; the idle rate is printed too. Files are kept with
--keep DIR (cg.<server>.<row>.out.1 is the workload) for callgrind_annotate.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402
import txn  # noqa: E402


def connect(port, timeout=60.0):
    deadline = time.time() + timeout
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(common.resp_command("PING"))
            txn.read_replies(s, b"", 1)
            return s
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def control(pid, what):
    subprocess.run(["callgrind_control", what, str(pid)], check=True, stdout=subprocess.DEVNULL)


def total_ir(path):
    ir = 0
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                ir = max(ir, int(line.split()[1]))
    return ir


def run_txn(port, keys, depth, rounds):
    s = connect(port)
    one = common.resp_command("MULTI")
    for k in keys:
        one += common.resp_command("SET", k, "v")
    one += common.resp_command("EXEC")
    batch = one * depth
    return s, lambda: [txn.read_replies(s, s.sendall(batch) or b"", (len(keys) + 2) * depth)
                       for _ in range(rounds)], depth * rounds


def run_pingpong(port, rounds, gap):
    a, b = connect(port), connect(port)

    def work():
        for _ in range(rounds):
            b.sendall(common.resp_command("BLPOP", "ping", "1"))
            time.sleep(gap)
            a.sendall(common.resp_command("LPUSH", "ping", "x"))
            txn.read_replies(a, b"", 1)
            txn.read_replies(b, b"", 1)
            a.sendall(common.resp_command("BLPOP", "pong", "1"))
            time.sleep(gap)
            b.sendall(common.resp_command("LPUSH", "pong", "x"))
            txn.read_replies(b, b"", 1)
            txn.read_replies(a, b"", 1)
    return (a, b), work, rounds


def measure(label, argv, row, args, workdir):
    port = common.free_port() if hasattr(common, "free_port") else args.port
    out = os.path.join(workdir, "cg.%s.%s.out" % (label, row))
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv(port)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if row == "pingpong":
            conns, work, ops = run_pingpong(port, args.rounds, args.gap / 1000.0)
        else:
            keys = ["bench:{txn}:%d" % i for i in range(5)] if row == "txn1" else txn.spread_keys(5)
            conns, work, ops = run_txn(port, keys, args.depth, args.rounds)
        time.sleep(0.5)
        control(proc.pid, "-z")
        start = time.time()
        work()
        elapsed = time.time() - start
        control(proc.pid, "-d")
        # The same time again with the clients idle: the server's own background work over the
        # workload's duration (timers, cron), subtracted below.
        time.sleep(elapsed)
        control(proc.pid, "-d")
        ctl = connect(port)
        ctl.sendall(common.resp_command("SHUTDOWN", "NOSAVE"))
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Dump 1: the workload; dump 2: as long idle.
    work = total_ir(out + ".1")
    idle = total_ir(out + ".2")
    return (work - idle) / ops, idle / elapsed, elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", default="txn1,txnN,pingpong")
    p.add_argument("--servers", default="redis,strata")
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--gap", type=float, default=3.0, help="ms between a BLPOP and its push")
    p.add_argument("--port", type=int, default=7391)
    p.add_argument("--keep", help="directory to keep the callgrind files in")
    args = p.parse_args()
    binary = os.path.abspath(args.strata)

    def strata_argv(port):
        return [binary, "--port", str(port), "--bind", "127.0.0.1", "--threads", str(args.threads),
                "--io-engine", "epoll", "--save", "", "--appendonly", "no", "--dir", workdir]

    def redis_argv(port):
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", workdir]

    servers = {"redis": redis_argv, "strata": strata_argv}
    workdir = args.keep or tempfile.mkdtemp(prefix="txn_ir.")
    os.makedirs(workdir, exist_ok=True)
    for row in args.rows.split(","):
        line = []
        for label in args.servers.split(","):
            per_op, idle_rate, _ = measure(label, servers[label], row, args, workdir)
            line.append("%s %.0f Ir/op (idle %.0f Ir/s)" % (label, per_op, idle_rate))
        print("%-9s %s" % (row, "   ".join(line)), flush=True)
    print("callgrind files in", workdir)


if __name__ == "__main__":
    main()
