//! Client-side caching (CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO) against redis-server:
//! RESP3 pushes on the tracking connection, RESP2 pub/sub messages to a REDIRECT client, default
//! mode (remember what was read, invalidate once), BCAST with prefixes, OPTIN/OPTOUT, NOLOOP,
//! FLUSHALL's null invalidation, the errors, and CLIENT LIST flags. Writers and keys are spread
//! over `--threads 4`, so invalidations cross threads.

use crate::harness::{hash_slot, Conn, Diff, Pair, Reply};

/// Reads `n` frames from each server's connection and asserts they are the same.
fn same_pushes(p: &mut Pair, n: usize) {
    let read = |c: &mut Conn| -> Vec<String> {
        (0..n)
            .map(|_| String::from_utf8_lossy(&c.read_reply()).into_owned())
            .collect()
    };
    let expected = read(&mut p.redis);
    let actual = read(&mut p.strata);
    assert_eq!(actual, expected, "pushes differ (left strata, right redis)");
}

/// Keys named `<prefix><n>` in as many different quarters of the slot space as possible (so on
/// different shards with 4 threads).
fn spread(prefix: &str, count: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    for n in 0.. {
        let k = format!("{prefix}{n}");
        let q = hash_slot(&k) / 4096;
        if !seen.contains(&q) || seen.len() >= 4 {
            seen.push(q);
            out.push(k);
        }
        if out.len() == count {
            break;
        }
    }
    out
}

/// Runs `args` on each server's connection with that server's client id of `target` appended
/// (REDIRECT ids differ between the servers), comparing the replies.
fn run_with_id(p: &mut Pair, args: &[&str], ids: (i64, i64)) {
    let mut r: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut s = r.clone();
    r.push(ids.0.to_string());
    s.push(ids.1.to_string());
    let expected = p.redis.call(&r);
    let actual = p.strata.call(&s);
    assert_eq!(
        String::from_utf8_lossy(&actual),
        String::from_utf8_lossy(&expected),
        "reply to {args:?} <id>"
    );
}

fn client_ids(p: &mut Pair) -> (i64, i64) {
    let id = |c: &mut Conn| c.call_decoded(&["CLIENT", "ID"]).as_int().unwrap();
    (id(&mut p.redis), id(&mut p.strata))
}

#[test]
fn resp3_default_mode_invalidates_what_was_read_once() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    let keys = spread("k", 4);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["CLIENT", "TRACKING", "on"]);
    for k in &keys {
        d.run(&["GET", k]);
    }
    d.run(&["MGET", "m{x}1", "m{x}2"]);
    d.run(&["HGET", "h", "f"]);
    // Another client (on some thread) writes each key: one push per key.
    for k in &keys {
        w.run(&["SET", k, "v"]);
        same_pushes(&mut d, 1);
    }
    // Remembered once: a second write sends nothing.
    for k in &keys {
        w.run(&["SET", k, "v2"]);
    }
    d.run(&["PING"]);
    w.run(&["MSET", "m{x}1", "1", "m{x}2", "2"]);
    same_pushes(&mut d, 2);
    w.run(&["HSET", "h", "f", "v"]);
    same_pushes(&mut d, 1);
    // A read whose keys span shards (MGET through the coordinator).
    let far = spread("g", 4);
    let mut mget = vec!["MGET"];
    mget.extend(far.iter().map(String::as_str));
    d.run(&mget);
    for k in &far {
        w.run(&["SET", k, "v"]);
        same_pushes(&mut d, 1);
    }
    // Deletion and TTL changes invalidate too.
    d.run(&["GET", &keys[0]]);
    w.run(&["EXPIRE", &keys[0], "100"]);
    same_pushes(&mut d, 1);
    d.run(&["GET", &keys[0]]);
    w.run(&["DEL", &keys[0]]);
    same_pushes(&mut d, 1);
    // The client's own write: the reply, then the invalidation.
    d.run(&["GET", &keys[1]]);
    d.run(&["SET", &keys[1], "mine"]);
    same_pushes(&mut d, 1);
    // Writes are not reads: nothing is remembered for SET.
    d.run(&["SET", &keys[2], "x"]);
    w.run(&["SET", &keys[2], "y"]);
    d.run(&["PING"]);
    // FLUSHALL: a null invalidation, and everything is forgotten.
    d.run(&["GET", &keys[3]]);
    w.run(&["FLUSHALL"]);
    same_pushes(&mut d, 1);
    w.run(&["SET", &keys[3], "v"]);
    d.run(&["PING"]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    d.run(&["CLIENT", "GETREDIR"]);
    // OFF: no more invalidations.
    d.run(&["GET", &keys[3]]);
    d.run(&["CLIENT", "TRACKING", "off"]);
    w.run(&["SET", &keys[3], "v2"]);
    d.run(&["PING"]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    d.run(&["CLIENT", "GETREDIR"]);
}

#[test]
fn resp2_redirect_delivers_pubsub_messages() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    let mut r = d.new_conns();
    let ids = client_ids(&mut r);
    r.run(&["SUBSCRIBE", "__redis__:invalidate"]);
    run_with_id(&mut d, &["CLIENT", "TRACKING", "on", "REDIRECT"], ids);
    run_with_id(&mut d, &["CLIENT", "GETREDIR"], (0, 0));
    let keys = spread("r", 3);
    for k in &keys {
        d.run(&["GET", k]);
    }
    for k in &keys {
        w.run(&["INCR", k]);
        same_pushes(&mut r, 1);
    }
    // The tracking client's own write reaches the redirect client too (no NOLOOP).
    d.run(&["GET", &keys[0]]);
    d.run(&["SET", &keys[0], "1"]);
    same_pushes(&mut r, 1);
    w.run(&["FLUSHDB"]);
    same_pushes(&mut r, 1);
    // A redirect client that does not exist.
    d.run(&["CLIENT", "TRACKING", "on", "REDIRECT", "987654"]);
    d.run(&["CLIENT", "TRACKING", "on", "REDIRECT", "notanumber"]);
    d.run(&["CLIENT", "TRACKING", "on", "REDIRECT", "1", "REDIRECT", "2"]);
}

#[test]
fn bcast_prefixes_and_noloop() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b:", "PREFIX", "a:",
    ]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    // One message per prefix, keys sorted; keys matching no prefix are not sent.
    w.run(&[
        "MSET", "a:2{t}", "1", "b:1{t}", "2", "a:1{t}", "3", "c{t}", "4",
    ]);
    same_pushes(&mut d, 2);
    w.run(&["SET", "a:z", "1"]);
    same_pushes(&mut d, 1);
    w.run(&["SET", "zzz", "1"]);
    d.run(&["PING"]);
    // Adding a prefix; overlapping ones are refused.
    d.run(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c"]);
    d.run(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]);
    d.run(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "xy",
    ]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    w.run(&["SET", "c{t}", "5"]);
    same_pushes(&mut d, 1);
    // The client's own writes are sent, unless NOLOOP.
    d.run(&["SET", "a:own", "1"]);
    same_pushes(&mut d, 1);
    d.run(&["CLIENT", "TRACKING", "off"]);
    d.run(&["CLIENT", "TRACKING", "on", "BCAST", "NOLOOP"]);
    d.run(&["SET", "own", "1"]);
    d.run(&["PING"]);
    w.run(&["SET", "theirs", "1"]);
    same_pushes(&mut d, 1);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    // Default mode with NOLOOP.
    d.run(&["CLIENT", "TRACKING", "off"]);
    d.run(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    d.run(&["GET", "nl"]);
    d.run(&["SET", "nl", "1"]);
    d.run(&["PING"]);
    d.run(&["GET", "nl"]);
    w.run(&["SET", "nl", "2"]);
    same_pushes(&mut d, 1);
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["CLIENT", "CACHING", "yes"]);
    d.run(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    d.run(&["CLIENT", "CACHING", "no"]);
    d.run(&["CLIENT", "CACHING", "maybe"]);
    d.run(&["GET", "not-cached"]);
    d.run(&["CLIENT", "CACHING", "yes"]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    d.run(&["GET", "cached"]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
    d.run(&["GET", "after"]);
    w.run(&["MSET", "not-cached", "1"]);
    w.run(&["SET", "after", "1"]);
    d.run(&["PING"]);
    w.run(&["SET", "cached", "1"]);
    same_pushes(&mut d, 1);
    d.run(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    d.run(&["CLIENT", "TRACKING", "off"]);
    d.run(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    d.run(&["CLIENT", "CACHING", "yes"]);
    d.run(&["CLIENT", "CACHING", "no"]);
    d.run(&["GET", "skipped"]);
    d.run(&["GET", "kept"]);
    w.run(&["SET", "skipped", "1"]);
    d.run(&["PING"]);
    w.run(&["SET", "kept", "1"]);
    same_pushes(&mut d, 1);
    d.run(&["CLIENT", "TRACKINGINFO"]);
}

#[test]
fn tracking_errors_match_redis() {
    let mut d = Diff::with_threads(2);
    for args in [
        &["CLIENT", "TRACKING"][..],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "BOGUS"],
        &["CLIENT", "TRACKING", "on", "PREFIX", "a"],
        &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
        &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "on", "REDIRECT"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "CACHING"],
        &["CLIENT", "GETREDIR", "x"],
        &["CLIENT", "TRACKINGINFO", "x"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "on", "OPTIN"],
        &["CLIENT", "TRACKING", "on", "OPTOUT"],
        &["CLIENT", "TRACKING", "on", "BCAST"],
        &["CLIENT", "TRACKINGINFO"],
        &["RESET"],
        &["CLIENT", "TRACKINGINFO"],
    ] {
        d.run(args);
    }
    // CLIENT LIST/INFO flags and redir field.
    d.run(&["CLIENT", "TRACKING", "on", "BCAST"]);
    let flags = |c: &mut Conn| {
        let info = c.call_decoded(&["CLIENT", "INFO"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        text.split(' ')
            .filter(|f| f.starts_with("flags=") || f.starts_with("redir="))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(flags(&mut d.strata), flags(&mut d.redis));
    assert_eq!(flags(&mut d.strata), vec!["flags=tB", "redir=0"]);
}

/// The keys of one BCAST message, sorted (for comparing messages whose key order is Redis's radix
/// tree order on one side).
fn bcast_keys(c: &mut Conn) -> Vec<String> {
    let r = crate::harness::Reply::decode(&c.read_reply());
    let items = r.as_array().expect("a push");
    let mut keys: Vec<String> = items[1]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| String::from_utf8_lossy(k.as_bytes().unwrap()).into_owned())
        .collect();
    keys.sort();
    keys
}

#[test]
fn bcast_batches_a_transaction_per_prefix() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
    ]);
    // Five writes in one EXEC (one shard): one message per prefix, not one per command.
    w.run(&["MULTI"]);
    for k in ["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}", "c:1{t}"] {
        w.run(&["INCR", k]);
    }
    w.run(&["EXEC"]);
    same_pushes(&mut d, 2);
    d.run(&["PING"]);
}

#[test]
fn a_quit_redirect_client_is_broken_at_once() {
    let mut d = Diff::with_threads(4);
    let mut w = d.new_conns();
    let mut r = d.new_conns();
    let ids = client_ids(&mut r);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    run_with_id(&mut d, &["CLIENT", "TRACKING", "on", "REDIRECT"], ids);
    d.run(&["GET", "q"]);
    // Once QUIT's +OK is read, the redirect is broken: the next invalidation says so.
    r.run(&["QUIT"]);
    w.run(&["SET", "q", "1"]);
    // The push names the redirect id, which differs between the servers.
    let (broken_r, broken_s) = (d.redis.read_reply(), d.strata.read_reply());
    let name = |b: &[u8]| crate::harness::Reply::decode(b).as_array().unwrap()[0].clone();
    assert_eq!(name(&broken_s), name(&broken_r));
    assert!(String::from_utf8_lossy(&broken_s).contains("tracking-redir-broken"));
    d.run(&["CLIENT", "TRACKING", "on"]);
    d.run(&["CLIENT", "TRACKINGINFO"]);
}

#[test]
fn tracking_table_max_keys_evicts_and_info_counts() {
    let mut d = Diff::with_threads(4);
    let mut prefix = d.new_conns();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    prefix.run(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "PREFIX", "q:",
    ]);
    d.run(&["CLIENT", "TRACKING", "on"]);
    let keys = spread("e", 4);
    for k in &keys {
        d.run(&["GET", k]);
    }
    let totals = |c: &mut Conn| -> Vec<String> {
        let info = String::from_utf8_lossy(&c.call(&["INFO", "stats"])).into_owned();
        info.lines()
            .filter(|l| l.starts_with("tracking_"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(totals(&mut d.strata), totals(&mut d.redis));
    // Lowering the limit evicts all but one key, each evicted key invalidated (before the next
    // command of anyone, or by the background tick).
    d.run(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    let evicted = |c: &mut Conn| -> Vec<String> {
        let mut all: Vec<String> = (0..keys.len() - 1).flat_map(|_| bcast_keys(c)).collect();
        all.sort();
        all
    };
    let (from_redis, from_strata) = (evicted(&mut d.redis), evicted(&mut d.strata));
    assert_eq!(from_strata.len(), from_redis.len());
    assert!(from_strata.iter().all(|k| keys.contains(k)));
    d.run(&["CONFIG", "GET", "tracking-table-max-keys"]);
    assert_eq!(totals(&mut d.strata), totals(&mut d.redis));
    d.run(&["CONFIG", "SET", "tracking-table-max-keys", "-1"]);
}

/// Keys read by a tracking client that has since left stay remembered until they change, then are
/// forgotten one by one, as in Redis: `tracking_total_keys` falls back to 0 with no client
/// tracking. Strata used to stop looking at writes once no client tracked, so they stayed (and
/// their memory with them) until a FLUSHALL.
#[test]
fn keys_of_a_departed_tracking_client_are_forgotten_when_written() {
    let run = |s: &crate::harness::Server| -> Vec<String> {
        let total = |c: &mut Conn| {
            let info = c.call_decoded(&["INFO", "stats"]);
            String::from_utf8_lossy(info.as_bytes().unwrap_or_default())
                .lines()
                .find(|l| l.starts_with("tracking_total_keys:"))
                .unwrap_or("none")
                .to_string()
        };
        let mut w = s.conn();
        {
            let mut reader = s.conn();
            reader.call(&["CLIENT", "TRACKING", "ON"]);
            for i in 0..100 {
                reader.call(&["GET", &format!("gone:{i}")]);
            }
        }
        let mut seen = vec![total(&mut w)];
        for i in 0..60 {
            w.call(&["SET", &format!("gone:{i}"), "x"]);
        }
        seen.push(total(&mut w));
        for i in 60..100 {
            w.call(&["DEL", &format!("gone:{i}")]);
            w.call(&["SET", &format!("gone:{i}"), "y"]);
        }
        seen.push(total(&mut w));
        seen
    };
    let strata = crate::harness::Server::strata(&["--threads", "4"]);
    let redis = crate::harness::Server::redis(&[]);
    assert_eq!(run(&strata), run(&redis));
}

/// A lowered `tracking-table-max-keys` takes effect before the next command even with the
/// background tick paused (DEBUG PAUSE-CRON), and the invalidation goes before that command's
/// reply — here a command queued inside MULTI (Redis's regression test for #11715).
#[test]
fn a_lowered_tracking_limit_evicts_before_the_next_command() {
    let mut d = Diff::with_threads(2);
    let mut admin = d.new_conns();
    admin.run(&["CONFIG", "SET", "tracking-table-max-keys", "2"]);
    admin.run(&["DEBUG", "PAUSE-CRON", "1"]);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["CLIENT", "TRACKING", "on"]);
    d.run(&["MGET", "1{tag}", "2{tag}"]);
    d.run(&["MULTI"]);
    admin.run(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    let pair: &mut Pair = &mut d;
    for c in [&mut pair.redis, &mut pair.strata] {
        c.send(&["PING"]);
        let push = Reply::decode(&c.read_reply());
        assert!(matches!(push, Reply::Push(_)), "{}: {push}", c.label());
        let push = push.as_array().unwrap();
        assert_eq!(
            push[0].as_bytes(),
            Some(&b"invalidate"[..]),
            "{}",
            c.label()
        );
        let keys = push[1].as_array().expect("the evicted keys");
        assert_eq!(keys.len(), 1, "{}", c.label());
        assert!(
            [&b"1{tag}"[..], b"2{tag}"].contains(&keys[0].as_bytes().unwrap()),
            "{}",
            c.label()
        );
        assert_eq!(c.read_reply(), b"+QUEUED\r\n", "{}", c.label());
    }
    d.run(&["EXEC"]);
    admin.run(&["DEBUG", "PAUSE-CRON", "0"]);
    admin.run(&["DEBUG", "PAUSE-CRON", "x"]);
    admin.run(&["DEBUG", "PAUSE-CRON"]);
}
