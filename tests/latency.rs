//! LATENCY and INFO latencystats against redis-server: the subcommands' errors byte for byte, and
//! for what depends on timing (histogram buckets, percentiles, sample times) the same commands,
//! counts and shape on both servers.

use std::collections::BTreeMap;

use crate::harness::{same_doc_subcommands, Diff, Reply};

/// A LATENCY HISTOGRAM reply as `command → (calls, [(bucket µs, cumulative count)])`, after checking
/// its shape: buckets rise (powers of two from 1024 ns, as Redis reports them), counts rise and end at
/// the calls.
fn histogram(reply: &Reply) -> BTreeMap<String, u64> {
    let flat = reply.as_array().expect("a map, flat in RESP2");
    let mut out = BTreeMap::new();
    for pair in flat.chunks(2) {
        let name = String::from_utf8(pair[0].as_bytes().unwrap().to_vec()).unwrap();
        let fields = pair[1].as_array().unwrap();
        assert_eq!(fields[0].as_bytes(), Some(&b"calls"[..]));
        assert_eq!(fields[2].as_bytes(), Some(&b"histogram_usec"[..]));
        let calls = fields[1].as_int().unwrap() as u64;
        let buckets = fields[3].as_array().unwrap();
        // The counter holding each power of two ends 1/128 above it (Redis: 1, 2, 4, 8, 16, 33).
        let powers: Vec<i64> = (0..21)
            .map(|k| 1024i64 << k)
            .map(|p| (p + p / 128 - 1) / 1000)
            .collect();
        let mut last = (0, 0);
        for b in buckets.chunks(2) {
            let (bound, count) = (b[0].as_int().unwrap(), b[1].as_int().unwrap() as u64);
            assert!(powers.contains(&bound), "{name}: bucket {bound} in {reply}");
            assert!(bound > last.0 && count > last.1, "{name}: {reply}");
            last = (bound, count);
        }
        assert_eq!(last.1, calls, "{name}: {reply}");
        out.insert(name, calls);
    }
    out
}

/// INFO latencystats as `command → [percentile names]`, checking every value is a number with
/// three decimals.
fn latencystats(reply: &Reply) -> BTreeMap<String, Vec<String>> {
    let text = String::from_utf8(reply.as_bytes().unwrap().to_vec()).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let (name, values) = line
            .strip_prefix("latency_percentiles_usec_")
            .and_then(|l| l.split_once(':'))
            .unwrap_or_else(|| panic!("{line}"));
        let labels = values
            .split(',')
            .map(|v| {
                let (label, value) = v.split_once('=').unwrap();
                let (_, decimals) = value.split_once('.').unwrap();
                assert_eq!(decimals.len(), 3, "{line}");
                assert!(value.parse::<f64>().is_ok(), "{line}");
                label.to_string()
            })
            .collect();
        out.insert(name.to_string(), labels);
    }
    out
}

#[test]
fn errors_and_settings_match_redis() {
    let mut d = Diff::new();
    d.run_all(&[
        &["LATENCY"][..],
        &["LATENCY", "nosuch"],
        &["LATENCY", "HELP", "x"],
        &["LATENCY", "LATEST", "x"],
        &["LATENCY", "HISTORY"],
        &["LATENCY", "HISTORY", "a", "b"],
        &["LATENCY", "DOCTOR", "x"],
        &["LATENCY", "RESET"],
        &["LATENCY", "RESET", "nosuch", "other"],
        &["LATENCY", "LATEST"],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "GRAPH"],
        &["LATENCY", "GRAPH", "nosuch"],
        &["LATENCY", "HELP"],
        &["CONFIG", "GET", "latency-monitor-threshold"],
        &["CONFIG", "GET", "latency-tracking"],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "latency-monitor-threshold", "-1"],
        &["CONFIG", "SET", "latency-tracking", "maybe"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 101",
        ],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "x"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0.5 99.990 100",
        ],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", ""],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
    ]);
    let subcommands = same_doc_subcommands(&mut d, "latency");
    assert_eq!(subcommands.len(), 7);
    for sub in [
        "latency|graph",
        "latency|doctor",
        "latency|histogram",
        "latency|history",
        "latency|latest",
        "latency|reset",
        "latency|help",
    ] {
        d.run(&["COMMAND", "INFO", sub]);
    }
}

#[test]
fn histograms_and_latencystats_count_what_ran() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CONFIG", "RESETSTAT"][..],
        &["SET", "a", "b"],
        &["SET", "c", "d"],
        &["GET", "a"],
        &["HSET", "h", "f", "v"],
    ]);
    // (Client ids differ.)
    d.redis.call(&["CLIENT", "ID"]);
    d.strata.call(&["CLIENT", "ID"]);
    let expect = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
        pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    };
    for (args, wanted) in [
        (
            &["LATENCY", "HISTOGRAM", "set", "hset", "nosuch"][..],
            expect(&[("set", 2), ("hset", 1)]),
        ),
        (
            &["LATENCY", "HISTOGRAM", "client"],
            expect(&[("client|id", 1)]),
        ),
        (&["LATENCY", "HISTOGRAM", "zadd"], expect(&[])),
    ] {
        let (redis, strata) = d.run_matching(args, |r| r.as_array().is_some());
        assert_eq!(histogram(&redis), wanted, "redis: {args:?}");
        assert_eq!(histogram(&strata), wanted, "strata: {args:?}");
    }
    // Every command run so far, LATENCY HISTOGRAM itself included.
    let (redis, strata) = d.run_matching(&["LATENCY", "HISTOGRAM"], |r| r.as_array().is_some());
    assert_eq!(histogram(&redis), histogram(&strata));
    let (redis, strata) = d.run_matching(&["INFO", "latencystats"], |r| r.as_bytes().is_some());
    let (redis, strata) = (latencystats(&redis), latencystats(&strata));
    assert_eq!(redis, strata);
    assert_eq!(redis["set"], ["p50", "p99", "p99.9"]);
    // The percentiles shown follow the setting; with tracking off nothing is recorded.
    d.run_all(&[
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "10 99.99",
        ][..],
        &["CONFIG", "RESETSTAT"],
        &["GET", "a"],
    ]);
    let (redis, strata) = d.run_matching(&["INFO", "latencystats"], |r| r.as_bytes().is_some());
    assert_eq!(latencystats(&redis)["get"], ["p10", "p99.99"]);
    assert_eq!(latencystats(&redis), latencystats(&strata));
    d.run_all(&[
        &["CONFIG", "SET", "latency-tracking", "no"][..],
        &["CONFIG", "RESETSTAT"],
        &["GET", "a"],
        &["LATENCY", "HISTOGRAM", "get"],
    ]);
}

#[test]
fn the_monitor_samples_commands_slower_than_the_threshold() {
    let mut d = Diff::with_config(&["--enable-debug-command", "yes"]);
    d.run_all(&[
        &["CONFIG", "SET", "latency-monitor-threshold", "100"][..],
        &["LATENCY", "RESET"],
        &["PING"],
        &["LATENCY", "LATEST"],
        &["DEBUG", "SLEEP", "0.2"],
    ]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (redis, strata) = d.run_matching(&["LATENCY", "LATEST"], |r| {
        let Some([event]) = r.as_array() else {
            return false;
        };
        let e = event.as_array().unwrap();
        let ms = e[2].as_int().unwrap();
        e[0].as_bytes() == Some(&b"command"[..])
            && (now - 5..=now + 1).contains(&e[1].as_int().unwrap())
            && (200..2000).contains(&ms)
            && e[3].as_int() == Some(ms)
    });
    let _ = (redis, strata);
    d.run_matching(&["LATENCY", "HISTORY", "command"], |r| {
        r.as_array().is_some_and(|a| a.len() == 1)
    });
    // One sample: a flat graph, labelled with its age in seconds.
    d.run_matching(&["LATENCY", "GRAPH", "command"], |r| {
        let text = String::from_utf8_lossy(r.as_bytes().unwrap_or_default()).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        // The label ("0s", "1s"...) is written downwards, one character per line.
        lines.len() == 9
            && lines[0].starts_with("command - high ")
            && lines[1] == "-".repeat(80)
            && lines[2..6] == [" ", " ", " ", "_"]
            && lines[6] == " "
            && lines[7].chars().all(|c| c.is_ascii_digit())
            && lines[8] == "s"
    });
    d.run_matching(&["LATENCY", "DOCTOR"], |r| {
        r.as_bytes()
            .is_some_and(|t| t.windows(7).any(|w| w == b"command"))
    });
    d.run_all(&[
        &["LATENCY", "RESET", "command"][..],
        &["LATENCY", "LATEST"],
        &["CONFIG", "SET", "latency-monitor-threshold", "0"],
        &["DEBUG", "SLEEP", "0.2"],
        &["LATENCY", "LATEST"],
    ]);
}
