//! String commands (Redis's t_string.c): GET, SET and its variants, GETEX/GETDEL/GETSET, MGET/MSET/MSETNX,
//! APPEND, STRLEN, the INCR family, INCRBYFLOAT, GETRANGE/SUBSTR, SETRANGE and LCS.
//!
//! Strings are stored in one of Redis's three encodings, chosen as Redis chooses them, so that
//! OBJECT ENCODING answers the same: `int` (canonical 64-bit integers of at most 20 characters, and
//! every INCR result), `embstr` (≤ 44 bytes, inline in the entry) and `raw` (longer, or modified in
//! place by APPEND/SETRANGE, which keep such strings as [`Object::Str`] so repeated appends stay
//! amortised O(1)).
//!
//! Invariants:
//! * every write goes through [`Db`]'s write path (`set`, `set_keep_ttl`, `delete`, `set_expire`, or
//!   the [`strata_shard::EntryMut`] guard of `Db::modify` for in-place changes), so the TTL
//!   bookkeeping, the expiry hints and the key events stay right;
//! * no command makes a string longer than [`MAX_STRING_LEN`] (Redis's default proto-max-bulk-len);
//! * expiry arguments are validated exactly where Redis validates them (e.g. GETEX on a missing key
//!   answers nil even with an invalid expire time), so the same input fails with the same error;
//! * multi-key commands (MGET, MSET, MSETNX, LCS) run on the owning shard when all keys live on one,
//!   and otherwise as a coordinator that holds intent locks on every key for the whole command, so no
//!   other client sees them half done.

use std::borrow::Cow;

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::long_double::LongDouble;
use strata_core::num::parse_i64;
use strata_core::{Object, Value, ValueRef};
use strata_resp::ReplyBuf;
use strata_shard::{notify, Db};

use strata_node::args::{eq_ci, Args};
use strata_node::ctx::ShardCtx;
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::{in_order, KeysCtx};
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec};
use strata_node::value::{as_str, encode, raw, Str, MAX_STRING_LEN};

const R: Flags = Flags::READONLY;
const W: Flags = Flags::WRITE;
const FAST: Flags = Flags::FAST;
const DENYOOM: Flags = Flags::DENYOOM;

// Key specs, as Redis 7.0 declares them for each command.
const RO: KeyFlags = KeyFlags::RO;
const RW: KeyFlags = KeyFlags::RW;
const OW: KeyFlags = KeyFlags::OW;
const ACCESS: KeyFlags = KeyFlags::ACCESS;
const UPDATE: KeyFlags = KeyFlags::UPDATE;
const INSERT: KeyFlags = KeyFlags::INSERT;
/// The key is read and returned (GET, GETRANGE).
const READ: &[KeySpec] = &[KeySpec::at(1, RO.or(ACCESS))];
/// Only the key's metadata is read (STRLEN).
const PEEK: &[KeySpec] = &[KeySpec::at(1, RO)];
/// Read, returned and updated (INCR, GETSET).
const READ_UPDATE: &[KeySpec] = &[KeySpec::at(1, RW.or(ACCESS).or(UPDATE))];
/// Replaced without being read (SETEX).
const OVERWRITE: &[KeySpec] = &[KeySpec::at(1, OW.or(UPDATE))];
const SET_KEYS: &[KeySpec] =
    &[
        KeySpec::at(1, RW.or(ACCESS).or(UPDATE).or(KeyFlags::VARIABLE_FLAGS))
            .with_notes("RW and ACCESS due to the optional `GET` argument"),
    ];
const SETNX_KEYS: &[KeySpec] = &[KeySpec::at(1, OW.or(INSERT))];
const GETEX_KEYS: &[KeySpec] =
    &[KeySpec::at(1, RW.or(ACCESS).or(UPDATE))
        .with_notes("RW and UPDATE because it changes the TTL")];
const GETDEL_KEYS: &[KeySpec] = &[KeySpec::at(1, RW.or(ACCESS).or(KeyFlags::DELETE))];
const APPEND_KEYS: &[KeySpec] = &[KeySpec::at(1, RW.or(INSERT))];
const SETRANGE_KEYS: &[KeySpec] = &[KeySpec::at(1, RW.or(UPDATE))];
const MGET_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 1, RO.or(ACCESS))];
/// MSET: key, value, key, value...
const MSET_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 2, OW.or(UPDATE))];
const MSETNX_KEYS: &[KeySpec] = &[KeySpec::range(1, -1, 2, OW.or(INSERT))];
/// LCS: the two keys at arguments 1 and 2.
const LCS_KEYS: &[KeySpec] = &[KeySpec::range(1, 1, 1, RO.or(ACCESS))];

/// SET's exact key flags: with GET the old value is read and returned (RW access), otherwise it is
/// just replaced (OW), as Redis's `setGetKeys` reports them.
fn set_keys(args: &[bytes::Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
    let get = args
        .iter()
        .skip(3)
        .any(|a| strata_node::args::eq_ci(a, "get"));
    found(
        1,
        if get {
            RW.or(ACCESS).or(UPDATE)
        } else {
            OW.or(UPDATE)
        },
    );
}

// COMMAND DOCS: arguments and history, as Redis 7.0 documents them.
const KEY_ONLY: &[Arg] = &[Arg::key("key", 0)];
const SET_ARGS_CONDITION: &[Arg] = &[Arg::pure_token("nx", "NX"), Arg::pure_token("xx", "XX")];
const SET_ARGS_EXPIRATION: &[Arg] = &[
    Arg::integer("seconds").with_token("EX").since("2.6.12"),
    Arg::integer("milliseconds")
        .with_token("PX")
        .since("2.6.12"),
    Arg::unix_time("unix-time-seconds")
        .with_token("EXAT")
        .since("6.2.0"),
    Arg::unix_time("unix-time-milliseconds")
        .with_token("PXAT")
        .since("6.2.0"),
    Arg::pure_token("keepttl", "KEEPTTL").since("6.0.0"),
];
const SET_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("value"),
    Arg::oneof("condition", SET_ARGS_CONDITION)
        .since("2.6.12")
        .optional(),
    Arg::pure_token("get", "GET").since("6.2.0").optional(),
    Arg::oneof("expiration", SET_ARGS_EXPIRATION).optional(),
];
const SET_HISTORY: &[(&str, &str)] = &[
    ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
    ("6.0.0", "Added the `KEEPTTL` option."),
    ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
    (
        "7.0.0",
        "Allowed the `NX` and `GET` options to be used together.",
    ),
];
const KEY_VALUE: &[Arg] = &[Arg::key("key", 0), Arg::string("value")];
const SETEX_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("seconds"),
    Arg::string("value"),
];
const PSETEX_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("milliseconds"),
    Arg::string("value"),
];
const GETEX_ARGS_EXPIRATION: &[Arg] = &[
    Arg::integer("seconds").with_token("EX"),
    Arg::integer("milliseconds").with_token("PX"),
    Arg::unix_time("unix-time-seconds").with_token("EXAT"),
    Arg::unix_time("unix-time-milliseconds").with_token("PXAT"),
    Arg::pure_token("persist", "PERSIST"),
];
const GETEX_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("expiration", GETEX_ARGS_EXPIRATION).optional(),
];
const MGET_ARGS: &[Arg] = &[Arg::key("key", 0).multiple()];
const MSET_ARGS: &[Arg] = &[Arg::block("key_value", KEY_VALUE).multiple()];
const INCRBY_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::integer("increment")];
const DECRBY_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::integer("decrement")];
const INCRBYFLOAT_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::double("increment")];
const GETRANGE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("start"),
    Arg::integer("end"),
];
const SETRANGE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("offset"),
    Arg::string("value"),
];
const LCS_ARGS: &[Arg] = &[
    Arg::key("key1", 0),
    Arg::key("key2", 0),
    Arg::pure_token("len", "LEN").optional(),
    Arg::pure_token("idx", "IDX").optional(),
    Arg::integer("len").with_token("MINMATCHLEN").optional(),
    Arg::pure_token("withmatchlen", "WITHMATCHLEN").optional(),
];

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
        "string", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

const GETRANGE_COMPLEXITY: &str =
    "O(N) where N is the length of the returned string. The complexity \
is ultimately determined by the returned length, but because creating a substring from an existing \
string is very cheap, it can be considered O(1) for small strings.";

/// The string family.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, R.or(FAST), READ, "Get the value of a key", "1.0.0", "O(1)", Handler::Shard(get))
        .with_args(KEY_ONLY),
    cmd("set", -3, W.or(DENYOOM), SET_KEYS, "Set the string value of a key", "1.0.0", "O(1)", Handler::Shard(set))
        .with_args(SET_ARGS)
        .with_history(SET_HISTORY)
        .with_getkeys(set_keys),
    cmd("setnx", 3, W.or(DENYOOM).or(FAST), SETNX_KEYS,
        "Set the value of a key, only if the key does not exist", "1.0.0", "O(1)", Handler::Shard(setnx))
        .with_args(KEY_VALUE),
    cmd("setex", 4, W.or(DENYOOM), OVERWRITE, "Set the value and expiration of a key", "2.0.0", "O(1)",
        Handler::Shard(setex))
        .with_args(SETEX_ARGS),
    cmd("psetex", 4, W.or(DENYOOM), OVERWRITE, "Set the value and expiration in milliseconds of a key",
        "2.6.0", "O(1)", Handler::Shard(psetex))
        .with_args(PSETEX_ARGS),
    cmd("getex", -2, W.or(FAST), GETEX_KEYS, "Get the value of a key and optionally set its expiration",
        "6.2.0", "O(1)", Handler::Shard(getex))
        .with_args(GETEX_ARGS),
    cmd("getdel", 2, W.or(FAST), GETDEL_KEYS, "Get the value of a key and delete the key", "6.2.0", "O(1)",
        Handler::Shard(getdel))
        .with_args(KEY_ONLY),
    cmd("getset", 3, W.or(DENYOOM).or(FAST), READ_UPDATE,
        "Set the string value of a key and return its old value", "1.0.0", "O(1)", Handler::Shard(getset))
        .with_args(KEY_VALUE)
        .deprecated("6.2.0", "`SET` with the `!GET` argument"),
    cmd("mget", -2, R.or(FAST), MGET_KEYS, "Get the values of all the given keys", "1.0.0",
        "O(N) where N is the number of keys to retrieve.",
        Handler::Keys(mget))
        .with_args(MGET_ARGS)
        .with_tips(&["request_policy:multi_shard"]),
    cmd("mset", -3, W.or(DENYOOM), MSET_KEYS, "Set multiple keys to multiple values", "1.0.1",
        "O(N) where N is the number of keys to set.",
        Handler::Keys(mset))
        .with_args(MSET_ARGS)
        .with_tips(&["request_policy:multi_shard", "response_policy:all_succeeded"]),
    cmd("msetnx", -3, W.or(DENYOOM), MSETNX_KEYS,
        "Set multiple keys to multiple values, only if none of the keys exist", "1.0.1",
        "O(N) where N is the number of keys to set.",
        Handler::Keys(msetnx))
        .with_args(MSET_ARGS)
        .with_tips(&["request_policy:multi_shard", "response_policy:agg_min"]),
    cmd("append", 3, W.or(DENYOOM).or(FAST), APPEND_KEYS, "Append a value to a key", "2.0.0",
        "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already \
present value is of any size, since the dynamic string library used by Redis will double the free space \
available on every reallocation.",
        Handler::Shard(append))
        .with_args(KEY_VALUE),
    cmd("strlen", 2, R.or(FAST), PEEK, "Get the length of the value stored in a key", "2.2.0", "O(1)",
        Handler::Shard(strlen))
        .with_args(KEY_ONLY),
    cmd("incr", 2, W.or(DENYOOM).or(FAST), READ_UPDATE, "Increment the integer value of a key by one",
        "1.0.0", "O(1)", Handler::Shard(incr))
        .with_args(KEY_ONLY),
    cmd("decr", 2, W.or(DENYOOM).or(FAST), READ_UPDATE, "Decrement the integer value of a key by one",
        "1.0.0", "O(1)", Handler::Shard(decr))
        .with_args(KEY_ONLY),
    cmd("incrby", 3, W.or(DENYOOM).or(FAST), READ_UPDATE,
        "Increment the integer value of a key by the given amount", "1.0.0", "O(1)", Handler::Shard(incrby))
        .with_args(INCRBY_ARGS),
    cmd("decrby", 3, W.or(DENYOOM).or(FAST), READ_UPDATE,
        "Decrement the integer value of a key by the given number", "1.0.0", "O(1)", Handler::Shard(decrby))
        .with_args(DECRBY_ARGS),
    cmd("incrbyfloat", 3, W.or(DENYOOM).or(FAST), READ_UPDATE,
        "Increment the float value of a key by the given amount", "2.6.0", "O(1)",
        Handler::Shard(incrbyfloat))
        .with_args(INCRBYFLOAT_ARGS),
    cmd("getrange", 4, R, READ, "Get a substring of the string stored at a key", "2.4.0",
        GETRANGE_COMPLEXITY, Handler::Shard(getrange))
        .with_args(GETRANGE_ARGS),
    cmd("substr", 4, R, READ, "Get a substring of the string stored at a key", "1.0.0",
        GETRANGE_COMPLEXITY, Handler::Shard(getrange))
        .with_args(GETRANGE_ARGS)
        .deprecated("2.0.0", "`GETRANGE`"),
    cmd("setrange", 4, W.or(DENYOOM), SETRANGE_KEYS,
        "Overwrite part of a string at key starting at the specified offset", "2.2.0",
        "O(1), not counting the time taken to copy the new string in place. Usually, this string is very \
small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the \
value argument.",
        Handler::Shard(setrange))
        .with_args(SETRANGE_ARGS),
    cmd("lcs", -3, R, LCS_KEYS, "Find longest common substring", "7.0.0",
        "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        Handler::Keys(lcs))
        .with_args(LCS_ARGS),
];

// ===== the string type =====

/// `ERR string exceeds maximum allowed size` unless `len + extra` fits [`MAX_STRING_LEN`].
fn check_len(len: usize, extra: usize) -> Result<(), CmdError> {
    match len.checked_add(extra) {
        Some(total) if total <= MAX_STRING_LEN => Ok(()),
        _ => Err(CmdError::msg(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

// ===== expiry options (SET, SETEX, PSETEX, GETEX) =====

/// Which expiry option was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireKind {
    /// EX seconds (SETEX)
    Ex,
    /// PX milliseconds (PSETEX)
    Px,
    /// EXAT unix-seconds
    ExAt,
    /// PXAT unix-milliseconds
    PxAt,
}

impl ExpireKind {
    fn parse(word: &[u8]) -> Option<ExpireKind> {
        [
            ("ex", ExpireKind::Ex),
            ("px", ExpireKind::Px),
            ("exat", ExpireKind::ExAt),
            ("pxat", ExpireKind::PxAt),
        ]
        .into_iter()
        .find(|(name, _)| eq_ci(word, name))
        .map(|(_, kind)| kind)
    }

    fn in_seconds(self) -> bool {
        matches!(self, ExpireKind::Ex | ExpireKind::ExAt)
    }

    fn absolute(self) -> bool {
        matches!(self, ExpireKind::ExAt | ExpireKind::PxAt)
    }
}

/// An expiry argument as the client gave it. Redis validates it only when it is about to be used,
/// so it stays unparsed until then.
#[derive(Clone, Copy, Debug)]
pub struct ExpireArg<'a> {
    pub kind: ExpireKind,
    pub value: &'a [u8],
}

impl ExpireArg<'_> {
    /// The absolute deadline in unix ms. Errors as Redis: not an integer, or `ERR invalid expire time
    /// in '<cmd>' command` for a value ≤ 0 or one that overflows once converted to absolute ms.
    pub fn deadline(&self, now: i64, cmd: &'static str) -> Result<i64, CmdError> {
        let v = parse_i64(self.value).ok_or(CmdError::NotInteger)?;
        let seconds = self.kind.in_seconds();
        if v <= 0 || (seconds && v > i64::MAX / 1000) {
            return Err(CmdError::InvalidExpire(cmd));
        }
        let ms = if seconds { v * 1000 } else { v };
        let at = if self.kind.absolute() {
            Some(ms)
        } else {
            ms.checked_add(now)
        };
        at.filter(|&at| at > 0).ok_or(CmdError::InvalidExpire(cmd))
    }
}

/// Options of SET (NX, XX, GET, KEEPTTL, EX/PX/EXAT/PXAT) or GETEX (PERSIST, EX/PX/EXAT/PXAT).
#[derive(Default)]
struct StrOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<ExpireArg<'a>>,
}

/// Parses SET's (`for_set`) or GETEX's options with Redis's exact acceptance rules: conflicting options
/// are a syntax error, repeating one is not (the last expiry wins, unvalidated earlier ones included).
fn parse_opts(args: &[Bytes], for_set: bool) -> Result<StrOpts<'_>, CmdError> {
    let mut o = StrOpts::default();
    let mut i = 0;
    while i < args.len() {
        let opt = &args[i][..];
        if for_set && eq_ci(opt, "nx") && !o.xx {
            o.nx = true;
        } else if for_set && eq_ci(opt, "xx") && !o.nx {
            o.xx = true;
        } else if for_set && eq_ci(opt, "get") {
            o.get = true;
        } else if for_set && eq_ci(opt, "keepttl") && o.expire.is_none() {
            o.keepttl = true;
        } else if !for_set && eq_ci(opt, "persist") && o.expire.is_none() {
            o.persist = true;
        } else {
            let kind = ExpireKind::parse(opt).ok_or(CmdError::Syntax)?;
            let value = args.get(i + 1).ok_or(CmdError::Syntax)?;
            if o.keepttl || o.persist || o.expire.is_some_and(|e| e.kind != kind) {
                return Err(CmdError::Syntax);
            }
            o.expire = Some(ExpireArg {
                kind,
                value: &value[..],
            });
            i += 1;
        }
        i += 1;
    }
    Ok(o)
}

// ===== GET / SET and friends =====

/// Reads the string at `key`: None if absent, WRONGTYPE if not a string.
pub fn op_get<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<Str<'a>>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => as_str(e.value()).map(Some),
    }
}

/// When SET writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// Only if the key does not exist (NX).
    Nx,
    /// Only if the key exists (XX).
    Xx,
}

/// What SET does with the key's TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Remove it (plain SET).
    Clear,
    /// Keep it (KEEPTTL).
    Keep,
    /// Expire at this unix ms.
    At(i64),
}

/// How SET writes.
#[derive(Clone, Copy, Debug)]
pub struct SetHow {
    pub cond: Cond,
    pub ttl: Ttl,
    /// Return the old value (SET GET, GETSET); the old value must then be a string.
    pub get: bool,
}

/// What SET did.
#[derive(Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// False when NX/XX stopped the write.
    pub written: bool,
    /// The previous value, when asked for.
    pub old: Option<Bytes>,
}

/// SET in all its forms. With `get`, a non-string old value fails with WRONGTYPE before anything is
/// written.
pub fn op_set(
    db: &mut Db,
    key: &[u8],
    value: Value,
    how: SetHow,
    now: i64,
) -> Result<SetOutcome, CmdError> {
    let old = match how.get {
        true => op_get(db, key, now)?.map(Str::to_bytes),
        false => None,
    };
    let written = match how.cond {
        Cond::Always => true,
        Cond::Nx => !db.contains(key, now),
        Cond::Xx => db.contains(key, now),
    };
    if written {
        match how.ttl {
            Ttl::Clear => db.set(key, value, None, now),
            Ttl::Keep => db.set_keep_ttl(key, value, now),
            Ttl::At(at) => db.set(key, value, Some(at), now),
        };
        db.notify(notify::STRING, "set", key);
        if matches!(how.ttl, Ttl::At(_)) {
            db.notify(notify::GENERIC, "expire", key);
        }
    }
    Ok(SetOutcome { written, old })
}

/// GET key → bulk string or null.
fn get(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let key = &cx.args[1];
    match op_get(cx.shard.db_mut(cx.db), key, now)? {
        Some(s) => s.reply(cx.out),
        None => cx.out.null(),
    }
    Ok(())
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT unix-s | PXAT unix-ms | KEEPTTL]
/// → OK, or null when NX/XX stopped it; with GET, the old value (or null) instead.
fn set(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut a = cx.args();
    let key = a.next_bytes()?;
    let value = a.next_bytes()?;
    let o = parse_opts(a.take_rest(), true)?;
    let now = cx.now;
    let ttl = match o.expire {
        Some(e) => Ttl::At(e.deadline(now, "set")?),
        None if o.keepttl => Ttl::Keep,
        None => Ttl::Clear,
    };
    let cond = match (o.nx, o.xx) {
        (true, _) => Cond::Nx,
        (_, true) => Cond::Xx,
        _ => Cond::Always,
    };
    let how = SetHow {
        cond,
        ttl,
        get: o.get,
    };
    let r = op_set(cx.db(), key, encode(value), how, now)?;
    if let Ttl::At(at) = ttl {
        // Redis 7.0 propagates SET key value PXAT ms (its other options dropped).
        let (k, v) = (key.clone(), value.clone());
        cx.propagate_as(|| set_pxat(k, v, at));
    }
    match (o.get, r) {
        (true, SetOutcome { old: Some(old), .. }) => cx.out.bulk(&old),
        (true, _) | (false, SetOutcome { written: false, .. }) => cx.out.null(),
        (false, _) => cx.out.ok(),
    }
    Ok(())
}

/// SETNX key value → 1 if set, 0 if the key existed.
fn setnx(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, value, now) = (&cx.args[1], &cx.args[2], cx.now);
    let how = SetHow {
        cond: Cond::Nx,
        ttl: Ttl::Clear,
        get: false,
    };
    let r = op_set(cx.db(), key, encode(value), how, now)?;
    cx.out.int(i64::from(r.written));
    Ok(())
}

/// SETEX / PSETEX: key, time in `kind`'s unit, value → OK.
fn set_with_expire(cx: &mut ShardCtx<'_>, kind: ExpireKind, name: &'static str) -> CmdResult {
    let (key, value, now) = (&cx.args[1], &cx.args[3], cx.now);
    let expire = ExpireArg {
        kind,
        value: &cx.args[2],
    };
    let at = expire.deadline(now, name)?;
    let how = SetHow {
        cond: Cond::Always,
        ttl: Ttl::At(at),
        get: false,
    };
    op_set(cx.db(), key, encode(value), how, now)?;
    cx.propagate_as(|| set_pxat(key.clone(), value.clone(), at));
    cx.out.ok();
    Ok(())
}

/// The propagated form of a SET with a relative or second-based TTL (Redis 7.0's).
fn set_pxat(key: Bytes, value: Bytes, at: i64) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"SET"),
        key,
        value,
        Bytes::from_static(b"PXAT"),
        Bytes::from(at.to_string()),
    ]
}

/// SETEX key seconds value → OK.
fn setex(cx: &mut ShardCtx<'_>) -> CmdResult {
    set_with_expire(cx, ExpireKind::Ex, "setex")
}

/// PSETEX key milliseconds value → OK.
fn psetex(cx: &mut ShardCtx<'_>) -> CmdResult {
    set_with_expire(cx, ExpireKind::Px, "psetex")
}

/// What GETEX does to the TTL.
#[derive(Clone, Copy, Debug)]
pub enum GetEx<'a> {
    Keep,
    Persist,
    Expire(ExpireArg<'a>),
}

/// GETEX: the value (None if absent), after changing the TTL. The expire time is validated only once
/// the key is known to hold a string, as Redis does; an absolute time already past deletes the key.
pub fn op_getex(
    db: &mut Db,
    key: &[u8],
    ttl: GetEx<'_>,
    now: i64,
    out: &mut ReplyBuf,
) -> CmdResult {
    // One lookup, in Redis's order: a missing key is nil and another type WRONGTYPE before the
    // expire time is checked. The value is written straight into the reply, and only once the
    // time is known to be valid: a bad time on a huge value costs no copy of it.
    let Some(value) = op_get(db, key, now)? else {
        out.null();
        return Ok(());
    };
    let expire = match &ttl {
        GetEx::Expire(e) => Some((e.kind.absolute(), e.deadline(now, "getex")?)),
        _ => None,
    };
    value.reply(out);
    match expire {
        Some((true, at)) if at <= now => {
            db.delete(key, now);
            db.notify(notify::GENERIC, "del", key);
        }
        Some((_, at)) => {
            db.set_expire(key, Some(at), now);
            db.notify(notify::GENERIC, "expire", key);
        }
        None if matches!(ttl, GetEx::Persist)
            && db.peek(key, now).is_some_and(|e| e.expire().is_some()) =>
        {
            db.set_expire(key, None, now);
            db.notify(notify::GENERIC, "persist", key);
        }
        None => {}
    }
    Ok(())
}

/// GETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST] → bulk string or null.
fn getex(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut a = cx.args();
    let key = a.next_bytes()?;
    let o = parse_opts(a.take_rest(), false)?;
    let ttl = match (o.expire, o.persist) {
        (Some(e), _) => GetEx::Expire(e),
        (None, true) => GetEx::Persist,
        (None, false) => GetEx::Keep,
    };
    let now = cx.now;
    // Propagated as the TTL change it made: PEXPIREAT ms, PERSIST, or DEL for a time past.
    match ttl {
        GetEx::Expire(e) => {
            if let Ok(at) = e.deadline(now, "getex") {
                let k = key.clone();
                cx.propagate_as(|| match e.kind.absolute() && at <= now {
                    true => vec![Bytes::from_static(b"DEL"), k],
                    false => vec![
                        Bytes::from_static(b"PEXPIREAT"),
                        k,
                        Bytes::from(at.to_string()),
                    ],
                });
            }
        }
        GetEx::Persist => {
            let k = key.clone();
            cx.propagate_as(|| vec![Bytes::from_static(b"PERSIST"), k]);
        }
        GetEx::Keep => {}
    }
    let db = cx.shard.db_mut(cx.db);
    op_getex(db, key, ttl, now, cx.out)
}

/// GETDEL: the value (None if absent), then deletes the key.
pub fn op_getdel(db: &mut Db, key: &[u8], now: i64) -> Result<Option<Bytes>, CmdError> {
    let value = op_get(db, key, now)?.map(Str::to_bytes);
    if value.is_some() {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    }
    Ok(value)
}

/// GETDEL key → bulk string or null.
fn getdel(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    cx.propagate_as(|| vec![Bytes::from_static(b"DEL"), cx.args[1].clone()]);
    match op_getdel(cx.shard.db_mut(cx.db), &cx.args[1], now)? {
        Some(v) => cx.out.bulk(&v),
        None => cx.out.null(),
    }
    Ok(())
}

/// GETSET key value → the old value or null; the key loses its TTL.
fn getset(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, value, now) = (&cx.args[1], &cx.args[2], cx.now);
    let how = SetHow {
        cond: Cond::Always,
        ttl: Ttl::Clear,
        get: true,
    };
    match op_set(cx.db(), key, encode(value), how, now)?.old {
        Some(old) => cx.out.bulk(&old),
        None => cx.out.null(),
    }
    Ok(())
}

// ===== MGET / MSET / MSETNX =====

/// Values of `keys` (None for missing or non-string keys, as MGET answers).
pub fn op_mget(db: &mut Db, keys: &[Bytes], now: i64) -> Vec<Option<Bytes>> {
    keys.iter()
        .map(|k| op_get(db, k, now).ok().flatten().map(Str::to_bytes))
        .collect()
}

/// Sets every (key, value) in order; the keys lose their TTLs.
pub fn op_mset(db: &mut Db, pairs: &[(Bytes, Bytes)], now: i64) {
    for (k, v) in pairs {
        db.set(k, encode(v), None, now);
        db.notify(notify::STRING, "set", k);
    }
}

/// True if any of the keys of `pairs` exists (MSETNX's check).
pub fn op_any_exists(db: &mut Db, pairs: &[(Bytes, Bytes)], now: i64) -> bool {
    pairs.iter().any(|(k, _)| db.contains(k, now))
}

/// MGET's reply.
fn reply_values(out: &mut ReplyBuf, values: &[Option<Bytes>]) {
    out.array(values.len());
    for v in values {
        match v {
            Some(b) => out.bulk(b),
            None => out.null(),
        }
    }
}

/// MGET key [key ...] → the values, nil for missing or non-string keys. One read per shard.
fn mget<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now, args) = (cx.db, cx.now, cx.args);
        let keys = &args[1..];
        let parts = cx
            .scatter(keys, |k| k, move |s, part| op_mget(s.db_mut(db), part, now))
            .await;
        reply_values(cx.out, &in_order(keys.len(), parts));
        Ok(())
    })
}

/// The (key, value) pairs of MSET/MSETNX, or the arity error Redis gives for an odd count.
fn pairs(args: &[Bytes], name: &str) -> Result<Vec<(Bytes, Bytes)>, CmdError> {
    let rest = &args[1..];
    if !rest.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(rest
        .chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect())
}

fn pair_key(pair: &(Bytes, Bytes)) -> &Bytes {
    &pair.0
}

/// MSET key value [key value ...] → OK. Each shard sets its pairs.
fn mset<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let pairs = pairs(cx.args, "mset")?;
        let (db, now) = (cx.db, cx.now);
        cx.scatter(&pairs, pair_key, move |s, part| {
            op_mset(s.db_mut(db), part, now)
        })
        .await;
        cx.out.ok();
        Ok(())
    })
}

/// MSETNX key value [key value ...] → 1 if every key was set, 0 (setting nothing) if any existed.
/// Across shards the exclusive locks are held from the existence check through the writes, so no
/// other client can create one of the keys in between.
fn msetnx<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let pairs = pairs(cx.args, "msetnx")?;
        let (db, now) = (cx.db, cx.now);
        let exists = cx
            .scatter(&pairs, pair_key, move |s, part| {
                op_any_exists(s.db_mut(db), part, now)
            })
            .await;
        let write = !exists.iter().any(|(_, found)| *found);
        if write {
            cx.scatter(&pairs, pair_key, move |s, part| {
                op_mset(s.db_mut(db), part, now)
            })
            .await;
        }
        cx.out.int(i64::from(write));
        Ok(())
    })
}

// ===== APPEND / STRLEN / SETRANGE / GETRANGE =====

/// APPEND: the new length. A new key gets the value encoded as SET would; an existing string becomes
/// raw and grows in place.
pub fn op_append(db: &mut Db, key: &[u8], tail: &Bytes, now: i64) -> Result<usize, CmdError> {
    let Some(mut e) = db.modify(key, now) else {
        db.set(key, encode(tail), None, now);
        return Ok(tail.len());
    };
    if let ValueRef::Obj(Object::Str(s)) = e.value() {
        check_len(s.len(), tail.len())?;
        if let Some(Object::Str(s)) = e.object_mut() {
            s.extend_from_slice(tail);
            return Ok(s.len());
        }
    }
    let cur = as_str(e.value())?;
    check_len(cur.len(), tail.len())?;
    let mut s = cur.as_bytes().into_owned();
    s.extend_from_slice(tail);
    let len = s.len();
    e.set_value(raw(s));
    Ok(len)
}

/// APPEND key value → the new length.
fn append(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = op_append(cx.shard.db_mut(cx.db), &cx.args[1], &cx.args[2], now)?;
    cx.notify(notify::STRING, "append", &cx.args[1]);
    cx.out.int(n as i64);
    Ok(())
}

/// STRLEN: the length of the string (0 if absent).
pub fn op_strlen(db: &mut Db, key: &[u8], now: i64) -> Result<usize, CmdError> {
    Ok(op_get(db, key, now)?.map_or(0, Str::len))
}

/// STRLEN key → integer.
fn strlen(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = op_strlen(cx.shard.db_mut(cx.db), &cx.args[1], now)?;
    cx.out.int(n as i64);
    Ok(())
}

/// Writes `value` at `offset` of `s`, zero-padding as needed.
fn write_at(s: &mut Vec<u8>, offset: usize, value: &[u8]) {
    let end = offset + value.len();
    if s.len() < end {
        s.resize(end, 0);
    }
    s[offset..end].copy_from_slice(value);
}

/// SETRANGE: the new length. Writing nothing changes nothing (and creates no key); the result is a raw
/// string modified in place.
pub fn op_setrange(
    db: &mut Db,
    key: &[u8],
    offset: usize,
    value: &[u8],
    now: i64,
) -> Result<usize, CmdError> {
    let Some(mut e) = db.modify(key, now) else {
        if value.is_empty() {
            return Ok(0);
        }
        check_len(offset, value.len())?;
        let mut s = Vec::new();
        write_at(&mut s, offset, value);
        let len = s.len();
        db.set(key, raw(s), None, now);
        return Ok(len);
    };
    if let ValueRef::Obj(Object::Str(s)) = e.value() {
        if value.is_empty() {
            return Ok(s.len());
        }
        check_len(offset, value.len())?;
        if let Some(Object::Str(s)) = e.object_mut() {
            write_at(s, offset, value);
            return Ok(s.len());
        }
    }
    let cur = as_str(e.value())?;
    if value.is_empty() {
        return Ok(cur.len());
    }
    check_len(offset, value.len())?;
    let mut s = cur.as_bytes().into_owned();
    write_at(&mut s, offset, value);
    let len = s.len();
    e.set_value(raw(s));
    Ok(len)
}

/// SETRANGE key offset value → the new length.
fn setrange(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut a = cx.args();
    let key = a.next_bytes()?;
    let offset = a.next_i64()?;
    let value = a.next_bytes()?;
    let offset =
        usize::try_from(offset).map_err(|_| CmdError::msg("ERR offset is out of range"))?;
    let now = cx.now;
    let n = op_setrange(cx.db(), key, offset, value, now)?;
    if !value.is_empty() {
        cx.notify(notify::STRING, "setrange", key);
    }
    cx.out.int(n as i64);
    Ok(())
}

/// The byte range GETRANGE answers for `start..=end` (negative counts from the end) of a `len`-byte
/// string, clamped as Redis clamps it; None for an empty answer.
pub fn clamp_range(len: usize, start: i64, end: i64) -> Option<std::ops::Range<usize>> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    // len ≤ MAX_STRING_LEN, so adding a negative index cannot overflow.
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (len > 0 && start <= end).then(|| start as usize..end as usize + 1)
}

/// GETRANGE: the bytes of the string in `start..=end` (empty if the key is absent).
pub fn op_getrange<'a>(
    db: &'a mut Db,
    key: &[u8],
    start: i64,
    end: i64,
    now: i64,
) -> Result<Cow<'a, [u8]>, CmdError> {
    let Some(s) = op_get(db, key, now)? else {
        return Ok(Cow::Borrowed(&[]));
    };
    Ok(match (clamp_range(s.len(), start, end), s.as_bytes()) {
        (None, _) => Cow::Borrowed(&[]),
        (Some(r), Cow::Borrowed(b)) => Cow::Borrowed(&b[r]),
        (Some(r), Cow::Owned(b)) => Cow::Owned(b[r].to_vec()),
    })
}

/// GETRANGE key start end (and SUBSTR) → bulk string.
fn getrange(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut a = cx.args();
    let key = a.next_bytes()?;
    let start = a.next_i64()?;
    let end = a.next_i64()?;
    let now = cx.now;
    let bytes = op_getrange(cx.shard.db_mut(cx.db), key, start, end, now)?;
    cx.out.bulk(&bytes);
    Ok(())
}

// ===== INCR / DECR / INCRBY / DECRBY / INCRBYFLOAT =====

/// Adds `by` to the integer at `key` (0 if absent) and returns the result, int-encoded, keeping the TTL.
pub fn op_incr_by(db: &mut Db, key: &[u8], by: i64, now: i64) -> Result<i64, CmdError> {
    let Some(mut e) = db.modify(key, now) else {
        db.set(key, Value::Int(by), None, now);
        return Ok(by);
    };
    let cur = match as_str(e.value())? {
        Str::Int(i) => i,
        Str::Bytes(b) => parse_i64(b).ok_or(CmdError::NotInteger)?,
    };
    let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    if !e.set_int(new) {
        e.set_value(Value::Int(new));
    }
    Ok(new)
}

fn incr_by(cx: &mut ShardCtx<'_>, by: i64) -> CmdResult {
    let now = cx.now;
    let v = op_incr_by(cx.shard.db_mut(cx.db), &cx.args[1], by, now)?;
    cx.notify(notify::STRING, "incrby", &cx.args[1]);
    cx.out.int(v);
    Ok(())
}

/// INCR key → the new value.
fn incr(cx: &mut ShardCtx<'_>) -> CmdResult {
    incr_by(cx, 1)
}

/// DECR key → the new value.
fn decr(cx: &mut ShardCtx<'_>) -> CmdResult {
    incr_by(cx, -1)
}

/// INCRBY key increment → the new value.
fn incrby(cx: &mut ShardCtx<'_>) -> CmdResult {
    let by = Args::new(cx.args, 2).next_i64()?;
    incr_by(cx, by)
}

/// DECRBY key decrement → the new value.
fn decrby(cx: &mut ShardCtx<'_>) -> CmdResult {
    let by = Args::new(cx.args, 2).next_i64()?;
    let by = by
        .checked_neg()
        .ok_or(CmdError::msg("ERR decrement would overflow"))?;
    incr_by(cx, by)
}

/// Adds the float `by` to the number at `key` (0 if absent) and returns the result as INCRBYFLOAT
/// formats it; the result is stored as a string, keeping the TTL. The stored value is checked before
/// the increment, as Redis does (both fail with `ERR value is not a valid float`).
pub fn op_incr_by_float(db: &mut Db, key: &[u8], by: &[u8], now: i64) -> Result<Bytes, CmdError> {
    let mut entry = db.modify(key, now);
    // Redis's `long double` arithmetic, emulated exactly (see `LongDouble`), so every sum prints
    // digit for digit as Redis prints it (1/41 then -1/41 gives "0", not a rounding residue).
    let cur = match &entry {
        None => LongDouble::from_i64(0),
        Some(e) => match as_str(e.value())? {
            Str::Int(i) => LongDouble::from_i64(i),
            Str::Bytes(b) => LongDouble::parse(b).ok_or(CmdError::NotFloat)?,
        },
    };
    let inc = LongDouble::parse(by).ok_or(CmdError::NotFloat)?;
    let sum = cur + inc;
    if sum.is_infinite() {
        return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
    }
    let text = Bytes::from(sum.to_human());
    let value = Value::Str(text.clone());
    match &mut entry {
        Some(e) => e.set_value(value),
        None => {
            drop(entry);
            db.set(key, value, None, now);
        }
    }
    Ok(text)
}

/// INCRBYFLOAT key increment → the new value as a bulk string.
fn incrbyfloat(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let v = op_incr_by_float(cx.shard.db_mut(cx.db), &cx.args[1], &cx.args[2], now)?;
    cx.notify(notify::STRING, "incrbyfloat", &cx.args[1]);
    // Propagated as the value it set, so a replay does not depend on float formatting.
    cx.propagate_as(|| {
        vec![
            Bytes::from_static(b"SET"),
            cx.args[1].clone(),
            v.clone(),
            Bytes::from_static(b"KEEPTTL"),
        ]
    });
    cx.out.bulk(&v);
    Ok(())
}

// ===== LCS =====

/// LCS reads both keys before looking at its options, so a non-string key is reported first.
fn lcs_operand(db: &mut Db, key: &[u8], now: i64) -> Result<Bytes, CmdError> {
    match op_get(db, key, now) {
        Ok(v) => Ok(v.map(Str::to_bytes).unwrap_or_default()),
        Err(_) => Err(CmdError::msg(
            "ERR The specified keys must contain string values",
        )),
    }
}

/// The LCS operands of `keys` (missing keys read as empty strings).
pub fn op_lcs_operands(db: &mut Db, keys: &[Bytes], now: i64) -> Vec<Result<Bytes, CmdError>> {
    keys.iter().map(|k| lcs_operand(db, k, now)).collect()
}

/// One common run of an LCS: `a[a_start..=a_end]` equals `b[b_start..=b_end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a_start: usize,
    pub a_end: usize,
    pub b_start: usize,
    pub b_end: usize,
}

impl LcsMatch {
    /// Length of the run.
    pub fn match_len(&self) -> usize {
        self.a_end - self.a_start + 1
    }
}

/// The longest common subsequence of two strings.
#[derive(Debug, PartialEq, Eq)]
pub struct Lcs {
    pub len: usize,
    /// The subsequence itself.
    pub text: Vec<u8>,
    /// Its runs, from the end of the strings backwards (Redis's order).
    pub matches: Vec<LcsMatch>,
}

/// Computes the LCS of `a` and `b` with Redis's dynamic programme and backtracking, so that among
/// several longest subsequences the same one is found. The table is bounded like Redis bounds it.
pub fn lcs_of(a: &[u8], b: &[u8]) -> Result<Lcs, CmdError> {
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1).saturating_mul(blen as u64 + 1);
    if cells.saturating_mul(4) > MAX_STRING_LEN as u64 {
        return Err(CmdError::msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let cells = cells as usize;
    let mut t: Vec<u32> = Vec::new();
    t.try_reserve_exact(cells).map_err(|_| {
        CmdError::msg("ERR Insufficient memory, failed allocating transient memory for LCS")
    })?;
    t.resize(cells, 0);
    let w = blen + 1;
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let len = t[alen * w + blen] as usize;
    let mut text = vec![0; len];
    let mut matches = Vec::new();
    let mut run: Option<LcsMatch> = None;
    let (mut i, mut j, mut k) = (alen, blen, len);
    while i > 0 && j > 0 {
        let emit;
        if a[i - 1] == b[j - 1] {
            text[k - 1] = a[i - 1];
            // After a match the walk steps diagonally, so a following match always extends the run.
            let r = run.get_or_insert(LcsMatch {
                a_start: i,
                a_end: i - 1,
                b_start: j,
                b_end: j - 1,
            });
            r.a_start -= 1;
            r.b_start -= 1;
            emit = r.a_start == 0 || r.b_start == 0;
            i -= 1;
            j -= 1;
            k -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        if emit {
            matches.extend(run.take());
        }
    }
    Ok(Lcs { len, text, matches })
}

/// LCS options.
#[derive(Default)]
struct LcsOpts {
    len: bool,
    idx: bool,
    min_match_len: usize,
    with_match_len: bool,
}

fn parse_lcs_opts(args: &[Bytes]) -> Result<LcsOpts, CmdError> {
    let mut o = LcsOpts::default();
    let mut a = Args::new(args, 3);
    while let Some(opt) = a.peek() {
        if a.eat("idx") {
            o.idx = true;
        } else if a.eat("len") {
            o.len = true;
        } else if a.eat("withmatchlen") {
            o.with_match_len = true;
        } else if eq_ci(opt, "minmatchlen") && a.remaining() > 1 {
            a.next_bytes()?;
            o.min_match_len = usize::try_from(a.next_i64()?).unwrap_or(0);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if o.len && o.idx {
        return Err(CmdError::msg(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// Parses LCS's options from `args`, computes the LCS of `a` and `b` and writes the reply: the string,
/// its length (LEN), or a map of `matches` and `len` (IDX).
fn lcs_reply(a: &[u8], b: &[u8], args: &[Bytes], out: &mut ReplyBuf) -> CmdResult {
    let o = parse_lcs_opts(args)?;
    let lcs = lcs_of(a, b)?;
    if o.idx {
        let shown: Vec<&LcsMatch> = lcs
            .matches
            .iter()
            .filter(|m| m.match_len() >= o.min_match_len)
            .collect();
        out.map(2);
        out.bulk(b"matches");
        out.array(shown.len());
        for m in shown {
            out.array(2 + usize::from(o.with_match_len));
            out.array(2);
            out.int(m.a_start as i64);
            out.int(m.a_end as i64);
            out.array(2);
            out.int(m.b_start as i64);
            out.int(m.b_end as i64);
            if o.with_match_len {
                out.int(m.match_len() as i64);
            }
        }
        out.bulk(b"len");
        out.int(lcs.len as i64);
    } else if o.len {
        out.int(lcs.len as i64);
    } else {
        out.bulk(&lcs.text);
    }
    Ok(())
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: both values are read (on their
/// shards), then the LCS is computed where the command runs.
fn lcs<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now, args) = (cx.db, cx.now, cx.args);
        let keys = &args[1..3];
        let parts = cx
            .scatter(
                keys,
                |k| k,
                move |s, part| op_lcs_operands(s.db_mut(db), part, now),
            )
            .await;
        let mut operands = in_order(2, parts).into_iter();
        let (Some(a), Some(b)) = (operands.next(), operands.next()) else {
            return Err(CmdError::msg(
                "ERR internal error: an LCS operand was not read",
            ));
        };
        lcs_reply(&a?, &b?, args, cx.out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{run, run_at, shard};
    use strata_shard::Shard;

    const T0: i64 = 1_700_000_000_000;

    /// Runs at the fixed time T0 + `dt` ms.
    fn at(s: &mut Shard, dt: i64, cmd: &[&str]) -> String {
        run_at(s, 0, T0 + dt, cmd)
    }

    fn expire_of(s: &mut Shard, key: &str, dt: i64) -> Option<i64> {
        s.db_mut(0)
            .peek(key.as_bytes(), T0 + dt)
            .and_then(|e| e.expire())
    }

    fn encoding(s: &mut Shard, key: &str) -> &'static str {
        s.db_mut(0)
            .peek(key.as_bytes(), T0)
            .map_or("none", |e| strata_node::value::encoding_name(e.value()))
    }

    #[test]
    fn get_set_mget() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["get", "k"]), "$-1");
        assert_eq!(run(&mut s, &["set", "k", "v"]), "+OK");
        assert_eq!(run(&mut s, &["get", "k"]), "$1:v");
        assert_eq!(run(&mut s, &["set", "n", "42"]), "+OK");
        assert_eq!(run(&mut s, &["mget", "k", "n", "x"]), "*3[$1:v,$2:42,$-1]");
        assert_eq!(
            run(&mut s, &["get"]),
            "-ERR wrong number of arguments for 'get' command"
        );
    }

    #[test]
    fn set_chooses_redis_encodings() {
        let mut s = shard();
        let long = "x".repeat(45);
        for (v, enc) in [
            ("12", "int"),
            ("-9223372036854775808", "int"),
            ("012", "embstr"),
            ("9223372036854775808", "embstr"),
            (&"y".repeat(44), "embstr"),
            (&long, "raw"),
        ] {
            at(&mut s, 0, &["set", "k", v]);
            assert_eq!(encoding(&mut s, "k"), enc, "{v}");
            assert_eq!(at(&mut s, 0, &["get", "k"]), format!("${}:{v}", v.len()));
        }
    }

    #[test]
    fn set_nx_xx_get() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["set", "k", "1", "xx"]), "$-1");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$-1");
        assert_eq!(at(&mut s, 0, &["set", "k", "1", "nx"]), "+OK");
        assert_eq!(at(&mut s, 0, &["set", "k", "2", "NX"]), "$-1");
        assert_eq!(at(&mut s, 0, &["set", "k", "3", "Xx"]), "+OK");
        assert_eq!(at(&mut s, 0, &["set", "k", "4", "get"]), "$1:3");
        assert_eq!(at(&mut s, 0, &["set", "k", "5", "nx", "get"]), "$1:4");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$1:4");
        assert_eq!(at(&mut s, 0, &["set", "new", "v", "nx", "get"]), "$-1");
        assert_eq!(at(&mut s, 0, &["get", "new"]), "$1:v");
        assert_eq!(at(&mut s, 0, &["set", "none", "v", "xx", "get"]), "$-1");
        assert_eq!(at(&mut s, 0, &["get", "none"]), "$-1");
        // Repeating an option is allowed, as in Redis.
        assert_eq!(at(&mut s, 0, &["set", "k", "6", "nx", "nx"]), "$-1");
        assert_eq!(at(&mut s, 0, &["set", "k", "7", "get", "get"]), "$1:4");
    }

    #[test]
    fn set_syntax_errors() {
        let mut s = shard();
        let syntax = "-ERR syntax error";
        for bad in [
            &["set", "k", "v", "nx", "xx"][..],
            &["set", "k", "v", "xx", "nx"],
            &["set", "k", "v", "ex"],
            &["set", "k", "v", "ex", "10", "px", "10"],
            &["set", "k", "v", "px", "10", "ex", "10"],
            &["set", "k", "v", "exat", "10", "pxat", "10"],
            &["set", "k", "v", "ex", "10", "keepttl"],
            &["set", "k", "v", "keepttl", "ex", "10"],
            &["set", "k", "v", "persist"],
            &["set", "k", "v", "foo"],
            &["set", "k", "v", "nxx"],
            &["set", "k", "v", "10"],
        ] {
            assert_eq!(at(&mut s, 0, bad), syntax, "{bad:?}");
        }
        assert_eq!(
            at(&mut s, 0, &["set", "k"]),
            "-ERR wrong number of arguments for 'set' command"
        );
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$-1");
    }

    #[test]
    fn set_expiry_options() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["set", "k", "v", "ex", "10"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 10_000));
        assert_eq!(at(&mut s, 0, &["set", "k", "v", "px", "1500"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 1500));
        let exat = ((T0 + 60_000) / 1000).to_string();
        assert_eq!(at(&mut s, 0, &["set", "k", "v", "exat", &exat]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 60_000));
        let pxat = (T0 + 70_001).to_string();
        assert_eq!(at(&mut s, 0, &["set", "k", "v", "PXAT", &pxat]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 70_001));
        // KEEPTTL keeps it, a plain SET clears it.
        assert_eq!(at(&mut s, 0, &["set", "k", "w", "keepttl"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 70_001));
        assert_eq!(at(&mut s, 0, &["set", "k", "w"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), None);
        // The last expiry wins; an earlier one is never validated (as in Redis).
        assert_eq!(
            at(&mut s, 0, &["set", "k", "v", "ex", "abc", "ex", "5"]),
            "+OK"
        );
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 5000));
        // The key expires on time.
        assert_eq!(at(&mut s, 4999, &["get", "k"]), "$1:v");
        assert_eq!(at(&mut s, 5000, &["get", "k"]), "$-1");
        // An absolute time in the past stores a key that is already gone.
        assert_eq!(at(&mut s, 0, &["set", "k", "v", "pxat", "1"]), "+OK");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$-1");
    }

    #[test]
    fn set_invalid_expire_times() {
        let mut s = shard();
        let invalid = "-ERR invalid expire time in 'set' command";
        for bad in [
            &["set", "k", "v", "ex", "0"][..],
            &["set", "k", "v", "ex", "-1"],
            &["set", "k", "v", "px", "0"],
            &["set", "k", "v", "exat", "0"],
            &["set", "k", "v", "pxat", "-5"],
            &["set", "k", "v", "ex", "9223372036854776"],
            &["set", "k", "v", "exat", "9223372036854776"],
            &["set", "k", "v", "px", "9223372036854775807"],
        ] {
            assert_eq!(at(&mut s, 0, bad), invalid, "{bad:?}");
        }
        assert_eq!(
            at(&mut s, 0, &["set", "k", "v", "ex", "1.5"]),
            "-ERR value is not an integer or out of range"
        );
        assert_eq!(
            at(&mut s, 0, &["set", "k", "v", "exat", "9223372036854775"]),
            "+OK"
        );
        assert_eq!(
            at(&mut s, 0, &["set", "k", "v", "pxat", "9223372036854775807"]),
            "+OK"
        );
        assert_eq!(expire_of(&mut s, "k", 0), Some(i64::MAX));
        assert_eq!(
            at(&mut s, 0, &["setex", "k", "0", "v"]),
            "-ERR invalid expire time in 'setex' command"
        );
        assert_eq!(
            at(&mut s, 0, &["psetex", "k", "-1", "v"]),
            "-ERR invalid expire time in 'psetex' command"
        );
        assert_eq!(
            at(&mut s, 0, &["setex", "k", "x", "v"]),
            "-ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn setnx_setex_psetex_getset() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["setnx", "k", "a"]), ":1");
        assert_eq!(at(&mut s, 0, &["setnx", "k", "b"]), ":0");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$1:a");
        assert_eq!(at(&mut s, 0, &["setex", "k", "10", "b"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 10_000));
        assert_eq!(at(&mut s, 0, &["psetex", "k", "250", "c"]), "+OK");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 250));
        assert_eq!(at(&mut s, 0, &["getset", "k", "d"]), "$1:c");
        assert_eq!(expire_of(&mut s, "k", 0), None);
        assert_eq!(at(&mut s, 0, &["getset", "new", "1"]), "$-1");
        assert_eq!(encoding(&mut s, "new"), "int");
        assert_eq!(at(&mut s, 300, &["get", "k"]), "$1:d");
    }

    #[test]
    fn getex_options() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["getex", "k"]), "$-1");
        // A missing key answers nil before the expire time is looked at.
        assert_eq!(at(&mut s, 0, &["getex", "k", "ex", "-1"]), "$-1");
        at(&mut s, 0, &["set", "k", "v"]);
        assert_eq!(at(&mut s, 0, &["getex", "k", "ex", "10"]), "$1:v");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 10_000));
        assert_eq!(at(&mut s, 0, &["getex", "k", "px", "20"]), "$1:v");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 20));
        let exat = ((T0 + 30_000) / 1000).to_string();
        assert_eq!(at(&mut s, 0, &["getex", "k", "exat", &exat]), "$1:v");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 30_000));
        assert_eq!(at(&mut s, 0, &["getex", "k"]), "$1:v");
        assert_eq!(expire_of(&mut s, "k", 0), Some(T0 + 30_000));
        assert_eq!(at(&mut s, 0, &["getex", "k", "persist"]), "$1:v");
        assert_eq!(expire_of(&mut s, "k", 0), None);
        assert_eq!(at(&mut s, 0, &["getex", "k", "persist", "persist"]), "$1:v");
        // An absolute time already past deletes the key after answering.
        let past = (T0 - 1).to_string();
        assert_eq!(at(&mut s, 0, &["getex", "k", "pxat", &past]), "$1:v");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$-1");
        at(&mut s, 0, &["set", "k", "v"]);
        for (bad, err) in [
            (
                &["getex", "k", "ex", "0"][..],
                "-ERR invalid expire time in 'getex' command",
            ),
            (
                &["getex", "k", "ex", "x"],
                "-ERR value is not an integer or out of range",
            ),
            (&["getex", "k", "ex", "10", "persist"], "-ERR syntax error"),
            (&["getex", "k", "persist", "px", "10"], "-ERR syntax error"),
            (&["getex", "k", "ex", "10", "px", "10"], "-ERR syntax error"),
            (&["getex", "k", "keepttl"], "-ERR syntax error"),
            (&["getex", "k", "nx"], "-ERR syntax error"),
            (&["getex", "k", "get"], "-ERR syntax error"),
            (&["getex", "k", "ex"], "-ERR syntax error"),
        ] {
            assert_eq!(at(&mut s, 0, bad), err, "{bad:?}");
        }
        assert_eq!(expire_of(&mut s, "k", 0), None);
    }

    #[test]
    fn getdel() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["getdel", "k"]), "$-1");
        at(&mut s, 0, &["set", "k", "7"]);
        assert_eq!(at(&mut s, 0, &["getdel", "k"]), "$1:7");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$-1");
        assert!(s.db_mut(0).is_empty());
    }

    #[test]
    fn mset_msetnx_on_one_shard() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["set", "a", "x", "ex", "10"]), "+OK");
        assert_eq!(
            at(&mut s, 0, &["mset", "a", "1", "b", "2", "a", "3"]),
            "+OK"
        );
        assert_eq!(at(&mut s, 0, &["mget", "a", "b"]), "*2[$1:3,$1:2]");
        assert_eq!(expire_of(&mut s, "a", 0), None);
        assert_eq!(
            at(&mut s, 0, &["mset", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'mset' command"
        );
        assert_eq!(at(&mut s, 0, &["msetnx", "c", "1", "a", "9"]), ":0");
        assert_eq!(at(&mut s, 0, &["mget", "a", "c"]), "*2[$1:3,$-1]");
        assert_eq!(at(&mut s, 0, &["msetnx", "c", "1", "d", "2"]), ":1");
        assert_eq!(at(&mut s, 0, &["mget", "c", "d"]), "*2[$1:1,$1:2]");
        assert_eq!(
            at(&mut s, 0, &["msetnx", "e", "1", "f"]),
            "-ERR wrong number of arguments for 'msetnx' command"
        );
        // An expired key does not count as existing.
        at(&mut s, 0, &["set", "g", "v", "px", "5"]);
        assert_eq!(at(&mut s, 5, &["msetnx", "g", "w"]), ":1");
    }

    #[test]
    fn append_and_strlen() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["strlen", "k"]), ":0");
        assert_eq!(at(&mut s, 0, &["append", "k", "12"]), ":2");
        assert_eq!(encoding(&mut s, "k"), "int");
        assert_eq!(at(&mut s, 0, &["append", "k", ""]), ":2");
        assert_eq!(encoding(&mut s, "k"), "raw");
        assert_eq!(at(&mut s, 0, &["append", "k", "34"]), ":4");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$4:1234");
        assert_eq!(at(&mut s, 0, &["strlen", "k"]), ":4");
        at(&mut s, 0, &["set", "n", "-100"]);
        assert_eq!(at(&mut s, 0, &["strlen", "n"]), ":4");
        at(&mut s, 0, &["set", "e", "hello", "ex", "10"]);
        assert_eq!(at(&mut s, 0, &["append", "e", " world"]), ":11");
        assert_eq!(encoding(&mut s, "e"), "raw");
        assert_eq!(expire_of(&mut s, "e", 0), Some(T0 + 10_000));
        assert_eq!(at(&mut s, 0, &["get", "e"]), "$11:hello world");
        assert_eq!(at(&mut s, 0, &["append", "new", "hello"]), ":5");
        assert_eq!(encoding(&mut s, "new"), "embstr");
    }

    #[test]
    fn incr_family() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["incr", "n"]), ":1");
        assert_eq!(at(&mut s, 0, &["incrby", "n", "10"]), ":11");
        assert_eq!(at(&mut s, 0, &["decr", "n"]), ":10");
        assert_eq!(at(&mut s, 0, &["decrby", "n", "-5"]), ":15");
        assert_eq!(encoding(&mut s, "n"), "int");
        at(&mut s, 0, &["set", "t", "5", "ex", "10"]);
        assert_eq!(at(&mut s, 0, &["incr", "t"]), ":6");
        assert_eq!(expire_of(&mut s, "t", 0), Some(T0 + 10_000));
        at(&mut s, 0, &["append", "r", "4"]);
        at(&mut s, 0, &["append", "r", "1"]);
        assert_eq!(encoding(&mut s, "r"), "raw");
        assert_eq!(at(&mut s, 0, &["incr", "r"]), ":42");
        assert_eq!(encoding(&mut s, "r"), "int");
        at(&mut s, 0, &["set", "max", "9223372036854775807"]);
        let overflow = "-ERR increment or decrement would overflow";
        assert_eq!(at(&mut s, 0, &["incr", "max"]), overflow);
        assert_eq!(at(&mut s, 0, &["decrby", "max", "-1"]), overflow);
        at(&mut s, 0, &["set", "min", "-9223372036854775808"]);
        assert_eq!(at(&mut s, 0, &["decr", "min"]), overflow);
        assert_eq!(
            at(&mut s, 0, &["decrby", "n", "-9223372036854775808"]),
            "-ERR decrement would overflow"
        );
        assert_eq!(
            at(&mut s, 0, &["incrby", "n", "-9223372036854775808"]),
            ":-9223372036854775793"
        );
        let not_int = "-ERR value is not an integer or out of range";
        for v in ["abc", " 1", "1 ", "01", "+1", "1.0", ""] {
            at(&mut s, 0, &["set", "bad", v]);
            assert_eq!(at(&mut s, 0, &["incr", "bad"]), not_int, "{v:?}");
        }
        assert_eq!(at(&mut s, 0, &["incrby", "n", "x"]), not_int);
        assert_eq!(
            at(&mut s, 0, &["incrby", "n", "9223372036854775808"]),
            not_int
        );
    }

    #[test]
    fn incrbyfloat() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "10.5"]), "$4:10.5");
        assert_eq!(encoding(&mut s, "f"), "embstr");
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "0.1"]), "$4:10.6");
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "-10.6"]), "$1:0");
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "5.0e3"]), "$4:5000");
        at(&mut s, 0, &["set", "i", "9223372036854775807"]);
        assert_eq!(
            at(&mut s, 0, &["incrbyfloat", "i", "1"]),
            "$19:9223372036854775808"
        );
        at(&mut s, 0, &["set", "t", "1", "px", "100"]);
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "t", "1.5"]), "$3:2.5");
        assert_eq!(expire_of(&mut s, "t", 0), Some(T0 + 100));
        let not_float = "-ERR value is not a valid float";
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "x"]), not_float);
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "f", "nan"]), not_float);
        at(&mut s, 0, &["set", "bad", "1x"]);
        assert_eq!(at(&mut s, 0, &["incrbyfloat", "bad", "1"]), not_float);
        assert_eq!(
            at(&mut s, 0, &["incrbyfloat", "f", "inf"]),
            "-ERR increment would produce NaN or Infinity"
        );
        assert_eq!(at(&mut s, 0, &["get", "f"]), "$4:5000");
    }

    #[test]
    fn getrange_and_substr() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["getrange", "k", "0", "-1"]), "$0:");
        at(&mut s, 0, &["set", "k", "This is a string"]);
        for (start, end, want) in [
            ("0", "3", "This"),
            ("-3", "-1", "ing"),
            ("0", "-1", "This is a string"),
            ("10", "100", "string"),
            ("5", "3", ""),
            ("-1", "-5", ""),
            ("-100", "2", "Thi"),
            ("100", "200", ""),
            (
                "-9223372036854775808",
                "9223372036854775807",
                "This is a string",
            ),
        ] {
            assert_eq!(
                at(&mut s, 0, &["getrange", "k", start, end]),
                format!("${}:{want}", want.len()),
                "{start} {end}"
            );
        }
        at(&mut s, 0, &["set", "n", "-1234"]);
        assert_eq!(at(&mut s, 0, &["substr", "n", "1", "2"]), "$2:12");
        at(&mut s, 0, &["set", "e", ""]);
        assert_eq!(at(&mut s, 0, &["getrange", "e", "0", "-1"]), "$0:");
        assert_eq!(
            at(&mut s, 0, &["getrange", "k", "a", "1"]),
            "-ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn setrange() {
        let mut s = shard();
        assert_eq!(at(&mut s, 0, &["setrange", "k", "5", ""]), ":0");
        assert!(s.db_mut(0).is_empty());
        assert_eq!(at(&mut s, 0, &["setrange", "k", "2", "ab"]), ":4");
        assert_eq!(at(&mut s, 0, &["get", "k"]), "$4:\0\0ab");
        assert_eq!(encoding(&mut s, "k"), "raw");
        at(&mut s, 0, &["set", "h", "Hello World", "ex", "10"]);
        assert_eq!(at(&mut s, 0, &["setrange", "h", "6", "Redis"]), ":11");
        assert_eq!(at(&mut s, 0, &["get", "h"]), "$11:Hello Redis");
        assert_eq!(expire_of(&mut s, "h", 0), Some(T0 + 10_000));
        assert_eq!(at(&mut s, 0, &["setrange", "h", "100", ""]), ":11");
        at(&mut s, 0, &["set", "n", "123"]);
        assert_eq!(at(&mut s, 0, &["setrange", "n", "1", "9"]), ":3");
        assert_eq!(at(&mut s, 0, &["get", "n"]), "$3:193");
        assert_eq!(encoding(&mut s, "n"), "raw");
        assert_eq!(
            at(&mut s, 0, &["setrange", "k", "-1", "x"]),
            "-ERR offset is out of range"
        );
        assert_eq!(
            at(&mut s, 0, &["setrange", "k", "x", "x"]),
            "-ERR value is not an integer or out of range"
        );
        let too_big = "-ERR string exceeds maximum allowed size (proto-max-bulk-len)";
        assert_eq!(at(&mut s, 0, &["setrange", "k", "536870912", "x"]), too_big);
        assert_eq!(
            at(&mut s, 0, &["setrange", "z", "9223372036854775807", "x"]),
            too_big
        );
        assert_eq!(at(&mut s, 0, &["get", "z"]), "$-1");
    }

    #[test]
    fn string_length_limit() {
        assert!(check_len(MAX_STRING_LEN - 1, 1).is_ok());
        assert!(check_len(MAX_STRING_LEN, 1).is_err());
        assert!(check_len(usize::MAX, 1).is_err());
    }

    #[test]
    fn lcs_command() {
        let mut s = shard();
        at(
            &mut s,
            0,
            &["mset", "{x}a", "ohmytext", "{x}b", "mynewtext"],
        );
        assert_eq!(at(&mut s, 0, &["lcs", "{x}a", "{x}b"]), "$6:mytext");
        assert_eq!(at(&mut s, 0, &["lcs", "{x}a", "{x}b", "len"]), ":6");
        assert_eq!(
            at(&mut s, 0, &["lcs", "{x}a", "{x}b", "idx"]),
            "*4[$7:matches,*2[*2[*2[:4,:7],*2[:5,:8]],*2[*2[:2,:3],*2[:0,:1]]],$3:len,:6]"
        );
        assert_eq!(
            at(
                &mut s,
                0,
                &[
                    "lcs",
                    "{x}a",
                    "{x}b",
                    "idx",
                    "minmatchlen",
                    "4",
                    "withmatchlen"
                ]
            ),
            "*4[$7:matches,*1[*3[*2[:4,:7],*2[:5,:8],:4]],$3:len,:6]"
        );
        assert_eq!(
            at(
                &mut s,
                0,
                &["lcs", "{x}a", "{x}b", "idx", "minmatchlen", "-3"]
            ),
            "*4[$7:matches,*2[*2[*2[:4,:7],*2[:5,:8]],*2[*2[:2,:3],*2[:0,:1]]],$3:len,:6]"
        );
        assert_eq!(at(&mut s, 0, &["lcs", "{x}a", "{x}missing"]), "$0:");
        assert_eq!(
            at(&mut s, 0, &["lcs", "{x}a", "{x}b", "len", "idx"]),
            "-ERR If you want both the length and indexes, please just use IDX."
        );
        assert_eq!(
            at(&mut s, 0, &["lcs", "{x}a", "{x}b", "minmatchlen"]),
            "-ERR syntax error"
        );
        assert_eq!(
            at(&mut s, 0, &["lcs", "{x}a", "{x}b", "minmatchlen", "x"]),
            "-ERR value is not an integer or out of range"
        );
        at(&mut s, 0, &["set", "{x}n", "12345"]);
        assert_eq!(at(&mut s, 0, &["lcs", "{x}n", "{x}a"]), "$0:");
        assert_eq!(at(&mut s, 0, &["lcs", "{x}n", "{x}n", "len"]), ":5");
    }

    #[test]
    fn lcs_backtracking_matches_redis() {
        let l = lcs_of(b"ohmytext", b"mynewtext").unwrap();
        assert_eq!((l.len, &l.text[..]), (6, &b"mytext"[..]));
        assert_eq!(l.matches.len(), 2);
        let l = lcs_of(b"", b"abc").unwrap();
        assert_eq!((l.len, l.text.len(), l.matches.len()), (0, 0, 0));
        let l = lcs_of(b"abc", b"abc").unwrap();
        assert_eq!(
            l.matches,
            vec![LcsMatch {
                a_start: 0,
                a_end: 2,
                b_start: 0,
                b_end: 2
            }]
        );
        let big = vec![b'a'; 20_000];
        assert_eq!(
            lcs_of(&big, &big).map(|l| l.len),
            Err(CmdError::msg(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
            ))
        );
    }

    #[test]
    fn expired_keys_read_as_missing_everywhere() {
        let mut s = shard();
        for cmd in [
            &["get", "k"][..],
            &["getex", "k"],
            &["getdel", "k"],
            &["getrange", "k", "0", "-1"],
            &["strlen", "k"],
            &["append", "k", "x"],
            &["incr", "k"],
            &["setrange", "k", "0", "x"],
            &["incrbyfloat", "k", "1"],
        ] {
            at(&mut s, 0, &["set", "k", "abc", "px", "10"]);
            let fresh = at(&mut s, 10, cmd);
            s.db_mut(0).clear();
            assert_eq!(fresh, at(&mut s, 10, cmd), "{cmd:?}");
            s.db_mut(0).clear();
        }
    }
}
