//! Bitmap commands (Redis's bitops.c): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO, over string values.
//!
//! The algorithms live in [`strata_core::bitops`]; this module parses arguments exactly as Redis
//! 7.0 does (including the order in which it checks them: e.g. BITCOUNT and BITPOS look the key up
//! before parsing the range, so a missing key answers 0 even for bad ranges) and applies the
//! results through the [`Db`] write path.
//!
//! Invariants:
//! * a write grows the string with zero bytes up to the highest byte it touches, never beyond
//!   Redis's 512 MB limit (offsets are refused with "bit offset is not an integer or out of range");
//! * the value becomes a raw string ([`Object::Str`]) as Redis's `dbUnshareStringValue` makes it,
//!   even when nothing changes — that conversion alone is not a modification (no key event), as
//!   in Redis where an unchanged SETBIT does not touch WATCH;
//! * BITOP is one keyed command: its sources and destination may live on any shards, and the
//!   coordinator holds every key's lock for the whole command.

use std::borrow::Cow;

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::bitops::{self, BitOp, Overflow};
use strata_core::num::parse_i64;
use strata_core::{Object, ValueRef};
use strata_shard::{notify, Db};

use strata_node::args::eq_ci;
use strata_node::ctx::ShardCtx;
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::{KeysCtx, Looked};
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec};
use strata_node::value::{as_str, raw, MAX_STRING_LEN};

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
        "bitmap", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

const SETBIT_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE),
)];
const SETBIT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("offset"),
    Arg::integer("value"),
];
const GETBIT_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GETBIT_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::integer("offset")];
const BITCOUNT_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const BITCOUNT_INDEX_INDEX_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("byte", "BYTE"),
    Arg::pure_token("bit", "BIT"),
];
const BITCOUNT_INDEX_ARGS: &[Arg] = &[
    Arg::integer("start"),
    Arg::integer("end"),
    Arg::oneof("index_unit", BITCOUNT_INDEX_INDEX_UNIT_ARGS)
        .since("7.0.0")
        .optional(),
];
const BITCOUNT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("index", BITCOUNT_INDEX_ARGS).optional(),
];
const BITCOUNT_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added the `BYTE|BIT` option.")];
const BITPOS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const BITPOS_INDEX_END_INDEX_INDEX_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("byte", "BYTE"),
    Arg::pure_token("bit", "BIT"),
];
const BITPOS_INDEX_END_INDEX_ARGS: &[Arg] = &[
    Arg::integer("end"),
    Arg::oneof("index_unit", BITPOS_INDEX_END_INDEX_INDEX_UNIT_ARGS)
        .since("7.0.0")
        .optional(),
];
const BITPOS_INDEX_ARGS: &[Arg] = &[
    Arg::integer("start"),
    Arg::block("end_index", BITPOS_INDEX_END_INDEX_ARGS).optional(),
];
const BITPOS_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("bit"),
    Arg::block("index", BITPOS_INDEX_ARGS).optional(),
];
const BITPOS_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added the `BYTE|BIT` option.")];
const BITOP_KEYS: &[KeySpec] = &[
    KeySpec::at(2, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::range(3, -1, 1, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const BITOP_ARGS: &[Arg] = &[
    Arg::string("operation"),
    Arg::key("destkey", 0),
    Arg::key("key", 1).multiple(),
];
const BITFIELD_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW
        .or(KeyFlags::ACCESS)
        .or(KeyFlags::UPDATE)
        .or(KeyFlags::VARIABLE_FLAGS),
)
.with_notes("This command allows both access and modification of the key")];
const BITFIELD_OPERATION_ENCODING_OFFSET_ARGS: &[Arg] =
    &[Arg::string("encoding"), Arg::integer("offset")];
const BITFIELD_OPERATION_WRITE_WRAP_SAT_FAIL_ARGS: &[Arg] = &[
    Arg::pure_token("wrap", "WRAP"),
    Arg::pure_token("sat", "SAT"),
    Arg::pure_token("fail", "FAIL"),
];
const BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ENCODING_OFFSET_VALUE_ARGS: &[Arg] = &[
    Arg::string("encoding"),
    Arg::integer("offset"),
    Arg::integer("value"),
];
const BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ENCODING_OFFSET_INCREMENT_ARGS: &[Arg] = &[
    Arg::string("encoding"),
    Arg::integer("offset"),
    Arg::integer("increment"),
];
const BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ARGS: &[Arg] = &[
    Arg::block(
        "encoding_offset_value",
        BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ENCODING_OFFSET_VALUE_ARGS,
    )
    .with_token("SET"),
    Arg::block(
        "encoding_offset_increment",
        BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ENCODING_OFFSET_INCREMENT_ARGS,
    )
    .with_token("INCRBY"),
];
const BITFIELD_OPERATION_WRITE_ARGS: &[Arg] = &[
    Arg::oneof("wrap_sat_fail", BITFIELD_OPERATION_WRITE_WRAP_SAT_FAIL_ARGS)
        .with_token("OVERFLOW")
        .optional(),
    Arg::oneof(
        "write_operation",
        BITFIELD_OPERATION_WRITE_WRITE_OPERATION_ARGS,
    ),
];
const BITFIELD_OPERATION_ARGS: &[Arg] = &[
    Arg::block("encoding_offset", BITFIELD_OPERATION_ENCODING_OFFSET_ARGS).with_token("GET"),
    Arg::block("write", BITFIELD_OPERATION_WRITE_ARGS),
];
const BITFIELD_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("operation", BITFIELD_OPERATION_ARGS)
        .optional()
        .multiple(),
];
const BITFIELD_RO_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const BITFIELD_RO_ENCODING_OFFSET_ARGS: &[Arg] = &[Arg::string("encoding"), Arg::integer("offset")];
const BITFIELD_RO_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("encoding_offset", BITFIELD_RO_ENCODING_OFFSET_ARGS)
        .with_token("GET")
        .optional()
        .multiple()
        .multiple_token(),
];

/// The bitmap family.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("setbit", 4, Flags::WRITE.or(Flags::DENYOOM), SETBIT_KEYS,
        "Sets or clears the bit at offset in the string value stored at key", "2.2.0",
        "O(1)",
        Handler::Shard(setbit))
        .with_args(SETBIT_ARGS),
    cmd("getbit", 3, Flags::READONLY.or(Flags::FAST), GETBIT_KEYS,
        "Returns the bit value at offset in the string value stored at key", "2.2.0",
        "O(1)",
        Handler::Shard(getbit))
        .with_args(GETBIT_ARGS),
    cmd("bitcount", -2, Flags::READONLY, BITCOUNT_KEYS,
        "Count set bits in a string", "2.6.0",
        "O(N)",
        Handler::Shard(bitcount))
        .with_args(BITCOUNT_ARGS)
        .with_history(BITCOUNT_HISTORY),
    cmd("bitpos", -3, Flags::READONLY, BITPOS_KEYS,
        "Find first bit set or clear in a string", "2.8.7",
        "O(N)",
        Handler::Shard(bitpos))
        .with_args(BITPOS_ARGS)
        .with_history(BITPOS_HISTORY),
    cmd("bitop", -4, Flags::WRITE.or(Flags::DENYOOM), BITOP_KEYS,
        "Perform bitwise operations between strings", "2.6.0",
        "O(N)",
        Handler::Keys(bitop))
        .with_args(BITOP_ARGS),
    cmd("bitfield", -2, Flags::WRITE.or(Flags::DENYOOM), BITFIELD_KEYS,
        "Perform arbitrary bitfield integer operations on strings", "3.2.0",
        "O(1) for each subcommand specified",
        Handler::Shard(bitfield))
        .with_args(BITFIELD_ARGS)
        .with_getkeys(bitfield_keys),
    cmd("bitfield_ro", -2, Flags::READONLY.or(Flags::FAST), BITFIELD_RO_KEYS,
        "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", "6.0.0",
        "O(1) for each subcommand specified",
        Handler::Shard(bitfield_ro))
        .with_args(BITFIELD_RO_ARGS),
];

/// BITFIELD's key flags: read-only when every subcommand is a GET (or OVERFLOW), as Redis's
/// `bitfieldGetKeys` reports them; anything else (including a syntax error) counts as a write.
fn bitfield_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
    let mut readonly = true;
    let mut i = 2;
    while i < args.len() {
        let rem = args.len() - i - 1;
        let a = &args[i];
        if eq_ci(a, "get") && rem >= 2 {
            i += 3;
        } else if eq_ci(a, "overflow") && rem >= 1 {
            i += 2;
        } else {
            readonly = false;
            break;
        }
    }
    let flags = if readonly {
        KeyFlags::RO.or(KeyFlags::ACCESS)
    } else {
        KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE)
    };
    found(1, flags);
}

// ===== argument parsing =====

const BAD_OFFSET: CmdError = CmdError::msg("ERR bit offset is not an integer or out of range");
const BAD_BIT: CmdError = CmdError::msg("ERR bit is not an integer or out of range");
const BAD_TYPE: CmdError = CmdError::msg(
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
);

/// A bit offset argument: a non-negative integer whose byte lies within the 512 MB limit; with
/// `bits` > 0 (BITFIELD) also `#n`, meaning `n * bits`.
fn bit_offset(arg: &[u8], bits: u32) -> Result<u64, CmdError> {
    let hash = bits > 0 && arg.first() == Some(&b'#');
    let n = parse_i64(&arg[usize::from(hash)..]).ok_or(BAD_OFFSET)?;
    let n = if hash {
        n.wrapping_mul(i64::from(bits))
    } else {
        n
    };
    if n < 0 || (n >> 3) as u64 >= MAX_STRING_LEN as u64 {
        return Err(BAD_OFFSET);
    }
    Ok(n as u64)
}

/// A BITFIELD type: `i1`..`i64` or `u1`..`u63` → (signed, bits).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(BAD_TYPE),
    };
    // Redis reads the width as a C string: it ends at the first NUL byte.
    let rest = &arg[1..];
    let rest = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
    match parse_i64(rest) {
        Some(b) if b >= 1 && b <= if signed { 64 } else { 63 } => Ok((signed, b as u32)),
        _ => Err(BAD_TYPE),
    }
}

// ===== the value =====

/// The string at `key` for reading (None if absent), WRONGTYPE for other types.
fn read<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<Cow<'a, [u8]>>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => Ok(Some(as_str(e.value())?.as_bytes())),
    }
}

/// Runs `f` on the string at `key` as a raw, growable value at least `len` bytes long (created
/// zero-filled if absent, padded with zeros if shorter: Redis's lookupStringForBitCommand). `f` is
/// told whether the value is new or grew, and returns its result and how many changes Redis counts
/// for what it did; the key is signalled and announced ("setbit") only if that is not zero, as in
/// Redis (a string padded by a write that then failed is kept, unannounced).
fn modify_bits<R>(
    db: &mut Db,
    key: &[u8],
    len: usize,
    now: i64,
    f: impl FnOnce(&mut Vec<u8>, bool) -> (R, u64),
) -> Result<R, CmdError> {
    let mark = db.dirty();
    let Some(mut e) = db.modify(key, now) else {
        let mut s = vec![0u8; len];
        let (r, changes) = f(&mut s, true);
        db.set(key, raw(s), None, now);
        if changes > 0 {
            db.notify(notify::STRING, "setbit", key);
        }
        db.count_changes_since(mark, changes);
        return Ok(r);
    };
    if !matches!(e.value(), ValueRef::Obj(Object::Str(_))) {
        let bytes = as_str(e.value())?.as_bytes().into_owned();
        e.reencode(raw(bytes));
    }
    let Some(Object::Str(s)) = e.object_mut_quiet() else {
        unreachable!("made raw above");
    };
    let grew = s.len() < len;
    if grew {
        s.resize(len, 0);
    }
    let (r, changes) = f(s, grew);
    if changes > 0 {
        e.mark_changed();
        drop(e);
        db.notify(notify::STRING, "setbit", key);
        db.count_changes_since(mark, changes);
    }
    Ok(r)
}

// ===== SETBIT / GETBIT =====

/// SETBIT: sets the bit, returning its previous value.
pub fn op_setbit(
    db: &mut Db,
    key: &[u8],
    offset: u64,
    on: bool,
    now: i64,
) -> Result<bool, CmdError> {
    let len = (offset / 8) as usize + 1;
    modify_bits(db, key, len, now, |s, grew| {
        let old = bitops::get_bit(s, offset);
        if old != on {
            bitops::set_bit(s, offset, on);
        }
        // A change if the bit flipped or the string is new or grew.
        (old, u64::from(grew || old != on))
    })
}

/// SETBIT key offset value → the bit's previous value.
fn setbit(cx: &mut ShardCtx<'_>) -> CmdResult {
    let offset = bit_offset(&cx.args[2], 0)?;
    let on = match parse_i64(&cx.args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(BAD_BIT),
    };
    let now = cx.now;
    let args = cx.args;
    let old = op_setbit(cx.db(), &args[1], offset, on, now)?;
    cx.out.int(i64::from(old));
    Ok(())
}

/// GETBIT key offset → the bit (0 beyond the end or for a missing key).
fn getbit(cx: &mut ShardCtx<'_>) -> CmdResult {
    let offset = bit_offset(&cx.args[2], 0)?;
    let now = cx.now;
    let bit = match read(cx.shard.db_mut(cx.db), &cx.args[1], now)? {
        Some(s) => bitops::get_bit(&s, offset),
        None => false,
    };
    cx.out.int(i64::from(bit));
    Ok(())
}

// ===== BITCOUNT / BITPOS =====

/// A start/end pair in BYTE or BIT units, normalised as Redis does (negative from the end, then
/// clamped); None for an empty range.
fn bit_range(len: usize, start: i64, end: i64, isbit: bool) -> Option<(u64, u64)> {
    let total = if isbit { len as i64 * 8 } else { len as i64 };
    let norm = |v: i64| if v < 0 { (v + total).max(0) } else { v };
    let (start, end) = (norm(start), norm(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if isbit {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// BYTE | BIT.
fn unit(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ci(arg, "bit") {
        Ok(true)
    } else if eq_ci(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// BITCOUNT key [start end [BYTE|BIT]] → the number of set bits.
fn bitcount(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let now = cx.now;
    let Some(s) = read(cx.shard.db_mut(cx.db), &args[1], now)? else {
        cx.out.int(0);
        return Ok(());
    };
    let range = match args.len() {
        2 => bit_range(s.len(), 0, -1, false),
        4 | 5 => {
            let start = parse_i64(&args[2]).ok_or(CmdError::NotInteger)?;
            let end = parse_i64(&args[3]).ok_or(CmdError::NotInteger)?;
            // An empty negative range answers 0 before the unit is looked at, as in Redis.
            if start < 0 && end < 0 && start > end {
                None
            } else {
                let isbit = args.len() == 5 && unit(&args[4])?;
                bit_range(s.len(), start, end, isbit)
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = range.map_or(0, |(a, b)| bitops::count_bits(&s, a, b));
    cx.out.int(n as i64);
    Ok(())
}

/// BITPOS key bit [start [end [BYTE|BIT]]] → the first bit set to `bit`, or -1.
fn bitpos(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let bit = match parse_i64(&args[2]).ok_or(CmdError::NotInteger)? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::msg("ERR The bit argument must be 1 or 0.")),
    };
    let now = cx.now;
    let Some(s) = read(cx.shard.db_mut(cx.db), &args[1], now)? else {
        // A missing key is an endless run of zeros.
        cx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let (range, end_given) = match args.len() {
        3 => (bit_range(s.len(), 0, -1, false), false),
        4..=6 => {
            let start = parse_i64(&args[3]).ok_or(CmdError::NotInteger)?;
            let isbit = args.len() == 6 && unit(&args[5])?;
            let end = match args.get(4) {
                Some(a) => parse_i64(a).ok_or(CmdError::NotInteger)?,
                None => -1,
            };
            (bit_range(s.len(), start, end, isbit), args.len() >= 5)
        }
        _ => return Err(CmdError::Syntax),
    };
    let pos = match range {
        None => -1,
        Some((first, last)) => match bitops::find_bit(&s, bit, first, last) {
            Some(p) => p as i64,
            // Without an explicit end the string is followed by zeros: the first clear bit is
            // the one right after it.
            None if !bit && !end_given => last as i64 + 1,
            None => -1,
        },
    };
    cx.out.int(pos);
    Ok(())
}

// ===== BITOP =====

/// One shard's part of BITOP `op`: its sources folded together (NOT: its one source inverted), in
/// one buffer as long as the longest of them — the only copy of the data BITOP makes when all its
/// keys live on one shard (Redis's one result buffer). A missing key is an empty string. With it,
/// what was looked up: each key's existence, up to the first that is not a string, where it stops
/// as Redis does.
pub fn op_part(
    db: &mut Db,
    op: BitOp,
    keys: &[Bytes],
    now: i64,
) -> (Result<Vec<u8>, CmdError>, Looked) {
    // Sized once up front (a peek: the reads below count the keyspace hits), so folding never
    // reallocates.
    let len = keys
        .iter()
        .filter_map(|k| {
            let e = db.peek(k, now)?;
            as_str(e.value()).ok().map(|v| v.as_bytes().len())
        })
        .max()
        .unwrap_or(0);
    let mut acc = Vec::with_capacity(len);
    let mut looked = Looked::default();
    for (i, k) in keys.iter().enumerate() {
        let v = match read(db, k, now) {
            Ok(v) => v,
            Err(e) => {
                looked.found.push(true);
                looked.failed = true;
                return (Err(e), looked);
            }
        };
        looked.found.push(v.is_some());
        if i == 0 {
            acc.extend_from_slice(v.as_deref().unwrap_or(&[]));
            if op == BitOp::Not {
                bitops::not(&mut acc);
            }
        } else {
            bitops::fold(op, &mut acc, v.as_deref().unwrap_or(&[]));
        }
    }
    (Ok(acc), looked)
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...] → the length of the string stored at destkey
/// (which is deleted when the result is empty).
fn bitop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let op = &args[1];
        let op = if eq_ci(op, "and") {
            BitOp::And
        } else if eq_ci(op, "or") {
            BitOp::Or
        } else if eq_ci(op, "xor") {
            BitOp::Xor
        } else if eq_ci(op, "not") {
            BitOp::Not
        } else {
            return Err(CmdError::Syntax);
        };
        if op == BitOp::Not && args.len() != 4 {
            return Err(CmdError::msg(
                "ERR BITOP NOT must be called with a single source key.",
            ));
        }
        let keys = &args[3..];
        let (db, now) = (cx.db, cx.now);
        let parts = cx
            .scatter_reads(
                keys,
                |k| k,
                move |s, part| op_part(s.db_mut(db), op, part, now),
            )
            .await;
        let mut parts = parts.into_iter().map(|(_, part)| part);
        let mut res = parts.next().transpose()?.unwrap_or_default();
        for part in parts {
            bitops::fold(op, &mut res, &part?);
        }
        let len = res.len();
        let dest = args[2].clone();
        cx.on(&args[2], move |s| {
            let db = s.db_mut(db);
            if res.is_empty() {
                if db.delete(&dest, now) {
                    db.notify(notify::GENERIC, "del", &dest);
                }
            } else {
                db.set(&dest, raw(res), None, now);
                db.notify(notify::STRING, "set", &dest);
            }
        })
        .await;
        cx.out.int(len as i64);
        Ok(())
    })
}

// ===== BITFIELD / BITFIELD_RO =====

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Parses BITFIELD's subcommands, in Redis's order of checks.
fn parse_fields(args: &[Bytes]) -> Result<Vec<Field>, CmdError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let sub = &args[j];
        let kind = if eq_ci(sub, "get") && rem >= 2 {
            0
        } else if eq_ci(sub, "set") && rem >= 3 {
            1
        } else if eq_ci(sub, "incrby") && rem >= 3 {
            2
        } else if eq_ci(sub, "overflow") && rem >= 1 {
            let t = &args[j + 1];
            overflow = if eq_ci(t, "wrap") {
                Overflow::Wrap
            } else if eq_ci(t, "sat") {
                Overflow::Sat
            } else if eq_ci(t, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::msg("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(&args[j + 1])?;
        let offset = bit_offset(&args[j + 2], bits)?;
        let op = match kind {
            0 => FieldOp::Get,
            k => {
                let v = parse_i64(&args[j + 3]).ok_or(CmdError::NotInteger)?;
                if k == 1 {
                    FieldOp::Set(v)
                } else {
                    FieldOp::IncrBy(v)
                }
            }
        };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if kind == 0 { 3 } else { 4 };
    }
    Ok(fields)
}

/// The field's current value (bits beyond the end of `s` read as zero).
fn get_field(s: &[u8], f: &Field) -> i64 {
    if f.signed {
        bitops::get_signed(s, f.offset, f.bits)
    } else {
        bitops::get_unsigned(s, f.offset, f.bits) as i64
    }
}

/// One field operation on `s`: Some(reply) or None (a FAIL overflow, nothing written).
fn apply_field(s: &mut [u8], f: &Field) -> Option<i64> {
    let (off, bits, ow) = (f.offset, f.bits, f.overflow);
    if f.signed {
        let old = bitops::get_signed(s, off, bits);
        let (new, reply, overflow) = match f.op {
            FieldOp::Get => return Some(old),
            FieldOp::IncrBy(by) => {
                let (o, lim) = bitops::signed_overflow(old, by, bits, ow);
                let new = if o != 0 {
                    lim
                } else {
                    Some(old.wrapping_add(by))
                };
                (new, new, o)
            }
            FieldOp::Set(v) => {
                let (o, lim) = bitops::signed_overflow(v, 0, bits, ow);
                (if o != 0 { lim } else { Some(v) }, Some(old), o)
            }
        };
        match new {
            Some(n) if !(overflow != 0 && ow == Overflow::Fail) => {
                bitops::set_field(s, off, bits, n as u64);
                reply
            }
            _ => None,
        }
    } else {
        let old = bitops::get_unsigned(s, off, bits);
        let (new, reply, overflow) = match f.op {
            FieldOp::Get => return Some(old as i64),
            FieldOp::IncrBy(by) => {
                let (o, lim) = bitops::unsigned_overflow(old, by, bits, ow);
                let new = if o != 0 {
                    lim
                } else {
                    Some(old.wrapping_add(by as u64))
                };
                (new, new, o)
            }
            FieldOp::Set(v) => {
                let (o, lim) = bitops::unsigned_overflow(v as u64, 0, bits, ow);
                (if o != 0 { lim } else { Some(v as u64) }, Some(old), o)
            }
        };
        match new {
            Some(n) if !(overflow != 0 && ow == Overflow::Fail) => {
                bitops::set_field(s, off, bits, n);
                reply.map(|r| r as i64)
            }
            _ => None,
        }
    }
}

fn reply_fields(cx: &mut ShardCtx<'_>, replies: &[Option<i64>]) {
    cx.out.array(replies.len());
    for r in replies {
        match r {
            Some(v) => cx.out.int(*v),
            None => cx.out.null(),
        }
    }
}

fn bitfield_generic(cx: &mut ShardCtx<'_>, readonly_cmd: bool) -> CmdResult {
    let fields = parse_fields(cx.args)?;
    let now = cx.now;
    let key = &cx.args[1];
    let writes = fields.iter().any(|f| f.op != FieldOp::Get);
    if !writes {
        let s = read(cx.shard.db_mut(cx.db), key, now)?;
        let s: &[u8] = s.as_deref().unwrap_or(&[]);
        let replies: Vec<Option<i64>> = fields.iter().map(|f| Some(get_field(s, f))).collect();
        reply_fields(cx, &replies);
        return Ok(());
    }
    if readonly_cmd {
        return Err(CmdError::msg(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let highest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max()
        .unwrap_or(0);
    let len = (highest / 8) as usize + 1;
    // As in Redis 7.0, a SET or INCRBY that wrote (no FAIL overflow) is a change if it changed its
    // field's value, or if the string is new or grew: each such write counts one.
    let replies = modify_bits(cx.shard.db_mut(cx.db), key, len, now, |s, grew| {
        let mut changes = 0;
        let replies = fields
            .iter()
            .map(|f| {
                let before = get_field(s, f);
                let r = apply_field(s, f);
                let wrote = f.op != FieldOp::Get && r.is_some();
                if wrote && (grew || get_field(s, f) != before) {
                    changes += 1;
                }
                r
            })
            .collect::<Vec<_>>();
        (replies, changes)
    })?;
    reply_fields(cx, &replies);
    Ok(())
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ... → one reply per GET/SET/INCRBY (null for a FAIL overflow).
fn bitfield(cx: &mut ShardCtx<'_>) -> CmdResult {
    bitfield_generic(cx, false)
}

/// BITFIELD_RO key [GET type offset ...] → one integer per GET.
fn bitfield_ro(cx: &mut ShardCtx<'_>) -> CmdResult {
    bitfield_generic(cx, true)
}

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    #[test]
    fn setbit_getbit_and_encoding() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["setbit", "k", "7", "1"]), ":0");
        assert_eq!(run(&mut s, &["get", "k"]), "$1:\u{1}");
        assert_eq!(run(&mut s, &["setbit", "k", "7", "1"]), ":1");
        assert_eq!(run(&mut s, &["getbit", "k", "7"]), ":1");
        assert_eq!(run(&mut s, &["getbit", "k", "100"]), ":0");
        assert_eq!(run(&mut s, &["object", "encoding", "k"]), "$3:raw");
        assert_eq!(run(&mut s, &["set", "n", "1"]), "+OK");
        assert_eq!(run(&mut s, &["getbit", "n", "2"]), ":1");
        assert_eq!(run(&mut s, &["setbit", "n", "2", "1"]), ":1");
        assert_eq!(run(&mut s, &["object", "encoding", "n"]), "$3:raw");
        assert_eq!(
            run(&mut s, &["setbit", "k", "4294967296", "1"]),
            "-ERR bit offset is not an integer or out of range"
        );
        assert_eq!(
            run(&mut s, &["setbit", "k", "1", "2"]),
            "-ERR bit is not an integer or out of range"
        );
    }

    #[test]
    fn only_real_changes_are_writes() {
        let mut s = shard();
        run(&mut s, &["set", "k", "a"]);
        run(&mut s, &["bitfield", "f", "set", "u8", "0", "7"]);
        s.db_mut(0).record_events(true);
        // 'a' is 0b01100001: bit 1 is already set. Made raw, but not a change.
        assert_eq!(run(&mut s, &["setbit", "k", "1", "1"]), ":1");
        assert_eq!(
            run(&mut s, &["bitfield", "f", "set", "u8", "0", "7"]),
            "*1[:7]"
        );
        assert_eq!(
            run(&mut s, &["bitfield", "f", "incrby", "u8", "0", "0"]),
            "*1[:7]"
        );
        assert!(s.db_mut(0).drain_events().is_empty());
        assert_eq!(run(&mut s, &["object", "encoding", "k"]), "$3:raw");
        assert_eq!(run(&mut s, &["setbit", "k", "0", "1"]), ":0");
        assert_eq!(run(&mut s, &["setbit", "k", "100", "0"]), ":0");
        assert_eq!(
            run(&mut s, &["bitfield", "f", "incrby", "u8", "0", "1"]),
            "*1[:8]"
        );
        assert_eq!(s.db_mut(0).drain_events().len(), 3);
    }

    #[test]
    fn bitcount_bitpos_ranges() {
        let mut s = shard();
        run(&mut s, &["set", "k", "foobar"]);
        assert_eq!(run(&mut s, &["bitcount", "k"]), ":26");
        assert_eq!(run(&mut s, &["bitcount", "k", "1", "1"]), ":6");
        assert_eq!(run(&mut s, &["bitcount", "k", "5", "30", "bit"]), ":17");
        assert_eq!(run(&mut s, &["bitcount", "k", "1"]), "-ERR syntax error");
        assert_eq!(run(&mut s, &["bitcount", "k", "-1", "-5", "foo"]), ":0");
        assert_eq!(
            run(&mut s, &["bitcount", "k", "1", "2", "foo"]),
            "-ERR syntax error"
        );
        assert_eq!(run(&mut s, &["bitcount", "nokey", "1"]), ":0");
        run(&mut s, &["set", "z", ""]);
        assert_eq!(run(&mut s, &["bitpos", "nokey", "0"]), ":0");
        assert_eq!(run(&mut s, &["bitpos", "nokey", "1"]), ":-1");
        assert_eq!(run(&mut s, &["bitpos", "z", "0"]), ":-1");
        assert_eq!(run(&mut s, &["bitpos", "k", "1", "2", "-1", "byte"]), ":17");
        assert_eq!(
            run(&mut s, &["bitpos", "k", "2"]),
            "-ERR The bit argument must be 1 or 0."
        );
    }

    #[test]
    fn bitop_and_bitfield() {
        let mut s = shard();
        run(&mut s, &["set", "a", "abc"]);
        run(&mut s, &["set", "b", "a"]);
        assert_eq!(run(&mut s, &["bitop", "and", "d", "a", "b"]), ":3");
        assert_eq!(
            run(&mut s, &["bitop", "not", "d", "a", "b"]),
            "-ERR BITOP NOT must be called with a single source key."
        );
        assert_eq!(run(&mut s, &["bitop", "or", "d", "x", "y"]), ":0");
        assert_eq!(run(&mut s, &["exists", "d"]), ":0");
        assert_eq!(
            run(
                &mut s,
                &[
                    "bitfield", "f", "set", "u8", "#1", "255", "get", "u4", "8", "incrby", "i8",
                    "8", "1"
                ]
            ),
            "*3[:0,:15,:0]"
        );
        assert_eq!(
            run(
                &mut s,
                &["bitfield", "f", "overflow", "fail", "incrby", "u2", "0", "7"]
            ),
            "*1[$-1]"
        );
        assert_eq!(
            run(&mut s, &["bitfield_ro", "f", "set", "u2", "0", "1"]),
            "-ERR BITFIELD_RO only supports the GET subcommand"
        );
        assert_eq!(
            run(&mut s, &["bitfield", "f", "get", "u64", "0"]),
            "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
        );
    }
}
