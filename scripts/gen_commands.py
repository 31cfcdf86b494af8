#!/usr/bin/env python3
"""Prints command-table entries (crates/commands) for Redis commands, from a running redis-server.

The command table must describe each command exactly as Redis 7.0 does (COMMAND INFO and COMMAND DOCS
are compared byte for byte in tests/server.rs). This script asks redis-server for those descriptions
and prints the Rust declarations that reproduce them: key-spec and argument constants, then one
`cmd(...)` entry per command with its arguments, history, deprecation, tips and extra ACL categories.
Review the output and paste it into the family module; handlers are named after the command
(`hset` → `Handler::Shard(hset)`), or `Handler::Keys(name)` for the names given with --keys.

Usage:
    redis-server --port 6390 --daemonize yes
    scripts/gen_commands.py --port 6390 [--keys sinterstore,smove] hset hget ...
"""

import argparse
import socket
import sys


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    return s, s.makefile("rb")


def call(sock, f, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return read(f)


def read(f):
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest.decode()
    if t == b"-":
        raise RuntimeError(rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if t in (b"*", b"~", b">"):
        n = int(rest)
        return None if n < 0 else [read(f) for _ in range(n)]
    if t == b"%":
        n = int(rest)
        return {read(f): read(f) for _ in range(n)}
    raise RuntimeError("unexpected reply %r" % line)


def pairs(lst):
    """A RESP2 flat key/value array as a dict (keeps order)."""
    return {lst[i]: lst[i + 1] for i in range(0, len(lst), 2)} if isinstance(lst, list) else lst


FLAGS = {
    "write": "WRITE", "readonly": "READONLY", "denyoom": "DENYOOM", "admin": "ADMIN",
    "pubsub": "PUBSUB", "noscript": "NOSCRIPT", "blocking": "BLOCKING", "loading": "LOADING",
    "stale": "STALE", "skip_monitor": "SKIP_MONITOR", "skip_slowlog": "SKIP_SLOWLOG", "fast": "FAST",
    "no_auth": "NO_AUTH", "may_replicate": "MAY_REPLICATE", "no_multi": "NO_MULTI",
    "allow_busy": "ALLOW_BUSY", "no_mandatory_keys": "NO_MANDATORY_KEYS",
}
DERIVED_FROM_GROUP = {
    "string": "@string", "generic": "@keyspace", "connection": "@connection", "hash": "@hash",
    "list": "@list", "set": "@set", "sorted-set": "@sortedset", "bitmap": "@bitmap",
    "hyperloglog": "@hyperloglog", "geo": "@geo",
}
KEY_FLAGS = {
    "RO": "RO", "RW": "RW", "OW": "OW", "RM": "RM", "access": "ACCESS", "update": "UPDATE",
    "insert": "INSERT", "delete": "DELETE", "not_key": "NOT_KEY", "incomplete": "INCOMPLETE",
    "variable_flags": "VARIABLE_FLAGS",
}
ARG_KINDS = {
    "string": "string", "integer": "integer", "double": "double", "pattern": "pattern",
    "unix-time": "unix_time",
}


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def flags_expr(names, table, prefix):
    parts = []
    for n in names:
        if n == "movablekeys":
            continue  # derived from the key specs
        if n not in table:
            sys.exit("unknown flag %r" % n)
        parts.append("%s::%s" % (prefix, table[n]))
    if not parts:
        return "%s::NONE" % prefix if prefix == "Flags" else "KeyFlags(0)"
    expr = parts[0]
    for p in parts[1:]:
        expr += ".or(%s)" % p
    return expr


def key_spec(spec):
    spec = pairs(spec)
    flags = flags_expr(spec["flags"], KEY_FLAGS, "KeyFlags")
    bs, fk = pairs(spec["begin_search"]), pairs(spec["find_keys"])
    bspec, fspec = pairs(bs["spec"]), pairs(fk["spec"])
    notes = spec.get("notes")
    if bs["type"] == "index":
        begin = "BeginSearch::Index(%d)" % bspec["index"]
    elif bs["type"] == "keyword":
        begin = "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            rust_str(bspec["keyword"]), bspec["startfrom"])
    else:
        begin = "BeginSearch::Unknown"
    if fk["type"] == "range":
        find = "FindKeys::Range { lastkey: %d, step: %d, limit: %d }" % (
            fspec["lastkey"], fspec["keystep"], fspec["limit"])
    elif fk["type"] == "keynum":
        find = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, step: %d }" % (
            fspec["keynumidx"], fspec["firstkey"], fspec["keystep"])
    else:
        find = "FindKeys::Unknown"
    # The short constructors where they fit.
    if bs["type"] == "index" and fk["type"] == "range" and fspec["limit"] == 0:
        if fspec["lastkey"] == 0 and fspec["keystep"] == 1:
            expr = "KeySpec::at(%d, %s)" % (bspec["index"], flags)
        else:
            expr = "KeySpec::range(%d, %d, %d, %s)" % (
                bspec["index"], fspec["lastkey"], fspec["keystep"], flags)
    elif (bs["type"] == "index" and fk["type"] == "keynum"
          and (fspec["keynumidx"], fspec["firstkey"], fspec["keystep"]) == (0, 1, 1)):
        expr = "KeySpec::numkeys(%d, %s)" % (bspec["index"], flags)
    elif bs["type"] == "keyword":
        expr = "KeySpec::keyword(%s, %d, %s, %s)" % (
            rust_str(bspec["keyword"]), bspec["startfrom"], find, flags)
    else:
        expr = "KeySpec { flags: %s, begin_search: %s, find_keys: %s, notes: \"\" }" % (
            flags, begin, find)
    if notes:
        expr += ".with_notes(%s)" % rust_str(notes)
    return expr


class Gen:
    def __init__(self):
        self.consts = []  # (name, text)
        self.names = set()

    def const(self, name, ty, body):
        base, i = name, 2
        while name in self.names:
            name = "%s_%d" % (base, i)
            i += 1
        self.names.add(name)
        self.consts.append("const %s: %s = %s;" % (name, ty, body))
        return name

    def arg(self, a, prefix):
        a = pairs(a)
        name, kind = a["name"], a["type"]
        if kind == "key":
            expr = "Arg::key(%s, %d)" % (rust_str(name), a["key_spec_index"])
        elif kind == "pattern" and "key_spec_index" in a:
            expr = "Arg::pattern_key(%s, %d)" % (rust_str(name), a["key_spec_index"])
        elif kind == "pure-token":
            expr = "Arg::pure_token(%s, %s)" % (rust_str(name), rust_str(a["token"]))
        elif kind in ("oneof", "block"):
            sub = self.args(a["arguments"], prefix + "_" + name.upper().replace("-", "_"))
            expr = "Arg::%s(%s, %s)" % (kind, rust_str(name), sub)
        elif kind in ARG_KINDS:
            expr = "Arg::%s(%s)" % (ARG_KINDS[kind], rust_str(name))
        else:
            sys.exit("unknown argument type %r" % kind)
        if "token" in a and kind != "pure-token":
            expr += ".with_token(%s)" % rust_str(a["token"])
        if "since" in a:
            expr += ".since(%s)" % rust_str(a["since"])
        for f in a.get("flags", []):
            expr += {"optional": ".optional()", "multiple": ".multiple()",
                     "multiple_token": ".multiple_token()"}[f]
        extra = set(a) - {"name", "type", "key_spec_index", "token", "since", "flags", "arguments"}
        if extra:
            sys.exit("argument %s: unsupported fields %s" % (name, sorted(extra)))
        return expr

    def args(self, args, prefix):
        items = [self.arg(a, prefix) for a in args]
        body = "&[\n" + "".join("    %s,\n" % i for i in items) + "]"
        return self.const(prefix + "_ARGS" if not prefix.endswith("_ARGS") else prefix, "&[Arg]", body)


def derived_acl(flags, group):
    cats = []
    if "write" in flags:
        cats.append("@write")
    if "readonly" in flags:
        cats.append("@read")
    if group in DERIVED_FROM_GROUP:
        cats.append(DERIVED_FROM_GROUP[group])
    if "admin" in flags:
        cats += ["@admin", "@dangerous"]
    if "pubsub" in flags:
        cats.append("@pubsub")
    if "blocking" in flags:
        cats.append("@blocking")
    cats.append("@fast" if "fast" in flags else "@slow")
    return cats


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--keys", default="", help="commands whose handler is Handler::Keys")
    p.add_argument("commands", nargs="+")
    o = p.parse_args()
    keyed = set(filter(None, o.keys.split(",")))
    sock, f = connect(o.port)
    g = Gen()
    entries = []
    for name in o.commands:
        info = call(sock, f, "COMMAND", "INFO", name)[0]
        if info is None:
            sys.exit("redis-server does not know %s" % name)
        docs = pairs(call(sock, f, "COMMAND", "DOCS", name)[1])
        cname, arity, flags, _first, _last, _step, acl, tips, specs, subs = info
        if subs:
            sys.exit("%s has subcommands: write the container by hand" % name)
        up = cname.upper().replace("-", "_")
        group = docs["group"]
        keys = "&[]"
        if specs:
            keys = g.const(up + "_KEYS", "&[KeySpec]",
                           "&[\n" + "".join("    %s,\n" % key_spec(s) for s in specs) + "]")
        handler = "Handler::%s(%s)" % ("Keys" if cname in keyed else "Shard", cname.replace("-", "_"))
        e = "cmd(%s, %d, %s, %s,\n    %s, %s,\n    %s,\n    %s)" % (
            rust_str(cname), arity, flags_expr(flags, FLAGS, "Flags"), keys,
            rust_str(docs["summary"]), rust_str(docs["since"]), rust_str(docs.get("complexity", "")),
            handler)
        if "arguments" in docs:
            e += "\n    .with_args(%s)" % g.args(docs["arguments"], up)
        if docs.get("history"):
            body = "&[\n" + "".join("    (%s, %s),\n" % (rust_str(v), rust_str(c))
                                    for v, c in docs["history"]) + "]"
            e += "\n    .with_history(%s)" % g.const(up + "_HISTORY", "&[(&str, &str)]", body)
        if "deprecated_since" in docs:
            e += "\n    .deprecated(%s, %s)" % (rust_str(docs["deprecated_since"]),
                                                rust_str(docs["replaced_by"]))
        if tips:
            e += "\n    .with_tips(&[%s])" % ", ".join(rust_str(t) for t in tips)
        extra = [c for c in acl if c not in derived_acl(flags, group)]
        if extra:
            e += "\n    .with_acl(&[%s])" % ", ".join(rust_str(c) for c in extra)
        if set(docs) - {"summary", "since", "group", "complexity", "history", "arguments",
                        "doc_flags", "deprecated_since", "replaced_by"}:
            sys.exit("%s: unsupported docs fields %s" % (name, sorted(docs)))
        entries.append(e)
    print("// ----- generated by scripts/gen_commands.py from redis-server; review before editing -----\n")
    print("\n".join(g.consts))
    print("\n/// The family's commands.\n#[rustfmt::skip]\npub static COMMANDS: &[CommandSpec] = &[")
    for e in entries:
        print("    " + e.replace("\n", "\n    ") + ",")
    print("];")


if __name__ == "__main__":
    main()
