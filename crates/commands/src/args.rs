//! The typed argument cursor every handler parses with.

use bytes::Bytes;
use strata_core::num::{parse_f64, parse_i64};

use crate::error::CmdError;

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
}
