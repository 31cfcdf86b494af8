//! Sorted-set handlers: argument parsing as Redis 7.0 does it (same error, same order), the work on
//! a [`ZSet`], and the replies.

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::glob::glob_match;
use strata_core::limits::ZSET_MAX_LISTPACK_ENTRIES;
use strata_core::num::{format_d2string, format_g17, parse_hex_f64, parse_i64};
use strata_core::{Entry, Object, Value, ValueRef, ZSet};
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::{notify, Db};

use strata_node::args::eq_ci;
use strata_node::args::{parse_cursor, parse_scan};
use strata_node::ctx::{Park, ShardCtx, TimeoutReply};
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::KeysCtx;

/// `ERR resulting score is not a number (NaN)`
const NAN_ERR: CmdError = CmdError::msg("ERR resulting score is not a number (NaN)");
const NOT_FLOAT_RANGE: CmdError = CmdError::msg("ERR min or max is not a float");
const NOT_LEX_RANGE: CmdError = CmdError::msg("ERR min or max not valid string range item");

/// An element as handed between shards and to the reply: member and score.
pub type Elem = (Bytes, f64);

// ===== parsing =====

/// Parses a score like Redis's `getDoubleFromObject` (strtod): the whole argument, no leading
/// space, no NaN, and no overflow or underflow to a value the text does not spell (`1e400`).
pub fn parse_score(s: &[u8]) -> Option<f64> {
    if let Some(v) = short_integer_score(s) {
        return Some(v);
    }
    parse_score_text(s)
}

/// The common case of [`parse_score`]: an optional sign and at most 15 decimal digits, a value
/// below 2^53 that strtod returns exactly (so `-0` is -0.0, as strtod gives).
fn short_integer_score(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |v, d| v * 10 + i64::from(d - b'0')) as f64;
    Some(if neg { -v } else { v })
}

/// [`parse_score`] for every other text: strtod's full grammar (hex floats, exponents, inf).
fn parse_score_text(s: &[u8]) -> Option<f64> {
    if s.first().is_some_and(|c| !c.is_ascii_whitespace()) {
        if let Some(v) = parse_hex_f64(s) {
            return v.is_finite().then_some(v);
        }
    }
    let v = strata_core::num::parse_f64(s)?;
    let text = std::str::from_utf8(s).ok()?.to_ascii_lowercase();
    let spelled_inf = text.trim_start_matches(['+', '-']).starts_with("inf");
    if v.is_infinite() && !spelled_inf {
        return None;
    }
    if v == 0.0 && text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        // strtod underflow (ERANGE with a zero result), e.g. "1e-400". A mantissa of zeros with
        // any exponent is a genuine zero; only nonzero mantissa digits signal underflow.
        let mantissa = text.split(['e']).next().unwrap_or("");
        if mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
            return None;
        }
    }
    Some(v)
}

/// Parses one bound of a score range (`zslParseRange`): `(` for exclusive, then what strtod
/// accepts (leading spaces, the empty string as 0, overflow to ±inf); NaN is rejected.
fn parse_score_bound(s: &[u8]) -> Result<(f64, bool), CmdError> {
    let (excl, rest) = match s.first() {
        Some(b'(') => (true, &s[1..]),
        _ => (false, s),
    };
    // Redis's strtod reads the bound as a C string: it ends at the first NUL byte.
    let rest = strata_node::args::c_string(rest);
    let text = std::str::from_utf8(rest).map_err(|_| NOT_FLOAT_RANGE)?;
    let text = text.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    if text.is_empty() {
        return Ok((0.0, excl));
    }
    let lower = text.to_ascii_lowercase();
    let v = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        "nan" => return Err(NOT_FLOAT_RANGE),
        _ if lower.trim_start_matches(['+', '-']).starts_with("0x") => {
            parse_hex_f64(text.as_bytes()).ok_or(NOT_FLOAT_RANGE)?
        }
        _ => {
            if lower.contains(['x', 'n', 'i']) || lower.ends_with('e') {
                return Err(NOT_FLOAT_RANGE);
            }
            text.parse::<f64>().map_err(|_| NOT_FLOAT_RANGE)?
        }
    };
    Ok((v, excl))
}

/// A score range `[min, max]`, each end possibly exclusive.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let (min, minex) = parse_score_bound(min)?;
        let (max, maxex) = parse_score_bound(max)?;
        Ok(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    /// The ascending ranks of the elements in range.
    fn ranks(&self, z: &ZSet) -> std::ops::Range<usize> {
        let lo = z.count_while(|_, s| {
            if self.minex {
                s <= self.min
            } else {
                s < self.min
            }
        });
        let hi = z.count_while(|_, s| {
            if self.maxex {
                s < self.max
            } else {
                s <= self.max
            }
        });
        lo..hi.max(lo)
    }
}

/// One end of a lex range.
#[derive(Clone, Debug)]
enum Lex {
    NegInf,
    PosInf,
    Incl(Bytes),
    Excl(Bytes),
}

impl Lex {
    fn parse(s: &Bytes) -> Result<Lex, CmdError> {
        match s.first() {
            Some(b'+') if s.len() == 1 => Ok(Lex::PosInf),
            Some(b'-') if s.len() == 1 => Ok(Lex::NegInf),
            Some(b'[') => Ok(Lex::Incl(s.slice(1..))),
            Some(b'(') => Ok(Lex::Excl(s.slice(1..))),
            _ => Err(NOT_LEX_RANGE),
        }
    }
}

/// A lex range (`zslParseLexRange`).
#[derive(Clone, Debug)]
pub struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    pub fn parse(min: &Bytes, max: &Bytes) -> Result<LexRange, CmdError> {
        Ok(LexRange {
            min: Lex::parse(min)?,
            max: Lex::parse(max)?,
        })
    }

    fn ranks(&self, z: &ZSet) -> std::ops::Range<usize> {
        let lo = z.count_while(|m, _| match &self.min {
            Lex::NegInf => false,
            Lex::PosInf => true,
            Lex::Incl(b) => m < &b[..],
            Lex::Excl(b) => m <= &b[..],
        });
        let hi = z.count_while(|m, _| match &self.max {
            Lex::NegInf => false,
            Lex::PosInf => true,
            Lex::Incl(b) => m <= &b[..],
            Lex::Excl(b) => m < &b[..],
        });
        lo..hi.max(lo)
    }
}

// ===== reading and writing the value =====

/// The sorted set at `key` (None if absent; WRONGTYPE for other types). Counts as an access.
pub fn read<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<&'a ZSet>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Obj(Object::ZSet(z)) => Ok(Some(z)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Runs `f` on the sorted set at `key` if `wants(z)` says there is something to change, then
/// deletes the key if `f` emptied it, announcing `event` (then "del") as Redis does, and counting
/// the changes `changes` reads from the result (the deletion is not one more). None when the key
/// is absent.
fn update<R>(
    db: &mut Db,
    key: &[u8],
    now: i64,
    event: &'static str,
    wants: impl FnOnce(&ZSet) -> bool,
    f: impl FnOnce(&mut ZSet) -> R,
    changes: impl FnOnce(&R) -> u64,
) -> Result<Option<R>, CmdError> {
    let mark = db.dirty();
    let Some(mut e) = db.modify(key, now) else {
        return Ok(None);
    };
    match e.value() {
        ValueRef::Obj(Object::ZSet(z)) => {
            if !wants(z) {
                return Ok(Some(f(&mut ZSet::new())));
            }
        }
        _ => return Err(CmdError::WrongType),
    }
    let Some(Object::ZSet(z)) = e.object_mut() else {
        return Err(CmdError::WrongType);
    };
    let r = f(z);
    let empty = z.is_empty();
    drop(e);
    db.notify(notify::ZSET, event, key);
    if empty {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    }
    db.count_changes_since(mark, changes(&r));
    Ok(Some(r))
}

/// Stores `elems` at `key` as a new sorted set (replacing any value and TTL), or deletes the key
/// when there are none, as Redis's *STORE commands do. The encoding is what Redis's
/// `zsetConvertToListpackIfNeeded` picks for the result.
pub fn store(db: &mut Db, key: &[u8], elems: &[Elem], event: &'static str, now: i64) {
    if elems.is_empty() {
        if db.delete(key, now) {
            db.notify(notify::GENERIC, "del", key);
        }
        return;
    }
    let longest = elems.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = if elems.len() <= strata_core::limits::ZSET_MAX_LISTPACK_ENTRIES.count()
        && longest <= strata_core::limits::ZSET_MAX_LISTPACK_VALUE.count()
    {
        ZSet::new()
    } else {
        ZSet::new_skiplist()
    };
    for (m, s) in elems {
        z.add(m, *s);
    }
    db.set(key, Value::Obj(Object::ZSet(z)), None, now);
    db.notify(notify::ZSET, event, key);
}

/// Stores the result of ZRANGESTORE: built by adding one element at a time, so it converts
/// exactly where ZADD would. As in Redis, a result longer than `zset-max-listpack-entries` is a
/// skiplist from the start (it keeps the sign of a `-0` score, which a listpack drops).
fn store_by_adding(db: &mut Db, key: &[u8], elems: &[Elem], now: i64) {
    if elems.is_empty() {
        if db.delete(key, now) {
            db.notify(notify::GENERIC, "del", key);
        }
        return;
    }
    let mut z = if elems.len() > ZSET_MAX_LISTPACK_ENTRIES.count() {
        ZSet::new_skiplist()
    } else {
        ZSet::for_first_member(0)
    };
    for (m, s) in elems {
        z.add(m, *s);
    }
    db.set(key, Value::Obj(Object::ZSet(z)), None, now);
    db.notify(notify::ZSET, "zrangestore", key);
}

// ===== replies =====

/// Elements, with scores as Redis sends them: RESP2 one flat array, RESP3 [member, score] pairs.
pub fn reply_elems(out: &mut ReplyBuf, elems: &[Elem], withscores: bool) {
    let resp3 = out.proto == Protocol::Resp3;
    out.array(if withscores && !resp3 {
        elems.len() * 2
    } else {
        elems.len()
    });
    for (m, s) in elems {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(*s);
        }
    }
}

fn collect(z: &ZSet, ranks: std::ops::Range<usize>, rev: bool) -> Vec<Elem> {
    let mut v = Vec::with_capacity(ranks.len().min(z.len()));
    z.range(ranks, rev, |m, s| v.push((Bytes::copy_from_slice(m), s)));
    v
}

// ===== ZADD / ZINCRBY =====

#[derive(Clone, Copy, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...] and ZINCRBY key incr
/// member (ZADD ... INCR): the number added (or added + changed with CH), or with INCR the new
/// score (null when a condition stopped it).
fn zadd_generic(cx: &mut ShardCtx<'_>, incr: bool) -> CmdResult {
    let args = cx.args;
    let key = &args[1];
    let mut f = AddFlags {
        incr,
        ..AddFlags::default()
    };
    let mut idx = 2;
    while idx < args.len() {
        let o = &args[idx];
        if eq_ci(o, "nx") {
            f.nx = true;
        } else if eq_ci(o, "xx") {
            f.xx = true;
        } else if eq_ci(o, "ch") {
            f.ch = true;
        } else if eq_ci(o, "incr") {
            f.incr = true;
        } else if eq_ci(o, "gt") {
            f.gt = true;
        } else if eq_ci(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = &args[idx..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if [f.gt, f.lt, f.nx].iter().filter(|&&x| x).count() > 1 {
        return Err(CmdError::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(CmdError::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks_exact(2) {
        pairs.push((parse_score(&p[0]).ok_or(CmdError::NotFloat)?, &p[1]));
    }
    let now = cx.now;
    let db = cx.shard.db_mut(cx.db);
    let mark = db.dirty();
    // A write lookup, as Redis's: no hit or miss counted, no "keymiss" event.
    let exists = match db.peek(key, now).map(Entry::value) {
        Some(ValueRef::Obj(Object::ZSet(_))) => true,
        Some(_) => return Err(CmdError::WrongType),
        None if f.xx => false,
        None => {
            let z = ZSet::for_first_member(pairs[0].1.len());
            db.set(key, Value::Obj(Object::ZSet(z)), None, now);
            true
        }
    };
    let (mut added, mut updated, mut processed, mut last) = (0, 0, 0, 0.0);
    if exists {
        let mut e = db.modify(key, now).ok_or(CmdError::NoSuchKey)?;
        // A change only if a member is added or rescored (ZADD of the same scores, ZINCRBY by 0,
        // NX/XX/GT/LT refusals leave WATCH, tracking and `dirty` alone, as in Redis).
        let Some(Object::ZSet(z)) = e.object_mut_quiet() else {
            return Err(CmdError::WrongType);
        };
        for (score, member) in pairs {
            match z.score(member) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let mut score = score;
                    if f.incr {
                        score += cur;
                        if score.is_nan() {
                            return Err(NAN_ERR);
                        }
                    }
                    if (f.lt && score >= cur) || (f.gt && score <= cur) {
                        continue;
                    }
                    processed += 1;
                    last = score;
                    if score != cur {
                        z.rescore(member, cur, score);
                        updated += 1;
                    }
                }
                None if !f.xx => {
                    z.insert_new(member, score);
                    added += 1;
                    processed += 1;
                    last = score;
                }
                None => {}
            }
        }
        if added + updated > 0 {
            e.mark_changed();
        }
    }
    if added + updated > 0 {
        db.notify(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
        // One change per member added or rescored (creating the key is not one more).
        db.count_changes_since(mark, (added + updated) as u64);
    }
    if f.incr {
        if processed > 0 {
            cx.out.double(last);
        } else {
            cx.out.null();
        }
    } else {
        cx.out.int(if f.ch { added + updated } else { added });
    }
    Ok(())
}

pub fn zadd(cx: &mut ShardCtx<'_>) -> CmdResult {
    zadd_generic(cx, false)
}

pub fn zincrby(cx: &mut ShardCtx<'_>) -> CmdResult {
    zadd_generic(cx, true)
}

// ===== single-key reads =====

/// ZCARD key → the number of members.
pub fn zcard(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = read(cx.shard.db_mut(cx.db), &cx.args[1], now)?.map_or(0, |z| z.len());
    cx.out.int(n as i64);
    Ok(())
}

/// ZSCORE key member → the score, or null.
pub fn zscore(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let s = read(cx.shard.db_mut(cx.db), &cx.args[1], now)?.and_then(|z| z.score(&cx.args[2]));
    match s {
        Some(s) => cx.out.double(s),
        None => cx.out.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...] → a score or null per member.
pub fn zmscore(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let args = cx.args;
    let scores: Vec<Option<f64>> = match read(cx.shard.db_mut(cx.db), &args[1], now)? {
        Some(z) => args[2..].iter().map(|m| z.score(m)).collect(),
        None => vec![None; args.len() - 2],
    };
    cx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => cx.out.double(s),
            None => cx.out.null(),
        }
    }
    Ok(())
}

fn rank_generic(cx: &mut ShardCtx<'_>, rev: bool) -> CmdResult {
    let now = cx.now;
    let args = cx.args;
    let r = read(cx.shard.db_mut(cx.db), &args[1], now)?.and_then(|z| {
        z.rank(&args[2])
            .map(|(r, _)| if rev { z.len() - 1 - r } else { r })
    });
    match r {
        Some(r) => cx.out.int(r as i64),
        None => cx.out.null(),
    }
    Ok(())
}

/// ZRANK key member → the 0-based rank, or null.
pub fn zrank(cx: &mut ShardCtx<'_>) -> CmdResult {
    rank_generic(cx, false)
}

/// ZREVRANK key member → the 0-based rank from the highest score, or null.
pub fn zrevrank(cx: &mut ShardCtx<'_>) -> CmdResult {
    rank_generic(cx, true)
}

/// ZCOUNT key min max → the number of members with a score in range.
pub fn zcount(cx: &mut ShardCtx<'_>) -> CmdResult {
    let range = ScoreRange::parse(&cx.args[2], &cx.args[3])?;
    let now = cx.now;
    let n = read(cx.shard.db_mut(cx.db), &cx.args[1], now)?.map_or(0, |z| range.ranks(z).len());
    cx.out.int(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max → the number of members in the lex range.
pub fn zlexcount(cx: &mut ShardCtx<'_>) -> CmdResult {
    let range = LexRange::parse(&cx.args[2], &cx.args[3])?;
    let now = cx.now;
    let n = read(cx.shard.db_mut(cx.db), &cx.args[1], now)?.map_or(0, |z| range.ranks(z).len());
    cx.out.int(n as i64);
    Ok(())
}

// ===== ZRANGE and its family =====

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Auto,
    Fwd,
    Rev,
}

enum Bounds {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// A parsed ZRANGE-style request.
pub struct RangeReq {
    bounds: Bounds,
    rev: bool,
    offset: i64,
    limit: i64,
    withscores: bool,
}

/// Parses `key min max [options]` starting at `args[at]` (the key) like `zrangeGenericCommand`.
fn parse_range(
    args: &[Bytes],
    at: usize,
    store: bool,
    mut by: By,
    mut dir: Dir,
) -> Result<RangeReq, CmdError> {
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if !store && eq_ci(a, "withscores") {
            withscores = true;
        } else if eq_ci(a, "limit") && left >= 2 {
            offset = parse_i64(&args[j + 1]).ok_or(CmdError::NotInteger)?;
            limit = parse_i64(&args[j + 2]).ok_or(CmdError::NotInteger)?;
            j += 2;
        } else if dir == Dir::Auto && eq_ci(a, "rev") {
            dir = Dir::Rev;
        } else if by == By::Auto && eq_ci(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && eq_ci(a, "byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = dir == Dir::Rev;
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (&args[at + 1], &args[at + 2]);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let bounds = match by {
        By::Score => Bounds::Score(ScoreRange::parse(lo, hi)?),
        By::Lex => Bounds::Lex(LexRange::parse(lo, hi)?),
        _ => Bounds::Rank(
            parse_i64(lo).ok_or(CmdError::NotInteger)?,
            parse_i64(hi).ok_or(CmdError::NotInteger)?,
        ),
    };
    Ok(RangeReq {
        bounds,
        rev,
        offset,
        limit,
        withscores,
    })
}

/// Ascending ranks `start..=end` of a rank request (negative from the end), clamped as Redis does.
fn rank_range(len: usize, start: i64, end: i64) -> std::ops::Range<usize> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    if start > end || start >= len {
        return 0..0;
    }
    end = end.min(len - 1);
    start as usize..end as usize + 1
}

impl RangeReq {
    /// The elements the request selects, in reply order.
    /// The ascending ranks the request selects, and whether they are replied highest first.
    fn select(&self, z: &ZSet) -> (std::ops::Range<usize>, bool) {
        let ranks = match &self.bounds {
            Bounds::Rank(start, end) => {
                let r = rank_range(z.len(), *start, *end);
                if self.rev {
                    // Ranks counted from the highest score.
                    let n = z.len();
                    return (n - r.end..n - r.start, true);
                }
                return (r, false);
            }
            Bounds::Score(s) => s.ranks(z),
            Bounds::Lex(l) => l.ranks(z),
        };
        if self.offset < 0 {
            return (0..0, false);
        }
        let offset = usize::try_from(self.offset).unwrap_or(usize::MAX);
        let take = if self.limit < 0 {
            usize::MAX
        } else {
            usize::try_from(self.limit).unwrap_or(usize::MAX)
        };
        let n = ranks.len().saturating_sub(offset).min(take);
        if self.rev {
            let end = ranks.end - offset.min(ranks.len());
            (end - n..end, true)
        } else {
            let start = ranks.start + offset.min(ranks.len());
            (start..start + n, false)
        }
    }

    /// The elements the request selects, in reply order.
    fn run(&self, z: &ZSet) -> Vec<Elem> {
        let (ranks, rev) = self.select(z);
        collect(z, ranks, rev)
    }
}

/// Replies with the elements straight from the set (no copy of the range first).
fn range_reply(cx: &mut ShardCtx<'_>, by: By, dir: Dir) -> CmdResult {
    let req = parse_range(cx.args, 1, false, by, dir)?;
    let (args, now) = (cx.args, cx.now);
    let Some(z) = read(cx.shard.db_mut(cx.db), &args[1], now)? else {
        cx.out.array(0);
        return Ok(());
    };
    let (ranks, rev) = req.select(z);
    let out = &mut *cx.out;
    let resp3 = out.proto == Protocol::Resp3;
    let pairs = req.withscores;
    out.array(if pairs && !resp3 {
        ranks.len() * 2
    } else {
        ranks.len()
    });
    z.range(ranks, rev, |m, s| {
        if pairs && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if pairs {
            out.double(s);
        }
    });
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Auto, Dir::Auto)
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Rank, Dir::Rev)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Score, Dir::Fwd)
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Score, Dir::Rev)
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Lex, Dir::Fwd)
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(cx: &mut ShardCtx<'_>) -> CmdResult {
    range_reply(cx, By::Lex, Dir::Rev)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] → the number stored.
pub fn zrangestore<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now, args) = (cx.db, cx.now, cx.args);
        let req = parse_range(args, 2, true, By::Auto, Dir::Auto)?;
        let src = args[2].clone();
        let elems = cx
            .on(&args[2], move |s| {
                read(s.db_mut(db), &src, now).map(|z| z.map(|z| req.run(z)).unwrap_or_default())
            })
            .await?;
        let n = elems.len();
        let dst = args[1].clone();
        cx.on(&args[1], move |s| {
            store_by_adding(s.db_mut(db), &dst, &elems, now)
        })
        .await;
        cx.out.int(n as i64);
        Ok(())
    })
}

// ===== removal =====

/// ZREM key member [member ...] → the number removed.
pub fn zrem(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let args = cx.args;
    let members = &args[2..];
    let n = update(
        cx.shard.db_mut(cx.db),
        &args[1],
        now,
        "zrem",
        |z| members.iter().any(|m| z.score(m).is_some()),
        |z| members.iter().filter(|m| z.remove(m).is_some()).count(),
        |n| *n as u64,
    )?;
    cx.out.int(n.unwrap_or(0) as i64);
    Ok(())
}

fn remrange(cx: &mut ShardCtx<'_>, by: By) -> CmdResult {
    let args = cx.args;
    let bounds = match by {
        By::Score => Bounds::Score(ScoreRange::parse(&args[2], &args[3])?),
        By::Lex => Bounds::Lex(LexRange::parse(&args[2], &args[3])?),
        _ => Bounds::Rank(
            parse_i64(&args[2]).ok_or(CmdError::NotInteger)?,
            parse_i64(&args[3]).ok_or(CmdError::NotInteger)?,
        ),
    };
    let ranks = |z: &ZSet| match &bounds {
        Bounds::Rank(a, b) => rank_range(z.len(), *a, *b),
        Bounds::Score(s) => s.ranks(z),
        Bounds::Lex(l) => l.ranks(z),
    };
    let now = cx.now;
    let event = match by {
        By::Score => "zremrangebyscore",
        By::Lex => "zremrangebylex",
        _ => "zremrangebyrank",
    };
    let n = update(
        cx.shard.db_mut(cx.db),
        &args[1],
        now,
        event,
        |z| !ranks(z).is_empty(),
        |z| {
            let r = ranks(z);
            z.remove_ranks(r)
        },
        |n| *n as u64,
    )?;
    cx.out.int(n.unwrap_or(0) as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop → the number removed.
pub fn zremrangebyrank(cx: &mut ShardCtx<'_>) -> CmdResult {
    remrange(cx, By::Rank)
}

/// ZREMRANGEBYSCORE key min max → the number removed.
pub fn zremrangebyscore(cx: &mut ShardCtx<'_>) -> CmdResult {
    remrange(cx, By::Score)
}

/// ZREMRANGEBYLEX key min max → the number removed.
pub fn zremrangebylex(cx: &mut ShardCtx<'_>) -> CmdResult {
    remrange(cx, By::Lex)
}

// ===== pops =====

/// Pops up to `count` elements from the low (`max` false) or high end; None if the key is absent.
pub fn op_pop(
    db: &mut Db,
    key: &[u8],
    max: bool,
    count: usize,
    now: i64,
) -> Result<Option<Vec<Elem>>, CmdError> {
    update(
        db,
        key,
        now,
        if max { "zpopmax" } else { "zpopmin" },
        |_| count > 0,
        |z| {
            let n = count.min(z.len());
            let ranks = if max { z.len() - n..z.len() } else { 0..n };
            let elems = collect(z, ranks, max);
            for (m, _) in &elems {
                z.remove(m);
            }
            elems
        },
        |elems| elems.len() as u64,
    )
}

fn pop_generic(cx: &mut ShardCtx<'_>, max: bool) -> CmdResult {
    let args = cx.args;
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => match parse_i64(c) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::msg("ERR value is out of range, must be positive")),
        },
        None => None,
    };
    let now = cx.now;
    let elems = op_pop(
        cx.shard.db_mut(cx.db),
        &args[1],
        max,
        count.unwrap_or(1),
        now,
    )?
    .unwrap_or_default();
    let nested = count.is_some() && cx.out.proto == Protocol::Resp3;
    if nested {
        cx.out.array(elems.len());
        for (m, s) in &elems {
            cx.out.array(2);
            cx.out.bulk(m);
            cx.out.double(*s);
        }
    } else {
        // Without a count (or in RESP2) the reply is one flat array, even in RESP3.
        cx.out.array(elems.len() * 2);
        for (m, s) in &elems {
            cx.out.bulk(m);
            cx.out.double(*s);
        }
    }
    Ok(())
}

/// ZPOPMIN key [count] → the popped members and scores.
pub fn zpopmin(cx: &mut ShardCtx<'_>) -> CmdResult {
    pop_generic(cx, false)
}

/// ZPOPMAX key [count]
pub fn zpopmax(cx: &mut ShardCtx<'_>) -> CmdResult {
    pop_generic(cx, true)
}

/// Parses `numkeys` as ZMPOP does: an integer ≥ 1, else `msg`.
fn parse_positive(arg: &[u8], msg: &'static str) -> Result<usize, CmdError> {
    match parse_i64(arg) {
        Some(n) if n >= 1 => Ok(n as usize),
        _ => Err(CmdError::msg(msg)),
    }
}

/// Parses ZMPOP's and BZMPOP's `numkeys key [key ...] MIN|MAX [COUNT count]` from `args[numkeys_idx]`
/// on, in Redis's order: the key range, MAX (true) or MIN, and the count (1 by default).
fn parse_mpop(
    args: &[Bytes],
    numkeys_idx: usize,
) -> Result<(std::ops::Range<usize>, bool, usize), CmdError> {
    let numkeys = parse_positive(&args[numkeys_idx], "ERR numkeys should be greater than 0")?;
    let where_idx = numkeys.saturating_add(numkeys_idx + 1);
    let Some(w) = args.get(where_idx) else {
        return Err(CmdError::Syntax);
    };
    let max = if eq_ci(w, "min") {
        false
    } else if eq_ci(w, "max") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ci(&args[j], "count") && j + 1 < args.len() {
            count = Some(parse_positive(
                &args[j + 1],
                "ERR count should be greater than 0",
            )?);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((numkeys_idx + 1..where_idx, max, count.unwrap_or(1)))
}

/// Pops up to `count` members from the first non-empty sorted set among `args[keys]` and replies
/// `[key, [[member, score] ...]]`; false (nothing written) if every key is empty. A key of another
/// type met before a sorted set fails with WRONGTYPE.
async fn mpop_first(
    cx: &mut KeysCtx<'_>,
    keys: std::ops::Range<usize>,
    max: bool,
    count: usize,
) -> Result<bool, CmdError> {
    let (db, now, args) = (cx.db, cx.now, cx.args);
    for key in &args[keys] {
        let k = key.clone();
        let popped = strata_node::value::skip_wrong_type(
            cx.woken,
            cx.on(key, move |s| op_pop(s.db_mut(db), &k, max, count, now))
                .await,
        )?;
        if let Some(elems) = popped {
            // Propagated as the pop it was (Redis 7.0: ZPOPMIN/ZPOPMAX key count).
            let n = elems.len();
            cx.propagate_as(|| {
                vec![
                    Bytes::from_static(zpop_name(max)),
                    key.clone(),
                    Bytes::from(n.to_string()),
                ]
            });
            let out = &mut *cx.out;
            out.array(2);
            out.bulk(key);
            out.array(elems.len());
            for (m, s) in &elems {
                out.array(2);
                out.bulk(m);
                out.double(*s);
            }
            return Ok(true);
        }
    }
    Ok(false)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] → [key, [[member, score] ...]] from the first
/// non-empty key, or null.
pub fn zmpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (keys, max, count) = parse_mpop(cx.args, 1)?;
        if !mpop_first(cx, keys, max, count).await? {
            cx.out.null_array();
        }
        Ok(())
    })
}

// ===== blocking pops =====
//
// Each tries its non-blocking form; when every key is empty it parks on them (see
// `strata_node::ctx::Park`) and runs again once one of them is written, until its timeout, as the
// blocking list commands do.

/// The non-blocking pop a pop of the `max` end is propagated as.
fn zpop_name(max: bool) -> &'static [u8] {
    match max {
        true => b"ZPOPMAX",
        false => b"ZPOPMIN",
    }
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout → [key, member, score] from the first non-empty key.
async fn bzpop(cx: &mut KeysCtx<'_>, max: bool) -> CmdResult {
    let args = cx.args;
    let deadline = strata_node::args::parse_timeout(&args[args.len() - 1], cx.now)?;
    let keys = 1..args.len() - 1;
    let (db, now) = (cx.db, cx.now);
    for key in &args[keys.clone()] {
        let k = key.clone();
        let popped = strata_node::value::skip_wrong_type(
            cx.woken,
            cx.on(key, move |s| op_pop(s.db_mut(db), &k, max, 1, now))
                .await,
        )?;
        if let Some((m, score)) = popped.and_then(|mut e| e.pop()) {
            cx.propagate_as(|| vec![Bytes::from_static(zpop_name(max)), key.clone()]);
            cx.out.array(3);
            cx.out.bulk(key);
            cx.out.bulk(&m);
            cx.out.double(score);
            return Ok(());
        }
    }
    cx.park = Some(Park {
        keys: args[keys].to_vec(),
        deadline,
        timeout: TimeoutReply::NullArray,
        no_block: TimeoutReply::NullArray,
    });
    Ok(())
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(bzpop(cx, false))
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(bzpop(cx, true))
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP that waits. Its arguments are
/// checked before its timeout, as in Redis.
pub fn bzmpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (keys, max, count) = parse_mpop(cx.args, 2)?;
        let deadline = strata_node::args::parse_timeout(&cx.args[1], cx.now)?;
        if !mpop_first(cx, keys.clone(), max, count).await? {
            cx.park = Some(Park {
                keys: cx.args[keys].to_vec(),
                deadline,
                timeout: TimeoutReply::NullArray,
                no_block: TimeoutReply::NullArray,
            });
        }
        Ok(())
    })
}

// ===== ZRANDMEMBER =====

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let now = cx.now;
    if args.len() == 2 {
        let mut r = cx.shard.rand();
        let db = cx.shard.db_mut(cx.db);
        match read(db, &args[1], now)? {
            Some(z) if !z.is_empty() => {
                r %= z.len() as u64;
                let m = z.get(r as usize).map(|(m, _)| Bytes::copy_from_slice(m));
                match m {
                    Some(m) => cx.out.bulk(&m),
                    None => cx.out.null(),
                }
            }
            _ => cx.out.null(),
        }
        return Ok(());
    }
    let l = match parse_i64(&args[2]) {
        Some(i64::MIN) => {
            return Err(CmdError::msg(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ))
        }
        Some(l) => l,
        None => return Err(CmdError::NotInteger),
    };
    let withscores = match args.len() {
        3 => false,
        4 if eq_ci(&args[3], "withscores") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return Err(CmdError::msg("ERR value is out of range"));
            }
            true
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut seed = cx.shard.rand() | 1;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let db = cx.shard.db_mut(cx.db);
    let Some(z) = read(db, &args[1], now)? else {
        cx.out.array(0);
        return Ok(());
    };
    let size = z.len();
    let resp3 = cx.out.proto == Protocol::Resp3;
    let emit = |out: &mut ReplyBuf, m: &[u8], s: f64| {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(s);
        }
    };
    let header = |out: &mut ReplyBuf, n: usize| {
        out.array(if withscores && !resp3 { n * 2 } else { n });
    };
    if l == 0 || size == 0 {
        cx.out.array(0);
        return Ok(());
    }
    if l < 0 {
        // Repetitions allowed: `count` independent picks, built element by element, up to
        // MAX_RANDOM_PICKS or the client's output limit, as for HRANDFIELD.
        if !strata_node::args::picks_allowed(l.unsigned_abs(), cx.out) {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        let count = l.unsigned_abs() as usize;
        header(cx.out, count);
        for _ in 0..count {
            if let Some((m, s)) = z.get(rand(size)) {
                emit(cx.out, m, s);
            }
            if cx.out.over_room() {
                break;
            }
        }
        return Ok(());
    }
    let count = l as usize;
    if count >= size {
        // Redis walks the set from its highest element here (its set-operation iterator does).
        header(cx.out, size);
        z.range(0..size, true, |m, s| emit(cx.out, m, s));
        return Ok(());
    }
    // Distinct ranks by a partial Fisher-Yates shuffle over the first `count` positions, keeping
    // only the swapped positions (count < size, so this is O(count) space).
    let mut swapped: std::collections::HashMap<usize, usize> = Default::default();
    header(cx.out, count);
    for i in 0..count {
        let j = i + rand(size - i);
        let vj = *swapped.get(&j).unwrap_or(&j);
        let vi = *swapped.get(&i).unwrap_or(&i);
        swapped.insert(j, vi);
        if let Some((m, s)) = z.get(vj) {
            emit(cx.out, m, s);
        }
    }
    Ok(())
}

// ===== ZSCAN =====

/// ZSCAN key cursor [MATCH pattern] [COUNT count] → [next cursor, [member, score, ...]]. Scores
/// are printed as Redis stores them: `d2string` in a listpack, `%.17g` in a skiplist.
pub fn zscan(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let now = cx.now;
    let cursor = parse_cursor(&args[2]).ok_or(CmdError::msg("ERR invalid cursor"))?;
    let Some(z) = read(cx.shard.db_mut(cx.db), &args[1], now)? else {
        cx.out.array(2);
        cx.out.bulk(b"0");
        cx.out.array(0);
        return Ok(());
    };
    let opts = parse_scan(&args[1..])?;
    if opts.filter.type_name.is_some() {
        return Err(CmdError::Syntax);
    }
    let packed = z.is_packed();
    let mut found: Vec<(Bytes, String)> = Vec::new();
    let next = z.scan(cursor, opts.count, |m, s| {
        if opts
            .filter
            .pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, m, false))
        {
            let score = if packed {
                format_d2string(s)
            } else {
                format_g17(s)
            };
            found.push((Bytes::copy_from_slice(m), score));
        }
    });
    cx.out.array(2);
    cx.out.bulk(next.to_string().as_bytes());
    cx.out.array(found.len() * 2);
    for (m, s) in &found {
        cx.out.bulk(m);
        cx.out.bulk(s.as_bytes());
    }
    Ok(())
}

// ===== ZUNION / ZINTER / ZDIFF / ZINTERCARD =====

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// A source read for a set operation: its elements in the source's order (sets score 1).
type Source = Option<Vec<Elem>>;

/// Reads a set-operation source: a sorted set, or a set (members with score 1).
fn op_read_source(db: &mut Db, key: &[u8], now: i64) -> Result<Source, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Obj(Object::ZSet(z)) => {
                let mut v = Vec::with_capacity(z.len());
                z.for_each(|m, s| v.push((Bytes::copy_from_slice(m), s)));
                Ok(Some(v))
            }
            ValueRef::Obj(Object::Set(s)) => {
                let mut v = Vec::with_capacity(s.len());
                s.for_each_member(|m| v.push((Bytes::copy_from_slice(m), 1.0)));
                Ok(Some(v))
            }
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Each of `keys` read as a source, in order, up to the first of a wrong type (Redis stops there:
/// the keys after it are not looked up, so no hit or miss is counted for them).
fn op_read_sources(db: &mut Db, keys: &[Bytes], now: i64) -> Vec<Result<Source, CmdError>> {
    strata_node::keyed::until_error(keys, |k| op_read_source(db, k, now))
}

fn aggregate(agg: Aggregate, acc: &mut f64, v: f64) {
    match agg {
        Aggregate::Sum => {
            *acc += v;
            // inf + -inf: Redis keeps the convention that the result is 0.
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Aggregate::Min => *acc = acc.min(v),
        Aggregate::Max => *acc = acc.max(v),
    }
}

fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Computes the set operation; the result is sorted by (score, member).
fn compute(op: SetOp, srcs: Vec<(Source, f64)>, agg: Aggregate) -> Vec<Elem> {
    use std::collections::HashMap;
    let mut out: Vec<Elem> = Vec::new();
    match op {
        SetOp::Union => {
            let mut srcs = srcs;
            srcs.sort_by_key(|(s, _)| s.as_ref().map_or(0, |v| v.len()));
            let mut acc: HashMap<Bytes, f64> = HashMap::new();
            let mut order: Vec<Bytes> = Vec::new();
            for (src, w) in &srcs {
                for (m, s) in src.iter().flatten() {
                    let v = weighted(*w, *s);
                    match acc.get_mut(m) {
                        Some(a) => aggregate(agg, a, v),
                        None => {
                            acc.insert(m.clone(), v);
                            order.push(m.clone());
                        }
                    }
                }
            }
            out = order
                .into_iter()
                .map(|m| {
                    let s = acc[&m];
                    (m, s)
                })
                .collect();
        }
        SetOp::Inter => {
            let mut srcs = srcs;
            srcs.sort_by_key(|(s, _)| s.as_ref().map_or(0, |v| v.len()));
            if srcs
                .iter()
                .any(|(s, _)| s.as_ref().is_none_or(|v| v.is_empty()))
            {
                return out;
            }
            let maps: Vec<HashMap<&Bytes, f64>> = srcs[1..]
                .iter()
                .map(|(s, _)| s.iter().flatten().map(|(m, s)| (m, *s)).collect())
                .collect();
            for (m, s) in srcs[0].0.iter().flatten() {
                let mut acc = weighted(srcs[0].1, *s);
                let mut all = true;
                for (map, (_, w)) in maps.iter().zip(&srcs[1..]) {
                    match map.get(m) {
                        // Only the first set's product is taken as 0 when it is NaN (inf × 0), as in
                        // Redis: a later NaN reaches the aggregate (SUM turns it into 0, MIN and MAX
                        // keep the running value).
                        Some(v) => aggregate(agg, &mut acc, *w * *v),
                        None => {
                            all = false;
                            break;
                        }
                    }
                }
                if all {
                    out.push((m.clone(), acc));
                }
            }
        }
        SetOp::Diff => {
            let mut it = srcs.into_iter();
            let Some((Some(first), _)) = it.next() else {
                return out;
            };
            let others: Vec<std::collections::HashSet<Bytes>> = it
                .filter_map(|(s, _)| s)
                .map(|v| v.into_iter().map(|(m, _)| m).collect())
                .collect();
            out = first
                .into_iter()
                .filter(|(m, _)| !others.iter().any(|o| o.contains(m)))
                .collect();
        }
    }
    out.sort_by(|a, b| strata_core::zset::cmp_entry(a.1, &a.0, b.1, &b.0));
    out
}

/// Parses `numkeys` for ZUNION/ZINTER/ZDIFF[STORE]/ZINTERCARD at `args[idx]`; returns it.
fn parse_numkeys(args: &[Bytes], idx: usize, name: &str) -> Result<usize, CmdError> {
    let n = parse_i64(&args[idx]).ok_or(CmdError::NotInteger)?;
    if n < 1 {
        return Err(CmdError::Msg(
            format!("ERR at least 1 input key is needed for '{name}' command").into(),
        ));
    }
    if n as u64 > (args.len() - idx - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    Ok(n as usize)
}

/// The shared body of ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD.
async fn setop(cx: &mut KeysCtx<'_>, op: SetOp, to_dst: bool, card: bool) -> CmdResult {
    let (db, now, args) = (cx.db, cx.now, cx.args);
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let nk_idx = if to_dst { 2 } else { 1 };
    let numkeys = parse_numkeys(args, nk_idx, &name)?;
    let keys = &args[nk_idx + 1..nk_idx + 1 + numkeys];
    let parts = cx
        .scatter_reads(
            keys,
            |k| k,
            move |s, part| {
                strata_node::keyed::Looked::with(op_read_sources(s.db_mut(db), part, now))
            },
        )
        .await;
    let mut srcs: Vec<Source> = Vec::with_capacity(numkeys);
    for r in strata_node::keyed::in_order(numkeys, parts) {
        srcs.push(r?);
    }
    let mut weights = vec![1.0; numkeys];
    let (mut agg, mut withscores, mut limit) = (Aggregate::Sum, false, 0usize);
    let mut j = nk_idx + 1 + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = &args[j];
        if op != SetOp::Diff && !card && remaining > numkeys && eq_ci(a, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_score(&args[j + 1 + i])
                    .ok_or(CmdError::msg("ERR weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if op != SetOp::Diff && !card && remaining >= 2 && eq_ci(a, "aggregate") {
            let v = &args[j + 1];
            agg = if eq_ci(v, "sum") {
                Aggregate::Sum
            } else if eq_ci(v, "min") {
                Aggregate::Min
            } else if eq_ci(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !to_dst && !card && eq_ci(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq_ci(a, "limit") {
            // Redis gives the one message for a non-integer and a negative limit.
            limit = match parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => l as usize,
                _ => return Err(CmdError::msg("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let result = compute(op, srcs.into_iter().zip(weights).collect(), agg);
    if card {
        let n = if limit > 0 {
            result.len().min(limit)
        } else {
            result.len()
        };
        cx.out.int(n as i64);
    } else if to_dst {
        let n = result.len();
        let dst = args[1].clone();
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        cx.on(&args[1], move |s| {
            store(s.db_mut(db), &dst, &result, event, now)
        })
        .await;
        cx.out.int(n as i64);
    } else {
        reply_elems(cx.out, &result, withscores);
    }
    Ok(())
}

macro_rules! setop_cmd {
    ($name:ident, $op:expr, $store:expr, $card:expr, $doc:literal) => {
        #[doc = $doc]
        pub fn $name<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
            Box::pin(setop(cx, $op, $store, $card))
        }
    };
}

setop_cmd!(
    zunion,
    SetOp::Union,
    false,
    false,
    "ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]"
);
setop_cmd!(
    zinter,
    SetOp::Inter,
    false,
    false,
    "ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]"
);
setop_cmd!(
    zdiff,
    SetOp::Diff,
    false,
    false,
    "ZDIFF numkeys key [key ...] [WITHSCORES]"
);
setop_cmd!(
    zunionstore,
    SetOp::Union,
    true,
    false,
    "ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]"
);
setop_cmd!(
    zinterstore,
    SetOp::Inter,
    true,
    false,
    "ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]"
);
setop_cmd!(
    zdiffstore,
    SetOp::Diff,
    true,
    false,
    "ZDIFFSTORE dst numkeys key [key ...]"
);
setop_cmd!(
    zintercard,
    SetOp::Inter,
    false,
    true,
    "ZINTERCARD numkeys key [key ...] [LIMIT limit]"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{run, shard};

    #[test]
    fn scores_parse_like_strtod() {
        for (text, want) in [
            ("1.5", Some(1.5)),
            ("-inf", Some(f64::NEG_INFINITY)),
            ("+Infinity", Some(f64::INFINITY)),
            ("0x10", Some(16.0)),
            ("-0x.8p1", Some(-1.0)),
            ("0e5", Some(0.0)),
            ("1e400", None),
            ("1e-400", None),
            ("nan", None),
            (" 1", None),
            ("", None),
            ("0x", None),
        ] {
            assert_eq!(parse_score(text.as_bytes()), want, "{text:?}");
        }
        // The integer fast path answers exactly as the full parser.
        for text in [
            "0",
            "-0",
            "+0",
            "7",
            "-12",
            "+12",
            "000000012345",
            "999999999999999",
            "-999999999999999",
            "1000000000000000",
            "12345678901234567890",
            "-",
            "+",
            "1a",
            "١",
        ] {
            let full = parse_score_text(text.as_bytes());
            let got = parse_score(text.as_bytes());
            assert_eq!(
                got.map(f64::to_bits),
                full.map(f64::to_bits),
                "{text:?}: {got:?} vs {full:?}"
            );
        }
    }

    #[test]
    fn range_bounds_parse_like_zsl_parse_range() {
        assert_eq!(parse_score_bound(b"(1.5"), Ok((1.5, true)));
        assert_eq!(parse_score_bound(b" 2"), Ok((2.0, false)));
        assert_eq!(parse_score_bound(b""), Ok((0.0, false)));
        assert_eq!(parse_score_bound(b"("), Ok((0.0, true)));
        assert_eq!(parse_score_bound(b"1e400"), Ok((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"0x1p2"), Ok((4.0, false)));
        for bad in [&b"x"[..], b"((1", b"nan", b"1e", b"0x"] {
            assert_eq!(parse_score_bound(bad), Err(NOT_FLOAT_RANGE));
        }
        assert!(Lex::parse(&Bytes::from_static(b"a")).is_err());
        assert!(Lex::parse(&Bytes::from_static(b"")).is_err());
        assert!(matches!(
            Lex::parse(&Bytes::from_static(b"-")),
            Ok(Lex::NegInf)
        ));
    }

    #[test]
    fn rank_ranges_clamp_like_redis() {
        assert_eq!(rank_range(5, 0, -1), 0..5);
        assert_eq!(rank_range(5, -2, -1), 3..5);
        assert_eq!(rank_range(5, -100, 100), 0..5);
        assert_eq!(rank_range(5, 3, 1), 0..0);
        assert_eq!(rank_range(5, 5, 10), 0..0);
        assert_eq!(rank_range(0, 0, -1), 0..0);
    }

    #[test]
    fn commands_on_one_shard() {
        let mut s = shard();
        assert_eq!(
            run(&mut s, &["zadd", "z", "1", "a", "2", "b", "3", "c"]),
            ":3"
        );
        assert_eq!(
            run(
                &mut s,
                &["zrange", "z", "(1", "+inf", "byscore", "withscores"]
            ),
            "*4[$1:b,$1:2,$1:c,$1:3]"
        );
        assert_eq!(run(&mut s, &["zrevrank", "z", "a"]), ":2");
        assert_eq!(run(&mut s, &["zincrby", "z", "1.5", "a"]), "$3:2.5");
        assert_eq!(
            run(&mut s, &["zpopmax", "z", "2"]),
            "*4[$1:c,$1:3,$1:a,$3:2.5]"
        );
        assert_eq!(
            run(
                &mut s,
                &["zunionstore", "d", "2", "z", "z", "weights", "2", "0.5"]
            ),
            ":1"
        );
        assert_eq!(run(&mut s, &["zscore", "d", "b"]), "$1:5");
        assert_eq!(run(&mut s, &["zrem", "z", "b"]), ":1");
        assert_eq!(run(&mut s, &["exists", "z"]), ":0");
        assert_eq!(run(&mut s, &["set", "str", "v"]), "+OK");
        assert!(run(&mut s, &["zcard", "str"]).starts_with("-WRONGTYPE"));
    }
}
