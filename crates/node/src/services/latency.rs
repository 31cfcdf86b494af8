//! Latency tracking and the latency monitor: LATENCY and INFO latencystats.
//!
//! * **Per-command histograms** (`latency-tracking`, on by default): every command's duration goes
//!   into its histogram on the thread that ran it (`ThreadStats::record_latency`, one index
//!   computation and an increment); INFO latencystats and LATENCY HISTOGRAM merge the threads'
//!   histograms when asked. CONFIG RESETSTAT clears them.
//! * **The monitor** (`latency-monitor-threshold`, in milliseconds, 0 = off): a command that ran
//!   at least that long is a sample of the `command` event (`fast-command` for a command flagged
//!   fast), and an active-expiry cycle that long one of `expire-cycle`. Each event keeps its last
//!   160 samples, one per second (the largest of that second), and its all-time maximum, as Redis
//!   does; LATENCY LATEST, HISTORY, RESET and DOCTOR read them.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures_util::future::LocalBoxFuture;
use strata_core::histogram::Histogram;
use strata_shard::now_ms;

use crate::config::trim_percentile;
use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::services::slowlog::sub;
use crate::table::{CommandSpec, Flags, Handler};

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

#[derive(Clone, Copy, Default)]
struct Sample {
    /// Unix seconds; 0: unused.
    time: i64,
    ms: u64,
}

struct Series {
    samples: [Sample; SAMPLES],
    /// Where the next second's sample goes.
    next: usize,
    max: u64,
}

/// Every event that had a sample, by name.
static EVENTS: Mutex<BTreeMap<&'static str, Series>> = Mutex::new(BTreeMap::new());

/// Whether something that took `usec` µs is a monitor sample: one load and a branch.
#[inline]
pub fn monitors(usec: u64) -> bool {
    let t = crate::settings::latency_threshold();
    t != 0 && usec / 1000 >= t
}

/// Records a sample of `event` (which took `usec` µs, already found long enough by [`monitors`]).
#[cold]
pub fn add_sample(event: &'static str, usec: u64) {
    let ms = usec / 1000;
    let now = now_ms().div_euclid(1000);
    let mut events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    let series = events.entry(event).or_insert_with(|| Series {
        samples: [Sample::default(); SAMPLES],
        next: 0,
        max: 0,
    });
    series.max = series.max.max(ms);
    let prev = (series.next + SAMPLES - 1) % SAMPLES;
    if series.samples[prev].time == now {
        let s = &mut series.samples[prev];
        s.ms = s.ms.max(ms);
        return;
    }
    series.samples[series.next] = Sample { time: now, ms };
    series.next = (series.next + 1) % SAMPLES;
}

/// The monitor's event for a command of `spec` that ran for `usec` µs, if it is a sample.
#[inline]
pub fn command_sample(spec: &CommandSpec, usec: u64) {
    if monitors(usec) {
        let event = if spec.flags.has(Flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        add_sample(event, usec);
    }
}

/// Every command's histogram, merged over the threads; commands never run since the last
/// CONFIG RESETSTAT are left out.
async fn histograms(cx: &ConnCtx<'_>) -> Vec<(&'static str, &'static CommandSpec, Histogram)> {
    let per_shard = cx
        .shards()
        .call_all(|s| {
            s.stats
                .latency
                .iter()
                .enumerate()
                .filter(|(_, h)| h.total() > 0)
                .map(|(id, h)| (id, h.clone()))
                .collect::<Vec<_>>()
        })
        .await;
    let entries = crate::table::process().entries();
    let mut merged: Vec<Option<Histogram>> = vec![None; entries.len()];
    for (id, h) in per_shard.into_iter().flatten() {
        if let Some(slot) = merged.get_mut(id) {
            slot.get_or_insert_with(Histogram::new).merge(&h);
        }
    }
    entries
        .iter()
        .zip(merged)
        .filter_map(|(e, h)| h.map(|h| (e.name, e.spec, h)))
        .collect()
}

/// The lines of INFO latencystats: `latency_percentiles_usec_<command>:p50=…,p99=…` for the
/// percentiles of `latency-tracking-info-percentiles`.
pub async fn info_lines(cx: &ConnCtx<'_>) -> Vec<String> {
    let percentiles: Vec<f64> = cx
        .server
        .config
        .get("latency-tracking-info-percentiles")
        .unwrap_or_default()
        .split(' ')
        .filter_map(|w| w.parse().ok())
        .collect();
    histograms(cx)
        .await
        .into_iter()
        .map(|(name, _, h)| {
            let values: Vec<String> = percentiles
                .iter()
                .map(|&p| {
                    let v = h.value_at_percentile(p) as f64 / 1000.0;
                    format!("p{}={v:.3}", trim_percentile(p))
                })
                .collect();
            format!("latency_percentiles_usec_{name}:{}", values.join(","))
        })
        .collect()
}

/// LATENCY HISTOGRAM [command ...]: for each command asked for (a container stands for its
/// subcommands; unknown names are skipped), or every command, its calls and the cumulative count
/// of its durations at each power of two from 1024 ns, in µs.
fn latency_histogram<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let mut all = histograms(cx).await;
        if cx.args.len() > 2 {
            let table = crate::table::process();
            let mut wanted: Vec<&'static str> = Vec::new();
            for a in &cx.args[2..] {
                let name = String::from_utf8_lossy(a).to_ascii_lowercase();
                if let Some(e) = table.get(&name) {
                    if e.spec.subcommands.is_empty() || name.contains('|') {
                        wanted.push(e.name);
                    } else {
                        wanted.extend(
                            table
                                .entries()
                                .iter()
                                .filter(|s| {
                                    s.name
                                        .strip_prefix(e.name)
                                        .is_some_and(|r| r.starts_with('|'))
                                })
                                .map(|s| s.name),
                        );
                    }
                }
            }
            all.retain(|(name, _, _)| wanted.contains(name));
        }
        cx.out.map(all.len());
        for (name, _, h) in &all {
            cx.out.bulk(name.as_bytes());
            cx.out.map(2);
            cx.out.bulk(b"calls");
            cx.out.int(h.total() as i64);
            cx.out.bulk(b"histogram_usec");
            let cdf = h.log2_cdf(1024);
            cx.out.map(cdf.len());
            for (bound, count) in cdf {
                cx.out.int((bound / 1000) as i64);
                cx.out.int(count as i64);
            }
        }
        Ok(())
    })
}

/// LATENCY LATEST: `[event, time of its latest sample, latest ms, all-time max ms]` per event.
fn latency_latest(cx: &mut ConnCtx<'_>) -> CmdResult {
    let events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    cx.out.array(events.len());
    for (name, s) in events.iter() {
        let last = s.samples[(s.next + SAMPLES - 1) % SAMPLES];
        cx.out.array(4);
        cx.out.bulk(name.as_bytes());
        cx.out.int(last.time);
        cx.out.int(last.ms as i64);
        cx.out.int(s.max as i64);
    }
    Ok(())
}

/// LATENCY HISTORY event: its samples, oldest first, as `[time, ms]`.
fn latency_history(cx: &mut ConnCtx<'_>) -> CmdResult {
    let events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    let name = String::from_utf8_lossy(&cx.args[2]);
    let Some(s) = events.get(name.as_ref()) else {
        cx.out.array(0);
        return Ok(());
    };
    let samples: Vec<Sample> = (0..SAMPLES)
        .map(|j| s.samples[(s.next + j) % SAMPLES])
        .filter(|x| x.time != 0)
        .collect();
    cx.out.array(samples.len());
    for x in samples {
        cx.out.array(2);
        cx.out.int(x.time);
        cx.out.int(x.ms as i64);
    }
    Ok(())
}

/// LATENCY RESET [event ...]: forgets those events (all without arguments); answers how many
/// there were.
fn latency_reset(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    let n = if cx.args.len() == 2 {
        let n = events.len();
        events.clear();
        n
    } else {
        cx.args[2..]
            .iter()
            .filter(|a| events.remove(String::from_utf8_lossy(a).as_ref()).is_some())
            .count()
    };
    cx.out.int(n as i64);
    Ok(())
}

/// LATENCY DOCTOR: what the monitor saw, per event: its spikes, their average and mean deviation,
/// how often they came, and the worst; then advice for the events seen.
fn latency_doctor(cx: &mut ConnCtx<'_>) -> CmdResult {
    let setup = Setup {
        slowlog_us: cx.server.config.get_i64("slowlog-log-slower-than"),
        threads: cx.shards().len(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let text = doctor_report(
        crate::settings::latency_threshold(),
        &EVENTS.lock().unwrap_or_else(|e| e.into_inner()),
        &setup,
    );
    cx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The settings LATENCY DOCTOR's advice depends on.
struct Setup {
    /// `slowlog-log-slower-than` (µs; negative: the slow log is off).
    slowlog_us: i64,
    /// Shard threads, and the cores the process may run on.
    threads: usize,
    cores: usize,
}

fn doctor_report(threshold: u64, events: &BTreeMap<&'static str, Series>, setup: &Setup) -> String {
    if threshold == 0 && events.is_empty() {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" \
                in order to enable it.\n"
            .into();
    }
    if events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this instance, not \
                in the slightest bit. I honestly think you ought to sleep tonight.\n"
            .into();
    }
    let mut out = String::from(
        "Dave, I have observed latency spikes in this instance. You don't mind talking about \
         it, do you Dave?\n\n",
    );
    let now = now_ms().div_euclid(1000);
    for (i, (name, s)) in events.iter().enumerate() {
        let samples = samples_of(s);
        let n = samples.len().max(1) as u64;
        // As Redis computes them: integer average and mean deviation, and the period from the
        // oldest sample to now, per sample.
        let avg = samples.iter().map(|x| x.ms).sum::<u64>() / n;
        let mad = samples.iter().map(|x| x.ms.abs_diff(avg)).sum::<u64>() / n;
        let oldest = samples.first().map_or(now, |x| x.time);
        let period = (now - oldest).max(1) as f64 / n as f64;
        out.push_str(&format!(
            "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, period \
             {period:.2} sec). Worst all time event {}ms.\n",
            i + 1,
            samples.len(),
            s.max
        ));
    }
    let advice = advice(threshold, events, setup);
    if advice.is_empty() {
        out.push_str(
            "\nThere is no advice for these events: SLOWLOG GET, INFO commandstats and INFO \
             latencystats show where the time went.\n",
        );
    } else {
        out.push_str("\nWhat may help:\n\n");
        for line in advice {
            out.push_str("- ");
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "\nThe latency monitor samples events that take {threshold} milliseconds or more \
         (latency-monitor-threshold). Slow commands are listed by SLOWLOG GET.\n"
    ));
    out
}

/// One paragraph of advice per cause the recorded events point to.
fn advice(threshold: u64, events: &BTreeMap<&'static str, Series>, setup: &Setup) -> Vec<String> {
    let mut out = Vec::new();
    let threshold_us = threshold.saturating_mul(1000);
    if events.contains_key("command") {
        if setup.slowlog_us < 0 {
            out.push(format!(
                "Slow commands were seen while the slow log is off: 'CONFIG SET \
                 slowlog-log-slower-than {threshold_us}' records them, with their arguments, \
                 for SLOWLOG GET."
            ));
        } else if setup.slowlog_us as u64 > threshold_us {
            out.push(format!(
                "The slow log records only commands slower than {} microseconds, more than \
                 this monitor's threshold: 'CONFIG SET slowlog-log-slower-than {threshold_us}' \
                 makes it record the commands counted here.",
                setup.slowlog_us
            ));
        }
        out.push(
            "Commands that walk a whole value (KEYS, SMEMBERS, HGETALL, LRANGE or ZRANGE over \
             everything, SORT, SUNION, ZUNIONSTORE...) take time in proportion to its size: \
             SLOWLOG GET names them. SCAN, SSCAN, HSCAN and ZSCAN, ranges of a bounded size and \
             smaller values keep each command short; MEMORY USAGE and 'redis-cli --bigkeys' find \
             the large values. Here such a command delays the other commands of its thread only."
                .to_string(),
        );
    }
    if events.contains_key("fast-command") {
        let mut line = String::from(
            "Commands of constant or logarithmic cost were slow, so the process was not \
             running rather than busy: look for CPU taken by other processes or by the \
             hypervisor (steal time in top or vmstat) and for swapping (used_memory against \
             the machine's RAM).",
        );
        if setup.threads > setup.cores {
            line.push_str(&format!(
                " This server runs {} threads on {} cores: '--threads {}' gives each thread a \
                 core of its own.",
                setup.threads, setup.cores, setup.cores
            ));
        }
        out.push(line);
    }
    if events.contains_key("expire-cycle") {
        out.push(
            "Expiring keys in the background took long: many keys reached their TTL at the \
             same moment. A random part in each TTL spreads that work over time."
                .to_string(),
        );
    }
    out
}

/// An event's samples, oldest first.
fn samples_of(s: &Series) -> Vec<Sample> {
    (0..SAMPLES)
        .map(|j| s.samples[(s.next + j) % SAMPLES])
        .filter(|x| x.time != 0)
        .collect()
}

/// LATENCY GRAPH event: its samples drawn as Redis draws them (80 columns, 4 rows, each column
/// labelled with how long ago its sample was taken).
fn latency_graph(cx: &mut ConnCtx<'_>) -> CmdResult {
    let events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    let name = String::from_utf8_lossy(&cx.args[2]);
    let Some(s) = events.get(name.as_ref()) else {
        return Err(CmdError::Msg(
            format!(
                "ERR No samples available for event '{}'",
                crate::error::echo(&cx.args[2])
            )
            .into(),
        ));
    };
    let text = graph(&name, s, now_ms().div_euclid(1000));
    cx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Redis's latency graph of `s` at unix time `now` (latencyCommandGenSparkeline).
fn graph(name: &str, s: &Series, now: i64) -> String {
    const COLUMNS: usize = 80;
    let samples = samples_of(s);
    let min = samples.iter().map(|x| x.ms).min().unwrap_or(0);
    let max = samples.iter().map(|x| x.ms).max().unwrap_or(0);
    let labels: Vec<String> = samples
        .iter()
        .map(|x| {
            let ago = now - x.time;
            match ago {
                ..60 => format!("{ago}s"),
                60..3600 => format!("{}m", ago / 60),
                3600..86_400 => format!("{}h", ago / 3600),
                _ => format!("{}d", ago / 86_400),
            }
        })
        .collect();
    let mut out = format!(
        "{name} - high {max} ms, low {min} ms (all time high {} ms)\n{}\n",
        s.max,
        "-".repeat(COLUMNS)
    );
    let values: Vec<u64> = samples.iter().map(|x| x.ms).collect();
    for (k, start) in (0..values.len()).step_by(COLUMNS).enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let end = (start + COLUMNS).min(values.len());
        sparkline(&mut out, &values[start..end], &labels[start..end], min, max);
    }
    out
}

/// Redis's filled sparkline of `values` (4 rows), with each column's label written downwards
/// under it after one blank line (sparklineRenderRange with SPARKLINE_FILL).
fn sparkline(out: &mut String, values: &[u64], labels: &[String], min: u64, max: u64) {
    const ROWS: usize = 4;
    const FILL: [char; 3] = ['_', 'o', '#'];
    let steps = (FILL.len() * ROWS) as f64;
    let relmax = match (max - min) as f64 {
        0.0 => 1.0,
        r => r,
    };
    let step_of = |v: u64| -> i64 {
        let step = (((v - min) as f64 * steps) as i64 as f64 / relmax) as i64;
        step.clamp(0, steps as i64 - 1)
    };
    for row in 0..ROWS {
        let line: String = values
            .iter()
            .map(|&v| {
                let idx = step_of(v) - ((ROWS - row - 1) * FILL.len()) as i64;
                match idx {
                    0..=2 => FILL[idx as usize],
                    3.. => '|',
                    _ => ' ',
                }
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    // One blank line, then the labels downwards, one character per row.
    out.push_str(&" ".repeat(values.len()));
    out.push('\n');
    let longest = labels.iter().map(String::len).max().unwrap_or(0);
    for c in 0..longest {
        let line: String = labels
            .iter()
            .map(|l| l.as_bytes().get(c).map_or(' ', |&b| b as char))
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
}

fn latency_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    crate::reply::reply_help(
        cx.out,
        &cx.args[0],
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

/// For tests: the current samples of `event`.
#[cfg(test)]
fn history_of(event: &str) -> Vec<(i64, u64)> {
    let events = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    events.get(event).map_or_else(Vec::new, |s| {
        samples_of(s).into_iter().map(|x| (x.time, x.ms)).collect()
    })
}

const ADMIN_LS: Flags = Flags::ADMIN
    .or(Flags::NOSCRIPT)
    .or(Flags::LOADING)
    .or(Flags::STALE);

const HISTORY_ARGS: &[crate::table::Arg] = &[crate::table::Arg::string("event")];
const RESET_ARGS: &[crate::table::Arg] =
    &[crate::table::Arg::string("event").optional().multiple()];
const HISTOGRAM_ARGS: &[crate::table::Arg] =
    &[crate::table::Arg::string("command").optional().multiple()];

static SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "doctor",
        2,
        ADMIN_LS,
        "Return a human readable latency analysis report.",
        "2.8.13",
        "O(1)",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        Handler::Conn(latency_doctor),
    ),
    sub(
        "graph",
        3,
        ADMIN_LS,
        "Return a latency graph for the event.",
        "2.8.13",
        "O(1)",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        Handler::Conn(latency_graph),
    )
    .with_args(HISTORY_ARGS),
    sub(
        "histogram",
        -2,
        ADMIN_LS,
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        "7.0.0",
        "O(N) where N is the number of commands with latency information being retrieved.",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        Handler::Async(latency_histogram),
    )
    .with_args(HISTOGRAM_ARGS),
    sub(
        "history",
        3,
        ADMIN_LS,
        "Return timestamp-latency samples for the event.",
        "2.8.13",
        "O(1)",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        Handler::Conn(latency_history),
    )
    .with_args(HISTORY_ARGS),
    sub(
        "latest",
        2,
        ADMIN_LS,
        "Return the latest latency samples for all events.",
        "2.8.13",
        "O(1)",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        Handler::Conn(latency_latest),
    ),
    sub(
        "reset",
        -2,
        ADMIN_LS,
        "Reset latency data for one or more events.",
        "2.8.13",
        "O(1)",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        Handler::Conn(latency_reset),
    )
    .with_args(RESET_ARGS),
    sub(
        "help",
        2,
        Flags::LOADING.or(Flags::STALE),
        "Show helpful text about the different subcommands.",
        "2.8.13",
        "O(1)",
        &[],
        Handler::Conn(latency_help),
    ),
];

/// The LATENCY container.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: SUBCOMMANDS,
    ..CommandSpec::new(
        "server",
        "latency",
        -2,
        Flags::NONE,
        &[],
        "A container for latency diagnostics commands",
        "2.8.13",
        "Depends on subcommand.",
        Handler::Container,
    )
}];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_one_second_merge_and_the_maximum_is_kept() {
        crate::settings::set_latency_threshold(1);
        assert!(!monitors(999) && monitors(1000));
        // A private event name: tests run in parallel on the shared log.
        add_sample("test-event", 5_000);
        add_sample("test-event", 9_000);
        add_sample("test-event", 2_000);
        let h = history_of("test-event");
        assert!(h.len() == 1 || h.len() == 2, "{h:?}");
        assert_eq!(h.iter().map(|x| x.1).max(), Some(9));
        let events = EVENTS.lock().unwrap();
        let s = &events["test-event"];
        assert_eq!(s.max, 9);
        let report = doctor_report(1, &events, &SETUP);
        assert!(report.contains("test-event:"), "{report}");
        assert!(report.contains("no advice"), "{report}");
        drop(events);
        crate::settings::set_latency_threshold(0);
        assert!(!monitors(u64::MAX));
        EVENTS.lock().unwrap().remove("test-event");
    }

    fn series(samples: &[(i64, u64)]) -> Series {
        let mut s = Series {
            samples: [Sample::default(); SAMPLES],
            next: 0,
            max: 0,
        };
        for &(time, ms) in samples {
            s.samples[s.next] = Sample { time, ms };
            s.next += 1;
            s.max = s.max.max(ms);
        }
        s
    }

    #[test]
    fn the_graph_is_drawn_as_redis_draws_it() {
        // Redis 7.0 for samples of 5 and 50 ms taken 3 and 1 seconds ago.
        let g = graph("command", &series(&[(97, 5), (99, 50)]), 100);
        let expected = format!(
            "command - high 50 ms, low 5 ms (all time high 50 ms)\n{}\n #\n |\n |\n_|\n  \n31\nss\n",
            "-".repeat(80)
        );
        assert_eq!(g, expected);
        // All equal: one row of '_'; labels in minutes, hours, days.
        let g = graph(
            "e",
            &series(&[(100 - 120, 7), (100 - 7200, 7), (100 - 172_800, 7)]),
            100,
        );
        assert!(g.ends_with("   \n   \n   \n___\n   \n222\nmhd\n"), "{g}");
    }

    const SETUP: Setup = Setup {
        slowlog_us: 10_000,
        threads: 2,
        cores: 2,
    };

    #[test]
    fn the_doctor_says_when_monitoring_is_off_or_quiet() {
        let empty = BTreeMap::new();
        assert!(doctor_report(0, &empty, &SETUP).contains("disabled"));
        assert!(doctor_report(10, &empty, &SETUP).contains("no latency spike"));
    }

    #[test]
    fn the_doctor_advises_for_the_events_it_saw() {
        let mut events = BTreeMap::new();
        events.insert("command", series(&[(99, 50)]));
        // The slow log at its default 10 ms, the monitor at 5 ms: it misses some.
        let report = doctor_report(5, &events, &SETUP);
        assert!(report.contains("What may help"), "{report}");
        assert!(report.contains("slowlog-log-slower-than 5000"), "{report}");
        assert!(report.contains("SCAN"), "{report}");
        assert!(
            !report.contains("steal") && !report.contains("TTL"),
            "{report}"
        );
        // The slow log off; at a threshold it already covers, no tuning advice.
        let off = Setup {
            slowlog_us: -1,
            ..SETUP
        };
        assert!(doctor_report(5, &events, &off).contains("slow log is off"));
        assert!(!doctor_report(20, &events, &SETUP).contains("records only"));
        // Fast commands and expiry, and more threads than cores.
        let mut events = BTreeMap::new();
        events.insert("fast-command", series(&[(99, 50)]));
        events.insert("expire-cycle", series(&[(98, 20)]));
        let crowded = Setup {
            threads: 4,
            ..SETUP
        };
        let report = doctor_report(5, &events, &crowded);
        assert!(report.contains("steal time"), "{report}");
        assert!(report.contains("--threads 2"), "{report}");
        assert!(report.contains("TTL"), "{report}");
        assert!(!report.contains("SCAN"), "{report}");
        assert!(!doctor_report(5, &events, &SETUP).contains("--threads"));
    }
}
