//! Set commands (Redis's t_set.c): SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SRANDMEMBER,
//! SPOP, SMOVE, SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE, SSCAN.
//!
//! The representation lives in [`strata_core::set`]. Invariants kept here:
//! * every write goes through [`Db`] (`set`, `delete`, or the `EntryMut` guard of `Db::modify`),
//!   and a set emptied by a write is deleted, as Redis does; a write that changes nothing does not
//!   touch the value (no key event);
//! * reads (SRANDMEMBER included) never restructure a set;
//! * the multi-key commands (SMOVE and the SINTER/SUNION/SDIFF family) are keyed commands
//!   ([`KeysCtx`]): atomic wherever their keys live. They first read every source's type and size
//!   (so WRONGTYPE wins as in Redis 7.0: any source of the wrong type fails the command, even after
//!   a missing one), then read the sources in slices of [`SLICE`] members, test candidates against
//!   the other sources a slice at a time, and build the result where the command runs. Across
//!   shards every step is one short message, so a huge SINTER never occupies a shard for long;
//! * reply order follows Redis where Redis's order is defined: an intset iterates ascending, so
//!   SMEMBERS, SINTER (in the smallest set's order) and the results Redis builds as a new set
//!   (SUNION, SDIFF, SPOP/SRANDMEMBER of the whole set) come out ascending whenever Redis's do.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::num::parse_i64;
use strata_core::set::Member;
use strata_core::{Entry, Object, Set, Value, ValueRef};
use strata_resp::ReplyBuf;
use strata_shard::{notify, Db};

use strata_node::args::eq_ci;
use strata_node::args::parse_cursor;
use strata_node::ctx::ShardCtx;
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::{in_order, until_error, KeysCtx, Looked, SLICE};
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec, Parts};

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
        "set", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

// ===== helpers =====

/// The set stored in `e`, or WRONGTYPE.
fn as_set(e: &Entry) -> Result<&Set, CmdError> {
    match e.value() {
        ValueRef::Obj(Object::Set(s)) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// The set at `key` for a read (counts as an access), None if missing.
fn read_set<'d>(db: &'d mut Db, key: &[u8], now: i64) -> Result<Option<&'d Set>, CmdError> {
    db.get(key, now).map(as_set).transpose()
}

fn set_value(s: Set) -> Value {
    Value::Obj(Object::Set(s))
}

/// A small, fast random generator seeded from the shard's (the shard's own cannot be borrowed
/// while its database is).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn reply_member(out: &mut ReplyBuf, m: Member<'_>) {
    match m {
        Member::Int(i) => out.bulk_int(i),
        Member::Str(s) => out.bulk(s),
    }
}

/// Replies with every member as a RESP3 set (RESP2 array), in the set's order.
fn reply_set(out: &mut ReplyBuf, s: &Set) {
    out.set(s.len());
    for m in s.iter() {
        reply_member(out, m);
    }
}

// ===== single-key commands =====

/// SADD: members added. Creates the set; an intset converts on a non-integer or past
/// `set-max-intset-entries`.
pub fn op_sadd(db: &mut Db, key: &[u8], members: &[Bytes], now: i64) -> Result<usize, CmdError> {
    let added = op_sadd_quiet(db, key, members, now)?;
    if added > 0 {
        db.notify(notify::SET, "sadd", key);
    }
    Ok(added)
}

/// Counts one change per member added, as Redis does.
fn op_sadd_quiet(db: &mut Db, key: &[u8], members: &[Bytes], now: i64) -> Result<usize, CmdError> {
    let mark = db.dirty();
    let added = match db.modify(key, now) {
        Some(mut e) => {
            let s = as_set(&e)?;
            if members.iter().all(|m| s.contains(m)) {
                return Ok(0);
            }
            let Some(Object::Set(s)) = e.object_mut() else {
                return Err(CmdError::WrongType);
            };
            Some(members.iter().filter(|m| s.insert(m)).count())
        }
        None => None,
    };
    let added = added.unwrap_or_else(|| {
        let mut s = Set::new();
        let added = members.iter().filter(|m| s.insert(m)).count();
        db.set(key, set_value(s), None, now);
        added
    });
    db.count_changes_since(mark, added as u64);
    Ok(added)
}

/// SADD key member [member ...] → the number of members added.
fn sadd(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let n = op_sadd(cx.db(), &args[1], &args[2..], now)?;
    cx.out.int(n as i64);
    Ok(())
}

/// SREM: members removed; the key is deleted when the set empties. Counts one change per member
/// removed (the deletion is not one more), as Redis does.
pub fn op_srem(db: &mut Db, key: &[u8], members: &[Bytes], now: i64) -> Result<usize, CmdError> {
    let mark = db.dirty();
    let (removed, empty) = {
        let Some(mut e) = db.modify(key, now) else {
            return Ok(0);
        };
        let s = as_set(&e)?;
        if !members.iter().any(|m| s.contains(m)) {
            return Ok(0);
        }
        let Some(Object::Set(s)) = e.object_mut() else {
            return Err(CmdError::WrongType);
        };
        let removed = members.iter().filter(|m| s.remove(m)).count();
        (removed, s.is_empty())
    };
    db.notify(notify::SET, "srem", key);
    if empty {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    }
    db.count_changes_since(mark, removed as u64);
    Ok(removed)
}

/// SREM key member [member ...] → the number of members removed.
fn srem(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let n = op_srem(cx.db(), &args[1], &args[2..], now)?;
    cx.out.int(n as i64);
    Ok(())
}

/// SCARD key → the number of members (0 for a missing key).
fn scard(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let n = read_set(cx.db(), &args[1], now)?.map_or(0, Set::len);
    cx.out.int(n as i64);
    Ok(())
}

/// SISMEMBER key member → 1 or 0.
fn sismember(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let found = read_set(cx.db(), &args[1], now)?.is_some_and(|s| s.contains(&args[2]));
    cx.out.int(i64::from(found));
    Ok(())
}

/// SMISMEMBER key member [member ...] → 1 or 0 per member.
fn smismember(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let found: Vec<bool> = match read_set(cx.db(), &args[1], now)? {
        Some(s) => args[2..].iter().map(|m| s.contains(m)).collect(),
        None => vec![false; args.len() - 2],
    };
    cx.out.array(found.len());
    for f in found {
        cx.out.int(i64::from(f));
    }
    Ok(())
}

/// SMEMBERS key → every member (a set reply; ascending for an intset).
fn smembers(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let ShardCtx { shard, db, out, .. } = cx;
    match read_set(shard.db_mut(*db), &args[1], now)? {
        Some(s) => reply_set(out, s),
        None => out.set(0),
    }
    Ok(())
}

/// SRANDMEMBER key [count]: one random member (nil if missing), or with a count, Redis's cases:
/// negative = that many picks with repeats; count ≥ size = the whole set; otherwise `count`
/// distinct members (copy-and-discard when count is close to the size, else sampling). A read:
/// nothing is restructured.
fn srandmember(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => {
            let l = parse_i64(a).ok_or(CmdError::NotInteger)?;
            if l == i64::MIN {
                return Err(CmdError::msg("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
            }
            Some(l)
        }
    };
    let mut rng = Rng(cx.shard.rand());
    let mut rand = || rng.next();
    let ShardCtx { shard, db, out, .. } = cx;
    let set = read_set(shard.db_mut(*db), &args[1], now)?;
    let Some(count) = count else {
        match set.and_then(|s| s.random(&mut rand)) {
            Some(m) => reply_member(out, m),
            None => out.null(),
        }
        return Ok(());
    };
    let Some(s) = set else {
        out.array(0);
        return Ok(());
    };
    let size = s.len() as u64;
    if count < 0 {
        let n = count.unsigned_abs();
        if !strata_node::args::picks_allowed(n, out) {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        out.array(n as usize);
        for _ in 0..n {
            if let Some(m) = s.random(&mut rand) {
                reply_member(out, m);
            }
            if out.over_room() {
                break;
            }
        }
        return Ok(());
    }
    let count = count as u64;
    if count >= size {
        out.array(s.len());
        for m in s.iter() {
            reply_member(out, m);
        }
        return Ok(());
    }
    let picked: Vec<Member<'_>> = if count * 3 > size {
        // Close to the whole set: copy it and drop random members.
        let mut all: Vec<Member<'_>> = s.iter().collect();
        while all.len() as u64 > count {
            let i = (rand() % all.len() as u64) as usize;
            all.swap_remove(i);
        }
        all
    } else {
        let mut seen = HashSet::new();
        let mut picked = Vec::new();
        while (picked.len() as u64) < count {
            if let Some(m) = s.random(&mut rand) {
                if seen.insert(m) {
                    picked.push(m);
                }
            }
        }
        picked
    };
    out.array(picked.len());
    for m in picked {
        reply_member(out, m);
    }
    Ok(())
}

/// SPOP key [count]: removes and returns one random member (nil if missing), or up to `count`
/// as a set reply, with Redis's strategies (whole set: delete the key; few: pop one by one; most:
/// keep a random remainder in a new set and return the old one). An emptied set is deleted.
fn spop(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(l) if l >= 0 => Some(l as u64),
            _ => return Err(CmdError::msg("ERR value is out of range, must be positive")),
        },
    };
    let mut rng = Rng(cx.shard.rand());
    let mut rand = || rng.next();
    let key = &args[1];
    // Propagated as what it did (Redis 7.0): SREM of the members popped (batches of 1024), or
    // DEL when a count takes the whole set.
    let prop = strata_shard::propagate::on();
    let mut members: Vec<Bytes> = Vec::new();
    let ShardCtx { shard, db, out, .. } = cx;
    let dbi = *db;
    let db = shard.db_mut(dbi);
    let mark = db.dirty();
    let (empty, popped) = {
        let Some(mut e) = db.modify(key, now) else {
            match count {
                None => out.null(),
                Some(_) => out.set(0),
            }
            return Ok(());
        };
        let size = as_set(&e)?.len() as u64;
        if count == Some(0) {
            out.set(0);
            return Ok(());
        }
        match count {
            None => {
                let Some(Object::Set(s)) = e.object_mut() else {
                    return Err(CmdError::WrongType);
                };
                match s.pop_random(&mut rand) {
                    Some(m) => {
                        if prop {
                            members.push(Bytes::copy_from_slice(&m));
                        }
                        out.bulk(&m)
                    }
                    None => out.null(),
                }
                (s.is_empty(), 1)
            }
            Some(count) if count >= size => {
                reply_set(out, as_set(&e)?);
                (true, size)
            }
            Some(count) => {
                let remaining = size - count;
                let Some(Object::Set(s)) = e.object_mut() else {
                    return Err(CmdError::WrongType);
                };
                if remaining * 5 > count {
                    out.set(count as usize);
                    for _ in 0..count {
                        if let Some(m) = s.pop_random(&mut rand) {
                            if prop {
                                members.push(Bytes::copy_from_slice(&m));
                            }
                            out.bulk(&m);
                        }
                    }
                } else {
                    let mut keep = Set::new();
                    for _ in 0..remaining {
                        if let Some(m) = s.pop_random(&mut rand) {
                            keep.insert(&m);
                        }
                    }
                    reply_set(out, s);
                    if prop {
                        members.extend(s.iter().map(|m| match m {
                            Member::Int(i) => Bytes::from(i.to_string()),
                            Member::Str(s) => Bytes::copy_from_slice(s),
                        }));
                    }
                    e.set_value(set_value(keep));
                }
                (false, count)
            }
        }
    };
    db.notify(notify::SET, "spop", key);
    if empty {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    }
    // One change per member popped, as Redis counts them.
    db.count_changes_since(mark, popped);
    if prop {
        strata_shard::propagate::with_current(|o| {
            o.suppress();
            if count.is_some() && empty {
                o.emit(vec![Bytes::from_static(b"DEL"), key.clone()]);
            } else {
                for chunk in members.chunks(1024) {
                    let mut argv = vec![Bytes::from_static(b"SREM"), key.clone()];
                    argv.extend(chunk.iter().cloned());
                    o.emit(argv);
                }
            }
        });
    }
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the cursor is parsed first, then the key is
/// looked up (missing: an empty scan), then the options. An intset is returned whole.
fn sscan(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let cursor = parse_cursor(&args[2]).ok_or(CmdError::msg("ERR invalid cursor"))?;
    let ShardCtx { shard, db, out, .. } = cx;
    let Some(s) = read_set(shard.db_mut(*db), &args[1], now)? else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let mut count = 10usize;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 3;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        if eq_ci(&args[i], "count") {
            let n = parse_i64(&args[i + 1]).ok_or(CmdError::NotInteger)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if eq_ci(&args[i], "match") {
            pattern = Some(&args[i + 1]).filter(|p| p.as_ref() != b"*");
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut found: Vec<Member<'_>> = Vec::new();
    let next = s.scan(cursor, count, |m| {
        if pattern.is_none_or(|p| m.matches(p)) {
            found.push(m);
        }
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len());
    for m in found {
        reply_member(out, m);
    }
    Ok(())
}

// ===== multi-key commands =====

/// A source's type and size as seen by a multi-key command: None = missing.
type Info = Result<Option<usize>, CmdError>;

/// Reads the type and size of each of `keys` on this shard. `access` counts the lookups as reads
/// (SINTER, SUNION, SDIFF and their STORE forms), otherwise they are write lookups (SMOVE), as in
/// Redis.
///
/// Like Redis, it stops at the first key of another type (the command fails there, and the keys
/// after it are not looked up: no miss counted or announced for them). Keys of the same command on
/// other shards are looked up in their own part, whatever this one found.
pub fn op_info(db: &mut Db, keys: &[Bytes], now: i64, access: bool) -> Vec<Info> {
    until_error(keys, |k| {
        if access {
            db.get(k, now).map(|e| as_set(e).map(Set::len)).transpose()
        } else {
            // A write lookup: touches the clock, no hit/miss (the guard changes nothing).
            db.modify(k, now)
                .map(|e| as_set(&e).map(Set::len))
                .transpose()
        }
    })
}

/// Up to [`SLICE`] members of the set at `key` from position `pos` (see [`Set::slice`]).
pub fn op_slice(db: &mut Db, key: &[u8], pos: usize, now: i64) -> (Vec<Box<[u8]>>, Option<usize>) {
    match db.peek(key, now).map(as_set) {
        Some(Ok(s)) => s.slice(pos, SLICE),
        _ => (Vec::new(), None),
    }
}

/// For each set of `keys`, which of `cands` it contains (missing keys contain nothing).
pub fn op_contains(db: &mut Db, keys: &[Bytes], cands: &[Box<[u8]>], now: i64) -> Vec<Vec<bool>> {
    keys.iter()
        .map(|k| match db.peek(k, now).map(as_set) {
            Some(Ok(s)) => cands.iter().map(|c| s.contains(c)).collect(),
            _ => vec![false; cands.len()],
        })
        .collect()
}

/// The type and size of every key, in order, up to the first of another type (read lookups, with
/// `access`, count as Redis counts them: see [`KeysCtx::scatter_reads`]).
async fn raw_infos(cx: &mut KeysCtx<'_>, keys: &[Bytes], access: bool) -> Vec<Info> {
    let (db, now) = (cx.db, cx.now);
    let parts = if access {
        cx.scatter_reads(
            keys,
            |k| k,
            move |s, part| Looked::with(op_info(s.db_mut(db), part, now, true)),
        )
        .await
    } else {
        cx.scatter(
            keys,
            |k| k,
            move |s, part| op_info(s.db_mut(db), part, now, false),
        )
        .await
    };
    in_order(keys.len(), parts)
}

/// The type and size of every source, in order; the first WRONGTYPE fails the command.
async fn infos(
    cx: &mut KeysCtx<'_>,
    keys: &[Bytes],
    access: bool,
) -> Result<Vec<Option<usize>>, CmdError> {
    raw_infos(cx, keys, access).await.into_iter().collect()
}

/// The slice of the set at `key` from position `pos` (one message in Across mode).
async fn read_slice(
    cx: &mut KeysCtx<'_>,
    key: &Bytes,
    pos: usize,
) -> (Vec<Box<[u8]>>, Option<usize>) {
    let (db, now) = (cx.db, cx.now);
    let k = key.clone();
    cx.on(key, move |s| op_slice(s.db_mut(db), &k, pos, now))
        .await
}

/// Keeps the candidates contained (`want` = true) or not contained (`want` = false) in every one
/// of `others`, each source asked once per slice.
async fn filter(
    cx: &mut KeysCtx<'_>,
    others: &[Bytes],
    cands: Vec<Box<[u8]>>,
    want: bool,
) -> Vec<Box<[u8]>> {
    if others.is_empty() || cands.is_empty() {
        return cands;
    }
    let (db, now) = (cx.db, cx.now);
    let shared = Arc::new(cands);
    let c = shared.clone();
    let parts = cx
        .scatter(
            others,
            |k| k,
            move |s, part| op_contains(s.db_mut(db), part, &c, now),
        )
        .await;
    let masks = in_order(others.len(), parts);
    let cands = Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone());
    cands
        .into_iter()
        .enumerate()
        .filter(|(i, _)| {
            masks
                .iter()
                .all(|m| m.get(*i).copied().unwrap_or(false) == want)
        })
        .map(|(_, c)| c)
        .collect()
}

/// The intersection of `keys`, in the smallest set's order, stopping at `limit` members (0 = no
/// limit). Empty if any source is missing. The sources are read lookups, for SINTERSTORE too.
async fn intersect(
    cx: &mut KeysCtx<'_>,
    keys: &[Bytes],
    limit: usize,
) -> Result<Vec<Box<[u8]>>, CmdError> {
    let sizes = infos(cx, keys, true).await?;
    if sizes.iter().any(Option::is_none) {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let first = keys[order[0]].clone();
    let others: Vec<Bytes> = order[1..]
        .iter()
        .map(|&i| keys[i].clone())
        .filter(|k| *k != first)
        .collect();
    // Test each slice of the smallest set as it is read; stop once the limit is reached.
    let mut result = Vec::new();
    let mut pos = Some(0);
    while let Some(p) = pos {
        let (slice, next) = read_slice(cx, &first, p).await;
        result.extend(filter(cx, &others, slice, true).await);
        if limit > 0 && result.len() >= limit {
            result.truncate(limit);
            break;
        }
        pos = next;
    }
    Ok(result)
}

/// SUNION/SDIFF of `keys` as a new set (built as Redis builds it: an intset until a member says
/// otherwise, so its order is Redis's for integer results). The sources are read lookups, also
/// for the STORE forms, as in Redis (a missing one counts a miss and raises "keymiss").
async fn union_or_diff(cx: &mut KeysCtx<'_>, keys: &[Bytes], diff: bool) -> Result<Set, CmdError> {
    let sizes = infos(cx, keys, true).await?;
    let mut out = Set::new();
    if diff {
        if sizes[0].is_none() {
            return Ok(out);
        }
        let others: Vec<Bytes> = keys[1..]
            .iter()
            .zip(&sizes[1..])
            .filter(|(_, s)| s.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let mut pos = Some(0);
        while let Some(p) = pos {
            let (slice, next) = read_slice(cx, &keys[0], p).await;
            for m in filter(cx, &others, slice, false).await {
                out.insert(&m);
            }
            pos = next;
        }
    } else {
        for (k, size) in keys.iter().zip(&sizes) {
            let mut pos = size.map(|_| 0);
            while let Some(p) = pos {
                let (slice, next) = read_slice(cx, k, p).await;
                for m in slice {
                    out.insert(&m);
                }
                pos = next;
            }
        }
    }
    Ok(out)
}

/// Stores `set` at `dst` (replacing any value, whatever its type), or deletes `dst` when the set
/// is empty; replies with the set's size.
async fn store(cx: &mut KeysCtx<'_>, dst: &Bytes, set: Set, event: &'static str) -> CmdResult {
    let (db, now) = (cx.db, cx.now);
    let n = set.len();
    let k = dst.clone();
    cx.on(dst, move |s| {
        let db = s.db_mut(db);
        if set.is_empty() {
            if db.delete(&k, now) {
                db.notify(notify::GENERIC, "del", &k);
            }
        } else {
            db.set(&k, set_value(set), None, now);
            db.notify(notify::SET, event, &k);
        }
    })
    .await;
    cx.out.int(n as i64);
    Ok(())
}

fn collect_set(members: Vec<Box<[u8]>>) -> Set {
    let mut s = Set::new();
    for m in members {
        s.insert(&m);
    }
    s
}

/// SINTER key [key ...] → the members common to every set (a set reply).
fn sinter<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let keys = &cx.args[1..];
        let members = intersect(cx, keys, 0).await?;
        cx.out.set(members.len());
        for m in members {
            cx.out.bulk(&m);
        }
        Ok(())
    })
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit] → the size of the intersection, counting stops
/// at `limit` (0 = no limit).
fn sintercard<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let numkeys = match parse_i64(&args[1]) {
            Some(n) if n > 0 => n as u64,
            _ => return Err(CmdError::msg("ERR numkeys should be greater than 0")),
        };
        if numkeys > (args.len() - 2) as u64 {
            return Err(CmdError::msg(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        let end = 2 + numkeys as usize;
        let mut limit = 0usize;
        let mut i = end;
        while i < args.len() {
            if eq_ci(&args[i], "limit") && i + 1 < args.len() {
                limit = match parse_i64(&args[i + 1]) {
                    Some(l) if l >= 0 => usize::try_from(l).unwrap_or(usize::MAX),
                    _ => return Err(CmdError::msg("ERR LIMIT can't be negative")),
                };
                i += 2;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        let n = intersect(cx, &args[2..end], limit).await?.len();
        cx.out.int(n as i64);
        Ok(())
    })
}

/// SINTERSTORE destination key [key ...] → the size of the intersection stored at destination.
fn sinterstore<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let members = intersect(cx, &args[2..], 0).await?;
        store(cx, &args[1], collect_set(members), "sinterstore").await
    })
}

/// SUNION key [key ...] → the members of any set.
fn sunion<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let keys = &cx.args[1..];
        let s = union_or_diff(cx, keys, false).await?;
        reply_set(cx.out, &s);
        Ok(())
    })
}

/// SUNIONSTORE destination key [key ...] → the size of the union stored at destination.
fn sunionstore<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let s = union_or_diff(cx, &args[2..], false).await?;
        store(cx, &args[1], s, "sunionstore").await
    })
}

/// SDIFF key [key ...] → the members of the first set in none of the others.
fn sdiff<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let keys = &cx.args[1..];
        let s = union_or_diff(cx, keys, true).await?;
        reply_set(cx.out, &s);
        Ok(())
    })
}

/// SDIFFSTORE destination key [key ...] → the size of the difference stored at destination.
fn sdiffstore<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let s = union_or_diff(cx, &args[2..], true).await?;
        store(cx, &args[1], s, "sdiffstore").await
    })
}

/// SMOVE's step on the source: removes `m`, deleting an emptied set; true if it was there.
pub fn op_smove_out(db: &mut Db, key: &[u8], m: &[u8], now: i64) -> bool {
    let mark = db.dirty();
    let (removed, empty) = {
        let Some(mut e) = db.modify(key, now) else {
            return false;
        };
        if !as_set(&e).is_ok_and(|s| s.contains(m)) {
            return false;
        }
        let Some(Object::Set(s)) = e.object_mut() else {
            return false;
        };
        (s.remove(m), s.is_empty())
    };
    db.notify(notify::SET, "srem", key);
    if empty {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    }
    // One change (the member's removal), emptied or not; SMOVE's SADD counts the other.
    db.count_changes_since(mark, 1);
    removed
}

/// SMOVE source destination member → 1 if moved, 0 if not in source (or source missing, whatever
/// destination holds); WRONGTYPE if source, or an existing destination, is not a set.
fn smove<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let (db, now) = (cx.db, cx.now);
        let (src, dst, m) = (args[1].clone(), args[2].clone(), args[3].clone());
        // A missing source answers 0 before the destination's type is looked at.
        let found = raw_infos(cx, &args[1..3], false).await;
        if matches!(found[0], Ok(None)) {
            cx.out.int(0);
            return Ok(());
        }
        for i in found {
            i?;
        }
        let moved = if src == dst {
            let (k, m) = (src.clone(), m.clone());
            cx.on(&src, move |s| {
                op_contains(s.db_mut(db), &[k], &[Box::from(m.as_ref())], now)[0][0]
            })
            .await
        } else {
            let (k, mm) = (src.clone(), m.clone());
            let removed = cx
                .on(&src, move |s| op_smove_out(s.db_mut(db), &k, &mm, now))
                .await;
            if removed {
                let k = dst.clone();
                cx.on(&dst, move |s| op_sadd(s.db_mut(db), &k, &[m], now))
                    .await?;
            }
            removed
        };
        cx.out.int(i64::from(moved));
        Ok(())
    })
}

// ===== the table =====

const SADD_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const SADD_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const SADD_HISTORY: &[(&str, &str)] = &[("2.4.0", "Accepts multiple `member` arguments.")];
const SREM_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const SREM_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const SREM_HISTORY: &[(&str, &str)] = &[("2.4.0", "Accepts multiple `member` arguments.")];
const SCARD_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const SCARD_ARGS: &[Arg] = &[Arg::key("key", 0)];
const SISMEMBER_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const SISMEMBER_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member")];
const SMISMEMBER_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SMISMEMBER_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const SMEMBERS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SMEMBERS_ARGS: &[Arg] = &[Arg::key("key", 0)];
const SRANDMEMBER_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SRANDMEMBER_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count").since("2.6.0").optional(),
];
const SRANDMEMBER_HISTORY: &[(&str, &str)] = &[("2.6.0", "Added the optional `count` argument.")];
const SPOP_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const SPOP_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count").since("3.2.0").optional(),
];
const SPOP_HISTORY: &[(&str, &str)] = &[("3.2.0", "Added the `count` argument.")];
const SMOVE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE)),
    KeySpec::at(2, KeyFlags::RW.or(KeyFlags::INSERT)),
];
const SMOVE_ARGS: &[Arg] = &[
    Arg::key("source", 0),
    Arg::key("destination", 1),
    Arg::string("member"),
];
const SINTER_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SINTER_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const SINTERCARD_KEYS: &[KeySpec] = &[KeySpec::numkeys(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SINTERCARD_ARGS: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::integer("limit").with_token("LIMIT").optional(),
];
const SINTERSTORE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE)),
    KeySpec::range(2, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const SINTERSTORE_ARGS: &[Arg] = &[Arg::key("destination", 0), Arg::key("key", 1).multiple()];
const SUNION_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SUNION_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const SUNIONSTORE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::range(2, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const SUNIONSTORE_ARGS: &[Arg] = &[Arg::key("destination", 0), Arg::key("key", 1).multiple()];
const SDIFF_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SDIFF_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const SDIFFSTORE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::range(2, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const SDIFFSTORE_ARGS: &[Arg] = &[Arg::key("destination", 0), Arg::key("key", 1).multiple()];
const SSCAN_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const SSCAN_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("cursor"),
    Arg::pattern("pattern").with_token("MATCH").optional(),
    Arg::integer("count").with_token("COUNT").optional(),
];

/// The family's commands.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("sadd", -3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), SADD_KEYS,
        "Add one or more members to a set", "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        Handler::Shard(sadd))
        .with_parts(Parts::Members { first: 2, step: 1 })
        .with_args(SADD_ARGS)
        .with_history(SADD_HISTORY),
    cmd("srem", -3, Flags::WRITE.or(Flags::FAST), SREM_KEYS,
        "Remove one or more members from a set", "1.0.0",
        "O(N) where N is the number of members to be removed.",
        Handler::Shard(srem))
        .with_parts(Parts::Members { first: 2, step: 1 })
        .with_args(SREM_ARGS)
        .with_history(SREM_HISTORY),
    cmd("scard", 2, Flags::READONLY.or(Flags::FAST), SCARD_KEYS,
        "Get the number of members in a set", "1.0.0",
        "O(1)",
        Handler::Shard(scard))
        .with_parts(Parts::Meta)
        .with_args(SCARD_ARGS),
    cmd("sismember", 3, Flags::READONLY.or(Flags::FAST), SISMEMBER_KEYS,
        "Determine if a given value is a member of a set", "1.0.0",
        "O(1)",
        Handler::Shard(sismember))
        .with_parts(Parts::Members { first: 2, step: 1 })
        .with_args(SISMEMBER_ARGS),
    cmd("smismember", -3, Flags::READONLY.or(Flags::FAST), SMISMEMBER_KEYS,
        "Returns the membership associated with the given elements for a set", "6.2.0",
        "O(N) where N is the number of elements being checked for membership",
        Handler::Shard(smismember))
        .with_parts(Parts::Members { first: 2, step: 1 })
        .with_args(SMISMEMBER_ARGS),
    cmd("smembers", 2, Flags::READONLY, SMEMBERS_KEYS,
        "Get all the members in a set", "1.0.0",
        "O(N) where N is the set cardinality.",
        Handler::Shard(smembers))
        .with_args(SMEMBERS_ARGS)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("srandmember", -2, Flags::READONLY, SRANDMEMBER_KEYS,
        "Get one or multiple random members from a set", "1.0.0",
        "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        Handler::Shard(srandmember))
        .with_args(SRANDMEMBER_ARGS)
        .with_history(SRANDMEMBER_HISTORY)
        .with_tips(&["nondeterministic_output"]),
    cmd("spop", -2, Flags::WRITE.or(Flags::FAST), SPOP_KEYS,
        "Remove and return one or multiple random members from a set", "1.0.0",
        "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        Handler::Shard(spop))
        .with_args(SPOP_ARGS)
        .with_history(SPOP_HISTORY)
        .with_tips(&["nondeterministic_output"]),
    cmd("smove", 4, Flags::WRITE.or(Flags::FAST), SMOVE_KEYS,
        "Move a member from one set to another", "1.0.0",
        "O(1)",
        Handler::Keys(smove))
        .with_parts(Parts::Members { first: 3, step: 1 })
        .with_args(SMOVE_ARGS),
    cmd("sinter", -2, Flags::READONLY, SINTER_KEYS,
        "Intersect multiple sets", "1.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        Handler::Keys(sinter))
        .with_args(SINTER_ARGS)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("sintercard", -3, Flags::READONLY, SINTERCARD_KEYS,
        "Intersect multiple sets and return the cardinality of the result", "7.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        Handler::Keys(sintercard))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(SINTERCARD_ARGS),
    cmd("sinterstore", -3, Flags::WRITE.or(Flags::DENYOOM), SINTERSTORE_KEYS,
        "Intersect multiple sets and store the resulting set in a key", "1.0.0",
        "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
        Handler::Keys(sinterstore))
        .with_args(SINTERSTORE_ARGS),
    cmd("sunion", -2, Flags::READONLY, SUNION_KEYS,
        "Add multiple sets", "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
        Handler::Keys(sunion))
        .with_args(SUNION_ARGS)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("sunionstore", -3, Flags::WRITE.or(Flags::DENYOOM), SUNIONSTORE_KEYS,
        "Add multiple sets and store the resulting set in a key", "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
        Handler::Keys(sunionstore))
        .with_args(SUNIONSTORE_ARGS),
    cmd("sdiff", -2, Flags::READONLY, SDIFF_KEYS,
        "Subtract multiple sets", "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
        Handler::Keys(sdiff))
        .with_args(SDIFF_ARGS)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("sdiffstore", -3, Flags::WRITE.or(Flags::DENYOOM), SDIFFSTORE_KEYS,
        "Subtract multiple sets and store the resulting set in a key", "1.0.0",
        "O(N) where N is the total number of elements in all given sets.",
        Handler::Keys(sdiffstore))
        .with_args(SDIFFSTORE_ARGS),
    cmd("sscan", -3, Flags::READONLY, SSCAN_KEYS,
        "Incrementally iterate Set elements", "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        Handler::Shard(sscan))
        .with_args(SSCAN_ARGS)
        .with_tips(&["nondeterministic_output"]),
];

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    #[test]
    fn add_remove_and_delete_when_empty() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["sadd", "k", "3", "1", "2", "1"]), ":3");
        assert_eq!(run(&mut s, &["smembers", "k"]), "*3[$1:1,$1:2,$1:3]");
        assert_eq!(run(&mut s, &["object", "encoding", "k"]), "$6:intset");
        assert_eq!(run(&mut s, &["srem", "k", "1", "2", "3", "4"]), ":3");
        assert_eq!(run(&mut s, &["exists", "k"]), ":0");
        assert_eq!(run(&mut s, &["set", "str", "v"]), "+OK");
        assert!(run(&mut s, &["sadd", "str", "a"]).starts_with("-WRONGTYPE"));
    }

    #[test]
    fn keyed_commands_run_in_place() {
        let mut s = shard();
        run(&mut s, &["sadd", "a", "1", "2", "3"]);
        run(&mut s, &["sadd", "b", "2", "3", "4"]);
        assert_eq!(run(&mut s, &["sinter", "a", "b"]), "*2[$1:2,$1:3]");
        assert_eq!(
            run(&mut s, &["sunion", "a", "b"]),
            "*4[$1:1,$1:2,$1:3,$1:4]"
        );
        assert_eq!(run(&mut s, &["sdiff", "a", "b"]), "*1[$1:1]");
        assert_eq!(
            run(&mut s, &["sintercard", "2", "a", "b", "limit", "1"]),
            ":1"
        );
        assert_eq!(run(&mut s, &["sinterstore", "d", "a", "b"]), ":2");
        assert_eq!(run(&mut s, &["sinterstore", "d", "a", "nokey"]), ":0");
        assert_eq!(run(&mut s, &["exists", "d"]), ":0");
        assert_eq!(run(&mut s, &["smove", "a", "b", "1"]), ":1");
        assert_eq!(run(&mut s, &["smove", "a", "b", "1"]), ":0");
        assert_eq!(run(&mut s, &["smembers", "b"]), "*4[$1:1,$1:2,$1:3,$1:4]");
    }

    #[test]
    fn spop_and_srandmember_counts() {
        let mut s = shard();
        run(&mut s, &["sadd", "k", "a", "b", "c", "d", "e", "f"]);
        assert_eq!(
            run(&mut s, &["srandmember", "k", "-3"])
                .matches('$')
                .count(),
            3
        );
        assert_eq!(
            run(&mut s, &["srandmember", "k", "4"]).matches('$').count(),
            4
        );
        assert_eq!(
            run(&mut s, &["srandmember", "k", "10"])
                .matches('$')
                .count(),
            6
        );
        assert_eq!(run(&mut s, &["scard", "k"]), ":6");
        // Few (pop one by one), then most (keep a random remainder).
        assert_eq!(run(&mut s, &["spop", "k", "1"]).matches('$').count(), 1);
        assert_eq!(run(&mut s, &["spop", "k", "4"]).matches('$').count(), 4);
        assert_eq!(run(&mut s, &["scard", "k"]), ":1");
        assert_eq!(run(&mut s, &["spop", "k", "5"]).matches('$').count(), 1);
        assert_eq!(run(&mut s, &["exists", "k"]), ":0");
        assert_eq!(
            run(&mut s, &["spop", "k", "-1"]),
            "-ERR value is out of range, must be positive"
        );
    }
}
