//! Differential fuzzing of the whole command table: seeded random command lines, built from the
//! argument grammar redis-server itself publishes (COMMAND DOCS), sent to redis-server and Strata
//! alike and compared reply for reply, with the keys' contents compared every few dozen commands.
//!
//! Every command both servers have is drawn, except those whose replies cannot match by design:
//! random output (Redis's `nondeterministic_output` tip: SPOP, RANDOMKEY, SCAN…) and server,
//! connection and replication administration. TTL, PTTL, EXPIRETIME and PEXPIRETIME are drawn, a
//! positive reply compared only as positive; blocking commands with timeouts of a few milliseconds
//! (the client is alone: they serve at once or time out). Arguments follow the grammar (tokens,
//! optional and repeated blocks, one-of choices) with values chosen to collide: nine keys (two
//! sharing a hash tag, the rest on either shard), fields and members from a small pool, integers
//! around zero and at the edges of 64 bits, `inf`, `nan`, binary and empty strings.
//! A few lines in a hundred then lose their last argument or gain one, for the error paths; some
//! are wrapped in COMMAND GETKEYS, some run inside MULTI/EXEC (with a WATCH now and then), and now
//! and then a line selects or swaps databases or changes an encoding limit. Half the
//! time a pipeline of up to 16 lines goes out in one write, so Strata's batching (sub-batches per
//! shard, split multi-key commands, barriers, transactions inside pipelines) is compared too. Small
//! encoding limits make collections convert back and forth between their compact and full forms.
//!
//! After each batch (a transaction once it has run) what other clients saw is compared too: every
//! keyspace and keyevent notification (`KEAnm`), in order among the events of one shard (a command
//! or pipeline spanning shards raises its events shard by shard); the keys invalidated for a BCAST
//! tracking client and for a default-mode one that reads every key after each check (as sets:
//! Redis sends BCAST invalidations once per event-loop turn); INFO's keyspace hits and misses; and
//! how many changes were counted (`rdb_changes_since_last_save`, which feeds `save` points),
//! also after a multi-key read that stops at its first key of the wrong type.
//!
//! What may legitimately differ is compared as Redis leaves it unspecified: replies of commands
//! tipped `nondeterministic_output_order` (SMEMBERS, HGETALL…) as multisets, and SORT of a set or
//! sorted set by kind and length only (Redis reads either from its hash table, whose order is
//! random; equal weights keep that order, and LIMIT picks from it). One documented
//! difference is skipped: Redis converts a small sorted set to a skiplist when SORT reads it, Strata
//! never restructures a value on a read, so OBJECT ENCODING is not compared on a key SORT has read.

use std::collections::{BTreeSet, HashSet};

use crate::harness::{encode_command, key_slot, Diff, Reply, Rng};

/// One argument of a command's grammar, as COMMAND DOCS describes it.
#[derive(Debug)]
struct ArgSpec {
    name: String,
    kind: String,
    token: Option<String>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    children: Vec<ArgSpec>,
}

struct Command {
    name: String,
    args: Vec<ArgSpec>,
    unordered: bool,
}

const KEYS: &[&str] = &["a", "b", "c", "{t}a", "{t}b", "h", "l", "s", "z"];
const STRINGS: &[&str] = &[
    "",
    "x",
    "foo",
    "bar",
    "1",
    "-1",
    "0",
    "3.5",
    "inf",
    "-inf",
    "nan",
    "10",
    "f1",
    "f2",
    "m1",
    "m2",
    "\0\u{ff}",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "9223372036854775807",
    "-9223372036854775808",
    "1e3",
    " 1",
    "abc",
];
const INTEGERS: &[&str] = &[
    "0",
    "-1",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "x",
    "1.5",
    "",
];
const DOUBLES: &[&str] = &[
    "0", "1", "1.5", "-2.5", "inf", "-inf", "+inf", "nan", "1e308", "abc", "3", "(1", "10",
];
const PATTERNS: &[&str] = &["*", "a*", "f?", "[a-c]", "*b*"];
/// Expiry arguments stay far from now (or in the past, or invalid): a TTL of a few milliseconds
/// would expire between the two servers' copies of the command, and a key SET with a deadline in
/// the past stays counted (DBSIZE) until each server's own expiry cycle removes it. Relative ones
/// (seconds or milliseconds from now) are these or drawn from a wide range; absolute ones are in
/// the future whichever their unit, or invalid, or 0.
const EXPIRY: &[&str] = &["-1", "0", "x", "9223372036854775807"];
const DEADLINES: &[&str] = &["5000000000000", "4102444800000", "-5", "x", "0"];
const EXPIRY_COMMANDS: &[&str] = &[
    "expire",
    "pexpire",
    "setex",
    "psetex",
    "expireat",
    "pexpireat",
    "set",
    "getex",
];
/// A blocking command's timeouts: a few milliseconds (the fuzzing client is alone, so a command
/// that finds nothing waits that long and answers null on both servers), or invalid. Never 0 or
/// under a millisecond, which would wait for good.
const TIMEOUTS: &[&str] = &["0.001", "0.002", "0.005", "-1", "x", "inf", "1e-3"];
/// The blocking commands whose timeout is their last argument.
const TIMEOUT_LAST: &[&str] = &["blpop", "brpop", "bzpopmin", "bzpopmax"];

/// The TTL readers: their replies depend on when each server ran them, so a positive one is only
/// compared as positive (-1 no expiry and -2 no key exactly): which commands keep, set or drop a
/// key's TTL is compared that way.
const TTL_READERS: &[&str] = &["ttl", "pttl", "expiretime", "pexpiretime"];

/// Not drawn: administration, connection state, replication, scripting, pub/sub, and PFSELFTEST
/// (a quarter of a second each, tested on its own).
const SKIPPED: &[&str] = &[
    "acl",
    "asking",
    "auth",
    "bgrewriteaof",
    "bgsave",
    "client",
    "cluster",
    "command",
    "config",
    "debug",
    "discard",
    "dump",
    "echo",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "exec",
    "failover",
    "fcall",
    "fcall_ro",
    "flushall",
    "function",
    "hello",
    "info",
    "keys",
    "lastsave",
    "latency",
    "lolwut",
    "memory",
    "migrate",
    "module",
    "monitor",
    "multi",
    "object",
    "pfselftest",
    "ping",
    "psubscribe",
    "psync",
    "publish",
    "pubsub",
    "punsubscribe",
    "quit",
    "readonly",
    "readwrite",
    "replicaof",
    "reset",
    "restore",
    "restore-asking",
    "role",
    "save",
    "script",
    "select",
    "shutdown",
    "slaveof",
    "slowlog",
    "spublish",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "swapdb",
    "sync",
    "time",
    "unsubscribe",
    "unwatch",
    "wait",
    "watch",
];

fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Simple(t) | Reply::Bulk(Some(t)) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    }
}

/// The value after `name` in a RESP2 flat map.
fn field<'a>(flat: &'a [Reply], name: &str) -> Option<&'a Reply> {
    flat.chunks(2)
        .find(|kv| text(&kv[0]).as_deref() == Some(name))
        .and_then(|kv| kv.get(1))
}

fn parse_args(list: &[Reply]) -> Vec<ArgSpec> {
    list.iter()
        .filter_map(|a| a.as_array())
        .map(|a| {
            let flags: Vec<String> = field(a, "flags")
                .and_then(Reply::as_array)
                .map(|f| f.iter().filter_map(text).collect())
                .unwrap_or_default();
            ArgSpec {
                name: field(a, "name").and_then(text).unwrap_or_default(),
                kind: field(a, "type").and_then(text).unwrap_or_default(),
                token: field(a, "token").and_then(text),
                optional: flags.iter().any(|f| f == "optional"),
                multiple: flags.iter().any(|f| f == "multiple"),
                multiple_token: flags.iter().any(|f| f == "multiple_token"),
                children: field(a, "arguments")
                    .and_then(Reply::as_array)
                    .map(parse_args)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The commands to draw from: in both servers' tables, deterministic, not skipped.
fn commands(d: &mut Diff) -> Vec<Command> {
    let have: HashSet<String> = d
        .strata
        .call_decoded(&["COMMAND", "LIST"])
        .as_array()
        .expect("COMMAND LIST")
        .iter()
        .filter_map(text)
        .collect();
    let info = d.redis.call_decoded(&["COMMAND", "INFO"]);
    let mut excluded: HashSet<String> = SKIPPED.iter().map(|s| s.to_string()).collect();
    let mut unordered = HashSet::new();
    for entry in info.as_array().expect("COMMAND INFO").iter() {
        let Some(e) = entry.as_array() else { continue };
        let name = text(&e[0]).unwrap_or_default();
        let tips: Vec<String> = e
            .get(7)
            .and_then(Reply::as_array)
            .map(|t| t.iter().filter_map(text).collect())
            .unwrap_or_default();
        // Blocking commands are drawn with timeouts of a few milliseconds (see TIMEOUTS); WAIT
        // (skipped) is the one with no key.
        if tips.iter().any(|t| t == "nondeterministic_output")
            && !TTL_READERS.contains(&name.as_str())
        {
            excluded.insert(name.clone());
        }
        if tips.iter().any(|t| t == "nondeterministic_output_order") {
            unordered.insert(name);
        }
    }
    let docs = d.redis.call_decoded(&["COMMAND", "DOCS"]);
    let docs = docs.as_array().expect("COMMAND DOCS");
    let mut out: Vec<Command> = docs
        .chunks(2)
        .filter_map(|kv| {
            let name = text(&kv[0])?;
            let doc = kv[1].as_array()?;
            if excluded.contains(&name)
                || !have.contains(&name)
                || field(doc, "subcommands").is_some()
            {
                return None;
            }
            let args = field(doc, "arguments")
                .and_then(Reply::as_array)
                .map(parse_args)
                .unwrap_or_default();
            Some(Command {
                unordered: unordered.contains(&name),
                name,
                args,
            })
        })
        .collect();
    // OBJECT ENCODING is the one subcommand drawn: it shows every conversion.
    let leaf = |kind: &str, token: Option<&str>| ArgSpec {
        name: kind.into(),
        kind: kind.into(),
        token: token.map(Into::into),
        optional: false,
        multiple: false,
        multiple_token: false,
        children: vec![],
    };
    out.push(Command {
        name: "object".into(),
        args: vec![leaf("pure-token", Some("ENCODING")), leaf("key", None)],
        unordered: false,
    });
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn generate(a: &ArgSpec, command: &str, rng: &mut Rng, out: &mut Vec<String>) {
    if a.optional && rng.chance(50) {
        return;
    }
    let times = if a.multiple { 1 + rng.below(3) } else { 1 };
    for i in 0..times {
        if let Some(token) = &a.token {
            if i == 0 || a.multiple_token {
                out.push(token.clone());
            }
        }
        match a.kind.as_str() {
            "pure-token" => {}
            "oneof" => {
                let choice = rng.below(a.children.len());
                generate(&a.children[choice], command, rng, out);
            }
            "block" => {
                for child in &a.children {
                    generate(child, command, rng, out);
                }
            }
            "key" => out.push(rng.pick(KEYS).into()),
            "double" | "integer" if a.name == "timeout" => out.push(rng.pick(TIMEOUTS).into()),
            // A relative expiry is drawn from a wide range: the same one twice (SETEX k 100000,
            // then EXPIRE k 100000 GT) compares two deadlines a few milliseconds apart, whose order
            // depends on when each server ran the commands.
            "integer" if EXPIRY_COMMANDS.contains(&command) && rng.chance(60) => {
                out.push((100_000 + rng.below(100_000_000)).to_string())
            }
            "integer" if EXPIRY_COMMANDS.contains(&command) => out.push(rng.pick(EXPIRY).into()),
            "unix-time" => out.push(rng.pick(DEADLINES).into()),
            "integer" if rng.chance(30) => out.push(rng.pick(INTEGERS).into()),
            "integer" => out.push((rng.below(16) as i64 - 3).to_string()),
            // A third of the members and scores come from a few hundred, so collections also
            // grow past one listpack or quicklist node and ranges cross node boundaries.
            "double" if rng.chance(30) => out.push(rng.below(300).to_string()),
            "double" => out.push(rng.pick(DOUBLES).into()),
            "pattern" => out.push(rng.pick(PATTERNS).into()),
            _ if rng.chance(30) => out.push(format!("e{}", rng.below(300))),
            _ => out.push(rng.pick(STRINGS).into()),
        }
    }
}

/// How a command's replies are compared.
#[derive(Clone, Copy, Debug)]
enum Loose {
    No,
    /// As multisets ([`unordered`]).
    Order,
    /// Kind and length only ([`shape`]).
    Shape,
    /// OBJECT ENCODING of a key SORT has read: Redis's `skiplist` may be Strata's `listpack`.
    SortedEncoding,
    /// A TTL reader's reply: any positive integer stands for "has a TTL".
    Remaining,
}

impl Loose {
    fn apply(self, r: &Reply) -> Reply {
        match self {
            Loose::No => r.clone(),
            Loose::Order => unordered(r),
            Loose::Shape => shape(r),
            Loose::SortedEncoding if r == &Reply::Bulk(Some(b"skiplist".to_vec())) => {
                Reply::Bulk(Some(b"listpack".to_vec()))
            }
            Loose::SortedEncoding => r.clone(),
            Loose::Remaining => match r {
                Reply::Integer(n) if *n > 0 => Reply::Integer(1),
                other => other.clone(),
            },
        }
    }
}

/// A reply in a form where element order no longer counts.
fn unordered(r: &Reply) -> Reply {
    let sorted = |items: &[Reply]| {
        let mut items: Vec<Reply> = items.to_vec();
        items.sort_by_key(|r| r.to_string());
        items
    };
    match r {
        Reply::Array(Some(items)) => Reply::Array(Some(sorted(items))),
        Reply::Set(items) => Reply::Set(sorted(items)),
        Reply::Map(pairs) => {
            let mut pairs = pairs.clone();
            pairs.sort_by_key(|(k, v)| (k.to_string(), v.to_string()));
            Reply::Map(pairs)
        }
        other => other.clone(),
    }
}

/// A line the grammar does not draw: SELECT or SWAPDB among the first three databases, or a new
/// encoding limit (collections convert on their next write, as in Redis).
fn special(rng: &mut Rng) -> Vec<String> {
    let db = |rng: &mut Rng| rng.below(3).to_string();
    match rng.below(5) {
        0 | 1 => vec!["SELECT".into(), db(rng)],
        2 => vec!["SWAPDB".into(), db(rng), db(rng)],
        _ => {
            let (name, values): (&str, &[&str]) = match rng.below(6) {
                0 => ("hash-max-listpack-entries", &["0", "1", "4", "128"]),
                1 => ("hash-max-listpack-value", &["0", "1", "8", "64"]),
                2 => ("set-max-intset-entries", &["0", "1", "4", "512"]),
                3 => ("zset-max-listpack-entries", &["0", "1", "4", "128"]),
                4 => ("zset-max-listpack-value", &["0", "1", "8", "64"]),
                _ => ("list-max-listpack-size", &["-5", "-2", "-1", "1", "2", "4"]),
            };
            vec![
                "CONFIG".into(),
                "SET".into(),
                name.into(),
                rng.pick(values).into(),
            ]
        }
    }
}

/// How much of a reply can match when its elements were chosen in an unspecified order (SORT of a
/// set with LIMIT picks from the set's own order): its kind and length, or the whole error.
fn shape(r: &Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) | Reply::Set(items) => Reply::Integer(items.len() as i64),
        other => other.clone(),
    }
}

/// A channel the subscribers' pattern matches, published at each check: the notifications before
/// it are those of the commands since the last check.
const SYNC: &str = "__keyfuzzsync__:x";

/// A subscriber's messages up to the sync message: the notifications as (channel, message), and
/// the keys named by tracking invalidations (`*` for a flush's null), which BCAST mode sends once
/// per event-loop turn in Redis and so cannot be compared message for message.
fn until_sync(c: &mut crate::harness::Conn) -> (Vec<(String, String)>, BTreeSet<String>) {
    let text = |r: &Reply| {
        r.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let (mut events, mut invalidated) = (Vec::new(), BTreeSet::new());
    loop {
        let frame = Reply::decode(&c.read_reply());
        let parts = frame.as_array().unwrap_or_default();
        match parts {
            [kind, channel, _] if text(kind) == "message" && text(channel) == SYNC => {
                return (events, invalidated)
            }
            [kind, channel, payload] if text(kind) == "message" => {
                assert_eq!(text(channel), "__redis__:invalidate", "{frame}");
                match payload.as_array() {
                    Some(keys) => invalidated.extend(keys.iter().map(text)),
                    None => {
                        invalidated.insert("*".into());
                    }
                }
            }
            [_, _, channel, _] if text(channel) == SYNC => return (events, invalidated),
            [_, _, channel, message] => events.push((text(channel), text(message))),
            _ => panic!("unexpected frame on the subscriber: {frame}"),
        }
    }
}

/// Notifications grouped by the shard of the key they name (`threads` shards, contiguous slot
/// ranges), each group in order and written `key:event`. Strata keeps Redis's order among a
/// shard's events; the events of one command or pipeline on several shards are raised shard by
/// shard, so their interleaving is not compared.
fn by_shard(events: &[(String, String)], threads: usize) -> Vec<Vec<String>> {
    let mut groups = vec![Vec::new(); threads];
    for (channel, message) in events {
        let (key, text) = match channel.split_once("__:") {
            Some((space, key)) if space.starts_with("__keyspace") => {
                (key, format!("{channel}:{message}"))
            }
            _ => (message.as_str(), format!("{channel}:{message}")),
        };
        groups[key_slot(key) as usize * threads / 16384].push(text);
    }
    groups
}

/// A key's type and contents, members sorted where the type has no order.
fn contents(c: &mut crate::harness::Conn, key: &str) -> (Reply, Reply) {
    let kind = c.call_decoded(&["TYPE", key]);
    let value = match text(&kind).as_deref() {
        Some("string") => c.call_decoded(&["GET", key]),
        Some("list") => c.call_decoded(&["LRANGE", key, "0", "-1"]),
        Some("hash") => unordered(&c.call_decoded(&["HGETALL", key])),
        Some("set") => unordered(&c.call_decoded(&["SMEMBERS", key])),
        Some("zset") => c.call_decoded(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        _ => Reply::Null,
    };
    (kind, value)
}

fn fuzz(seed: u64, threads: usize, resp: &str, ops: usize) {
    let mut d = Diff::with_threads(threads);
    let table = commands(&mut d);
    assert!(
        table.len() > 100,
        "only {} commands to draw from",
        table.len()
    );
    for (name, value) in [
        ("hash-max-listpack-entries", "4"),
        ("hash-max-listpack-value", "8"),
        ("set-max-intset-entries", "4"),
        ("zset-max-listpack-entries", "4"),
        ("zset-max-listpack-value", "8"),
        ("list-max-listpack-size", "4"),
    ] {
        d.run(&["CONFIG", "SET", name, value]);
    }
    // Redis checks blocked clients' timeouts `hz` times a second: a blocking command that finds
    // nothing would otherwise answer only after up to 100 ms.
    d.redis.call(&["CONFIG", "SET", "hz", "500"]);
    // HELLO's reply names the client id, which differs.
    d.redis.call(&["HELLO", resp]);
    d.strata.call(&["HELLO", resp]);
    // Every keyspace and keyevent notification (new-key and key-miss events too), compared in
    // order at each contents check.
    d.run(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
    // The subscriber also receives the invalidations of the fuzzing connection's tracking, in
    // BCAST mode (every key any client changes).
    let mut sub = d.new_conns();
    let ids = (
        sub.redis.call(&["CLIENT", "ID"]),
        sub.strata.call(&["CLIENT", "ID"]),
    );
    sub.run(&["PSUBSCRIBE", "__key*__:*"]);
    sub.run(&["SUBSCRIBE", "__redis__:invalidate"]);
    let track = |id: &[u8], mode: &str| {
        let id = Reply::decode(id).as_int().expect("a client id").to_string();
        ["CLIENT", "TRACKING", "on", mode, "REDIRECT", &id].map(String::from)
    };
    assert_eq!(d.redis.call(&track(&ids.0, "BCAST")), b"+OK\r\n");
    assert_eq!(d.strata.call(&track(&ids.1, "BCAST")), b"+OK\r\n");
    // A reader tracking in the default mode: it reads every key after each check, and a second
    // subscriber receives the invalidations of those it read that then change.
    let (mut reader, mut sub2) = (d.new_conns(), d.new_conns());
    let ids = (
        sub2.redis.call(&["CLIENT", "ID"]),
        sub2.strata.call(&["CLIENT", "ID"]),
    );
    sub2.run(&["SUBSCRIBE", "__redis__:invalidate"]);
    sub2.run(&["SUBSCRIBE", SYNC]);
    assert_eq!(reader.redis.call(&track(&ids.0, "OPTOUT")), b"+OK\r\n");
    assert_eq!(reader.strata.call(&track(&ids.1, "OPTOUT")), b"+OK\r\n");
    // Keyspace hits and misses (INFO stats) of each server at the last check.
    let mut stats = [(0, 0, 0), (0, 0, 0)];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    let mut history = History(Vec::new());
    let mut sorted_keys: HashSet<String> = HashSet::new();
    // Commands still to queue in the open transaction; the queued ones' comparisons.
    let (mut in_txn, mut queued) = (0usize, Vec::<Loose>::new());
    let mut op = 0;
    let mut unordered_dest: Option<String> = None;
    // Set when a SORT with LIMIT whose ties Redis orders otherwise ran since the last
    // notification check (below): which keys its BY/GET patterns looked up may differ.
    let mut lookups_differ = false;
    // Set when a SORT of a set or sorted set ran since the last check: its events are compared
    // as multisets (still per shard).
    let mut sorted_a_set = false;
    while op < ops {
        // Half the time one command, otherwise a pipeline of up to 16 (transactions included).
        let length = if rng.chance(50) { 1 } else { 2 + rng.below(15) };
        let mut lines: Vec<(Vec<String>, Loose)> = Vec::new();
        while lines.len() < length {
            if in_txn == 0 && rng.chance(4) {
                if rng.chance(30) {
                    lines.push((vec!["WATCH".into(), rng.pick(KEYS).into()], Loose::No));
                }
                lines.push((vec!["MULTI".into()], Loose::No));
                in_txn = 1 + rng.below(5);
            }
            if rng.chance(2) {
                lines.push((special(&mut rng), Loose::No));
                continue;
            }
            let cmd = &table[rng.below(table.len())];
            let mut line = vec![cmd.name.clone()];
            for a in &cmd.args {
                generate(a, &cmd.name, &mut rng, &mut line);
            }
            match rng.below(100) {
                0..=2 if line.len() > 1 => {
                    line.pop();
                }
                // (Not after a timeout that ends the line: it would become a key, and the new last
                // argument a timeout of seconds.)
                3..=5 if !TIMEOUT_LAST.contains(&line[0].as_str()) => {
                    line.push(rng.pick(STRINGS).into())
                }
                // (Not with a count past 64 bits: Redis's getkeys_proc reads it with atoi, whose
                // ERANGE stays in errno, and SORT, which checks errno after a strtod that does not
                // clear it, then fails a later valid numeric sort in Redis.)
                6..=8 if !line.iter().any(|a| a == "18446744073709551616") => {
                    let how = rng.pick(&["GETKEYS", "GETKEYSANDFLAGS"]);
                    line.splice(0..0, ["COMMAND".to_string(), how.to_string()]);
                }
                _ => {}
            }
            let is = |n: &str| line[0] == n;
            let sort = (is("sort") || is("sort_ro")) && line.len() > 1;
            let store = line.iter().rposition(|a| a.eq_ignore_ascii_case("store"));
            if sort && store.is_some() && (length > 1 || in_txn > 0) {
                // Its source may be a set, whose stored order is unspecified (see below): SORT …
                // STORE goes out alone, where its source's type is known.
                continue;
            }
            // Whether SORT reads a set or sorted set is asked first when it is alone; in a
            // pipeline or a transaction it is compared loosely whatever it reads.
            let sorts_a_set = sort
                && (length > 1
                    || in_txn > 0
                    || matches!(
                        // (Asked of both: TYPE raises "keymiss" on a missing key.)
                        text(&Reply::decode(&d.run(&["TYPE", &line[1]]))).as_deref(),
                        Some("set" | "zset")
                    ));
            if sort {
                sorted_keys.insert(line[1].clone());
            }
            if sorts_a_set {
                // A set or sorted set sorted BY weights that tie is stored in its hash table's
                // order, random in Redis: the destination is deleted on both servers once stored.
                if let Some(dest) = store.and_then(|i| line.get(i + 1)) {
                    unordered_dest = Some(dest.clone());
                }
            }
            // SORT reads a set's elements, and looks their BY and GET keys up, in its hash table's
            // order, random in Redis: the order of those lookups' "keymiss" events is too.
            sorted_a_set |= sorts_a_set;
            // With LIMIT, which elements' GET keys SORT looks up depends on the order of elements
            // that tie: a set's hash-table order, or with BY Redis's partial quick sort, which is
            // not stable (Strata's sort is; see sort.rs).
            let has = |w: &str| line.iter().any(|a| a.eq_ignore_ascii_case(w));
            lookups_differ |= sort && has("limit") && (sorts_a_set || has("by"));
            let loose = if sorts_a_set {
                Loose::Shape
            } else if is("object") && line.len() == 3 && sorted_keys.contains(&line[2]) {
                Loose::SortedEncoding
            } else if TTL_READERS.contains(&line[0].as_str()) {
                Loose::Remaining
            } else if cmd.unordered {
                Loose::Order
            } else {
                Loose::No
            };
            lines.push((line, loose));
            if in_txn > 0 {
                in_txn -= 1;
                if in_txn == 0 {
                    lines.push((vec!["EXEC".into()], Loose::No));
                }
            }
        }
        let wire: Vec<u8> = lines.iter().flat_map(|(l, _)| encode_command(l)).collect();

        d.redis.send_raw(&wire);
        d.strata.send_raw(&wire);
        for (at, (line, loose)) in lines.iter().enumerate() {
            op += 1;
            history.0.push(line.clone());
            let context = || history.recent(16);
            let mut expected = Reply::decode(&d.redis.read_reply());
            let mut actual = Reply::decode(&d.strata.read_reply());
            match line[0].as_str() {
                "MULTI" => queued.clear(),
                "EXEC" => {
                    let exec = |r: Reply| match r {
                        Reply::Array(Some(items)) if items.len() == queued.len() => Reply::Array(
                            Some(items.iter().zip(&queued).map(|(r, l)| l.apply(r)).collect()),
                        ),
                        other => other,
                    };
                    (expected, actual) = (exec(expected), exec(actual));
                    queued.clear();
                }
                _ if expected == Reply::Simple(b"QUEUED".to_vec()) => queued.push(*loose),
                _ => (expected, actual) = (loose.apply(&expected), loose.apply(&actual)),
            }
            if expected != actual {
                // The rest of the pipeline's replies, then the keys the line names, as they are
                // now (after the rest of the pipeline ran).
                for _ in at + 1..lines.len() {
                    d.redis.read_reply();
                    d.strata.read_reply();
                }
                let keys: Vec<String> = KEYS
                    .iter()
                    .filter(|k| line.iter().any(|a| a == *k))
                    .map(|k| {
                        let (r, s) = (contents(&mut d.redis, k), contents(&mut d.strata, k));
                        format!("{k}: redis {} {}, strata {} {}", r.0, r.1, s.0, s.1)
                    })
                    .collect();
                panic!(
                    "seed {seed}, command {op}: {}\n  redis : {expected}\n  strata: {actual}\n  after:\n    {}\n  keys now:\n    {}",
                    line.join(" "),
                    context(),
                    keys.join("\n    ")
                );
            }
        }
        if let Some(dest) = unordered_dest.take() {
            d.redis.call(&["DEL", &dest]);
            d.strata.call(&["DEL", &dest]);
        }
        history.0.push(vec!["--".into()]);
        if in_txn == 0 {
            // This batch's notifications (a transaction's once it has run).
            d.run(&["PUBLISH", SYNC, "x"]);
            let keep = |(channel, message): &(String, String)| {
                !lookups_differ || !(channel.ends_with("__:keymiss") || message == "keymiss")
            };
            let seen = |c: &mut crate::harness::Conn, sub, last: &mut (i64, i64, i64)| {
                let (events, invalidated) = until_sync(sub);
                let mut events = by_shard(
                    &events.into_iter().filter(keep).collect::<Vec<_>>(),
                    threads,
                );
                if sorted_a_set {
                    events.iter_mut().for_each(|g| g.sort());
                }
                let info = Reply::decode(&c.call(&["INFO", "stats", "persistence"]));
                let info = String::from_utf8_lossy(info.as_bytes().expect("INFO")).into_owned();
                let stat = |name: &str| {
                    info.lines()
                        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
                        .expect(name)
                };
                let now = (
                    stat("keyspace_hits"),
                    stat("keyspace_misses"),
                    stat("rdb_changes_since_last_save"),
                );
                let delta = (now.0 - last.0, now.1 - last.1);
                let changed = now.2 - last.2;
                *last = now;
                (
                    events,
                    invalidated,
                    (!lookups_differ).then_some(delta),
                    changed,
                )
            };
            let [r, s] = &mut stats;
            let expected = (
                seen(&mut d.redis, &mut sub.redis, r),
                until_sync(&mut sub2.redis).1,
            );
            let actual = (
                seen(&mut d.strata, &mut sub.strata, s),
                until_sync(&mut sub2.strata).1,
            );
            (lookups_differ, sorted_a_set) = (false, false);
            assert!(
                expected == actual,
                "seed {seed}: what a subscriber saw differs after command {op} (notifications by shard, keys invalidated, keyspace hits and misses, changes counted; keys the reader had read that were invalidated)\n  redis : {expected:?}\n  strata: {actual:?}\n  after:\n    {}",
                history.recent(lines.len().max(8))
            );
            // The reader reads every key again (tracking them), in the first database.
            let mget: Vec<&str> = ["MGET"].into_iter().chain(KEYS.iter().copied()).collect();
            reader.run(&mget);
        }
        if in_txn == 0 && op / 64 != (op - lines.len()) / 64 {
            for key in KEYS {
                let expected = contents(&mut d.redis, key);
                let actual = contents(&mut d.strata, key);
                assert!(
                    expected == actual,
                    "seed {seed}: key {key} differs after command {op}\n  redis : {} {}\n  strata: {} {}\n  after:\n    {}",
                    expected.0,
                    expected.1,
                    actual.0,
                    actual.1,
                    history.recent(16)
                );
            }
        }
    }
}

/// The command lines sent so far, each batch (one write) followed by a line `--`. If the run fails
/// and `STRATA_FUZZ_DUMP` names a file, they are written there, one line per command, each
/// argument hex-encoded, to replay them.
struct History(Vec<Vec<String>>);

impl History {
    fn recent(&self, n: usize) -> String {
        let lines = &self.0[self.0.len().saturating_sub(n)..];
        let lines: Vec<String> = lines.iter().map(|l| l.join(" ")).collect();
        lines.join("\n    ")
    }
}

impl Drop for History {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("STRATA_FUZZ_DUMP") else {
            return;
        };
        if !std::thread::panicking() {
            return;
        }
        // (A batch's lines end with a line `--`, written as is.)
        let hex = |a: &String| match a.as_str() {
            "--" => a.clone(),
            _ => a.bytes().map(|b| format!("{b:02x}")).collect::<String>(),
        };
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|l| l.iter().map(hex).collect::<Vec<_>>().join(" "))
            .collect();
        let _ = std::fs::write(path, lines.join("\n") + "\n");
    }
}

/// `STRATA_FUZZ_SEED` and `STRATA_FUZZ_OPS` run other seeds and longer runs than CI's.
fn settings(seed: u64) -> (u64, usize) {
    crate::harness::seed_and_ops("STRATA_FUZZ", seed, 6000)
}

#[test]
fn random_command_lines_match_redis_resp2() {
    let (seed, ops) = settings(1);
    fuzz(seed, 2, "2", ops);
}

/// More threads than cores, so the shards' threads interleave.
#[test]
fn random_command_lines_match_redis_resp3() {
    let (seed, ops) = settings(2);
    fuzz(seed, 3, "3", ops);
}
