#!/usr/bin/env python3
"""Memory growth during BGSAVE under a write-heavy load: Strata (forkless snapshot, copy-on-write
per key) beside redis-server (fork, copy-on-write per page).

For each server: start it (persistence off, `dir` in a temp directory), load N keys of V bytes
(`key:%012d`, what redis-benchmark's `__rand_int__` names), wait for the memory to settle and take
the baseline, start redis-benchmark overwriting random keys of that set (`SET key:__rand_int__
<V bytes>`, pipelined), BGSAVE, and sample the memory every 50 ms until the save ends. Memory is
the PSS (proportional set size, /proc/PID/smaps_rollup) of the server and its children: a forked
child's pages are counted once whether shared or copied, so for Redis it is exactly what the fork
costs, and for Strata (one process) it is its RSS. Reported: dataset (used_memory before the
save), peak growth over the baseline, growth as a share of the dataset, the save's duration and
the write rate of the load before and during the save; ratios are Strata over Redis.

    python3 bench/bgsave_rss.py --strata target/release/strata --keys 1000000 --value 1000

Needs redis-server and redis-benchmark on PATH.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args):
    r = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True)
    return r.stdout.strip()


def info(port, field):
    for line in cli(port, "info", "all").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def wait_up(port, proc, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        if cli(port, "ping") == "PONG":
            return
        time.sleep(0.1)
    raise RuntimeError("server did not answer PING")


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def memory_kb(pid):
    return pss_kb(pid) + sum(pss_kb(c) for c in children(pid))


def load(port, keys, value):
    """Writes key:%012d for every i < keys, pipelined from one socket."""
    s = socket.create_connection(("127.0.0.1", port))
    payload = b"$%d\r\n%s\r\n" % (len(value), value)
    batch = 1000
    for start in range(0, keys, batch):
        n = min(batch, keys - start)
        buf = bytearray()
        for i in range(start, start + n):
            k = b"key:%012d" % i
            buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(k), k)
            buf += payload
        s.sendall(buf)
        want = 5 * n
        got = 0
        while got < want:
            chunk = s.recv(want - got)
            if not chunk:
                raise RuntimeError("server closed the connection while loading")
            got += len(chunk)
    s.close()


def run(kind, binary, keys, value_size, threads, clients, pipeline):
    port = free_port()
    d = tempfile.mkdtemp(prefix=f"bgsave-rss-{kind}-")
    if kind == "redis":
        cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", d, "--daemonize", "no"]
    else:
        cmd = [binary, "--port", str(port), "--save", "", "--dir", d, "--threads", str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
    try:
        wait_up(port, proc)
        value = b"v" * value_size
        t0 = time.time()
        load(port, keys, value)
        fill_s = time.time() - t0
        time.sleep(2)
        dataset = int(info(port, "used_memory"))
        base = memory_kb(proc.pid)
        bench = subprocess.Popen(
            ["redis-benchmark", "-p", str(port), "-r", str(keys), "-n", "1000000000",
             "-c", str(clients), "-P", str(pipeline), "-q",
             "SET", "key:__rand_int__", value.decode()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        c_before = int(info(port, "total_commands_processed"))
        time.sleep(2)
        cmds0 = int(info(port, "total_commands_processed"))
        rate_before = (cmds0 - c_before) / 2
        peak = base
        samples = []
        stop = threading.Event()

        def sample():
            nonlocal peak
            while not stop.is_set():
                m = memory_kb(proc.pid)
                peak = max(peak, m)
                samples.append(m)
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        start = time.time()
        assert cli(port, "bgsave") == "Background saving started", "bgsave refused"
        while info(port, "rdb_bgsave_in_progress") == "1":
            time.sleep(0.05)
        took = time.time() - start
        stop.set()
        sampler.join()
        cmds1 = int(info(port, "total_commands_processed"))
        bench.kill()
        bench.wait()
        status = info(port, "rdb_last_bgsave_status")
        size = os.path.getsize(os.path.join(d, "dump.rdb")) if status == "ok" else 0
        growth = (peak - base) * 1024
        return {
            "kind": kind, "dataset": dataset, "base": base * 1024, "peak": peak * 1024,
            "growth": growth, "share": growth / dataset, "secs": took,
            "writes": cmds1 - cmds0, "rate_before": rate_before, "status": status, "file": size, "fill_s": fill_s,
        }
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def mb(b):
    return f"{b / 1e6:,.0f} MB"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2, help="Strata's --threads")
    ap.add_argument("--clients", type=int, default=8, help="redis-benchmark -c")
    ap.add_argument("--pipeline", type=int, default=16, help="redis-benchmark -P")
    ap.add_argument("--servers", default="redis,strata")
    a = ap.parse_args()
    rows = [run(k, a.strata, a.keys, a.value, a.threads, a.clients, a.pipeline)
            for k in a.servers.split(",")]
    print(f"{a.keys:,} keys x {a.value} B, redis-benchmark -c {a.clients} -P {a.pipeline} "
          f"overwriting random keys during BGSAVE")
    print("| server | dataset (used_memory) | memory before | peak during BGSAVE | growth | "
          "growth / dataset | BGSAVE s | writes/s before | writes/s during | status |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {mb(r['dataset'])} | {mb(r['base'])} | {mb(r['peak'])} | "
              f"{mb(r['growth'])} | {r['share'] * 100:.1f}% | {r['secs']:.1f} | "
              f"{r['rate_before']:,.0f} | {r['writes'] / r['secs']:,.0f} | {r['status']} |")
    by = {r["kind"]: r for r in rows}
    if "redis" in by and "strata" in by and by["redis"]["growth"] > 0:
        print(f"growth ratio strata/redis: {by['strata']['growth'] / by['redis']['growth']:.3f}; "
              f"writes during the save, per second, strata/redis: "
              f"{(by['strata']['writes'] / by['strata']['secs']) / (by['redis']['writes'] / by['redis']['secs']):.2f}")


if __name__ == "__main__":
    main()
