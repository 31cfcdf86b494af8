#!/usr/bin/env python3
"""Checks the one-way rules of docs/architecture.md ("Layers"): which crate may depend on which, and
which module may import which inside strata-node and strata-commands. Run by scripts/test.sh; exits
non-zero and names every broken rule.

Rules
  * Crates: each workspace crate depends only on the strata crates listed for it in CRATES.
  * strata-node: every file belongs to one concern of NODE_CONCERNS; a file imports (`crate::…`) only
    files of its own concern or of a concern listed before it. Inside a concern the imports between
    files form no circle, except inside the command context, whose four files name each other's
    types by construction (a handler type names its context, the context carries the session, the
    session queues commands).
  * strata-commands: a data-type family imports no other family (GEO, a sorted-set family, may use
    zset's value functions), nothing of the node's registries or services, only the node's base and
    command context, the shard layer and core.
  * strata-server: the request path's steps (dispatch/*.rs but mod.rs) import each other without a
    circle.
Imports are read from the source with comments removed: `crate::a::b`, `use crate::{a, b::c}`,
`strata_node::a`.
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# crate directory -> the strata crates it may depend on
CRATES = {
    "resp": [],
    "core": [],
    "rt": [],
    "loadgen": [],
    "rdb": ["core"],
    "shard": ["core"],
    "node": ["core", "resp", "shard", "rdb"],
    "commands": ["core", "resp", "shard", "node", "rdb"],
    "server": ["core", "resp", "rt", "shard", "node", "commands", "rdb"],
    "strata": ["server", "node", "commands"],
}

# strata-node's concerns, lowest first, and the files of each (paths under crates/node/src, no .rs)
NODE_CONCERNS = [
    ("base", ["error", "args", "value", "reply", "keyspec", "names", "settings", "log", "oom", "proctitle"]),
    ("registries", ["config", "config/parse", "config/rewrite", "config/specs", "access", "clients", "pubsub", "tracking"]),
    ("context", ["table", "ctx", "keyed", "state"]),
    # every file under services/; in docs/architecture.md order: digest, monitor, slowlog, latency,
    # client_evict, multi, tracking, pubsub, replication, persist, server/, connection
    ("services", None),
]
CYCLES_ALLOWED = {"context"}

FAMILIES = ["string", "generic", "hash", "list", "set", "zset", "bitmap", "hll", "geo", "sort"]
# family -> other families it may import
FAMILY_EXCEPTIONS = {"geo": ["zset"]}
# what a family may take from strata-node: the base and the command context
FAMILY_MAY_USE_NODE = {"error", "args", "value", "reply", "keyspec", "table", "ctx", "keyed", "access",
                       "Args", "CmdError", "CmdResult", "ShardCtx", "ConnCtx", "KeysCtx", "KeysHandler",
                       "Park", "TimeoutReply", "CommandSpec", "Flags", "Handler", "KeyAccess", "KeyFlags",
                       "KeySpec", "Lookup", "Parts", "Resolved", "Table", "run_shard_handler", "memory",
                       # the base's log (RESTORE logs a refused payload's reason, as Redis does)
                       "log", "server_log"}

errors = []


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return "\n".join(re.sub(r"//.*", "", line) for line in src.split("\n"))


def rust_files(base):
    for dirpath, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


def module_of(path, src_dir):
    rel = os.path.relpath(path, src_dir)[:-3]
    if rel.endswith("/mod"):
        rel = rel[: -len("/mod")]
    return rel


def split_top(inner):
    """Top-level comma-separated items of a `{...}` use group."""
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur.strip())
    return items


def paths_from(src, root):
    """Every path `root::…` in `src`, as a list of its segments (use groups expanded one level)."""
    out = []
    for m in re.finditer(re.escape(root) + r"::", src):
        rest = src[m.end():]
        if rest.startswith("{"):
            depth, i = 0, 0
            for i, ch in enumerate(rest):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        break
            for item in split_top(rest[1:i]):
                seg = re.match(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", item)
                if seg:
                    out.append(seg.group(0).split("::"))
        else:
            seg = re.match(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", rest)
            if seg:
                out.append(seg.group(0).split("::"))
    return out


def check_crates():
    for name, allowed in CRATES.items():
        manifest = os.path.join(ROOT, "crates", name, "Cargo.toml")
        if not os.path.exists(manifest):
            errors.append(f"crates/{name}: listed in CRATES but missing")
            continue
        # [dependencies] only: a dev-dependency (a test's event loop) is not a layer edge.
        text = open(manifest).read()
        section = re.search(r"^\[dependencies\]\n(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
        deps = set(re.findall(r"^strata-([a-z]+)\b", section.group(1) if section else "", flags=re.M))
        for d in sorted(deps - set(allowed)):
            errors.append(f"crates/{name} depends on strata-{d}: not allowed (may use: {allowed or 'none'})")
    for name in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        if name not in CRATES:
            errors.append(f"crates/{name}: not in scripts/check-layers.py CRATES (say what it may use)")


def find_cycle(nodes, edges):
    """A circle in the graph (list of nodes), or None."""
    color, stack = {}, []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) is None:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(nodes):
        if color.get(n) is None:
            c = visit(n)
            if c:
                return c
    return None


def check_node():
    src_dir = os.path.join(ROOT, "crates", "node", "src")
    concern = {}
    for rank, (name, files) in enumerate(NODE_CONCERNS):
        for f in files or []:
            concern[f] = (rank, name)
    for path in rust_files(src_dir):
        mod = module_of(path, src_dir)
        if mod == "services" or mod.startswith("services/"):
            concern.setdefault(mod, (len(NODE_CONCERNS) - 1, "services"))
    edges, modules = {}, set()
    for path in rust_files(src_dir):
        mod = module_of(path, src_dir)
        if mod == "lib":
            continue
        if mod not in concern:
            errors.append(f"crates/node/src/{mod}.rs: in no concern of scripts/check-layers.py NODE_CONCERNS")
            continue
        modules.add(mod)
        src = strip_comments(open(path).read())
        if "strata_commands" in src:
            errors.append(f"crates/node/src/{mod}.rs names strata_commands: the node never imports a family")
        for segs in paths_from(src, "crate"):
            if segs[0] == "services" and len(segs) > 1 and (
                os.path.exists(os.path.join(src_dir, "services", segs[1] + ".rs"))
                or os.path.exists(os.path.join(src_dir, "services", segs[1], "mod.rs"))
            ):
                target = "services/" + segs[1]
            else:
                target = segs[0]
            if target == mod or target not in concern:
                continue
            edges.setdefault(mod, set()).add(target)
            (r_from, c_from), (r_to, c_to) = concern[mod], concern[target]
            if r_to > r_from:
                errors.append(
                    f"crates/node/src/{mod}.rs ({c_from}) imports {target} ({c_to}): a concern imports "
                    "only its own and those below it"
                )
    for rank, (name, _) in enumerate(NODE_CONCERNS):
        if name in CYCLES_ALLOWED:
            continue
        members = {m for m in modules if concern[m][0] == rank}
        sub = {m: {t for t in edges.get(m, ()) if t in members} for m in members}
        cycle = find_cycle(members, sub)
        if cycle:
            errors.append(f"strata-node, {name}: import circle " + " -> ".join(cycle))


def check_commands():
    src_dir = os.path.join(ROOT, "crates", "commands", "src")
    for path in rust_files(src_dir):
        mod = module_of(path, src_dir)
        family = mod.split("/")[0]
        if family not in FAMILIES:
            continue
        src = strip_comments(open(path).read())
        allowed = {family, "testing"} | set(FAMILY_EXCEPTIONS.get(family, []))
        for segs in paths_from(src, "crate"):
            if segs[0] in FAMILIES and segs[0] not in allowed:
                errors.append(f"crates/commands/src/{mod}.rs imports the {segs[0]} family: families "
                              "use each other only through the node's shared views")
            if segs[0] not in FAMILIES and segs[0] not in allowed:
                errors.append(f"crates/commands/src/{mod}.rs uses crate::{segs[0]}: a family sees the "
                              "command context, not the crate's assembly")
        for segs in paths_from(src, "strata_node"):
            if segs[0] not in FAMILY_MAY_USE_NODE:
                errors.append(f"crates/commands/src/{mod}.rs uses strata_node::{'::'.join(segs)}: a "
                              "family uses only the node's base and command context")


def check_dispatch():
    """The request path's steps (crates/server/src/dispatch/*.rs) import each other without a
    circle; `mod.rs` (the map, and the `Batch` every step extends) is outside the rule."""
    src_dir = os.path.join(ROOT, "crates", "server", "src", "dispatch")
    files = {module_of(p, src_dir): p for p in rust_files(src_dir)}
    files.pop("dispatch", None)
    steps = {m for m in files if m != "mod"}
    edges = {}
    for mod in steps:
        src = strip_comments(open(files[mod]).read())
        for segs in paths_from(src, "super"):
            if segs[0] in steps and segs[0] != mod:
                edges.setdefault(mod, set()).add(segs[0])
    cycle = find_cycle(steps, edges)
    if cycle:
        errors.append("crates/server/src/dispatch: import circle " + " -> ".join(cycle))


def main():
    check_crates()
    check_node()
    check_commands()
    check_dispatch()
    if errors:
        for e in errors:
            print("layers: " + e)
        print(f"layers: {len(errors)} rule(s) broken (see docs/architecture.md, Layers)")
        return 1
    print("layers: every crate and module imports only downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
