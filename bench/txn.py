#!/usr/bin/env python3
"""Transactions and blocking pops, Strata side by side with redis-server.

Rows (each on a fresh server per configuration: redis, strata --threads 1, strata --threads N):

  MULTI/EXEC 5 SETs, 1 shard    MULTI, 5 SETs of keys sharing a hash tag (one shard), EXEC
  MULTI/EXEC 5 SETs, n shards   the same with 5 keys spread over the slot space (several shards)
  BLPOP/LPUSH ping-pong         pairs of clients: A LPUSHes to ping:i and BLPOPs pong:i, B BLPOPs
                                ping:i and LPUSHes pong:i; one round trip = 2 pops and 2 pushes

Each row runs --clients worker processes (for ping-pong: --clients/2 pairs) for --seconds; transaction
workers pipeline --depth transactions per write (so the client side stays cheap). Reported: operations per
second (transactions, or round trips), server CPU microseconds per operation (user + system, all threads,
from /proc), and both as ratios to redis in the same run. With --rounds N the median is reported.

    python3 bench/txn.py --strata target/release/strata --seconds 5 --rounds 3

Standard library only; reuses bench.py's server helpers.
"""

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402


def read_replies(sock, buf, n):
    """Reads n complete top-level RESP replies (simple parser: enough for our replies)."""
    count = 0
    pos = 0
    while True:
        while count < n:
            end = skip(buf, pos)
            if end is None:
                break
            pos = end
            count += 1
        if count == n:
            return buf[pos:]
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk


def skip(buf, pos):
    """End offset of the reply starting at pos, or None if incomplete."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return None
    t = buf[pos:pos + 1]
    if t in (b"+", b"-", b":", b"_"):
        return nl + 2
    if t == b"$":
        n = int(buf[pos + 1:nl])
        if n < 0:
            return nl + 2
        end = nl + 2 + n + 2
        return end if len(buf) >= end else None
    if t in (b"*", b">"):
        n = int(buf[pos + 1:nl])
        p = nl + 2
        for _ in range(max(n, 0)):
            p = skip(buf, p)
            if p is None:
                return None
        return p
    raise RuntimeError("unexpected reply %r" % buf[pos:pos + 20])


def txn_worker(port, keys, depth, seconds, out):
    s = socket.create_connection(("127.0.0.1", port))
    one = common.resp_command("MULTI")
    for k in keys:
        one += common.resp_command("SET", k, "v")
    one += common.resp_command("EXEC")
    batch = one * depth
    per_txn = len(keys) + 2
    buf = b""
    done = 0
    end = time.time() + seconds
    while time.time() < end:
        s.sendall(batch)
        buf = read_replies(s, buf, per_txn * depth)
        done += depth
    out.put(done)


def pingpong_worker(port, i, first, seconds, out):
    s = socket.create_connection(("127.0.0.1", port))
    ping, pong = "bench:ping:%d" % i, "bench:pong:%d" % i
    mine, theirs = (pong, ping) if first else (ping, pong)
    push = common.resp_command("LPUSH", theirs, "x")
    pop = common.resp_command("BLPOP", mine, "1")
    buf = b""
    done = 0
    end = time.time() + seconds
    if first:
        s.sendall(push)
        buf = read_replies(s, buf, 1)
    while time.time() < end:
        s.sendall(pop)
        buf = read_replies(s, buf, 1)
        s.sendall(push)
        buf = read_replies(s, buf, 1)
        done += 1
    out.put(done if first else 0)


def spread_keys(n):
    """n keys in n different quarters/eighths of the slot space (so on several shards)."""
    keys, seen = [], set()
    i = 0
    while len(keys) < n:
        k = "bench:txn:%d" % i
        part = common_slot(k) * n // 16384
        if part not in seen:
            seen.add(part)
            keys.append(k)
        i += 1
    return keys


def common_slot(key):
    crc = 0
    data = key.encode()
    if b"{" in data:
        a = data.index(b"{")
        b = data.find(b"}", a + 1)
        if b > a + 1:
            data = data[a + 1:b]
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc % 16384


def run_row(server, row, args):
    out = mp.Queue()
    procs = []
    if row == "pingpong":
        pairs = max(1, args.clients // 2)
        for i in range(pairs):
            for first in (True, False):
                procs.append(mp.Process(target=pingpong_worker,
                                        args=(server.port, i, first, args.seconds, out)))
    else:
        keys = ["bench:{txn}:%d" % i for i in range(5)] if row == "txn1" else spread_keys(5)
        for _ in range(args.clients):
            procs.append(mp.Process(target=txn_worker, args=(server.port, keys, args.depth, args.seconds, out)))
    before = server.cpu_seconds()
    start = time.time()
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    elapsed = time.time() - start
    cpu = server.cpu_seconds() - before
    return total / elapsed, cpu / max(total, 1) * 1e6


ROWS = [("txn1", "MULTI/EXEC 5 SETs, 1 shard"), ("txnN", "MULTI/EXEC 5 SETs, n shards"),
        ("pingpong", "BLPOP/LPUSH ping-pong")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strata", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="strata's multi-thread count")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--depth", type=int, default=8, help="transactions pipelined per write")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    binary = os.path.abspath(args.strata)
    configs = [common.redis_config(), common.strata_config(binary, 1), common.strata_config(binary, args.threads)]
    results = {}
    for _ in range(args.rounds):
        for label, argv in configs:
            server = common.Server(label, argv, "/tmp")
            try:
                for row, _ in ROWS:
                    results.setdefault((label, row), []).append(run_row(server, row, args))
            finally:
                server.stop()
    print("%-30s %-16s %12s %12s %9s %9s" % ("row", "server", "ops/s", "CPU us/op", "ops ratio", "CPU ratio"))
    for row, title in ROWS:
        base_ops = statistics.median(r[0] for r in results[("redis", row)])
        base_cpu = statistics.median(r[1] for r in results[("redis", row)])
        for label, _ in configs:
            ops = statistics.median(r[0] for r in results[(label, row)])
            cpu = statistics.median(r[1] for r in results[(label, row)])
            print("%-30s %-16s %12.0f %12.2f %8.2fx %8.2fx" % (title, label, ops, cpu, ops / base_ops,
                                                           cpu / base_cpu))


if __name__ == "__main__":
    main()
