//! COMMAND: the command table as Redis 7.0 describes it (COMMAND, COUNT, DOCS, GETKEYS,
//! GETKEYSANDFLAGS, INFO, LIST), generated from the table alone.

use super::*;

pub fn shown_flags(spec: &CommandSpec) -> Vec<&'static str> {
    spec.flag_names()
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL categories, tips, key specs,
/// subcommands.
pub(super) fn write_command_info(out: &mut ReplyBuf, spec: &CommandSpec, name: &str) {
    out.array(10);
    out.bulk(name.as_bytes());
    out.int(spec.arity as i64);
    let flags = shown_flags(spec);
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    let ((first, last, step), _) = spec.key_specs().legacy_range();
    out.int(first);
    out.int(last);
    out.int(step);
    let cats = spec.acl_categories();
    out.set(cats.len());
    for c in cats {
        out.simple(c);
    }
    out.set(spec.tips.len());
    for t in spec.tips {
        out.bulk(t.as_bytes());
    }
    // Redis 7.0 sends key specs and subcommands as sets in RESP3.
    out.set(spec.keys.len());
    for k in spec.keys {
        write_key_spec(out, k);
    }
    out.set(spec.subcommands.len());
    for sub in spec.subcommands {
        write_command_info(out, sub, &format!("{name}|{}", sub.name));
    }
}

/// One key spec as COMMAND INFO shows it: [notes], flags, begin_search, find_keys.
pub(super) fn write_key_spec(out: &mut ReplyBuf, k: &KeySpec) {
    out.map(3 + !k.notes.is_empty() as usize);
    if !k.notes.is_empty() {
        out.bulk(b"notes");
        out.bulk(k.notes.as_bytes());
    }
    out.bulk(b"flags");
    write_key_flags(out, k.flags);
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match k.begin_search {
        BeginSearch::Index(index) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(index as i64);
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.int(startfrom as i64);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match k.find_keys {
        FindKeys::Range {
            lastkey,
            step,
            limit,
        } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(lastkey as i64);
            out.bulk(b"keystep");
            out.int(step as i64);
            out.bulk(b"limit");
            out.int(limit as i64);
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            step,
        } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.int(keynumidx as i64);
            out.bulk(b"firstkey");
            out.int(firstkey as i64);
            out.bulk(b"keystep");
            out.int(step as i64);
        }
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

/// Key-spec flags as a set of simple strings (COMMAND INFO, COMMAND GETKEYSANDFLAGS).
pub(super) fn write_key_flags(out: &mut ReplyBuf, flags: KeyFlags) {
    let names: Vec<&str> = flags.names().collect();
    out.set(names.len());
    for n in names {
        out.simple(n);
    }
}

/// One COMMAND DOCS entry (the value; the caller writes the name), fields in Redis's order.
pub(super) fn write_command_docs(out: &mut ReplyBuf, spec: &CommandSpec, name: &str) {
    let docs = &spec.docs;
    let subs = !spec.subcommands.is_empty();
    out.map(
        4 + 3 * docs.deprecated.is_some() as usize
            + !docs.history.is_empty() as usize
            + !docs.args.is_empty() as usize
            + subs as usize,
    );
    for (k, v) in [
        ("summary", spec.summary),
        ("since", spec.since),
        ("group", spec.group),
        ("complexity", spec.complexity),
    ] {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
    if let Some((since, replaced_by)) = docs.deprecated {
        out.bulk(b"doc_flags");
        out.set(1);
        out.simple("deprecated");
        out.bulk(b"deprecated_since");
        out.bulk(since.as_bytes());
        out.bulk(b"replaced_by");
        out.bulk(replaced_by.as_bytes());
    }
    if !docs.history.is_empty() {
        out.bulk(b"history");
        out.set(docs.history.len());
        for (version, change) in docs.history {
            out.array(2);
            out.bulk(version.as_bytes());
            out.bulk(change.as_bytes());
        }
    }
    if !docs.args.is_empty() {
        out.bulk(b"arguments");
        write_args(out, docs.args);
    }
    if subs {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            let full = format!("{name}|{}", sub.name);
            out.bulk(full.as_bytes());
            write_command_docs(out, sub, &full);
        }
    }
}

/// COMMAND DOCS's `arguments`: one map per argument, nested for oneof/block.
pub(super) fn write_args(out: &mut ReplyBuf, args: &[Arg]) {
    out.array(args.len());
    for a in args {
        let flags = [
            ("optional", a.optional),
            ("multiple", a.multiple),
            ("multiple_token", a.multiple_token),
        ];
        let nflags = flags.iter().filter(|(_, on)| *on).count();
        let sub = match a.kind {
            ArgKind::OneOf(sub) | ArgKind::Block(sub) => Some(sub),
            _ => None,
        };
        out.map(
            2 + matches!(a.kind, ArgKind::Key(_) | ArgKind::PatternKey(_)) as usize
                + !a.token.is_empty() as usize
                + !a.since.is_empty() as usize
                + (nflags > 0) as usize
                + sub.is_some() as usize,
        );
        out.bulk(b"name");
        out.bulk(a.name.as_bytes());
        out.bulk(b"type");
        out.bulk(a.kind.name().as_bytes());
        if let ArgKind::Key(i) | ArgKind::PatternKey(i) = a.kind {
            out.bulk(b"key_spec_index");
            out.int(i as i64);
        }
        if !a.token.is_empty() {
            out.bulk(b"token");
            out.bulk(a.token.as_bytes());
        }
        if !a.since.is_empty() {
            out.bulk(b"since");
            out.bulk(a.since.as_bytes());
        }
        if nflags > 0 {
            out.bulk(b"flags");
            out.set(nflags);
            for (f, _) in flags.iter().filter(|(_, on)| *on) {
                out.simple(f);
            }
        }
        if let Some(sub) = sub {
            out.bulk(b"arguments");
            write_args(out, sub);
        }
    }
}

/// The table entry a `COMMAND INFO/DOCS` name designates ("get", "CLIENT|LIST"), by the names
/// clients call (a command renamed by `rename-command` is found by its new name only).
pub(super) fn lookup(name: &[u8]) -> Option<crate::table::Resolved> {
    std::str::from_utf8(name)
        .ok()
        .and_then(|n| crate::table::process().lookup_client_name(n))
}

/// COMMAND → COMMAND INFO of every command.
pub(super) fn command(cx: &mut ConnCtx<'_>) -> CmdResult {
    let top = crate::table::process().commands();
    cx.out.array(top.len());
    for spec in top {
        write_command_info(cx.out, spec, spec.name);
    }
    Ok(())
}

pub(super) fn command_count(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.int(crate::table::process().commands().len() as i64);
    Ok(())
}

/// COMMAND INFO [name ...] → one entry per name (null for unknown names); all commands if none.
pub(super) fn command_info(cx: &mut ConnCtx<'_>) -> CmdResult {
    let names = &cx.args[2..];
    if names.is_empty() {
        return command(cx);
    }
    cx.out.array(names.len());
    for n in names {
        match lookup(n) {
            Some(r) => write_command_info(cx.out, r.spec, r.name),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// COMMAND DOCS [name ...] → a map of command name to its documentation; unknown names are left
/// out; every command if no name is given.
pub(super) fn command_docs(cx: &mut ConnCtx<'_>) -> CmdResult {
    let found: Vec<(&'static CommandSpec, &'static str)> = if cx.args.len() == 2 {
        crate::table::process()
            .commands()
            .iter()
            .map(|s| (*s, s.name))
            .collect()
    } else {
        cx.args[2..]
            .iter()
            .filter_map(|n| lookup(n))
            .map(|r| (r.spec, r.name))
            .collect()
    };
    cx.out.map(found.len());
    for (spec, name) in found {
        cx.out.bulk(name.as_bytes());
        write_command_docs(cx.out, spec, name);
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern] → command names,
/// subcommands included ("client|list").
pub(super) fn command_list(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut a = cx.args_from(2);
    let mut filter = None;
    while let Ok(opt) = a.next_bytes() {
        if !(eq_ci(opt, "filterby") && a.remaining() == 2) {
            return Err(CmdError::Syntax);
        }
        let (kind, arg) = (a.next_bytes()?, a.next_bytes()?);
        filter = Some(if eq_ci(kind, "module") {
            ListFilter::Module
        } else if eq_ci(kind, "aclcat") {
            let cat = format!("@{}", String::from_utf8_lossy(arg).to_ascii_lowercase());
            ListFilter::AclCat(ACL_ORDER.iter().find(|c| **c == cat).copied())
        } else if eq_ci(kind, "pattern") {
            ListFilter::Pattern(arg.clone())
        } else {
            return Err(CmdError::Syntax);
        });
    }
    let table = crate::table::process();
    let names: Vec<&str> = table
        .entries()
        .iter()
        .filter(|e| table.is_callable(e))
        .filter(|e| match &filter {
            None => true,
            // Strata has no modules.
            Some(ListFilter::Module) => false,
            Some(ListFilter::AclCat(cat)) => {
                cat.is_some_and(|c| e.spec.acl_categories().contains(&c))
            }
            Some(ListFilter::Pattern(p)) => glob_match(p, e.name.as_bytes(), true),
        })
        .map(|e| e.name)
        .collect();
    cx.out.array(names.len());
    for n in names {
        cx.out.bulk(n.as_bytes());
    }
    Ok(())
}

pub(super) enum ListFilter {
    Module,
    /// The category, or None if Redis has no such category (nothing matches).
    AclCat(Option<&'static str>),
    Pattern(Bytes),
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS command [arg ...] → the key arguments of that command line
/// (with their key-spec flags for GETKEYSANDFLAGS).
pub(super) fn command_getkeys(cx: &mut ConnCtx<'_>) -> CmdResult {
    let with_flags = eq_ci(&cx.args[1], "getkeysandflags");
    let line = &cx.args[2..];
    let invalid = || CmdError::msg("ERR Invalid command specified");
    // The command line names a command, then possibly its subcommand ("client|list" names neither).
    if line[0].contains(&b'|') {
        return Err(invalid());
    }
    let base = lookup(&line[0]).ok_or_else(invalid)?;
    let cmd = if base.spec.subcommands.is_empty() || line.len() == 1 {
        base
    } else {
        let sub = [&line[0][..], b"|", &line[1][..]].concat();
        lookup(&sub).ok_or_else(invalid)?
    };
    if !cmd.spec.has_keys() {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !cmd.spec.arity_ok(line.len()) {
        return Err(CmdError::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let mut keys: Vec<(usize, KeyFlags)> = Vec::new();
    let mut specs = cmd.spec.key_specs();
    if cmd.spec.getkeys_routing_only {
        specs.getkeys = None;
    }
    specs.each(line, with_flags, |i, f| keys.push((i, f)));
    if keys.is_empty() && !cmd.spec.flags.has(Flags::NO_MANDATORY_KEYS) {
        return Err(CmdError::msg("ERR Invalid arguments specified for command"));
    }
    cx.out.array(keys.len());
    for (i, flags) in keys {
        if with_flags {
            cx.out.array(2);
            cx.out.bulk(&line[i]);
            write_key_flags(cx.out, flags);
        } else {
            cx.out.bulk(&line[i]);
        }
    }
    Ok(())
}

pub(super) fn command_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}
