//! Tests over the whole command table: lookups (and the per-thread cache of recent names), key
//! positions, COMMAND's categories and flags, and what the slow log keeps of a command line. They
//! live here, where every family is in the table.

use bytes::Bytes;
use strata_node::services::server::shown_flags;
use strata_node::services::slowlog::kept_args;
use strata_node::table::{CommandSpec, KeyAccess, Lookup};

use crate::testing::args as words;

fn line(s: &str) -> Vec<Bytes> {
    s.split(' ')
        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
        .collect()
}

fn keys_of(cmd: &str) -> Vec<(usize, KeyAccess)> {
    let args = line(cmd);
    let spec = crate::table()
        .get(&cmd.split(' ').next().unwrap().to_ascii_lowercase())
        .unwrap()
        .spec;
    let mut keys = Vec::new();
    spec.for_each_key(&args, |i, a| keys.push((i, a)));
    keys
}

#[test]
fn repeated_lookups_answer_as_the_first() {
    let t = crate::table();
    let name = |l: &str| match t.resolve(&line(l)) {
        Lookup::Found(c) => c.name.to_string(),
        Lookup::Unknown(m) | Lookup::BadArity(_, m) => m,
    };
    for _ in 0..2 {
        assert_eq!(name("GET k"), "get");
        assert_eq!(name("GET k"), "get");
        assert_eq!(
            name("GET"),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(name("gEt k"), "get");
        assert_eq!(
            name("GETX k"),
            "ERR unknown command 'GETX', with args beginning with: 'k' "
        );
        assert_eq!(name("CLIENT ID"), "client|id");
        assert_eq!(
            name("CLIENT NOPE"),
            "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
        );
        assert_eq!(name("ZREMRANGEBYSCORE k 0 1"), "zremrangebyscore");
        assert_eq!(
            name("GEORADIUSBYMEMBER_RO k m 1 km"),
            "georadiusbymember_ro"
        );
    }
}

#[test]
fn interleaved_names_resolve_as_without_the_cache() {
    // More distinct names than the cache holds, in changing orders and spellings, each
    // answered as a fresh lookup of its lowercase name answers it.
    let t = crate::table();
    let names = [
        "get", "SET", "lpush", "BLPOP", "multi", "exec", "Incr", "zadd", "hset", "get",
    ];
    for round in 0..50usize {
        for i in 0..names.len() {
            let n = names[(i * 7 + round * 3) % names.len()];
            let expect = t.get(&n.to_ascii_lowercase()).unwrap();
            let args: Vec<Bytes> = std::iter::once(n)
                .chain(
                    ["k", "1", "2"]
                        .into_iter()
                        .take(expect.spec.arity.unsigned_abs() as usize - 1),
                )
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            match t.resolve(&args) {
                Lookup::Found(c) => assert_eq!((c.name, c.id), (expect.name, expect.id), "{n}"),
                Lookup::Unknown(m) | Lookup::BadArity(_, m) => panic!("{n}: {m}"),
            }
        }
    }
}

#[test]
fn table_key_positions_and_access() {
    use KeyAccess::{Read, Write};
    assert_eq!(keys_of("get k"), [(1, Read)]);
    assert_eq!(keys_of("mget a b c"), [(1, Read), (2, Read), (3, Read)]);
    assert_eq!(keys_of("mset a 1 b 2"), [(1, Write), (3, Write)]);
    assert_eq!(keys_of("copy a b"), [(1, Read), (2, Write)]);
    assert_eq!(keys_of("del a b"), [(1, Write), (2, Write)]);
    assert_eq!(keys_of("set k v get"), [(1, Write)]);
    assert!(keys_of("ping x").is_empty());
    let get = crate::table().get("get").unwrap().spec;
    assert_eq!(get.first_key(&line("get k")), Some(1));
    assert!(get.has_keys() && !crate::table().get("ping").unwrap().spec.has_keys());
    let obj = crate::table().get("object|encoding").unwrap().spec;
    assert_eq!(obj.first_key(&line("object encoding k")), Some(2));
}

#[test]
fn whole_table_validates() {
    let t = crate::table();
    assert!(t.get("get").is_some());
    for e in t.entries() {
        let _ = e.spec.acl_categories();
    }
}

#[test]
fn command_info_orders_categories_like_redis() {
    let t = crate::table();
    let cats = |n: &str| t.get(n).unwrap().spec.acl_categories();
    assert_eq!(cats("ping"), ["@fast", "@connection"]);
    assert_eq!(cats("lastsave"), ["@admin", "@fast", "@dangerous"]);
    assert_eq!(
        cats("flushdb"),
        ["@keyspace", "@write", "@slow", "@dangerous"]
    );
    assert_eq!(cats("client"), ["@slow"]);
    assert_eq!(
        cats("client|kill"),
        ["@admin", "@slow", "@dangerous", "@connection"]
    );
    assert_eq!(
        shown_flags(t.get("hello").unwrap().spec),
        [
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy"
        ]
    );
}

#[test]
fn command_resolves_bare_and_with_subcommands() {
    let t = crate::table();
    let found = |line: &[&str]| match t.resolve(&words(line)) {
        Lookup::Found(r) => r.name.to_string(),
        Lookup::Unknown(e) | Lookup::BadArity(_, e) => e,
    };
    assert_eq!(found(&["COMMAND"]), "command");
    assert_eq!(found(&["command", "Info", "get"]), "command|info");
    assert_eq!(
        found(&["command", "nope"]),
        "ERR unknown subcommand 'nope'. Try COMMAND HELP."
    );
    assert_eq!(
        found(&["command", "getkeys", "get"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
}

/// The spec `args` resolve to.
fn spec(args: &[Bytes]) -> &'static CommandSpec {
    match crate::table().resolve(args) {
        Lookup::Found(c) => c.spec,
        _ => panic!("{args:?} not in the table"),
    }
}

/// [`kept_args`] for `args`.
fn kept(args: &[Bytes]) -> Vec<Bytes> {
    kept_args(spec(args), args)
}

#[test]
fn long_commands_keep_31_arguments_and_say_how_many_were_left_out() {
    let mut args = words(&["sadd", "set"]);
    args.extend((3..=33).map(|i| Bytes::from(i.to_string())));
    let cut = kept(&args);
    assert_eq!(cut.len(), 32);
    assert_eq!(cut[30], Bytes::from("31"));
    assert_eq!(cut[31], Bytes::from("... (2 more arguments)"));
    // Exactly 32 arguments are all kept.
    assert_eq!(kept(&args[..32]), args[..32].to_vec());
}

#[test]
fn long_arguments_are_cut_at_128_bytes() {
    let long = "A".repeat(129);
    let cut = kept(&words(&["sadd", "set", "foo", &long]));
    assert_eq!(
        cut[3],
        Bytes::from(format!("{}... (1 more bytes)", "A".repeat(128)))
    );
    let just = "B".repeat(128);
    assert_eq!(kept(&words(&["sadd", "s", &just]))[2], Bytes::from(just));
}

#[test]
fn credentials_are_redacted() {
    let auth = kept(&words(&["auth", "user", "pw"]));
    assert_eq!(auth, words(&["auth", "(redacted)", "(redacted)"]));
    let hello = kept(&words(&["hello", "3", "auth", "u", "p", "setname", "n"]));
    assert_eq!(
        hello,
        words(&[
            "hello",
            "3",
            "auth",
            "(redacted)",
            "(redacted)",
            "setname",
            "n"
        ])
    );
    let set = kept(&words(&[
        "config",
        "set",
        "maxmemory",
        "1",
        "requirepass",
        "x",
    ]));
    // The string command SET is not CONFIG SET.
    assert_eq!(
        kept(&words(&["set", "requirepass", "x"])),
        words(&["set", "requirepass", "x"])
    );
    assert_eq!(
        set,
        words(&[
            "config",
            "set",
            "maxmemory",
            "1",
            "requirepass",
            "(redacted)"
        ])
    );
}
