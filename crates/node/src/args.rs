//! The typed argument cursor every handler parses with.

use bytes::Bytes;
use strata_core::num::{parse_f64, parse_i64};

use strata_core::glob::glob_match;
use strata_core::Entry;
use strata_resp::ReplyBuf;

use crate::error::CmdError;
use crate::value::type_name;

/// Walks a command's arguments (after the command name, and after the subcommand for containers).
#[derive(Clone)]
pub struct Args<'a> {
    args: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor over `args` starting at index `start` (1 for commands, 2 for subcommands).
    pub fn new(args: &'a [Bytes], start: usize) -> Self {
        Args {
            args,
            pos: start.min(args.len()),
        }
    }

    /// Arguments not yet consumed.
    pub fn remaining(&self) -> usize {
        self.args.len() - self.pos
    }

    /// True when every argument has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The rest of the arguments, without consuming them.
    pub fn rest(&self) -> &'a [Bytes] {
        &self.args[self.pos..]
    }

    /// The next argument, without consuming it.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.args.get(self.pos)
    }

    /// The next argument; `ERR syntax error` if there is none.
    pub fn next_bytes(&mut self) -> Result<&'a Bytes, CmdError> {
        let a = self.args.get(self.pos).ok_or(CmdError::Syntax)?;
        self.pos += 1;
        Ok(a)
    }

    /// The next argument as an integer (`ERR value is not an integer or out of range`).
    pub fn next_i64(&mut self) -> Result<i64, CmdError> {
        parse_i64(self.next_bytes()?).ok_or(CmdError::NotInteger)
    }

    /// The next argument as a float (`ERR value is not a valid float`).
    pub fn next_f64(&mut self) -> Result<f64, CmdError> {
        parse_f64(self.next_bytes()?).ok_or(CmdError::NotFloat)
    }

    /// Consumes the next argument if it is the option `word` (see [`eq_ci`]).
    pub fn eat(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(a) if eq_ci(a, word) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Consumes every remaining argument.
    pub fn take_rest(&mut self) -> &'a [Bytes] {
        let rest = self.rest();
        self.pos = self.args.len();
        rest
    }

    /// `ERR syntax error` if arguments are left over.
    pub fn finish(&self) -> Result<(), CmdError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(CmdError::Syntax)
        }
    }
}

/// `a` up to its first NUL byte: what Redis reads where it hands an argument to a C string
/// function (`strtod`, `strtoul`) and checks only that the parse reached the string's end.
pub fn c_string(a: &[u8]) -> &[u8] {
    a.split(|&b| b == 0).next().unwrap_or_default()
}

/// C's `strtol(a, NULL, 10)`, as `atoi` uses it: leading blanks, an optional sign and the digits
/// that follow (0 when there are none), saturating at the `long` bounds.
pub fn c_strtol(a: &[u8]) -> i64 {
    let start = a
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(a.len());
    let (negative, digits) = match a[start..].split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, &a[start..]),
    };
    let mut v: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        v = match v.checked_mul(10).and_then(|v| {
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        }) {
            Some(v) => v,
            None => return if negative { i64::MIN } else { i64::MAX },
        };
    }
    v
}

/// True when the argument `a` is the option `word`: equal ignoring ASCII case, up to `a`'s first
/// NUL byte. Redis matches options with `strcasecmp`, which stops there, so `"NX\0junk"` is NX.
/// (Command and subcommand names are not options: Redis hashes them over their whole length, so
/// `GET\0x` finds GET only by a chance of its random hash seed; Strata never matches them.)
pub fn eq_ci(a: &[u8], word: &str) -> bool {
    let w = word.as_bytes();
    a.len() >= w.len()
        && a[..w.len()].eq_ignore_ascii_case(w)
        && a.get(w.len()).is_none_or(|&b| b == 0)
}

// ===== arguments several families share =====

/// Parses a blocking command's timeout (seconds, fractions allowed) into a deadline in unix ms;
/// None waits forever. As Redis 7.0 does: the milliseconds are rounded up (0.0001 waits 1 ms, not
/// forever), a value that rounds to 0 (0, -0.0001) waits forever, and one below zero or too large
/// to be a count of milliseconds (inf, 1e17) is "negative"; a deadline past the clock's range
/// waits forever.
pub fn parse_timeout(arg: &[u8], now: i64) -> Result<Option<i64>, CmdError> {
    let secs = strata_core::num::parse_f64(arg)
        .filter(|v| !v.is_nan())
        .ok_or_else(|| CmdError::msg("ERR timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // `i64::MAX as f64` rounds up to 2^63, so `<` keeps every accepted value representable.
    if !(ms > -1.0 && ms < i64::MAX as f64) {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let ms = ms as i64;
    if ms == 0 {
        return Ok(None);
    }
    Ok(now.checked_add(ms))
}

/// Parses a cursor as Redis does (`strtoul`, base 10): an optional sign, digits, no spaces, no
/// overflow; a minus negates modulo 2^64 and the empty string is 0. Redis reads it as a C string,
/// so it ends at the first NUL byte.
pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let arg = c_string(arg);
    if arg.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match arg[0] {
        b'-' => (true, &arg[1..]),
        b'+' => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// SCAN's MATCH and TYPE filters.
#[derive(Clone, Debug, Default)]
pub struct ScanFilter {
    /// None when absent or `*`.
    pub pattern: Option<Bytes>,
    pub type_name: Option<Bytes>,
}

impl ScanFilter {
    pub fn matches_name(&self, key: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, key, false))
    }

    pub fn accepts(&self, e: &Entry) -> bool {
        self.matches_name(e.key())
            && self
                .type_name
                .as_ref()
                .is_none_or(|t| eq_ci(t, type_name(e.value())))
    }
}

/// SCAN's options.
#[derive(Clone, Debug)]
pub struct ScanArgs {
    pub cursor: u64,
    pub count: usize,
    pub filter: ScanFilter,
}

/// Parses `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]` with Redis's errors.
pub fn parse_scan(args: &[Bytes]) -> Result<ScanArgs, CmdError> {
    let cursor = parse_cursor(&args[1]).ok_or(CmdError::msg("ERR invalid cursor"))?;
    let mut out = ScanArgs {
        cursor,
        count: 10,
        filter: ScanFilter::default(),
    };
    let mut a = Args::new(args, 2);
    while let Some(opt) = a.peek() {
        if a.remaining() < 2 {
            return Err(CmdError::Syntax);
        }
        a.next_bytes()?;
        if eq_ci(opt, "count") {
            let n = a.next_i64()?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            out.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if eq_ci(opt, "match") {
            let p = a.next_bytes()?;
            out.filter.pattern = (p.as_ref() != b"*").then(|| p.clone());
        } else if eq_ci(opt, "type") {
            out.filter.type_name = Some(a.next_bytes()?.clone());
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(out)
}

/// The most picks HRANDFIELD, SRANDMEMBER and ZRANDMEMBER with a negative count answer (for an
/// existing key) to a client without an output limit. Redis builds whatever reply is asked for (a
/// count near 2^63 exhausts its memory); Strata refuses counts past this with `ERR value is out of
/// range` rather than allocate an unbounded reply. With a hard `client-output-buffer-limit` any
/// count runs, as in Redis, and stops where the reply passes the limit: the client is closed and
/// the reply dropped, as Redis stops the command for a client it is closing.
pub const MAX_RANDOM_PICKS: u64 = 1 << 24;

/// Whether a reply of `picks` repeated random picks may be started (see [`MAX_RANDOM_PICKS`]).
pub fn picks_allowed(picks: u64, out: &ReplyBuf) -> bool {
    picks <= MAX_RANDOM_PICKS || out.room.is_some()
}

/// Parses a timeout in milliseconds as Redis's getTimeoutFromObjectOrReply does (an integer, not
/// negative).
pub fn parse_timeout_ms(arg: &[u8]) -> Result<i64, CmdError> {
    let ms = strata_core::num::parse_i64(arg).ok_or(CmdError::msg(
        "ERR timeout is not an integer or out of range",
    ))?;
    if ms < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_parses_and_finishes() {
        let v: Vec<Bytes> = ["set", "k", "10", "nx", "1.5"]
            .iter()
            .map(|s| Bytes::from(*s))
            .collect();
        let mut a = Args::new(&v, 1);
        assert_eq!(a.next_bytes().unwrap().as_ref(), b"k");
        assert_eq!(a.next_i64(), Ok(10));
        assert!(!a.eat("xx") && a.eat("NX"));
        assert_eq!(a.finish(), Err(CmdError::Syntax));
        assert_eq!(a.next_f64(), Ok(1.5));
        assert!(a.finish().is_ok());
        assert_eq!(a.next_bytes(), Err(CmdError::Syntax));
    }

    #[test]
    fn options_match_up_to_a_nul_byte_as_strcasecmp_does() {
        assert!(eq_ci(b"nx", "NX"));
        assert!(eq_ci(b"Nx\0junk", "NX"));
        assert!(eq_ci(b"NX\0", "NX"));
        assert!(!eq_ci(b"N\0X", "NX"));
        assert!(!eq_ci(b"NXX", "NX"));
        assert!(!eq_ci(b"N", "NX"));
        assert!(!eq_ci(b"", "NX"));
        let v: Vec<Bytes> = ["WITHSCORES\0x"].iter().map(|s| Bytes::from(*s)).collect();
        assert!(Args::new(&v, 0).eat("withscores"));
    }

    #[test]
    fn strtol_reads_a_leading_integer_as_c_does() {
        assert_eq!(c_strtol(b"2"), 2);
        assert_eq!(c_strtol(b" \t-1abc"), -1);
        assert_eq!(c_strtol(b"+7.5"), 7);
        assert_eq!(c_strtol(b"x"), 0);
        assert_eq!(c_strtol(b"- 1"), 0);
        assert_eq!(c_strtol(b""), 0);
        assert_eq!(c_strtol(b"99999999999999999999"), i64::MAX);
        assert_eq!(c_strtol(b"-99999999999999999999"), i64::MIN);
        assert_eq!(c_strtol(b"-9223372036854775808"), i64::MIN);
    }

    #[test]
    fn scan_cursor_parses_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        // A C string: what follows a NUL byte is never read.
        assert_eq!(parse_cursor(b"\x00\xff"), Some(0));
        assert_eq!(parse_cursor(b"12\x00x"), Some(12));
        assert_eq!(parse_cursor(b"x\x00"), None);
        for bad in [
            &b"18446744073709551616"[..],
            b"x",
            b" 1",
            b"1 ",
            b"-",
            b"+",
            b"0x1",
            b"+-1",
        ] {
            assert_eq!(
                parse_cursor(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
