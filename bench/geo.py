#!/usr/bin/env python3
"""Side-by-side benchmark of GEOSEARCH in a large geo set, Strata against redis-server.

Each server (redis-server, then strata --threads N) is started fresh and loaded with one geo set of
--points points (default 1M, uniform in longitude [-180, 180] and latitude [-85, 85], seeded) through
`redis-cli --pipe` (GEOADD, 1000 points per command). Then redis-benchmark sends GEOSEARCH queries
around random centres (`__rand_int__` → longitude and latitude in 0..79) at pipeline 1 and 32, and the
server's CPU time per query is read from /proc/<pid>/stat. Redis is measured in the same run on the same
machine; the ratio columns are Strata / Redis.

Queries (--queries, comma-separated):
  radius   GEOSEARCH pts FROMLONLAT x y BYRADIUS 100 km ASC COUNT 10 WITHDIST   (the 10 nearest)
  box      GEOSEARCH pts FROMLONLAT x y BYBOX 200 200 km                        (everything in a box)

Standard library only; reuses bench.py's process helpers. See bench/README.md.
"""

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as common  # noqa: E402

KEY = b"pts"
QUERIES = {
    "radius": ["GEOSEARCH", "pts", "FROMLONLAT", "__rand_int__", "__rand_int__", "BYRADIUS", "100", "km",
               "ASC", "COUNT", "10", "WITHDIST"],
    "box": ["GEOSEARCH", "pts", "FROMLONLAT", "__rand_int__", "__rand_int__", "BYBOX", "200", "200", "km"],
}


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def write_load_file(path, points, seed):
    """GEOADD pts lon lat p<i> ..., 1000 points per command; returns the number of commands."""
    rng = random.Random(seed)
    commands = 0
    with open(path, "wb") as f:
        for start in range(0, points, 1000):
            end = min(points, start + 1000)
            parts = [b"*%d\r\n$6\r\nGEOADD\r\n" % (2 + 3 * (end - start)), bulk(KEY)]
            for i in range(start, end):
                parts.append(bulk(b"%.6f" % rng.uniform(-180, 180)))
                parts.append(bulk(b"%.6f" % rng.uniform(-85, 85)))
                parts.append(bulk(b"p%d" % i))
            f.write(b"".join(parts))
            commands += 1
    return commands


def load(server, load_file, commands, points):
    started = time.time()
    with open(load_file, "rb") as f:
        proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.port), "--pipe"], stdin=f,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
    out = proc.stdout.decode(errors="replace")
    m = re.search(r"errors: (\d+), replies: (\d+)", out)
    if proc.returncode != 0 or not m or int(m.group(1)) != 0 or int(m.group(2)) != commands:
        return None, "load failed: %s" % out.strip()[-300:]
    reply = common.call(server.port, "ZCARD", "pts").strip()
    if reply != b":%d" % points:
        return None, "after loading, ZCARD pts = %r (expected %d)" % (reply, points)
    return time.time() - started, None


def run_query(server, name, pipeline, args):
    requests = args.requests * (args.pipelined_factor if pipeline > 1 else 1)
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-c", str(args.clients),
           "-P", str(pipeline), "-n", str(requests), "-r", "80", "--csv"] + QUERIES[name]
    cpu0 = server.cpu_seconds()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    cpu = server.cpu_seconds() - cpu0
    out = proc.stdout.decode(errors="replace")
    lines = [l for l in out.splitlines() if l.startswith('"')]
    if proc.returncode != 0 or len(lines) < 2:
        return {"error": "redis-benchmark exit %d: %s %s" % (proc.returncode, out.strip()[-200:],
                                                             proc.stderr.decode(errors="replace")[-200:])}
    header = [h.strip('"') for h in lines[0].split(",")]
    row = dict(zip(header, [v.strip('"') for v in lines[1].split(",")]))
    return {"rps": float(row["rps"]), "p50": float(row["p50_latency_ms"]), "cpu_us": cpu / requests * 1e6}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", type=int, default=1000000, help="points in the geo set (default 1000000)")
    p.add_argument("--queries", default="radius,box", help="queries to run (default radius,box)")
    p.add_argument("--requests", type=int, default=50000, help="requests per run at -P 1 (default 50000)")
    p.add_argument("--pipelined-factor", type=int, default=4,
                   help="runs at -P 32 use this many times --requests (default 4)")
    p.add_argument("--clients", type=int, default=50, help="redis-benchmark -c (default 50)")
    p.add_argument("--threads", default="1", help="strata --threads values to run (default 1)")
    p.add_argument("--seed", type=int, default=7, help="seed of the points (default 7)")
    p.add_argument("--strata", help="use this strata binary instead of building one")
    args = p.parse_args()
    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    for q in queries:
        if q not in QUERIES:
            sys.exit("bench: unknown query %s (known: %s)" % (q, ", ".join(QUERIES)))
    for tool in ("redis-server", "redis-benchmark", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit("bench: %s not found: apt-get install -y redis-server redis-tools" % tool)
    binary = os.path.abspath(args.strata) if args.strata else common.build_strata()
    configs = [common.redis_config()] + [common.strata_config(binary, int(t)) for t in args.threads.split(",")]
    common.describe_machine()
    workdir = tempfile.mkdtemp(prefix="strata-bench-geo-")
    results = []
    try:
        load_file = os.path.join(workdir, "load.resp")
        commands = write_load_file(load_file, args.points, args.seed)
        for label, argv in configs:
            server = common.Server(label, argv, workdir)
            try:
                secs, err = load(server, load_file, commands, args.points)
                if err:
                    print("  %-12s FAILED: %s" % (label, err), flush=True)
                    continue
                print("  %-12s loaded %d points in %.1fs, RSS %.1f MiB" % (label, args.points, secs,
                                                                          server.rss_bytes() / 2**20), flush=True)
                for q in queries:
                    for pipeline in (1, 32):
                        r = run_query(server, q, pipeline, args)
                        r.update({"server": label, "query": q, "pipeline": pipeline})
                        results.append(r)
                        print("  %-12s %-7s P%-3d %s" % (label, q, pipeline, "FAILED: " + r["error"] if "error"
                                                          in r else "%.0f ops/s" % r["rps"]), flush=True)
            finally:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print("GEOSEARCH in one set of %d points (clients %d)" % (args.points, args.clients))
    cols = "%-8s %3s  %-12s %10s %9s %9s %9s %9s"
    print(cols % ("query", "P", "server", "ops/s", "p50 ms", "CPU us/op", "ops ratio", "CPU ratio"))
    print("-" * 80)
    for q in queries:
        for pipeline in (1, 32):
            mine = [r for r in results if r["query"] == q and r["pipeline"] == pipeline]
            base = next((r for r in mine if r["server"] == "redis" and "error" not in r), None)
            for r in mine:
                if "error" in r:
                    print(cols % (q, pipeline, r["server"], "FAILED", "-", "-", "-", "-"))
                    continue
                own = r is base or base is None
                print(cols % (q, pipeline, r["server"], "%.0f" % r["rps"], "%.3f" % r["p50"], "%.2f" % r["cpu_us"],
                              "" if own else "%.2fx" % (r["rps"] / base["rps"]),
                              "" if own else "%.2fx" % (r["cpu_us"] / base["cpu_us"])))


if __name__ == "__main__":
    main()
