#!/usr/bin/env python3
"""Side-by-side benchmark of Strata against redis-server.

Builds strata in release mode, starts each server on a free port (no persistence), drives it with
redis-benchmark (SET and GET, 256-byte values, 1M-key range, 50 clients, pipeline 1 and 32) while measuring
the server's CPU time, then loads 1M small string keys through `redis-cli --pipe` to compare memory per key.
Redis is measured in the same run, so the ratios compare like with like on this machine.

Standard library only. See bench/README.md for the meaning of every column.
"""

import argparse
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 10.0


# --------------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp_command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def call(port, *args, timeout=5.0):
    """Sends one command, returns the raw reply bytes (best effort: reads until a full line/bulk arrived)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(resp_command(*args))
        data = b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
            if data.startswith(b"$"):
                header, _, rest = data.partition(b"\r\n")
                if header == b"$-1" or len(rest) >= int(header[1:]) + 2:
                    break
            elif data.endswith(b"\r\n"):
                break
        return data


class Server:
    """A server process with its own port, directory and log; stop() kills it."""

    def __init__(self, label, argv_for_port, workdir):
        self.label = label
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="bench-%s-" % re.sub(r"[^a-z0-9]+", "-", label.lower()), dir=workdir)
        self.log_path = os.path.join(self.dir, "server.log")
        argv = argv_for_port(self.port, self.dir)
        self.argv = argv
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.dir)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.time() + READY_TIMEOUT_S
        last = "no attempt"
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited during start-up (status %s)\n%s" % (self.label, self.proc.returncode,
                                                                                 self.log_tail()))
            try:
                if call(self.port, "PING", timeout=1.0):
                    return
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s did not answer PING within %ss (%s)\n%s" % (self.label, READY_TIMEOUT_S, last,
                                                                           self.log_tail()))

    def alive(self):
        return self.proc.poll() is None

    def cpu_seconds(self):
        """utime + stime of the whole process (all threads), in seconds."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            stat = f.read()
        # Fields after the parenthesised command name; utime and stime are fields 14 and 15 of the line.
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS for %s" % self.label)

    def info_field(self, section, field):
        """An integer field of INFO <section>, or None if the server does not report it."""
        try:
            reply = call(self.port, "INFO", section)
        except OSError:
            return None
        m = re.search(rb"^%s:(\d+)\r?$" % field.encode(), reply, re.M)
        return int(m.group(1)) if m else None

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "    (no log)"
        return "\n".join("    " + l for l in text[-lines:]) or "    (log is empty)"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------
# Server configurations
# --------------------------------------------------------------------------------------------------------


def redis_config():
    def argv(port, d):
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", d]
    return ("redis", argv)


def strata_config(binary, threads):
    label = "strata t%d" % threads

    def argv(port, d):
        return [binary, "--port", str(port), "--bind", "127.0.0.1", "--threads", str(threads), "--save", "",
                "--appendonly", "no", "--dir", d]
    return (label, argv)


# --------------------------------------------------------------------------------------------------------
# Throughput
# --------------------------------------------------------------------------------------------------------


def run_benchmark(server, test, pipeline, args):
    """One redis-benchmark run; returns a result dict (with 'error' set if anything went wrong)."""
    result = {"server": server.label, "test": test.upper(), "pipeline": pipeline, "requests": 0}
    requests = args.requests if pipeline == 1 else args.requests * args.pipelined_factor
    result["requests"] = requests
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-t", test, "-d", str(args.data_size),
           "-r", str(args.keyspace), "-c", str(args.clients), "-P", str(pipeline), "-n", str(requests), "--csv"]
    # redis-benchmark retries forever if the server stops answering: bound it.
    timeout = 120 + requests / 5000.0
    cpu_before = server.cpu_seconds()
    wall_before = time.time()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        result["error"] = "redis-benchmark timed out after %ds" % timeout
        return result
    wall = time.time() - wall_before
    if not server.alive():
        result["error"] = "server died during the run (exit %s)\n%s" % (server.proc.returncode, server.log_tail())
        return result
    cpu = server.cpu_seconds() - cpu_before
    out = proc.stdout.decode(errors="replace")
    rows = [l for l in out.splitlines() if l.startswith('"') and not l.startswith('"test"')]
    if proc.returncode != 0 or not rows:
        result["error"] = "redis-benchmark exit %d: %s %s" % (proc.returncode, out.strip()[-300:],
                                                              proc.stderr.decode(errors="replace").strip()[-300:])
        return result
    header = [h.strip('"') for h in out.splitlines()[0].split(",")]
    values = dict(zip(header, [v.strip('"') for v in rows[0].split(",")]))
    try:
        result["rps"] = float(values["rps"])
        result["p50"] = float(values["p50_latency_ms"])
        result["p99"] = float(values["p99_latency_ms"])
    except (KeyError, ValueError):
        result["error"] = "unexpected redis-benchmark CSV: %s" % out.strip()[-300:]
        return result
    result["cpu"] = cpu
    result["wall"] = wall
    result["cpu_per_mops"] = cpu / (requests / 1e6)
    return result


def throughput(configs, args, workdir):
    """Every configuration, once per round (servers take turns, so slow drift hits all of them alike)."""
    results = []
    for round_no in range(args.rounds):
        if args.rounds > 1:
            print("  round %d of %d" % (round_no + 1, args.rounds), flush=True)
        results += throughput_round(configs, args, workdir)
    return results


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def summarize(rows):
    """Median over rounds of each measured value; an error if any round failed."""
    failed = [r for r in rows if "error" in r]
    if failed:
        return dict(failed[0])
    out = dict(rows[0])
    for key in ("rps", "p50", "p99", "cpu_per_mops"):
        out[key] = median([r[key] for r in rows])
    return out


def throughput_round(configs, args, workdir):
    results = []
    for label, argv in configs:
        print("  %-20s starting..." % label, flush=True)
        try:
            server = Server(label, argv, workdir)
        except RuntimeError as e:
            print("  %-20s FAILED TO START: %s" % (label, e), flush=True)
            for pipeline in args.pipelines:
                for test in args.tests:
                    results.append({"server": label, "test": test.upper(), "pipeline": pipeline,
                                    "error": "failed to start"})
            continue
        try:
            for pipeline in args.pipelines:
                for test in args.tests:
                    if not server.alive():
                        results.append({"server": label, "test": test.upper(), "pipeline": pipeline,
                                        "error": "server no longer running"})
                        continue
                    r = run_benchmark(server, test, pipeline, args)
                    results.append(r)
                    if "error" in r:
                        print("  %-20s %s -P %d: FAILED: %s" % (label, r["test"], pipeline, r["error"]), flush=True)
                    else:
                        print("  %-20s %s -P %-2d %12.0f ops/s  (%.1fs)" % (label, r["test"], pipeline, r["rps"],
                                                                          r["wall"]), flush=True)
        finally:
            server.stop()
    return results


def print_throughput(results, args):
    print()
    print("Throughput: redis-benchmark -d %d -r %d -c %d, requests %d at -P 1 and %d at -P 32"
          % (args.data_size, args.keyspace, args.clients, args.requests, args.requests * args.pipelined_factor))
    if args.rounds > 1:
        print("Each value is the median of %d rounds." % args.rounds)
    cols = "%-5s %4s  %-20s %12s %8s %8s %11s %10s %10s"
    print(cols % ("test", "P", "server", "ops/s", "p50 ms", "p99 ms", "CPU s/Mops", "ops ratio", "CPU ratio"))
    print("-" * 98)
    for pipeline in args.pipelines:
        for test in args.tests:
            servers = []
            for r in results:
                if r["server"] not in servers:
                    servers.append(r["server"])
            rows = [summarize([r for r in results if r["pipeline"] == pipeline and r["test"] == test.upper()
                               and r["server"] == server]) for server in servers]
            base = next((r for r in rows if r["server"] == "redis" and "error" not in r), None)
            for r in rows:
                if "error" in r:
                    print(cols % (r["test"], pipeline, r["server"], "FAILED", "-", "-", "-", "-", "-"))
                    continue
                ops_ratio = "%.2fx" % (r["rps"] / base["rps"]) if base else "n/a"
                cpu_ratio = "%.2fx" % (r["cpu_per_mops"] / base["cpu_per_mops"]) if base and base[
                    "cpu_per_mops"] > 0 else "n/a"
                print(cols % (r["test"], pipeline, r["server"], "%.0f" % r["rps"], "%.3f" % r["p50"],
                              "%.3f" % r["p99"], "%.2f" % r["cpu_per_mops"], ops_ratio, cpu_ratio))
        print()


# --------------------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------------------


def write_load_file(path, keys):
    """The RESP stream `SET key:%010d <32-byte value>` for `keys` keys: 14-byte keys, 32-byte values."""
    with open(path, "wb") as f:
        batch = []
        for i in range(keys):
            key = b"key:%010d" % i
            value = b"%032d" % i
            batch.append(b"*3\r\n$3\r\nSET\r\n$14\r\n%s\r\n$32\r\n%s\r\n" % (key, value))
            if len(batch) == 10000:
                f.write(b"".join(batch))
                batch = []
        f.write(b"".join(batch))


def memory(configs, args, workdir):
    load_file = os.path.join(workdir, "load.resp")
    write_load_file(load_file, args.memory_keys)
    results = []
    for label, argv in configs:
        r = {"server": label}
        results.append(r)
        try:
            server = Server(label, argv, workdir)
        except RuntimeError as e:
            r["error"] = "failed to start: %s" % e
            print("  %-20s FAILED TO START" % label, flush=True)
            continue
        try:
            time.sleep(0.5)
            rss0, used0 = server.rss_bytes(), server.info_field("memory", "used_memory")
            started = time.time()
            with open(load_file, "rb") as f:
                try:
                    proc = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.port), "--pipe"],
                                          stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          timeout=600)
                except subprocess.TimeoutExpired:
                    r["error"] = "redis-cli --pipe timed out"
                    continue
            out = proc.stdout.decode(errors="replace")
            m = re.search(r"errors: (\d+), replies: (\d+)", out)
            if proc.returncode != 0 or not m or int(m.group(1)) != 0 or int(m.group(2)) != args.memory_keys:
                r["error"] = "load failed: %s" % out.strip()[-300:]
                print("  %-20s LOAD FAILED: %s" % (label, out.strip()[-300:]), flush=True)
                continue
            load_s = time.time() - started
            time.sleep(1.0)
            if not server.alive():
                r["error"] = "server died after loading\n%s" % server.log_tail()
                continue
            dbsize = call(server.port, "DBSIZE")
            rss1, used1 = server.rss_bytes(), server.info_field("memory", "used_memory")
            r.update(rss0=rss0, rss1=rss1, used0=used0, used1=used1, load_s=load_s,
                     dbsize=dbsize.strip().decode(errors="replace"))
            r["rss_per_key"] = (rss1 - rss0) / args.memory_keys
            r["used_per_key"] = (used1 - used0) / args.memory_keys if used0 is not None and used1 is not None else None
            print("  %-20s loaded %d keys in %.1fs, DBSIZE %s" % (label, args.memory_keys, load_s, r["dbsize"]),
                  flush=True)
        finally:
            server.stop()
    os.unlink(load_file)
    return results


def print_memory(results, args):
    print()
    print("Memory: %d string keys (14-byte keys, 32-byte values) loaded with redis-cli --pipe; bytes per key "
          "above the empty server" % args.memory_keys)
    cols = "%-20s %10s %9s %10s %16s %11s %10s"
    print(cols % ("server", "DBSIZE", "RSS MiB", "RSS B/key", "used_memory MiB", "used B/key", "RSS ratio"))
    print("-" * 96)
    base = next((r for r in results if r["server"] == "redis" and "error" not in r), None)
    for r in results:
        if "error" in r:
            print(cols % (r["server"], "FAILED", "-", "-", "-", "-", "-"))
            print("    " + r["error"].replace("\n", "\n    "))
            continue
        used_mib = "%.1f" % (r["used1"] / 2**20) if r["used1"] is not None else "n/a"
        used_key = "%.1f" % r["used_per_key"] if r["used_per_key"] is not None else "n/a"
        ratio = "%.2fx" % (r["rss_per_key"] / base["rss_per_key"]) if base and base["rss_per_key"] > 0 else "n/a"
        print(cols % (r["server"], r["dbsize"].lstrip(":"), "%.1f" % (r["rss1"] / 2**20), "%.1f" % r["rss_per_key"],
                      used_mib, used_key, ratio))
    if base and base.get("used_per_key"):
        for r in results:
            if "error" not in r and r["server"] != "redis" and r.get("used_per_key"):
                print("  used_memory ratio %s / redis: %.2fx" % (r["server"], r["used_per_key"] / base["used_per_key"]))


# --------------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------------


def build_strata():
    print("Building strata (cargo build --release -p strata)...", flush=True)
    env = dict(os.environ)
    proc = subprocess.run(["cargo", "build", "--release", "-p", "strata"], cwd=REPO, env=env)
    if proc.returncode != 0:
        sys.exit("bench: cargo build --release -p strata failed")
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = os.path.join(REPO, target, "release", "strata") if not os.path.isabs(target) else os.path.join(
        target, "release", "strata")
    if not os.access(binary, os.X_OK):
        sys.exit("bench: built, but %s is not an executable" % binary)
    return binary


def describe_machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    redis_version = subprocess.run(["redis-server", "--version"], stdout=subprocess.PIPE).stdout.decode().strip()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode().strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL).stdout.decode().strip()
    print("Machine: %s, %d CPUs, %s %s" % (cpu, os.cpu_count(), platform.system(), platform.release()))
    print("Redis:   %s" % redis_version)
    print("Strata:  git %s%s" % (rev, " (uncommitted changes)" if dirty else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, help="requests per run at -P 1 (default 500000; 50000 with --quick)")
    p.add_argument("--pipelined-factor", type=int, default=10,
                   help="runs at -P 32 use this many times --requests (default 10)")
    p.add_argument("--clients", type=int, default=50, help="redis-benchmark -c (default 50)")
    p.add_argument("--data-size", type=int, default=256, help="redis-benchmark -d (default 256)")
    p.add_argument("--keyspace", type=int, default=1000000, help="redis-benchmark -r (default 1000000)")
    p.add_argument("--threads", default="1,2", help="strata --threads values to run (default 1,2)")
    p.add_argument("--memory-keys", type=int,
                   help="keys for the memory test (default 1000000; 200000 with --quick)")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat every throughput run this many times and report the median (default 1)")
    p.add_argument("--no-throughput", action="store_true", help="skip the redis-benchmark part")
    p.add_argument("--no-memory", action="store_true", help="skip the memory part")
    p.add_argument("--strata", help="use this strata binary instead of building one")
    p.add_argument("--quick", action="store_true",
                   help="short run: 50000 requests (x10 pipelined), 200000 keys for memory")
    args = p.parse_args()
    if args.requests is None:
        args.requests = 50000 if args.quick else 500000
    if args.memory_keys is None:
        args.memory_keys = 200000 if args.quick else 1000000
    args.tests = ["set", "get"]
    args.pipelines = [1, 32]

    for tool in ("redis-server", "redis-benchmark", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit("bench: %s not found: apt-get install -y redis-server redis-tools" % tool)

    # The servers run in their own working directories: a relative --strata path must be resolved
    # against ours first, and a missing binary reported now rather than as a failed start later.
    binary = os.path.abspath(args.strata) if args.strata else build_strata()
    if not os.access(binary, os.X_OK):
        sys.exit("bench: %s is not an executable strata binary" % binary)
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    configs = [redis_config()] + [strata_config(binary, t) for t in threads]

    describe_machine()
    workdir = tempfile.mkdtemp(prefix="strata-bench-")
    try:
        if not args.no_throughput:
            print("\nRunning redis-benchmark...", flush=True)
            print_throughput(throughput(configs, args, workdir), args)
        if not args.no_memory:
            print("\nMemory test...", flush=True)
            mem_configs = [redis_config()] + [strata_config(binary, t) for t in threads]
            print_memory(memory(mem_configs, args, workdir), args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
