//! SORT and SORT_RO (Redis's sort.c): sort a list, set or sorted set, numerically or by bytes,
//! optionally by the values of other keys (`BY weight_*`, `BY obj_*->field`), returning other keys'
//! values (`GET #`, `GET data_*`, `GET obj_*->field`), a `LIMIT` window, or storing the result as a
//! list (`STORE`).
//!
//! Where things run: SORT is one keyed command (see [`strata_node::keyed`]). The value to sort is read on
//! its shard, the BY and GET lookups go to whatever shards own the substituted keys (one message per
//! shard and slice, not one per element), and the STORE destination is written on its shard. A
//! command line whose patterns read other keys declares it ([`reads_db`]): the dispatcher then
//! locks the database shared on every shard for the whole command, so the keys it reads — named
//! only once the sorted value is known — cannot change under it, and the result is atomic.
//!
//! Redis semantics kept exactly:
//! * options parse left to right; LIMIT's integers are checked while parsing; the key's type after;
//! * a BY pattern without `*` means "don't sort" (the value's own order, LIMIT applied directly to
//!   lists and sorted sets, DESC walking them backwards) — except for a set with STORE, which is
//!   sorted by its members' bytes so that replicas store the same list;
//! * numeric sorting parses every weight like C's `strtod` (leading blanks, hex, `inf`; an empty
//!   string is 0) and fails the whole command with "One or more scores can't be converted into
//!   double"; equal weights fall back to comparing the elements' bytes;
//! * a BY or GET lookup that finds no key, a key of the wrong type, or no such hash field gives
//!   weight 0 (numeric), "no weight" sorted first (ALPHA), or a nil reply (GET; "" when stored).
//!
//! Deliberate differences: Redis converts a small sorted set to its skiplist encoding when SORT reads
//! it; Strata never restructures a value on a read (OBJECT ENCODING stays `listpack`). ALPHA without
//! STORE collates as Redis does under the C locale (`strcoll` is `strcmp` there: values end at their
//! first NUL byte); Redis started under another locale orders by that locale's rules, which Strata
//! does not follow. Strata's sort is stable, as glibc's `qsort` (a merge sort) is; with BY and LIMIT
//! Redis's partial quick sort may order equal weights otherwise.

use std::cmp::Ordering;

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::{List, Object, Value, ValueRef};
use strata_shard::{notify, Db, Shard};

use strata_node::args::{c_string, eq_ci};
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::{in_order, KeysCtx};
use strata_node::table::{
    Arg, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeyFlags, KeySpec,
};

const SORT_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS)),
    KeySpec {
        flags: KeyFlags::RO.or(KeyFlags::ACCESS),
        begin_search: BeginSearch::Unknown,
        find_keys: FindKeys::Unknown,
        notes: "",
    }
    .with_notes(
        "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive \
         from the content of the key we sort",
    ),
    KeySpec {
        flags: KeyFlags::OW.or(KeyFlags::UPDATE),
        begin_search: BeginSearch::Unknown,
        find_keys: FindKeys::Unknown,
        notes: "",
    }
    .with_notes(
        "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear \
         anywhere in the argument array",
    ),
];
const SORT_RO_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS)),
    KeySpec {
        flags: KeyFlags::RO.or(KeyFlags::ACCESS),
        begin_search: BeginSearch::Unknown,
        find_keys: FindKeys::Unknown,
        notes: "",
    }
    .with_notes(
        "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive \
         from the content of the key we sort",
    ),
];
const OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const ORDER: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const SORT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::pattern_key("pattern", 1).with_token("BY").optional(),
    Arg::block("offset_count", OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
    Arg::pattern_key("pattern", 1)
        .with_token("GET")
        .optional()
        .multiple()
        .multiple_token(),
    Arg::oneof("order", ORDER).optional(),
    Arg::pure_token("sorting", "ALPHA").optional(),
    Arg::key("destination", 2).with_token("STORE").optional(),
];
const SORT_RO_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::pattern_key("pattern", 1).with_token("BY").optional(),
    Arg::block("offset_count", OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
    Arg::pattern_key("pattern", 1)
        .with_token("GET")
        .optional()
        .multiple()
        .multiple_token(),
    Arg::oneof("order", ORDER).optional(),
    Arg::pure_token("sorting", "ALPHA").optional(),
];
const ACL: &[&str] = &["@set", "@sortedset", "@list", "@dangerous"];
const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to \
sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

/// SORT and SORT_RO (they belong to Redis's "generic" group).
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("generic", "sort", -2, Flags::WRITE.or(Flags::DENYOOM), SORT_KEYS,
        "Sort the elements in a list, set or sorted set", "1.0.0", COMPLEXITY, Handler::Keys(sort))
        .with_args(SORT_ARGS)
        .with_acl(ACL)
        .with_getkeys(sort_keys)
        .with_reads_db(reads_db),
    CommandSpec::new("generic", "sort_ro", -2, Flags::READONLY, SORT_RO_KEYS,
        "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0",
        COMPLEXITY, Handler::Keys(sort_ro))
        .with_args(SORT_RO_ARGS)
        .with_acl(ACL)
        .with_getkeys(sort_ro_keys)
        .with_reads_db(reads_db),
];

/// SORT's keys as Redis's `sortGetKeys` finds them: the sorted key, and the last STORE
/// destination (options with arguments are skipped so a `GET store` pattern is not taken for one).
fn sort_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
    if args.len() < 2 {
        return;
    }
    found(1, KeyFlags::RO.or(KeyFlags::ACCESS));
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if eq_ci(a, "limit") {
            i += 2;
        } else if eq_ci(a, "get") || eq_ci(a, "by") {
            i += 1;
        } else if eq_ci(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(i) = store {
        found(i, KeyFlags::OW.or(KeyFlags::UPDATE));
    }
}

/// SORT_RO's one key.
fn sort_ro_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
    if args.len() >= 2 {
        found(1, KeyFlags::RO.or(KeyFlags::ACCESS));
    }
}

/// SORT's options, as parsed.
struct Options {
    desc: bool,
    alpha: bool,
    /// LIMIT offset count.
    limit: Option<(i64, i64)>,
    store: Option<Bytes>,
    by: Option<Bytes>,
    gets: Vec<Bytes>,
    /// BY names no `*`: keep the value's own order.
    dontsort: bool,
}

/// Parses the options after the key, in Redis's order of checks.
fn parse(args: &[Bytes], readonly: bool) -> Result<Options, CmdError> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: None,
        store: None,
        by: None,
        gets: Vec::new(),
        dontsort: false,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if eq_ci(a, "asc") {
            o.desc = false;
        } else if eq_ci(a, "desc") {
            o.desc = true;
        } else if eq_ci(a, "alpha") {
            o.alpha = true;
        } else if eq_ci(a, "limit") && left >= 2 {
            let start = strata_core::num::parse_i64(&args[j + 1]).ok_or(CmdError::NotInteger)?;
            let count = strata_core::num::parse_i64(&args[j + 2]).ok_or(CmdError::NotInteger)?;
            o.limit = Some((start, count));
            j += 2;
        } else if !readonly && eq_ci(a, "store") && left >= 1 {
            o.store = Some(args[j + 1].clone());
            j += 1;
        } else if eq_ci(a, "by") && left >= 1 {
            let p = args[j + 1].clone();
            // As in Redis, one BY without `*` means "don't sort" even if a later BY has one.
            o.dontsort |= !p.contains(&b'*');
            o.by = Some(p);
            j += 1;
        } else if eq_ci(a, "get") && left >= 1 {
            o.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Whether a SORT command line reads keys other than its own (BY or GET patterns with a `*`).
fn reads_db(args: &[Bytes]) -> bool {
    let readonly = args.first().is_some_and(|a| eq_ci(a, "sort_ro"));
    parse(args, readonly).is_ok_and(|o| {
        o.by.as_ref().is_some_and(|p| p.contains(&b'*'))
            || o.gets.iter().any(|p| &p[..] != b"#" && p.contains(&b'*'))
    })
}

fn sort<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(sort_generic(cx, false))
}

fn sort_ro<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(sort_generic(cx, true))
}

/// The value to sort, read on its shard: the elements SORT will order (all of them, or the LIMIT
/// window when the value's own order is kept), and the window left to apply.
struct Loaded {
    elems: Vec<Bytes>,
    dontsort: bool,
    alpha: bool,
    /// BY still applies (a set sorted for STORE drops it).
    by: bool,
    start: usize,
    /// One past the last element of the window (`start == end`: empty).
    end: usize,
}

/// What a sorted value offers SORT, whatever its type.
enum Source<'a> {
    List(&'a List),
    Set(&'a strata_core::Set),
    ZSet(&'a strata_core::ZSet),
    Missing,
}

/// Reads the value at `key` and applies Redis's loading rules (see the module docs).
fn load(db: &mut Db, key: &[u8], now: i64, o: &OptionsView) -> Result<Loaded, CmdError> {
    let entry = db.get(key, now);
    let src = match entry.map(|e| e.value()) {
        None => Source::Missing,
        Some(ValueRef::Obj(Object::List(l))) => Source::List(l),
        Some(ValueRef::Obj(Object::Set(s))) => Source::Set(s),
        Some(ValueRef::Obj(Object::ZSet(z))) => Source::ZSet(z),
        Some(_) => return Err(CmdError::WrongType),
    };
    let (mut dontsort, mut alpha, mut by) = (o.dontsort, o.alpha, o.by);
    if dontsort && matches!(src, Source::Set(_)) && o.store {
        // Replicas must store the same list: sort the members by their bytes.
        dontsort = false;
        alpha = true;
        by = false;
    }
    let len = match &src {
        Source::List(l) => l.len(),
        Source::Set(s) => s.len(),
        Source::ZSet(z) => z.len(),
        Source::Missing => 0,
    } as i64;
    // LIMIT, as Redis adjusts it (inclusive end; an empty window is end = start - 1).
    let (lstart, lcount) = o.limit.unwrap_or((0, -1));
    let mut start = lstart.max(0);
    let mut end = if lcount < 0 {
        len - 1
    } else {
        start.saturating_add(lcount) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    let is_set = matches!(src, Source::Set(_));
    let elems = match src {
        Source::Missing => Vec::new(),
        Source::List(l) if dontsort => {
            if end >= start {
                let n = (end - start + 1) as usize;
                list_window(l, start as usize, n, o.desc)
            } else {
                Vec::new()
            }
        }
        Source::List(l) => list_window(l, 0, l.len(), false),
        Source::Set(s) => set_members(s),
        Source::ZSet(z) if dontsort => {
            if end >= start {
                let n = (end - start + 1) as usize;
                zset_window(z, start as usize, n, o.desc)
            } else {
                Vec::new()
            }
        }
        Source::ZSet(z) => zset_members(z),
    };
    let (start, end) = if dontsort && !is_set {
        // The window was applied while loading (Redis: "fix start/end").
        (0, elems.len())
    } else if end >= start {
        (start as usize, end as usize + 1)
    } else {
        (0, 0)
    };
    Ok(Loaded {
        elems,
        dontsort,
        alpha,
        by,
        start,
        end,
    })
}

/// The options `load` needs, copied so the closure that runs on the key's shard owns them.
#[derive(Clone, Copy)]
struct OptionsView {
    desc: bool,
    alpha: bool,
    dontsort: bool,
    by: bool,
    store: bool,
    limit: Option<(i64, i64)>,
}

// ----- reading the collections (their own APIs) -----

/// `n` elements of list `l` from index `from` (counted from the tail when `rev`), in walk order.
fn list_window(l: &List, from: usize, n: usize, rev: bool) -> Vec<Bytes> {
    let len = l.len();
    if from >= len {
        return Vec::new();
    }
    let n = n.min(len - from);
    if rev {
        l.iter_rev_from(len - 1 - from)
            .take(n)
            .map(|e| Bytes::from(e.to_vec()))
            .collect()
    } else {
        l.iter_from(from)
            .take(n)
            .map(|e| Bytes::from(e.to_vec()))
            .collect()
    }
}

fn set_members(s: &strata_core::Set) -> Vec<Bytes> {
    let mut out = Vec::with_capacity(s.len());
    s.for_each_member(|m| out.push(Bytes::copy_from_slice(m)));
    out
}

/// `n` members of `z` from rank `from` (reverse rank when `rev`), in rank order.
fn zset_window(z: &strata_core::ZSet, from: usize, n: usize, rev: bool) -> Vec<Bytes> {
    let len = z.len();
    if from >= len {
        return Vec::new();
    }
    let n = n.min(len - from);
    // `ZSet::range` takes ascending ranks; reverse rank r is ascending rank len - 1 - r.
    let ranks = if rev {
        len - from - n..len - from
    } else {
        from..from + n
    };
    let mut out = Vec::with_capacity(n);
    z.range(ranks, rev, |m, _score| out.push(Bytes::copy_from_slice(m)));
    out
}

fn zset_members(z: &strata_core::ZSet) -> Vec<Bytes> {
    zset_window(z, 0, z.len(), false)
}

/// The value of `field` in hash `h`, if any.
fn hash_field(h: &strata_core::Hash, field: &[u8]) -> Option<Bytes> {
    h.get(field).map(Bytes::copy_from_slice)
}

/// A list holding `elems`, in order (SORT … STORE).
fn new_list(elems: &[Bytes]) -> List {
    let mut l = List::new();
    for e in elems {
        l.push_back(e);
    }
    l
}

// ----- patterns -----

/// One BY/GET lookup: the key a pattern names for an element, and the hash field, if any.
#[derive(Clone)]
struct Lookup {
    key: Bytes,
    field: Option<Bytes>,
}

/// Substitutes `elem` for the first `*` of `pattern` (Redis's lookupKeyByPattern). None when the
/// pattern has no `*` (a fixed key is never looked up). `key*->field` names a hash field, unless
/// nothing follows the arrow.
fn substitute(pattern: &[u8], elem: &[u8]) -> Option<Lookup> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (post, field) = match arrow {
        Some(i) => (&after[..i], Some(Bytes::copy_from_slice(&after[i + 2..]))),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + elem.len() + post.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    Some(Lookup {
        key: Bytes::from(key),
        field,
    })
}

/// Reads lookups on one shard: a string's value, or a hash field's; None for anything else.
fn fetch(shard: &mut Shard, db: usize, now: i64, items: &[Lookup]) -> Vec<Option<Bytes>> {
    let db = shard.db_mut(db);
    items
        .iter()
        .map(|l| {
            let v = db.get(&l.key, now)?.value();
            match (&l.field, v) {
                (Some(f), ValueRef::Obj(Object::Hash(h))) => hash_field(h, f),
                (Some(_), _) => None,
                (None, ValueRef::Inline(s)) => Some(Bytes::copy_from_slice(s)),
                (None, ValueRef::Int(i)) => Some(Bytes::from(i.to_string())),
                (None, ValueRef::Obj(Object::Str(s))) => Some(Bytes::copy_from_slice(s)),
                (None, _) => None,
            }
        })
        .collect()
}

/// Resolves `lookups` (None = nothing to look up) on their shards, in order.
async fn fetch_all(cx: &mut KeysCtx<'_>, lookups: Vec<Option<Lookup>>) -> Vec<Option<Bytes>> {
    let (db, now) = (cx.db, cx.now);
    let wanted: Vec<Lookup> = lookups.iter().flatten().cloned().collect();
    let parts = cx
        .scatter(
            &wanted,
            |l| &l.key,
            move |s, items| fetch(s, db, now, items),
        )
        .await;
    let mut found = in_order(wanted.len(), parts).into_iter();
    lookups
        .into_iter()
        .map(|l| l.and_then(|_| found.next().flatten()))
        .collect()
}

// ----- weights -----

/// C's `strtod` over the whole string, as SORT uses it: leading blanks skipped, decimal or hex,
/// `inf`/`infinity`; the empty string is 0; trailing bytes, NaN or a result out of range fail.
/// Redis hands it the value as a C string, so it ends at the first NUL byte.
fn strtod(s: &[u8]) -> Option<f64> {
    let s = c_string(s);
    if s.is_empty() {
        return Some(0.0);
    }
    if let Some(v) = strata_core::num::short_integer_f64(s) {
        return Some(v);
    }
    let t = s.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b))?;
    let t = std::str::from_utf8(&s[t..]).ok()?;
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body.starts_with(['+', '-']) {
        return None;
    }
    let v = if body.len() > 2 && (body.starts_with("0x") || body.starts_with("0X")) {
        parse_hex(&body[2..])?
    } else {
        let lower = body.to_ascii_lowercase();
        if lower == "inf" || lower == "infinity" {
            f64::INFINITY
        } else if !body
            .bytes()
            .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
        {
            // Includes "nan" (rejected by SORT) and partial words such as "in".
            return None;
        } else {
            let v: f64 = body.parse().ok()?;
            let digits_nonzero = body
                .split(['e', 'E'])
                .next()
                .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
            // ERANGE: overflow to infinity, or underflow below the normal range.
            if v.is_infinite() || (digits_nonzero && v.abs() < f64::MIN_POSITIVE) {
                return None;
            }
            v
        }
    };
    Some(if neg { -v } else { v })
}

/// A hex float without its `0x`: digits, an optional fraction and an optional `p` exponent.
fn parse_hex(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp);
    (v.is_finite()).then_some(v)
}

/// One element with what it is sorted by.
struct Item {
    elem: Bytes,
    score: f64,
    /// ALPHA: what the element is compared by, its own value or BY's looked-up one (None, no
    /// weight, sorts first).
    cmp: Option<Bytes>,
}

// ----- the command -----

async fn sort_generic(cx: &mut KeysCtx<'_>, readonly: bool) -> CmdResult {
    let o = parse(cx.args, readonly)?;
    let (db, now) = (cx.db, cx.now);
    let key = cx.args[1].clone();
    let view = OptionsView {
        desc: o.desc,
        alpha: o.alpha,
        dontsort: o.dontsort,
        by: o.by.is_some(),
        store: o.store.is_some(),
        limit: o.limit,
    };
    let k = key.clone();
    let loaded = cx
        .on(&key, move |s| load(s.db_mut(db), &k, now, &view))
        .await?;
    let Loaded {
        elems,
        dontsort,
        alpha,
        by,
        start,
        end,
    } = loaded;

    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            cmp: None,
        })
        .collect();
    if !dontsort {
        let weights: Vec<Option<Bytes>> = match o.by.as_ref().filter(|_| by) {
            Some(pattern) => {
                let lookups = items.iter().map(|i| substitute(pattern, &i.elem)).collect();
                fetch_all(cx, lookups).await
            }
            None => items.iter().map(|i| Some(i.elem.clone())).collect(),
        };
        // ALPHA compares as Redis does: with STORE by the values' bytes, otherwise with `strcoll`
        // on C strings (the C locale's order, each value ending at its first NUL byte).
        let store = o.store.is_some();
        let text = |b: &Bytes| -> Bytes {
            if store {
                b.clone()
            } else {
                b.slice(..c_string(b).len())
            }
        };
        let mut bad = false;
        for (item, w) in items.iter_mut().zip(weights) {
            if alpha {
                // The element itself, or what BY found for it (None: no weight).
                item.cmp = w.as_ref().map(text);
            } else if let Some(w) = w {
                match strtod(&w) {
                    Some(v) => item.score = v,
                    None => bad = true,
                }
            }
        }
        if bad {
            return Err(CmdError::Msg(
                "ERR One or more scores can't be converted into double".into(),
            ));
        }
        items.sort_by(|a, b| {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.elem.cmp(&b.elem))
            } else {
                a.cmp.cmp(&b.cmp)
            };
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let window = &items[start.min(items.len())..end.min(items.len())];

    // GET lookups for the window, in output order.
    let gets: Vec<Option<Bytes>> = if o.gets.is_empty() {
        Vec::new()
    } else {
        let mut lookups = Vec::with_capacity(window.len() * o.gets.len());
        let mut own = Vec::with_capacity(lookups.capacity());
        for item in window {
            for p in &o.gets {
                if &p[..] == b"#" {
                    own.push(Some(item.elem.clone()));
                    lookups.push(None);
                } else {
                    own.push(None);
                    lookups.push(substitute(p, &item.elem));
                }
            }
        }
        let fetched = fetch_all(cx, lookups).await;
        own.into_iter()
            .zip(fetched)
            .map(|(own, f)| own.or(f))
            .collect()
    };
    let output: Vec<Option<Bytes>> = if o.gets.is_empty() {
        window.iter().map(|i| Some(i.elem.clone())).collect()
    } else {
        gets
    };

    match o.store {
        None => {
            cx.out.array(output.len());
            for v in &output {
                match v {
                    Some(v) => cx.out.bulk(v),
                    None => cx.out.null(),
                }
            }
        }
        Some(dest) => {
            let n = output.len();
            let elems: Vec<Bytes> = output.into_iter().map(Option::unwrap_or_default).collect();
            let d = dest.clone();
            cx.on(&dest, move |s| {
                let db = s.db_mut(db);
                if elems.is_empty() {
                    if db.delete(&d, now) {
                        db.notify(notify::GENERIC, "del", &d);
                    }
                } else {
                    let mark = db.dirty();
                    let list = new_list(&elems);
                    db.set(&d, Value::Obj(Object::List(Box::new(list))), None, now);
                    db.notify(notify::LIST, "sortstore", &d);
                    // Redis counts one change per element stored.
                    db.count_changes_since(mark, elems.len() as u64);
                }
            })
            .await;
            cx.out.int(n as i64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn patterns_substitute_the_first_star_and_split_hash_fields() {
        let l = substitute(b"w_*", b"3").unwrap();
        assert_eq!((l.key, l.field), (b("w_3"), None));
        let l = substitute(b"o_*->f", b"x").unwrap();
        assert_eq!((l.key, l.field), (b("o_x"), Some(b("f"))));
        // An arrow with nothing after it is part of the key.
        let l = substitute(b"o_*->", b"x").unwrap();
        assert_eq!((l.key, l.field), (b("o_x->"), None));
        // Only the first star is substituted; the arrow must follow it.
        let l = substitute(b"a->b*c*", b"1").unwrap();
        assert_eq!((l.key, l.field), (b("a->b1c*"), None));
        assert!(substitute(b"fixed", b"1").is_none());
    }

    #[test]
    fn weights_parse_like_strtod() {
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b"  1.5"), Some(1.5));
        assert_eq!(strtod(b"-3"), Some(-3.0));
        assert_eq!(strtod(b"0x10"), Some(16.0));
        assert_eq!(strtod(b"inf"), Some(f64::INFINITY));
        assert_eq!(strtod(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod(b"1e5"), Some(1e5));
        for bad in ["abc", "1x", "1 ", " ", "nan", "1e400", "1e-400", "--1"] {
            assert_eq!(strtod(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(strtod(b"0e-400"), Some(0.0));
        assert_eq!(strtod(b"123456789012345"), Some(123456789012345.0));
        assert_eq!(strtod(b"1234567890123456789"), Some(1234567890123456789.0));
        assert_eq!(strtod(b"-0").map(f64::to_bits), Some((-0.0f64).to_bits()));
        // A C string ends at NUL: what follows is never looked at.
        assert_eq!(strtod(b"7\x00junk"), Some(7.0));
        assert_eq!(strtod(b"\x00\xff"), Some(0.0));
        assert_eq!(strtod(b"1x\x00"), None);
    }

    #[test]
    fn options_parse_in_redis_order() {
        let args: Vec<Bytes> = ["sort", "k", "limit", "x", "1"].map(b).to_vec();
        assert!(matches!(parse(&args, false), Err(CmdError::NotInteger)));
        let args: Vec<Bytes> = ["sort", "k", "store"].map(b).to_vec();
        assert!(matches!(parse(&args, false), Err(CmdError::Syntax)));
        let args: Vec<Bytes> = ["sort_ro", "k", "store", "d"].map(b).to_vec();
        assert!(matches!(parse(&args, true), Err(CmdError::Syntax)));
        let args: Vec<Bytes> = ["sort", "k", "by", "nosort", "get", "#", "desc"]
            .map(b)
            .to_vec();
        let o = parse(&args, false).unwrap();
        assert!(o.dontsort && o.desc && o.gets.len() == 1);
        assert!(!reads_db(&args));
        let args: Vec<Bytes> = ["sort", "k", "get", "d_*"].map(b).to_vec();
        assert!(reads_db(&args));
    }

    #[test]
    fn getkeys_finds_the_last_store_and_skips_option_arguments() {
        let mut keys = Vec::new();
        let args: Vec<Bytes> = ["sort", "k", "get", "store", "store", "a", "store", "b"]
            .map(b)
            .to_vec();
        sort_keys(&args, &mut |i, _| keys.push(i));
        assert_eq!(keys, vec![1, 7]);
    }
}
