//! DEBUG's subcommands: replies compared with redis-server where they are deterministic
//! (POPULATE, DIGEST, errors and arities, empty HTSTATS), shape checks where the reply describes
//! each server's own tables (HTSTATS, HTSTATS-KEY, HELP), and the crashes SEGFAULT and PANIC cause.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use crate::harness::{Diff, Reply, Server};

const ENABLED: &[&str] = &["--enable-debug-command", "yes"];

/// The text of a verbatim (RESP3) or bulk (RESP2) reply.
fn text(r: &Reply) -> String {
    match r {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Reply::Verbatim(b) => {
            String::from_utf8_lossy(b.strip_prefix(b"txt:").unwrap_or(b)).into_owned()
        }
        other => panic!("expected a text reply, got {other}"),
    }
}

/// The numbers following `label` on each line of `text` that has it.
fn numbers_after(text: &str, label: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(label))
        .map(|n| n.trim().parse().expect("a number after the label"))
        .collect()
}

#[test]
fn debug_populate_creates_redis_keys_and_values() {
    let mut d = Diff::with_config(ENABLED);
    d.run_all(&[
        &["DEBUG", "POPULATE"][..],
        &["DEBUG", "POPULATE", "1", "p", "1", "x"],
        &["DEBUG", "POPULATE", "-1"],
        &["DEBUG", "POPULATE", "abc"],
        &["DEBUG", "POPULATE", "1", "p", "-1"],
        &["DEBUG", "POPULATE", "1", "p", "x"],
        &["DEBUG", "POPULATE", "0"],
        &["DBSIZE"],
        &["SET", "key:3", "mine"],
        &["DEBUG", "POPULATE", "10"],
        &["DBSIZE"],
        &["GET", "key:0"],
        &["GET", "key:3"],
        &["GET", "key:9"],
        &["GET", "key:10"],
        &["DEBUG", "POPULATE", "3", "padded", "20"],
        &["GET", "padded:1"],
        &["STRLEN", "padded:2"],
        &["DEBUG", "POPULATE", "3", "cut", "3"],
        &["GET", "cut:2"],
        &["DEBUG", "POPULATE", "2", "zero", "0"],
        &["GET", "zero:1"],
        &["OBJECT", "ENCODING", "padded:0"],
        &["DEBUG", "POPULATE", "1", "long", "100"],
        &["OBJECT", "ENCODING", "long:0"],
        &["SELECT", "1"],
        &["DEBUG", "POPULATE", "5", "other"],
        &["DBSIZE"],
        &["SELECT", "0"],
        &["DBSIZE"],
    ]);
    // A prefix that fills Redis's 128-byte buffer: the keys are cut, so all three are one.
    let long = "x".repeat(130);
    d.run(&["DEBUG", "POPULATE", "3", &long]);
    d.run(&["DBSIZE"]);
    d.run(&["GET", &"x".repeat(127)]);
    // Many slices, spread over the shards: the whole keyspace digests the same.
    d.run(&["DEBUG", "POPULATE", "20000", "many", "7"]);
    d.run(&["DBSIZE"]);
    d.run(&["DEBUG", "DIGEST"]);
    d.run(&[
        "DEBUG",
        "DIGEST-VALUE",
        "many:0",
        "many:19999",
        "key:3",
        "nokey",
    ]);
    d.run(&["GET", "many:12345"]);
    // Strata only: a value longer than any string is refused instead of aborting the process
    // (Redis tries to allocate it).
    assert_eq!(
        d.strata
            .call(&["DEBUG", "POPULATE", "1", "big", "9223372036854775807"]),
        b"-ERR string exceeds maximum allowed size\r\n"
    );
}

#[test]
fn debug_subcommand_errors_and_acknowledgements_match_redis() {
    let mut d = Diff::start(1, ENABLED);
    // An empty database's tables: nothing that depends on hashing yet.
    d.run(&["DEBUG", "HTSTATS", "0"]);
    d.run_all(&[
        &["DEBUG", "HTSTATS"][..],
        &["DEBUG", "HTSTATS", "x"],
        &["DEBUG", "HTSTATS", "-1"],
        &["DEBUG", "HTSTATS", "16"],
        &["DEBUG", "HTSTATS", "0", "full"],
        &["DEBUG", "HTSTATS-KEY"],
        &["DEBUG", "HTSTATS-KEY", "nokey"],
        &["SET", "str", "v"],
        &["SADD", "ints", "1", "2"],
        &["HSET", "small", "f", "v"],
        &["ZADD", "zsmall", "1", "m"],
        &["RPUSH", "list", "a", "b", "c"],
        &["DEBUG", "HTSTATS-KEY", "str"],
        &["DEBUG", "HTSTATS-KEY", "ints"],
        &["DEBUG", "HTSTATS-KEY", "small"],
        &["DEBUG", "HTSTATS-KEY", "list"],
        &["DEBUG", "LISTPACK", "nokey"],
        &["DEBUG", "LISTPACK", "str"],
        &["DEBUG", "LISTPACK", "list"],
        &["DEBUG", "LISTPACK", "small"],
        &["DEBUG", "LISTPACK", "zsmall"],
        &["DEBUG", "LISTPACK", "small", "x"],
        &["DEBUG", "QUICKLIST", "nokey"],
        &["DEBUG", "QUICKLIST", "small"],
        &["DEBUG", "QUICKLIST", "list"],
        &["DEBUG", "QUICKLIST", "list", "1"],
        &["DEBUG", "QUICKLIST", "list", "1", "x"],
        &["DEBUG", "CHANGE-REPL-ID"],
        &["DEBUG", "CHANGE-REPL-ID", "x"],
        &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"],
        &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"],
        &["DEBUG", "SET-DISABLE-DENY-SCRIPTS"],
        &["DEBUG", "LOG", "a message from the test"],
        &["DEBUG", "LOG"],
        // Not in Redis 7.0: both answer the unknown-subcommand error.
        &["DEBUG", "STRINGMATCH-LEN", "a*"],
        &["DEBUG", "JMAP"],
    ]);
    // The replication id changes.
    let id = |d: &mut Diff| {
        let info = d.strata.call_decoded(&["INFO", "replication"]);
        text(&info)
            .lines()
            .find_map(|l| l.strip_prefix("master_replid:").map(str::to_string))
            .expect("master_replid in INFO")
    };
    let before = id(&mut d);
    d.run(&["DEBUG", "CHANGE-REPL-ID"]);
    let after = id(&mut d);
    assert!(before != after && after.len() == 40, "{before} -> {after}");
}

#[test]
fn debug_htstats_describes_the_real_key_tables() {
    let s = Server::strata(&["--enable-debug-command", "yes", "--threads", "2"]);
    let mut c = s.conn();
    c.call(&["DEBUG", "POPULATE", "1000"]);
    c.call(&["SET", "volatile", "v", "EX", "100"]);
    let stats = text(&c.call_decoded(&["DEBUG", "HTSTATS", "0"]));
    assert!(
        stats
            .starts_with("[Dictionary HT]\nShard 0 of 2:\nHash table 0 stats (main hash table):\n"),
        "{stats}"
    );
    assert!(stats.contains("Shard 1 of 2:"), "{stats}");
    let (dict, expires) = stats
        .split_once("[Expires HT]\n")
        .expect("an expires section");
    let sizes = numbers_after(dict, "table size:");
    assert!(sizes.iter().all(|n| n.is_power_of_two()), "{stats}");
    // Main tables and resize targets together hold every key once.
    assert_eq!(
        numbers_after(dict, "number of elements:")
            .iter()
            .sum::<u64>(),
        1001,
        "{stats}"
    );
    assert!(
        dict.contains("Chain length distribution:\n   0: "),
        "{stats}"
    );
    assert_eq!(
        numbers_after(expires, "number of elements:"),
        vec![1],
        "{stats}"
    );

    // One shard, as in Redis's "Don't rehash if redis has child process": 4099 keys grow the
    // table to 8192 buckets once the resize has run.
    let s = Server::strata(&["--enable-debug-command", "yes", "--threads", "1"]);
    let mut c = s.conn();
    c.call(&["SELECT", "9"]);
    c.call(&["DEBUG", "POPULATE", "4099"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = text(&c.call_decoded(&["DEBUG", "HTSTATS", "9"]));
        if stats.contains("table size: 8192\n") && !stats.contains("rehashing target") {
            assert_eq!(numbers_after(&stats, "number of elements:"), vec![4099]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the table did not finish growing: {stats}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn debug_htstats_key_describes_a_collection_table() {
    let s = Server::strata(ENABLED);
    let mut c = s.conn();
    let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(members.iter().map(String::as_str));
    c.call(&sadd);
    let mut zadd = vec!["ZADD".to_string(), "zset".to_string()];
    for m in &members {
        zadd.extend(["1".to_string(), m.clone()]);
    }
    c.call(&zadd);
    for key in ["set", "zset"] {
        let stats = text(&c.call_decoded(&["DEBUG", "HTSTATS-KEY", key]));
        assert!(
            stats.starts_with("Hash table 0 stats (main hash table):\n"),
            "{stats}"
        );
        assert_eq!(
            numbers_after(&stats, "number of elements:"),
            vec![300],
            "{stats}"
        );
        assert_eq!(
            numbers_after(&stats, "different slots:"),
            vec![300],
            "{stats}"
        );
        let size = numbers_after(&stats, "table size:")[0];
        assert!(size >= 300 && size.is_power_of_two(), "{stats}");
        assert!(stats.contains("   1: 300 ("), "{stats}");
    }
}

#[test]
fn debug_help_lists_what_strata_has_in_redis_words() {
    let mut d = Diff::with_config(ENABLED);
    let lines = |r: Reply| -> Vec<String> {
        r.as_array()
            .expect("HELP is an array")
            .iter()
            .map(|l| match l {
                Reply::Simple(s) => String::from_utf8_lossy(s).into_owned(),
                other => panic!("a status line, got {other}"),
            })
            .collect()
    };
    let redis = lines(d.redis.call_decoded(&["DEBUG", "HELP"]));
    let strata = lines(d.strata.call_decoded(&["DEBUG", "HELP"]));
    assert_eq!(strata[0], redis[0]);
    // Each entry Strata lists (a name line and its indented lines) is Redis's, word for word, and
    // the subcommand it names is implemented.
    let mut entries: Vec<Vec<String>> = Vec::new();
    for l in &strata[1..] {
        if l.starts_with(' ') {
            entries.last_mut().expect("an entry first").push(l.clone());
        } else {
            entries.push(vec![l.clone()]);
        }
    }
    assert!(entries.len() >= 19, "{strata:?}");
    for e in &entries {
        let name = e[0].split(' ').next().expect("a name");
        if name != "SET-DISABLE-DENY-SCRIPTS" {
            let at = redis
                .iter()
                .position(|l| l == &e[0])
                .unwrap_or_else(|| panic!("{} not in Redis's help", e[0]));
            assert_eq!(&redis[at..at + e.len()], &e[..], "the entry of {name}");
        }
        // Without its arguments each answers as Redis does (an arity error for most).
        if !["SEGFAULT", "PANIC", "HELP"].contains(&name) {
            d.run(&["DEBUG", name]);
        }
    }
}

#[test]
fn debug_is_refused_before_it_can_crash_or_write() {
    let mut d = Diff::new();
    d.run_all(&[
        &["DEBUG", "SEGFAULT"][..],
        &["DEBUG", "PANIC"],
        &["DEBUG", "POPULATE", "10"],
        &["DBSIZE"],
        &["DEBUG", "HTSTATS", "0"],
    ]);
}

#[test]
fn debug_segfault_and_panic_end_the_process() {
    // SIGSEGV and SIGABRT.
    for (sub, signal) in [("SEGFAULT", 11), ("PANIC", 6)] {
        let mut s = Server::strata(ENABLED);
        let mut c = s.conn();
        c.send(&["DEBUG", sub]);
        let status = s
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("DEBUG {sub} left the server running"));
        // Killed by the signal, or (once a crash handler reports it) exiting with a failure.
        assert!(!status.success(), "DEBUG {sub}: {status}");
        assert!(
            status.signal().is_none_or(|s| s == signal),
            "DEBUG {sub}: {status}"
        );
        let log = s.log_text();
        if sub == "PANIC" {
            // The whole log: the crash report's backtrace follows the message.
            assert!(
                log.contains("DEBUG PANIC called at Unix time"),
                "{}",
                s.log_tail()
            );
        }
        // After the stack trace, Redis's sections: INFO, the clients, and the one whose command
        // crashed, with its arguments.
        let sections = [
            "------ STACK TRACE ------",
            "------ INFO OUTPUT ------",
            "# Server\r\n",
            "------ CLIENT LIST OUTPUT ------",
            "------ CURRENT CLIENT INFO ------",
            "=== REDIS BUG REPORT END",
        ];
        let mut at = 0;
        for section in sections {
            let found = log[at..]
                .find(section)
                .unwrap_or_else(|| panic!("DEBUG {sub}: no {section:?} in order:\n{log}"));
            at += found + section.len();
        }
        let current = &log[log.find("------ CURRENT CLIENT INFO ------").unwrap()..];
        assert!(current.contains(" cmd=debug "), "{current}");
        let argv = format!("argv[0]: '\"DEBUG\"'\nargv[1]: '\"{sub}\"'\n");
        assert!(current.contains(&argv), "{current}");
    }
}

#[test]
fn debug_listpack_and_quicklist_print_the_layout_to_the_log() {
    let s = Server::strata(ENABLED);
    let mut c = s.conn();
    c.call(&["RPUSH", "list", "a", "b", "c"]);
    c.call(&["HSET", "hash", "field", "value"]);
    c.call(&["DEBUG", "QUICKLIST", "list", "1"]);
    c.call(&["DEBUG", "LISTPACK", "hash"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = s.log_tail();
        let printed = ["{quicklist}", "{count : 3}", "{len : 1}", "[entry]c"]
            .iter()
            .all(|l| log.contains(l))
            && ["{num entries 2}", "[str]field", "[str]value", "{end}"]
                .iter()
                .all(|l| log.contains(l));
        if printed {
            break;
        }
        assert!(Instant::now() < deadline, "layouts not in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `rbs` of the client named `name` in CLIENT LIST.
fn reply_buffer_size(c: &mut crate::harness::Conn, name: &str) -> u64 {
    let list = text(&c.call_decoded(&["CLIENT", "LIST"]));
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name}: {list}"));
    line.split(' ')
        .find_map(|kv| kv.strip_prefix("rbs="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no rbs in {line}"))
}

/// DEBUG REPLYBUFFER's replies are Redis's, and the reply buffer moves as Redis's does (the
/// suite's replybufsize unit): an idle client's shrinks to 1 KiB once its peak is forgotten, a
/// busy one's grows back to 16 KiB while the peak is kept.
#[test]
fn debug_replybuffer_sizes_reply_buffers_as_redis_does() {
    let mut d = Diff::with_config(ENABLED);
    d.run_all(&[
        &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "abc"][..],
        &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME"],
        &["DEBUG", "REPLYBUFFER", "SIZE", "1"],
        &["DEBUG", "REPLYBUFFER", "RESIZING", "1"],
        &["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"],
    ]);
    for s in [&d.redis_server, &d.strata_server] {
        let who = s.kind().name();
        let mut c = s.conn();
        let mut tc = s.conn();
        assert_eq!(
            c.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]),
            b"+OK\r\n"
        );
        tc.call(&["CLIENT", "SETNAME", "test_client"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let rbs = reply_buffer_size(&mut c, "test_client");
            if (1024..2046).contains(&rbs) {
                break;
            }
            assert!(Instant::now() < deadline, "{who}: idle rbs stays {rbs}");
            std::thread::sleep(Duration::from_millis(50));
        }
        c.call(&["SET", "bigval", &"x".repeat(32768)]);
        c.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"]);
        loop {
            tc.call(&["GET", "bigval"]);
            let rbs = reply_buffer_size(&mut c, "test_client");
            if (16384..32768).contains(&rbs) {
                break;
            }
            assert!(Instant::now() < deadline, "{who}: busy rbs stays {rbs}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let shrinks = c.info_u64("stats", "reply_buffer_shrinks");
        let expands = c.info_u64("stats", "reply_buffer_expands");
        assert!(shrinks >= 1 && expands >= 4, "{who}: {shrinks} {expands}");
        c.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"]);
    }
}

/// DEBUG CONFIG-REWRITE-FORCE-ALL writes every setting into the config file, which then starts a
/// server with the same settings; without a config file, Redis's error.
#[test]
fn debug_config_rewrite_force_all_writes_every_setting() {
    let mut d = Diff::with_config(ENABLED);
    d.run_all(&[
        &["DEBUG", "CONFIG-REWRITE-FORCE-ALL"][..],
        &["DEBUG", "CONFIG-REWRITE-FORCE-ALL", "x"],
    ]);
    let dir = crate::harness::TempDir::new("force-all");
    let conf = dir.path().join("strata.conf");
    std::fs::write(&conf, "enable-debug-command yes\ntimeout 7\n").unwrap();
    let s = Server::strata(&[conf.to_str().unwrap()]);
    let mut c = s.conn();
    assert_eq!(c.call(&["DEBUG", "CONFIG-REWRITE-FORCE-ALL"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    for name in [
        "timeout 7",
        "hz 10",
        "maxmemory-policy noeviction",
        "oom-score-adj no",
    ] {
        assert!(text.lines().any(|l| l == name), "{name}: {text}");
    }
    let again = Server::strata(&[conf.to_str().unwrap()]);
    let mut c2 = again.conn();
    for name in [
        "timeout",
        "hz",
        "maxmemory-policy",
        "save",
        "client-output-buffer-limit",
    ] {
        assert_eq!(
            c.call(&["CONFIG", "GET", name]),
            c2.call(&["CONFIG", "GET", name]),
            "{name}"
        );
    }
}
