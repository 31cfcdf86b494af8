//! HyperLogLog commands (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! A HyperLogLog is a string value in Redis's exact layout ([`strata_core::hll`]), so GET/SET move
//! it between Strata and Redis unchanged. Validation is Redis's: a non-string is the usual
//! WRONGTYPE, a string that is not an HLL (wrong magic, unknown encoding, dense of the wrong size,
//! or an int-encoded string) is "WRONGTYPE Key is not a valid HyperLogLog string value.", and
//! sparse opcodes that do not add up are "INVALIDOBJ Corrupted HLL object detected" when read.
//!
//! Invariants:
//! * updates happen in place on a raw string ([`Object::Str`]); making a value raw is not a change
//!   by itself (no key event), as Redis's dbUnshareStringValue;
//! * PFCOUNT of one key refreshes the cached cardinality in the value (a write, as in Redis);
//!   PFCOUNT of several keys merges their registers in a temporary and writes nothing;
//! * PFCOUNT and PFMERGE are keyed commands: their keys may live on any shards. Each shard merges
//!   the registers of its own keys and sends back one 16 KiB array, plus the first error in
//!   argument order, so the command answers exactly as Redis's key-by-key loop would.

use std::sync::{mpsc, OnceLock};

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::hll;
use strata_core::limits::HLL_SPARSE_MAX_BYTES;
use strata_core::{Object, ValueRef};
use strata_shard::{notify, Db, EntryMut};

use strata_node::args::eq_ci;
use strata_node::ctx::{ConnCtx, ShardCtx};
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::{KeysCtx, Looked};
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec};
use strata_node::value::{as_str, raw};

#[allow(clippy::too_many_arguments)]
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "hyperloglog",
        name,
        arity,
        flags,
        keys,
        summary,
        since,
        complexity,
        handler,
    )
}

const PFADD_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const PFADD_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("element").optional().multiple(),
];
const PFCOUNT_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RW.or(KeyFlags::ACCESS))
    .with_notes(
    "RW because it may change the internal representation of the key, and propagate to replicas",
)];
const PFCOUNT_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const PFMERGE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::INSERT)),
    KeySpec::range(2, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const PFMERGE_ARGS: &[Arg] = &[Arg::key("destkey", 0), Arg::key("sourcekey", 1).multiple()];
const PFDEBUG_KEYS: &[KeySpec] = &[KeySpec::at(2, KeyFlags::RW.or(KeyFlags::ACCESS))];
const PFDEBUG_ARGS: &[Arg] = &[Arg::string("subcommand"), Arg::key("key", 0)];

/// The HyperLogLog family.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("pfadd", -2, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), PFADD_KEYS,
        "Adds the specified elements to the specified HyperLogLog.", "2.8.9",
        "O(1) to add every element.",
        Handler::Shard(pfadd))
        .with_args(PFADD_ARGS),
    // may_replicate (hidden from COMMAND INFO), as in Redis: PFCOUNT may rewrite a cached
    // cardinality, so CLIENT PAUSE WRITE holds it.
    cmd("pfcount", -2, Flags::READONLY.or(Flags::MAY_REPLICATE), PFCOUNT_KEYS,
        "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", "2.8.9",
        "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        Handler::Keys(pfcount))
        .with_args(PFCOUNT_ARGS),
    cmd("pfmerge", -2, Flags::WRITE.or(Flags::DENYOOM), PFMERGE_KEYS,
        "Merge N different HyperLogLogs into a single one.", "2.8.9",
        "O(N) to merge N HyperLogLogs, but with high constant times.",
        Handler::Keys(pfmerge))
        .with_args(PFMERGE_ARGS)
        .with_routing_keys(pfmerge_keys),
    cmd("pfdebug", 3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::ADMIN), PFDEBUG_KEYS,
        "Internal commands for debugging HyperLogLog values", "2.8.9",
        "N/A",
        Handler::Shard(pfdebug))
        .with_args(PFDEBUG_ARGS),
    cmd("pfselftest", 1, Flags::ADMIN, &[],
        "An internal command for testing HyperLogLog values", "2.8.9",
        "N/A",
        Handler::Async(pfselftest)),
];

/// PFMERGE's keys when positions cannot tell them: `PFMERGE dest` alone leaves the sources' range
/// empty, which Redis's key specs treat as unresolvable (COMMAND GETKEYS fails, and still does
/// here: this finder is for routing only). Strata must still route the command to the shard owning
/// `dest`, so the destination is reported here.
fn pfmerge_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
    found(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::INSERT));
    for i in 2..args.len() {
        found(i, KeyFlags::RO.or(KeyFlags::ACCESS));
    }
}

const NOT_HLL: CmdError = CmdError::msg("WRONGTYPE Key is not a valid HyperLogLog string value.");
/// The HLL bytes of a value, or Redis's errors for anything else (isHLLObjectOrReply).
fn check(v: ValueRef<'_>) -> Result<&[u8], CmdError> {
    let bytes = match v {
        ValueRef::Int(_) => return Err(NOT_HLL),
        ValueRef::Inline(b) => b,
        ValueRef::Obj(Object::Str(s)) => s,
        other => {
            as_str(other)?;
            return Err(NOT_HLL);
        }
    };
    if hll::is_hll(bytes) {
        Ok(bytes)
    } else {
        Err(NOT_HLL)
    }
}

/// The HLL of an entry being modified, validated and made raw (quietly: no change yet).
fn hll_mut<'e>(e: &'e mut EntryMut<'_>) -> Result<&'e mut Vec<u8>, CmdError> {
    check(e.value())?;
    if !matches!(e.value(), ValueRef::Obj(Object::Str(_))) {
        let bytes = check(e.value())?.to_vec();
        e.reencode(raw(bytes));
    }
    match e.object_mut_quiet() {
        Some(Object::Str(s)) => Ok(s),
        _ => unreachable!("made raw above"),
    }
}

fn sparse_max() -> usize {
    HLL_SPARSE_MAX_BYTES.count()
}

// ===== PFADD =====

/// PFADD: 1 if the HLL was created or a register changed, else 0.
pub fn op_pfadd(db: &mut Db, key: &[u8], elements: &[Bytes], now: i64) -> Result<bool, CmdError> {
    let max = sparse_max();
    // Redis counts one change for creating the key and one per element that changed a register.
    let mark = db.dirty();
    let Some(mut e) = db.modify(key, now) else {
        let mut v = hll::new_sparse();
        let mut changes = 1;
        for ele in elements {
            changes += u64::from(hll::add(&mut v, ele, max)?);
        }
        hll::invalidate(&mut v);
        db.set(key, raw(v), None, now);
        db.count_changes_since(mark, changes);
        return Ok(true);
    };
    let v = hll_mut(&mut e)?;
    let mut changes = 0;
    let mut result = Ok(());
    for ele in elements {
        match hll::add(v, ele, max) {
            Ok(changed) => changes += u64::from(changed),
            Err(c) => {
                result = Err(c);
                break;
            }
        }
    }
    let updated = changes > 0;
    if updated && result.is_ok() {
        hll::invalidate(v);
    }
    if updated {
        e.mark_changed();
    }
    drop(e);
    if updated {
        // A corrupt value found midway is an error Redis counts no change for.
        db.count_changes_since(mark, if result.is_ok() { changes } else { 0 });
    }
    result?;
    Ok(updated)
}

/// PFADD key [element ...] → 1 if the approximated cardinality may have changed, else 0.
fn pfadd(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let args = cx.args;
    let updated = op_pfadd(cx.db(), &args[1], &args[2..], now)?;
    if updated {
        cx.notify(notify::STRING, "pfadd", &args[1]);
    }
    cx.out.int(i64::from(updated));
    Ok(())
}

// ===== PFCOUNT =====

/// PFCOUNT of one key: the cached cardinality, or a fresh estimate stored back in the cache.
pub fn op_pfcount_one(db: &mut Db, key: &[u8], now: i64) -> Result<u64, CmdError> {
    // A read lookup first (hit/miss accounting, as Redis's lookupKeyRead), then the update.
    if db.get(key, now).is_none() {
        return Ok(0);
    }
    let Some(mut e) = db.modify(key, now) else {
        return Ok(0);
    };
    let v = hll_mut(&mut e)?;
    if let Some(card) = hll::cached(v) {
        return Ok(card);
    }
    let card = hll::count(v)?;
    hll::set_cached(v, card);
    e.mark_changed();
    Ok(card)
}

/// The merged registers of the HLLs at `keys` (missing keys are empty), whether any is dense,
/// and the first failure with its position in `keys`; with what was looked up (Redis stops at
/// the first failing key).
pub fn op_merge_part(db: &mut Db, keys: &[Bytes], now: i64) -> (Merged, Looked) {
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    let mut looked = Looked::default();
    for (i, k) in keys.iter().enumerate() {
        let e = db.get(k, now);
        looked.found.push(e.is_some());
        let Some(e) = e else { continue };
        let r = check(e.value()).and_then(|v| {
            dense |= hll::encoding(v) == hll::DENSE;
            Ok(hll::merge_into(&mut max, v)?)
        });
        if let Err(err) = r {
            looked.failed = true;
            return ((max, dense, Some((i, err))), looked);
        }
    }
    ((max, dense, None), looked)
}

/// One share's merged registers, whether any was dense, and its first failure (see
/// [`op_merge_part`]).
pub type Merged = (Vec<u8>, bool, Option<(usize, CmdError)>);

/// The registers of `keys` merged across shards, whether any source was dense, or the error of
/// the first failing key in argument order.
async fn merge_keys(cx: &mut KeysCtx<'_>, keys: &[Bytes]) -> Result<(Vec<u8>, bool), CmdError> {
    let (db, now) = (cx.db, cx.now);
    let parts = cx
        .scatter_reads(
            keys,
            |k| k,
            move |s, part| op_merge_part(s.db_mut(db), part, now),
        )
        .await;
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    let mut first_err: Option<(usize, CmdError)> = None;
    for (idx, (regs, d, err)) in parts {
        if let Some((i, e)) = err {
            let global = idx[i];
            if first_err.as_ref().is_none_or(|(g, _)| global < *g) {
                first_err = Some((global, e));
            }
        }
        dense |= d;
        for (m, r) in max.iter_mut().zip(regs) {
            *m = (*m).max(r);
        }
    }
    match first_err {
        Some((_, e)) => Err(e),
        None => Ok((max, dense)),
    }
}

/// PFCOUNT key [key ...] → the approximated cardinality of the union of the HLLs.
fn pfcount<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let card = if args.len() == 2 {
            let (db, now) = (cx.db, cx.now);
            let k = args[1].clone();
            cx.on(&args[1], move |s| op_pfcount_one(s.db_mut(db), &k, now))
                .await?
        } else {
            let (max, _) = merge_keys(cx, &args[1..]).await?;
            hll::estimate(&hll::raw_histogram(&max))
        };
        cx.out.int(card as i64);
        Ok(())
    })
}

// ===== PFMERGE =====

/// PFMERGE's write: raises the destination's registers to `max` (creating it, sparse, if absent;
/// converting it to dense first when a source was dense).
pub fn op_pfmerge_store(
    db: &mut Db,
    key: &[u8],
    max: &[u8],
    dense: bool,
    now: i64,
) -> Result<(), CmdError> {
    let limit = sparse_max();
    let write = |v: &mut Vec<u8>| -> Result<(), CmdError> {
        if dense && hll::encoding(v) == hll::SPARSE {
            *v = hll::to_dense(v)?;
        }
        for (i, &m) in max.iter().enumerate() {
            if m != 0 {
                // As Redis, a corrupt sparse destination is not reported here.
                let _ = hll::set(v, i, m, limit);
            }
        }
        hll::invalidate(v);
        Ok(())
    };
    let Some(mut e) = db.modify(key, now) else {
        let mut v = hll::new_sparse();
        write(&mut v)?;
        db.set(key, raw(v), None, now);
        db.notify(notify::STRING, "pfadd", key);
        return Ok(());
    };
    let v = hll_mut(&mut e)?;
    let r = write(v);
    e.mark_changed();
    drop(e);
    if r.is_ok() {
        db.notify(notify::STRING, "pfadd", key);
    }
    r
}

/// PFMERGE destkey [sourcekey ...] → OK; destkey holds the union of itself and the sources.
fn pfmerge<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let (max, dense) = merge_keys(cx, &args[1..]).await?;
        let (db, now) = (cx.db, cx.now);
        let k = args[1].clone();
        cx.on(&args[1], move |s| {
            op_pfmerge_store(s.db_mut(db), &k, &max, dense, now)
        })
        .await?;
        cx.out.ok();
        Ok(())
    })
}

// ===== PFDEBUG / PFSELFTEST =====

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key.
fn pfdebug(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let sub = &args[1];
    let now = cx.now;
    let Some(mut e) = cx.shard.db_mut(cx.db).modify(&args[2], now) else {
        return Err(CmdError::msg("ERR The specified key does not exist"));
    };
    let v = hll_mut(&mut e)?;
    if eq_ci(sub, "getreg") {
        if hll::encoding(v) == hll::SPARSE {
            *v = hll::to_dense(v)?;
            e.mark_changed();
        }
        let regs = hll::registers(check(e.value())?)?;
        cx.out.array(regs.len());
        for r in regs {
            cx.out.int(i64::from(r));
        }
    } else if eq_ci(sub, "decode") {
        if hll::encoding(v) != hll::SPARSE {
            return Err(CmdError::msg("ERR HLL encoding is not sparse"));
        }
        cx.out.bulk(hll::decode_sparse(v).as_bytes());
    } else if eq_ci(sub, "encoding") {
        cx.out.simple(if hll::encoding(v) == hll::DENSE {
            "dense"
        } else {
            "sparse"
        });
    } else if eq_ci(sub, "todense") {
        let conv = hll::encoding(v) == hll::SPARSE;
        if conv {
            *v = hll::to_dense(v)?;
            e.mark_changed();
        }
        cx.out.int(i64::from(conv));
    } else {
        return Err(CmdError::Msg(
            format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                strata_node::error::echo(sub)
            )
            .into(),
        ));
    }
    Ok(())
}

/// PFSELFTEST → OK, or a TESTFAILED error. The test is a few hundred milliseconds of computation
/// that touches no key: it runs on a worker thread of its own (one for the process, started by the
/// first call; calls queue for it) while the connection waits, so the clients sharing the
/// connection's thread are not held up as Redis holds up all of its clients.
fn pfselftest<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    type Job = (
        u64,
        usize,
        futures_channel::oneshot::Sender<Result<(), String>>,
    );
    static WORKER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    let seed = (cx.now as u64) | 1;
    Box::pin(async move {
        let worker = WORKER.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("pfselftest".into())
                .spawn(move || {
                    for (seed, sparse_max, reply) in rx {
                        let _ = reply.send(hll::self_test(sparse_max, xorshift(seed)));
                    }
                });
            // Without the thread the job's sender is dropped with it, and the caller answers below.
            drop(spawned);
            tx
        });
        let (tx, rx) = futures_channel::oneshot::channel();
        let queued = worker.send((seed, sparse_max(), tx)).is_ok();
        match if queued { rx.await.ok() } else { None } {
            Some(Ok(())) => {
                cx.out.ok();
                Ok(())
            }
            Some(Err(msg)) => Err(CmdError::Msg(msg.into())),
            None => Err(CmdError::msg(
                "ERR PFSELFTEST could not start its worker thread",
            )),
        }
    })
}

/// The test's random numbers (xorshift32 output of a 64-bit state).
fn xorshift(mut state: u64) -> impl FnMut() -> u32 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    #[test]
    fn pfadd_pfcount_pfmerge() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["pfadd", "h"]), ":1");
        assert_eq!(run(&mut s, &["pfadd", "h"]), ":0");
        assert_eq!(run(&mut s, &["pfadd", "h", "a", "b", "c"]), ":1");
        assert_eq!(run(&mut s, &["pfadd", "h", "a"]), ":0");
        assert_eq!(run(&mut s, &["pfcount", "h"]), ":3");
        assert_eq!(run(&mut s, &["pfadd", "g", "c", "d"]), ":1");
        assert_eq!(run(&mut s, &["pfcount", "h", "g", "nokey"]), ":4");
        assert_eq!(run(&mut s, &["pfmerge", "m", "h", "g"]), "+OK");
        assert_eq!(run(&mut s, &["pfcount", "m"]), ":4");
        assert_eq!(run(&mut s, &["object", "encoding", "m"]), "$3:raw");
        assert_eq!(run(&mut s, &["pfdebug", "encoding", "m"]), "+sparse");
        assert_eq!(run(&mut s, &["pfdebug", "todense", "m"]), ":1");
        assert_eq!(run(&mut s, &["pfdebug", "encoding", "m"]), "+dense");
        assert_eq!(run(&mut s, &["pfcount", "m"]), ":4");
        assert_eq!(
            run(&mut s, &["pfdebug", "decode", "m"]),
            "-ERR HLL encoding is not sparse"
        );
    }

    #[test]
    fn pfcount_writes_only_to_refresh_the_cache() {
        let mut s = shard();
        run(&mut s, &["pfadd", "h", "a", "b"]);
        s.db_mut(0).record_events(true);
        assert_eq!(run(&mut s, &["pfcount", "h"]), ":2");
        assert_eq!(s.db_mut(0).drain_events().len(), 1);
        assert_eq!(run(&mut s, &["pfcount", "h"]), ":2");
        assert_eq!(run(&mut s, &["pfadd", "h", "a"]), ":0");
        assert_eq!(run(&mut s, &["pfcount", "h", "h"]), ":2");
        assert!(s.db_mut(0).drain_events().is_empty());
    }

    #[test]
    fn invalid_values() {
        let mut s = shard();
        run(&mut s, &["set", "str", "hello"]);
        run(&mut s, &["set", "int", "12"]);
        run(&mut s, &["sadd", "set", "a"]);
        let not_hll = "-WRONGTYPE Key is not a valid HyperLogLog string value.";
        assert_eq!(run(&mut s, &["pfadd", "str", "a"]), not_hll);
        assert_eq!(run(&mut s, &["pfcount", "int"]), not_hll);
        assert!(run(&mut s, &["pfcount", "set"]).starts_with("-WRONGTYPE Operation"));
        assert_eq!(run(&mut s, &["pfmerge", "x", "str"]), not_hll);
        assert_eq!(
            run(&mut s, &["pfdebug", "getreg", "nokey"]),
            "-ERR The specified key does not exist"
        );
    }
}
