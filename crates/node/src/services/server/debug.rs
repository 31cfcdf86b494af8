//! DEBUG (Redis's debug.c): the subcommands Redis's test suite and operators use, each doing its
//! work on Strata's own structures: POPULATE, DIGEST, DIGEST-VALUE, OBJECT, HTSTATS, HTSTATS-KEY,
//! LISTPACK, QUICKLIST, SLEEP, SET-ACTIVE-EXPIRE, PAUSE-CRON, QUICKLIST-PACKED-THRESHOLD,
//! SET-DISABLE-DENY-SCRIPTS, CHANGE-REPL-ID, PROTOCOL, ERROR, LOG, SEGFAULT and PANIC (the last
//! two crash the process on purpose), plus the RDB lengths DEBUG OBJECT reports.
//!
//! Where Redis's reply describes its internals (HTSTATS's tables, the LISTPACK and QUICKLIST
//! dumps) Strata describes its own in the same shape: the keyspace's chained [`Dict`] per shard,
//! the open-addressed tables of the collections, its own packed encodings. Subcommands of features
//! Strata does not have yet (RELOAD, LOADAOF, SET-SKIP-CHECKSUM-VALIDATION, replication and
//! cluster ones, REPLYBUFFER) answer Redis's unknown-subcommand error.
//!
//! [`Dict`]: strata_core::Dict

use std::fmt::Write as _;

use strata_core::dict::CHAIN_STATS_LEN;
use strata_core::{TableStats, Value};

use super::*;

/// Keys DEBUG POPULATE creates per round (see [`debug_populate`]).
const POPULATE_SLICE: u64 = 4096;

/// Whether `enable-debug-command` lets this connection run DEBUG (`local`: loopback and Unix
/// socket only).
pub(super) fn debug_allowed(cx: &ConnCtx<'_>) -> bool {
    match cx
        .server
        .config
        .get("enable-debug-command")
        .unwrap_or_default()
        .as_str()
    {
        "yes" => true,
        "local" => cx.session.info.is_local(),
        _ => false,
    }
}

/// DEBUG subcommand [arg ...]: dispatches on the subcommand and the argument count as Redis does
/// (a count a subcommand does not take is an unknown subcommand); see the module docs for the list.
pub(super) fn debug<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if !debug_allowed(cx) {
            return Err(CmdError::msg(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
                 \"local\", you can run it from a local connection, otherwise you need to set \
                 this option in the configuration file, and then restart the server.",
            ));
        }
        let sub = String::from_utf8_lossy(&cx.args[1]).to_ascii_lowercase();
        match (sub.as_str(), cx.args.len()) {
            ("help", 2) => debug_help(cx),
            ("reload", _) => debug_reload(cx).await?,
            ("sleep", 3) => {
                // SLEEP suspends this connection only; Redis stops the whole server.
                let secs = c_strtod(&cx.args[2]);
                if secs > 0.0 && secs.is_finite() {
                    (cx.server.sleep)(Duration::from_secs_f64(secs.min(1e9))).await;
                }
                cx.out.ok();
            }
            ("object", 3) => {
                let key = cx.args[2].clone();
                let (db, now) = (cx.session.db, cx.now);
                let shard = cx.shards().shard_of_key(&key);
                let text = cx
                    .shards()
                    .call(shard, move |s| {
                        s.db_mut(db).peek(&key, now).map(|e| debug_object(e, now))
                    })
                    .await
                    .ok_or(CmdError::NoSuchKey)?;
                cx.out.simple(&text);
            }
            ("digest-value", _) => {
                let db = cx.session.db;
                let keys = cx.args[2..].to_vec();
                cx.out.array(keys.len());
                for key in keys {
                    let shard = cx.shards().shard_of_key(&key);
                    let d = cx
                        .shards()
                        .call(shard, move |s| {
                            // As Redis: logically expired keys count until they are removed.
                            s.db(db)
                                .stored(&key)
                                .map_or([0; 20], crate::services::digest::value_digest)
                        })
                        .await;
                    cx.out.simple(&crate::services::digest::hex(&d));
                }
            }
            ("digest", 2) => {
                let per_shard = cx
                    .shards()
                    .call_all(move |s| {
                        (0..s.db_count())
                            .map(|i| {
                                let mut keys = [0u8; 20];
                                let mut any = false;
                                for e in s.db(i).iter_stored() {
                                    any = true;
                                    crate::services::digest::xor(
                                        &mut keys,
                                        &crate::services::digest::key_digest(e),
                                    );
                                }
                                (any, keys)
                            })
                            .collect::<Vec<_>>()
                    })
                    .await;
                let mut dbs = vec![(false, [0u8; 20]); per_shard.first().map_or(0, Vec::len)];
                for shard in per_shard {
                    for (acc, (any, keys)) in dbs.iter_mut().zip(shard) {
                        acc.0 |= any;
                        acc.1.iter_mut().zip(keys).for_each(|(a, b)| *a ^= b);
                    }
                }
                cx.out.simple(&crate::services::digest::hex(
                    &crate::services::digest::dataset_digest(&dbs),
                ));
            }
            ("set-active-expire", 3) => {
                // Redis reads it with atoi: (int) strtol.
                let on = crate::args::c_strtol(&cx.args[2]) as i32 != 0;
                cx.shards().call_all(move |s| s.active_expire = on).await;
                cx.out.ok();
            }
            ("pause-cron", 3) => {
                strata_shard::pause_cron(crate::args::c_strtol(&cx.args[2]) as i32 != 0);
                cx.out.ok();
            }
            ("error", 3) => {
                // The argument is the whole error line, code included.
                cx.out.error(&String::from_utf8_lossy(&cx.args[2]));
            }
            ("quicklist-packed-threshold", 3) => {
                let ok = std::str::from_utf8(&cx.args[2])
                    .ok()
                    .and_then(crate::config::memtoull)
                    .is_some_and(strata_core::list::set_packed_threshold);
                if !ok {
                    return Err(CmdError::msg(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    ));
                }
                cx.out.ok();
            }
            ("log", 3) => {
                crate::server_log!(
                    Warning,
                    "DEBUG LOG: {}",
                    String::from_utf8_lossy(&cx.args[2])
                );
                cx.out.ok();
            }
            ("protocol", 3) => debug_protocol(cx)?,
            ("populate", 3..=5) => debug_populate(cx).await?,
            ("htstats", 3) => debug_htstats(cx).await?,
            ("htstats-key", 3) => debug_htstats_key(cx).await?,
            ("listpack", 3) => debug_listpack(cx).await?,
            ("quicklist", 3 | 4) => debug_quicklist(cx).await?,
            ("change-repl-id", 2) => {
                crate::server_log!(
                    Notice,
                    "Changing replication IDs after receiving DEBUG change-repl-id"
                );
                change_replid();
                cx.out.ok();
            }
            ("set-skip-checksum-validation", 3) => {
                strata_rdb::set_skip_checksum_validation(
                    crate::args::c_strtol(&cx.args[2]) as i32 != 0,
                );
                cx.out.ok();
            }
            ("set-disable-deny-scripts", 3) => {
                crate::settings::set_disable_deny_scripts(
                    crate::args::c_strtol(&cx.args[2]) as i32 != 0,
                );
                cx.out.ok();
            }
            ("replybuffer", 4) => debug_replybuffer(cx)?,
            ("config-rewrite-force-all", 2) => {
                cx.server.config.rewrite_force_all().map_err(|e| {
                    CmdError::Msg(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}").into())
                })?;
                cx.out.ok();
            }
            // Like Redis, both take any number of arguments.
            ("segfault", _) => {
                super::crash::set_current_args(&cx.session.info, cx.args);
                crash_with_sigsegv()
            }
            ("panic", _) => {
                super::crash::set_current_args(&cx.session.info, cx.args);
                crash_with_panic()
            }
            _ => return Err(subcommand_syntax_error(cx.args)),
        }
        Ok(())
    })
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type, as Redis sends them (for client tests).
/// DEBUG REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|ms> | RESIZING <0|1>: how the clients' reply
/// buffers are sized (`crate::settings::reply_buffer`), as Redis 7.0's debug.c sets them.
fn debug_replybuffer(cx: &mut ConnCtx<'_>) -> CmdResult {
    use crate::settings::reply_buffer as rb;
    let (what, value) = (&cx.args[2], &cx.args[3]);
    if eq_ci(what, "peak-reset-time") {
        if eq_ci(value, "never") {
            rb::set_peak_reset_ms(-1);
        } else if eq_ci(value, "reset") {
            rb::set_peak_reset_ms(rb::DEFAULT_PEAK_RESET_MS);
        } else {
            let ms = strata_core::num::parse_i64(value).ok_or(CmdError::NotInteger)?;
            rb::set_peak_reset_ms(ms);
        }
    } else if eq_ci(what, "resizing") {
        rb::set_resizing(crate::args::c_strtol(value) as i32 != 0);
    } else {
        return Err(subcommand_syntax_error(cx.args));
    }
    cx.out.ok();
    Ok(())
}

pub(super) fn debug_protocol(cx: &mut ConnCtx<'_>) -> CmdResult {
    let resp3 = cx.out.proto == strata_resp::Protocol::Resp3;
    let out = &mut *cx.out;
    match String::from_utf8_lossy(&cx.args[2])
        .to_ascii_lowercase()
        .as_str()
    {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        "double" => out.double_text("3.141"),
        "bignum" => {
            let n = "1234567999999999999999999999999999999";
            if resp3 {
                out.buf.extend_from_slice(format!("({n}\r\n").as_bytes());
            } else {
                out.bulk(n.as_bytes());
            }
        }
        "null" => out.null(),
        "array" => {
            out.array(3);
            (0..3).for_each(|j| out.int(j));
        }
        "set" => {
            out.set(3);
            (0..3).for_each(|j| out.int(j));
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            // An attribute is not a reply: a real one follows it (RESP2 gets only that).
            if resp3 {
                out.buf.extend_from_slice(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !resp3 {
                return Err(CmdError::msg("ERR RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        _ => {
            return Err(CmdError::msg(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

/// DEBUG HELP: the subcommands Strata has, in Redis's order and words.
pub(super) fn debug_help(cx: &mut ConnCtx<'_>) {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PANIC",
            "    Crash the server simulating a panic.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SEGFAULT",
            "    Crash the server with sigsegv.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key>.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key>.",
            "    The optional argument (0 by default) sets the level of detail",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
            "    In case NEVER is provided the last observed peak will never be reset",
            "    In case RESET is provided the peak reset time will be restored to the default value",
            "REPLYBUFFER RESIZING <0|1>",
            "    Enable or disable the reply buffer resize cron job",
            "SET-DISABLE-DENY-SCRIPTS <0|1>",
            "    Allow scripts to run commands flagged noscript (for testing).",
        ],
    );
}

/// DEBUG POPULATE count [prefix] [size] → OK: creates the string keys `prefix:N` (`key:N` without
/// a prefix) for N in 0..count, each holding `value:N`, or with `size` that text cut or padded
/// with zero bytes to `size` bytes. Existing keys are left as they are.
///
/// Where Strata differs: Redis creates every key in one go, atomically. Strata creates them
/// [`POPULATE_SLICE`] at a time, each slice on every shard at once under the database's locks
/// (as FLUSHDB), so no thread stalls on a large count and no multi-key command sees part of a
/// slice; between slices other clients run, may see some of the keys, and keys they create first
/// are skipped.
async fn debug_populate(cx: &mut ConnCtx<'_>) -> CmdResult {
    let positive = |arg: &[u8]| {
        strata_core::num::parse_i64(arg)
            .filter(|n| *n >= 0)
            .ok_or(CmdError::msg("ERR value is out of range, must be positive"))
    };
    let count = positive(&cx.args[2])? as u64;
    let size = match cx.args.get(4) {
        Some(a) => positive(a)? as usize,
        None => 0,
    };
    // Redis allocates whatever size is asked (and dies if it cannot); Strata refuses a value
    // longer than any string may be rather than abort the process on a client's number.
    if size > crate::value::MAX_STRING_LEN {
        return Err(CmdError::msg("ERR string exceeds maximum allowed size"));
    }
    // Redis prints the prefix with "%s": it ends at a NUL byte.
    let prefix = cx.args.get(3).map_or(&b"key"[..], |p| {
        &p[..p.iter().position(|&b| b == 0).unwrap_or(p.len())]
    });
    let db = cx.session.db;
    let set = cx.shards().clone();
    let mut start = 0;
    while start < count {
        let end = count.min(start + POPULATE_SLICE);
        let mut per_shard: Vec<Vec<(Bytes, u64)>> = vec![Vec::new(); set.len()];
        for j in start..end {
            let key = populate_key(prefix, j);
            per_shard[set.shard_of_key(&key)].push((key, j));
        }
        let lock = set
            .lock_dbs_as(cx.lock_owner(), &[db as u32], strata_shard::Mode::Exclusive)
            .await;
        let parts = per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(shard, keys)| {
                lock.run(shard, move |s| {
                    let now = strata_shard::now_ms();
                    let d = s.db_mut(db);
                    for (key, j) in keys {
                        if !d.contains(&key, now) {
                            d.set(&key, Value::Str(populate_value(j, size)), None, now);
                        }
                    }
                })
            });
        join_all(parts).await;
        lock.release();
        start = end;
    }
    cx.out.ok();
    Ok(())
}

/// `prefix:j`, cut to 127 bytes as Redis's 128-byte buffer cuts it.
fn populate_key(prefix: &[u8], j: u64) -> Bytes {
    let mut key = Vec::with_capacity(prefix.len() + 21);
    key.extend_from_slice(prefix);
    key.extend_from_slice(format!(":{j}").as_bytes());
    key.truncate(127);
    Bytes::from(key)
}

/// `value:j`, or with `size` > 0 its first `size` bytes padded with zero bytes to `size`.
fn populate_value(j: u64, size: usize) -> Bytes {
    let text = format!("value:{j}").into_bytes();
    if size == 0 {
        return Bytes::from(text);
    }
    let mut v = vec![0u8; size];
    let n = size.min(text.len());
    v[..n].copy_from_slice(&text[..n]);
    Bytes::from(v)
}

/// DEBUG HTSTATS dbid → a verbatim text: the shape of the database's key table on each shard
/// (Redis's `[Dictionary HT]`, with one block per shard when there are several), then its
/// expiry bookkeeping (`[Expires HT]`: Strata keeps deadlines in the entries, with a heap of
/// hints for active expiry, rather than a second table).
async fn debug_htstats(cx: &mut ConnCtx<'_>) -> CmdResult {
    let dbid = strata_core::num::parse_i64(&cx.args[2]).ok_or(CmdError::NotInteger)?;
    if dbid < 0 || dbid >= cx.server.config.get_i64("databases") {
        return Err(CmdError::msg("ERR Out of range database"));
    }
    let db = dbid as usize;
    let per_shard = cx
        .shards()
        .call_all(move |s| {
            let d = s.db(db);
            (d.table_stats(), d.volatile_len(), d.expiry_hints())
        })
        .await;
    let shards = per_shard.len();
    let mut text = String::from("[Dictionary HT]\n");
    for (i, (tables, _, _)) in per_shard.iter().enumerate() {
        if shards > 1 {
            let _ = writeln!(text, "Shard {i} of {shards}:");
        }
        for (id, t) in tables.iter().enumerate() {
            table_stats_text(&mut text, id, t);
        }
    }
    text.push_str("[Expires HT]\n");
    let volatile: usize = per_shard.iter().map(|p| p.1).sum();
    if volatile == 0 {
        table_stats_text(&mut text, 0, &TableStats::default());
    } else {
        let hints: usize = per_shard.iter().map(|p| p.2).sum();
        let _ = write!(
            text,
            "Deadlines kept in the keys' entries, with a heap of hints for active expiry:\n \
             number of elements: {volatile}\n heap hints: {hints}\n"
        );
    }
    cx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// DEBUG HTSTATS-KEY key → a verbatim text: the shape of the hash table of a hashtable-encoded
/// set or hash, or of a skiplist-encoded sorted set's member table. These are open-addressed
/// (each slot holds at most one element), so their "chains" are 0 or 1 long.
async fn debug_htstats_key(cx: &mut ConnCtx<'_>) -> CmdResult {
    let stats = lookup_value(cx, |v| match v {
        ValueRef::Obj(Object::Set(s)) => s.table_stats(),
        ValueRef::Obj(Object::Hash(h)) => h.table_stats(),
        ValueRef::Obj(Object::ZSet(z)) => z.table_stats(),
        _ => None,
    })
    .await?
    .ok_or(CmdError::msg(
        "ERR The value stored at the specified key is not represented using an hash table",
    ))?;
    let mut text = String::new();
    table_stats_text(&mut text, 0, &stats);
    cx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Runs `f` on the value at the command's key (argument 2) on its shard, without touching its
/// access clock; `ERR no such key` if it is missing (or due to expire, which it then does).
async fn lookup_value<R: Send + 'static>(
    cx: &mut ConnCtx<'_>,
    f: impl FnOnce(ValueRef<'_>) -> R + Send + 'static,
) -> Result<R, CmdError> {
    let key = cx.args[2].clone();
    let (db, now) = (cx.session.db, cx.now);
    let shard = cx.shards().shard_of_key(&key);
    cx.shards()
        .call(shard, move |s| {
            s.db_mut(db).peek(&key, now).map(|e| f(e.value()))
        })
        .await
        .ok_or(CmdError::NoSuchKey)
}

/// One table's statistics in Redis's dictGetStats format.
fn table_stats_text(out: &mut String, id: usize, t: &TableStats) {
    let role = if id == 0 {
        "main hash table"
    } else {
        "rehashing target"
    };
    let _ = writeln!(out, "Hash table {id} stats ({role}):");
    if t.entries == 0 {
        out.push_str("No stats available for empty dictionaries\n");
        return;
    }
    // Redis computes these in single precision.
    let avg = f64::from(t.entries as f32 / t.used_buckets as f32);
    let _ = write!(
        out,
        " table size: {}\n number of elements: {}\n different slots: {}\n \
         max chain length: {}\n avg chain length (counted): {avg:.2}\n \
         avg chain length (computed): {avg:.2}\n Chain length distribution:\n",
        t.buckets, t.entries, t.used_buckets, t.max_chain
    );
    for (n, &c) in t.chains.iter().enumerate().take(CHAIN_STATS_LEN - 1) {
        if c > 0 {
            let pct = f64::from(c as f32 / t.buckets as f32 * 100.0);
            let _ = writeln!(out, "   {n}: {c} ({pct:.2}%)");
        }
    }
}

/// DEBUG LISTPACK key → `Listpack structure printed on stdout`, after printing the packed
/// encoding of a small hash or sorted set (Strata's own layout, not Redis's listpack: its size
/// and entries, in order).
async fn debug_listpack(cx: &mut ConnCtx<'_>) -> CmdResult {
    let dump = lookup_value(cx, |v| {
        let mut out = String::new();
        let entry = |out: &mut String, i: usize, kind: &str, bytes: &[u8]| {
            let _ = writeln!(
                out,
                "{{\n\tindex: {i:>2},\n\t[{kind}]{}\n}}",
                String::from_utf8_lossy(bytes)
            );
        };
        match v {
            ValueRef::Obj(Object::Hash(h)) => {
                let bytes = h.packed_bytes()?;
                let _ = writeln!(
                    out,
                    "{{total bytes {bytes}}} {{num entries {}}}",
                    2 * h.len()
                );
                for (i, (f, v)) in h.iter().enumerate() {
                    entry(&mut out, 2 * i, "str", f);
                    entry(&mut out, 2 * i + 1, "str", v);
                }
            }
            ValueRef::Obj(Object::ZSet(z)) => {
                let bytes = z.packed_bytes()?;
                let _ = writeln!(
                    out,
                    "{{total bytes {bytes}}} {{num entries {}}}",
                    2 * z.len()
                );
                let mut i = 0;
                z.for_each(|m, score| {
                    entry(&mut out, i, "str", m);
                    let score = strata_core::num::format_g17(score);
                    entry(&mut out, i + 1, "score", score.as_bytes());
                    i += 2;
                });
            }
            _ => return None,
        }
        out.push_str("{end}\n");
        Some(out)
    })
    .await?
    .ok_or(CmdError::msg("ERR Not a listpack encoded object."))?;
    print!("{dump}");
    cx.out.simple("Listpack structure printed on stdout");
    Ok(())
}

/// DEBUG QUICKLIST key [0|1] → `Quicklist structure printed on stdout`, after printing the list's
/// nodes (with 1, their elements too), as Redis's quicklistRepr.
async fn debug_quicklist(cx: &mut ConnCtx<'_>) -> CmdResult {
    let full = cx
        .args
        .get(3)
        .is_some_and(|a| crate::args::c_strtol(a) as i32 != 0);
    let dump =
        lookup_value(cx, move |v| {
            let ValueRef::Obj(Object::List(l)) = v else {
                return None;
            };
            let nodes: Vec<_> = l.node_layout().collect();
            let mut out = String::from("{quicklist}\n");
            let _ = write!(
                out,
                "{{count : {}}}\n{{len : {}}}\n{{fill : {}}}\n{{compress : {}}}\n\
             {{packed_threshold : {}}}\n",
                l.len(),
                nodes.len(),
                strata_core::limits::LIST_MAX_LISTPACK_SIZE.get(),
                l.compress_depth(),
                strata_core::list::packed_threshold(),
            );
            let mut elems = l.iter();
            for (i, n) in nodes.iter().enumerate() {
                let _ =
                    writeln!(
                out,
                "{{quicklist node({i})\n{{container : {}, encoding: {}, size: {}, count: {}, \
                 compressed size: {}}}",
                if n.plain { "PLAIN" } else { "PACKED" },
                if n.compressed_bytes.is_some() { "LZF" } else { "RAW" },
                n.bytes,
                n.count,
                n.compressed_bytes.unwrap_or(n.bytes),
            );
                if full {
                    for e in elems.by_ref().take(n.count) {
                        let _ = writeln!(out, "\t[entry]{}", String::from_utf8_lossy(&e.to_vec()));
                    }
                }
                out.push_str("}\n");
            }
            Some(out)
        })
        .await?
        .ok_or(CmdError::msg("ERR Not a quicklist encoded object."))?;
    print!("{dump}");
    cx.out.simple("Quicklist structure printed on stdout");
    Ok(())
}

/// DEBUG SEGFAULT: a real segmentation fault, as Redis causes one: a write to a read-only page.
fn crash_with_sigsegv() -> ! {
    // SAFETY: none, on purpose: the write faults and the kernel delivers SIGSEGV, which kills the
    // process (or runs the crash-report handler, which then does). Should mmap fail, the signal
    // is raised directly.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p != libc::MAP_FAILED {
            std::ptr::write_volatile(p.cast::<u8>(), b'x');
        }
        libc::raise(libc::SIGSEGV);
    }
    std::process::abort()
}

/// DEBUG PANIC: a Rust panic with Redis's message. The release profile aborts on panic; where
/// panics unwind (tests' debug builds), the guard aborts when the unwinding reaches it, so the
/// process ends either way instead of losing one shard thread.
fn crash_with_panic() -> ! {
    struct AbortOnUnwind;
    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            std::process::abort();
        }
    }
    let _guard = AbortOnUnwind;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    panic!("DEBUG PANIC called at Unix time {now}");
}

/// DEBUG OBJECT's line, in Redis's format.
pub(super) fn debug_object(e: &strata_core::Entry, now: i64) -> String {
    let v = e.value();
    let refcount = if crate::value::is_shared_int(e) {
        i32::MAX
    } else {
        1
    };
    let lru = e.lru();
    let idle = strata_shard::db::lru_idle(lru_clock(now), lru);
    format!(
        "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{} lru:{lru} \
         lru_seconds_idle:{idle}",
        e as *const strata_core::Entry,
        crate::value::encoding_name(v),
        serialized_len(v)
    )
}

/// The length of a value in an RDB file (Redis's rdbSavedObjectLen), with `rdbcompression` on.
pub(super) fn serialized_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Int(i) => int_encoded_len(i).unwrap_or_else(|| {
            let digits = i.to_string().len();
            rdb_len_size(digits) + digits
        }),
        ValueRef::Inline(s) => rdb_string_len(s),
        ValueRef::Obj(Object::Str(s)) => rdb_string_len(s),
        // Collections: their heap size stands in until the RDB encodings land with persistence.
        ValueRef::Obj(o) => o.heap_size(),
    }
}

/// Bytes of an RDB length prefix.
pub(super) fn rdb_len_size(len: usize) -> usize {
    match len {
        0..=63 => 1,
        64..=16383 => 2,
        _ if len <= u32::MAX as usize => 5,
        _ => 9,
    }
}

/// Bytes of an integer stored in RDB's integer encodings (8, 16 or 32 bits), if it fits one.
pub(super) fn int_encoded_len(i: i64) -> Option<usize> {
    if i8::try_from(i).is_ok() {
        Some(2)
    } else if i16::try_from(i).is_ok() {
        Some(3)
    } else if i32::try_from(i).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// Bytes of a string in RDB: as an integer when it is a short canonical one, LZF-compressed when
/// longer than 20 bytes and compression saves at least 4 bytes, raw otherwise.
pub(super) fn rdb_string_len(s: &[u8]) -> usize {
    if s.len() <= 11 {
        if let Some(n) = strata_core::num::parse_i64(s)
            .filter(|i| i.to_string().as_bytes() == s)
            .and_then(int_encoded_len)
        {
            return n;
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf_compressed_len(s, s.len() - 4) {
            return 1 + rdb_len_size(c) + rdb_len_size(s.len()) + c;
        }
    }
    rdb_len_size(s.len()) + s.len()
}

/// The size liblzf's `lzf_compress` (as built into Redis: HLOG 16, VERY_FAST) produces for
/// `input` with `out_len` bytes of room, or None where it gives up (returns 0). Only the size is
/// computed; the algorithm's decisions are replayed exactly so the size matches Redis's.
pub(super) fn lzf_compressed_len(input: &[u8], out_len: usize) -> Option<usize> {
    const HLOG: u32 = 16;
    const HSIZE: usize = 1 << HLOG;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let idx = |h: u32| ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1);
    let frst = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let next = |v: u32, p: usize| (v << 8) | u32::from(input[p + 2]);

    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    // Positions + 1 (0 = empty slot), like the C version's NULL pointers.
    let mut htab = vec![0usize; HSIZE];
    let (mut ip, mut op, mut lit) = (0usize, 1usize, 0usize);
    let mut hval = frst(ip);
    while ip + 2 < in_len {
        hval = next(hval, ip);
        let slot = idx(hval);
        let reference = htab[slot];
        htab[slot] = ip + 1;
        let matched = reference > 1 && {
            let r = reference - 1;
            r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = reference - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= out_len && op - (lit == 0) as usize + 3 + 1 >= out_len {
                return None;
            }
            op -= (lit == 0) as usize;
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            op += if len < 7 { 1 } else { 2 };
            op += 1; // the low offset byte
            lit = 0;
            op += 1; // start a literal run
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            lit = 0;
            op += 1;
        }
    }
    op -= (lit == 0) as usize;
    Some(op)
}

/// C's strtod on the longest numeric prefix (0 when there is none), as DEBUG SLEEP parses.
pub(super) fn c_strtod(arg: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(64)]);
    let text = text.trim_start();
    (1..=text.len())
        .rev()
        .filter(|&n| text.is_char_boundary(n))
        .find_map(|n| text[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the dataset (unless NOSAVE), empties every
/// database (unless NOFLUSH) and loads the file again, under every database's lock so no command
/// sees it half loaded. With NOFLUSH a loaded key replaces the one there (MERGE's behaviour).
async fn debug_reload(cx: &mut ConnCtx<'_>) -> CmdResult {
    let (mut flush, mut save) = (true, true);
    for a in &cx.args[2..] {
        if eq_ci(a, "merge") {
        } else if eq_ci(a, "noflush") {
            flush = false;
        } else if eq_ci(a, "nosave") {
            save = false;
        } else {
            return Err(CmdError::msg(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    let owner = cx.lock_owner();
    if save && persist::save(cx.server, owner).await.is_err() {
        cx.out.error("ERR");
        return Ok(());
    }
    let n = cx.server.config.get_i64("databases") as u32;
    let dbs: Vec<u32> = (0..n).collect();
    let set = cx.shards().clone();
    let lock = set
        .lock_dbs_as(owner, &dbs, strata_shard::Mode::Exclusive)
        .await;
    if flush {
        let parts = lock.shards().map(|shard| {
            let dbs: Vec<usize> = (0..n as usize).collect();
            lock.run(shard, move |s| drop(s.flush(&dbs)))
        });
        join_all(parts).await;
    }
    let (tx, rx) = futures_channel::oneshot::channel();
    let server = cx.server.clone();
    let path = persist::rdb_path(&server.config);
    let spawned = std::thread::Builder::new()
        .name("strata-rdb-loader".into())
        .spawn(move || {
            let r = persist::load_file(&server, &path);
            if let Err(persist::LoadError::Bad(e)) = &r {
                persist::log_bad_file(&path, e);
            }
            let _ = tx.send(r.is_ok());
        });
    let loaded = spawned.is_ok() && rx.await.unwrap_or(false);
    lock.release();
    if !loaded {
        return Err(CmdError::msg(
            "ERR Error trying to load the RDB dump, check server logs.",
        ));
    }
    persist::reset_dirty(persist::dirty_total(cx.shards()).await);
    crate::server_log!(Notice, "DB reloaded by DEBUG RELOAD");
    cx.out.ok();
    Ok(())
}
