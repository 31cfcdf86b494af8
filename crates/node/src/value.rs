//! The value views every family shares: a value read as a string (bitmaps and HyperLogLogs are
//! strings, as in Redis), the names TYPE and OBJECT ENCODING give a value, Redis's shared integers,
//! and how a woken blocking pop treats a key of another type. A family reads another type's values
//! only through these, never through that family's module.

use std::borrow::Cow;

use bytes::Bytes;
use strata_core::entry::EMBSTR_MAX;
use strata_core::num::parse_i64;
use strata_core::{Entry, Object, Value, ValueRef};
use strata_resp::ReplyBuf;

use crate::error::CmdError;

/// The longest string any command may build (Redis's default `proto-max-bulk-len`, 512 MB).
pub const MAX_STRING_LEN: usize = 512 * 1024 * 1024;

/// A string value as stored: bytes, or an integer to be formatted on output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Str<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl<'a> Str<'a> {
    /// Writes the value as a bulk string.
    pub fn reply(self, out: &mut ReplyBuf) {
        match self {
            Str::Bytes(b) => out.bulk(b),
            Str::Int(i) => out.bulk_int(i),
        }
    }

    /// The value as owned bytes.
    pub fn to_bytes(self) -> Bytes {
        match self {
            Str::Bytes(b) => Bytes::copy_from_slice(b),
            Str::Int(i) => Bytes::from(i.to_string()),
        }
    }

    /// The value's bytes, formatting integers.
    pub fn as_bytes(self) -> Cow<'a, [u8]> {
        match self {
            Str::Bytes(b) => Cow::Borrowed(b),
            Str::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        }
    }

    /// Length in bytes (of the decimal form for integers).
    pub fn len(self) -> usize {
        match self {
            Str::Bytes(b) => b.len(),
            Str::Int(i) => {
                let (mut n, mut u) = (1 + usize::from(i < 0), i.unsigned_abs());
                while u >= 10 {
                    u /= 10;
                    n += 1;
                }
                n
            }
        }
    }

    /// True for the empty string.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// The string in `v`, or WRONGTYPE.
#[allow(unreachable_patterns)] // other families add object types; they are all WRONGTYPE here
pub fn as_str(v: ValueRef<'_>) -> Result<Str<'_>, CmdError> {
    match v {
        ValueRef::Inline(b) => Ok(Str::Bytes(b)),
        ValueRef::Int(i) => Ok(Str::Int(i)),
        ValueRef::Obj(Object::Str(s)) => Ok(Str::Bytes(s)),
        _ => Err(CmdError::WrongType),
    }
}

/// The value Redis would store for `bytes` (tryObjectEncoding): int-encoded when it is a canonical
/// integer of at most 20 characters, else a string (embstr up to 44 bytes, raw beyond).
pub fn encode(bytes: &Bytes) -> Value {
    match parse_i64(bytes) {
        Some(i) if bytes.len() <= 20 => Value::Int(i),
        _ => Value::Str(bytes.clone()),
    }
}

/// A raw-encoded string (the result of APPEND and SETRANGE, whatever its length).
pub fn raw(bytes: Vec<u8>) -> Value {
    Value::Obj(Object::Str(Box::new(bytes)))
}

/// The name TYPE (and SCAN ... TYPE) gives a value.
pub fn type_name(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Inline(_) | ValueRef::Int(_) => "string",
        ValueRef::Obj(o) => o.type_name(),
    }
}

/// The encoding OBJECT ENCODING reports, in Redis's words.
pub fn encoding_name(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Int(_) => "int",
        ValueRef::Inline(s) if s.len() <= EMBSTR_MAX => "embstr",
        ValueRef::Inline(_) => "raw",
        ValueRef::Obj(o) => o.encoding(),
    }
}

/// Integers below this are Redis's shared objects (OBJ_SHARED_INTEGERS).
const SHARED_INTEGERS: i64 = 10_000;

/// True if Redis would hold `e`'s value as one of its shared integers: 0..9999, written while
/// sharing was on (`maxmemory` unset or a policy without LRU/LFU, [`shares_integers`]), and not
/// a COPY's duplicate, which is an object of its own.
pub fn is_shared_int(e: &Entry) -> bool {
    matches!(e.value(), ValueRef::Int(i) if (0..SHARED_INTEGERS).contains(&i)) && !e.is_unshared()
}

/// A woken blocking command treats a key of another type as empty (it stays blocked on it, as
/// Redis serves woken clients only from keys of their type); a first attempt fails with WRONGTYPE.
pub fn skip_wrong_type<T>(
    woken: bool,
    r: Result<Option<T>, CmdError>,
) -> Result<Option<T>, CmdError> {
    match r {
        Err(CmdError::WrongType) if woken => Ok(None),
        r => r,
    }
}
