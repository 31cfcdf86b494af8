//! Incremental request parser: Redis 7.0's `processInlineBuffer` and `processMultibulkBuffer`
//! (src/networking.c), error texts included.
//!
//! A request that starts with `*` is a multibulk (`*<n>\r\n` then `n` times `$<len>\r\n<bytes>\r\n`);
//! anything else is an inline line ending at `\n` (an optional `\r` before it is dropped), split into
//! arguments like `sdssplitargs`. Empty inline lines and `*<n>` with `n <= 0` are skipped.
//!
//! Invariants:
//! - **Resumable, linear.** Header lines and complete bulk arguments are consumed from the buffer as
//!   soon as they are read and their result is kept in the parser, so a call that returns `Ok(None)`
//!   leaves the unfinished tail in the buffer and the next call resumes where this one stopped. A line
//!   still missing its terminator is not searched again from its start either (`scanned`).
//! - **Zero-copy.** A bulk argument, or an unquoted inline argument, is a `Bytes` slice of the read
//!   buffer (`split_to` + `freeze`); only inline arguments with quotes are copied. A small multibulk
//!   already wholly in the buffer (the usual case in a pipeline) is cut off in one piece and its
//!   arguments sliced from it, without consuming its header lines one by one.
//! - **Claims cost nothing.** A claimed argument count pre-allocates at most 1024 slots and a claimed
//!   bulk length allocates nothing; `bytes_needed_hint` reports it so the caller may choose to reserve.
//! - **Chunking never changes the outcome.** The requests, and the protocol error, read from a stream
//!   are the same however it is split into reads. Redis applies its 64 KiB line limit to the bytes
//!   buffered so far, which depends on read sizes; here a line fails exactly when no terminator comes
//!   within the first `max_inline_len + 1` bytes, the one rule that agrees with Redis whatever the
//!   split. Redis also stops its `strchr` searches at a NUL byte, a C artefact not reproduced: NUL is an
//!   ordinary byte.
//! - **Redis's leniency is kept**: the byte after the `\r` of a `*`/`$` line and the two bytes after a
//!   bulk argument are skipped without being checked, as Redis does.
//! - After a protocol error the caller replies with it and closes the connection; the parser's state
//!   is then meaningless (but calling it again is still safe).

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// `argv` slots allocated up front for a multibulk, whatever count the client claimed.
const MAX_PREALLOC_ARGS: usize = 1024;
/// Most arguments of a multibulk read by the whole-request fast path (`RequestParser::whole`).
const WHOLE_MAX_ARGS: usize = 16;
/// Bytes `RequestParser::find` checks with a plain loop before handing the rest to memchr.
const QUICK_SCAN: usize = 12;
/// Most arguments a client that has not authenticated may send in one multibulk.
const UNAUTH_MAX_ARGS: i64 = 10;
/// Longest bulk argument a client that has not authenticated may send.
const UNAUTH_MAX_BULK: usize = 16 * 1024;

/// Size limits applied while parsing, from the server's configuration.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// `proto-max-bulk-len`: longest bulk argument accepted.
    pub max_bulk_len: usize,
    /// Longest inline request line, and longest `*`/`$` header line (Redis's `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        Self {
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}

/// A protocol error: `.0` is the full message WITHOUT the leading '-' and CRLF, e.g.
/// "ERR Protocol error: invalid bulk length". After it the server replies with it and closes the
/// connection. (In "expected '$', got 'X'" a non-ASCII byte shows as its Latin-1 character, where
/// Redis sends the raw byte.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(what: &str) -> Self {
        Self(format!("ERR Protocol error: {what}"))
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Cuts requests off the front of a connection's read buffer; one per connection.
#[derive(Debug)]
pub struct RequestParser {
    limits: ParseLimits,
    /// Arguments of the current multibulk still to read; 0 between requests.
    pending_args: usize,
    /// Length of the bulk argument whose `$` line is consumed but whose bytes are not.
    bulk_len: Option<usize>,
    /// Arguments of the current multibulk read so far.
    args: Vec<Bytes>,
    /// Bytes at the front of the buffer already searched for a line terminator in vain.
    scanned: usize,
    /// Bytes the bulk argument being read still lacked when `next` last returned.
    missing: usize,
    /// Bytes of `args` (what a partly read request holds outside the buffer).
    held: usize,
}

impl RequestParser {
    pub fn new(limits: ParseLimits) -> Self {
        Self {
            limits,
            pending_args: 0,
            bulk_len: None,
            args: Vec::new(),
            scanned: 0,
            missing: 0,
            held: 0,
        }
    }

    /// Bytes of the arguments of a partly read request the parser holds (taken out of the
    /// buffer already): CLIENT LIST's `argv-mem` of a client in the middle of sending one.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Takes effect from the next header line read (`CONFIG SET proto-max-bulk-len`).
    pub fn set_limits(&mut self, limits: ParseLimits) {
        self.limits = limits;
    }

    /// Parses the next complete request from the front of `buf`, removing its bytes from `buf`.
    ///
    /// `Ok(None)` means more bytes are needed: the bytes of a partly read request may already have
    /// been taken from `buf` (the parser holds them), so call again with the same buffer once more
    /// bytes are appended to it. `unauthenticated` applies Redis's limits for a client that has not
    /// run `AUTH` yet: at most 10 arguments of at most 16 KiB each.
    pub fn next(
        &mut self,
        buf: &mut BytesMut,
        unauthenticated: bool,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        self.missing = 0;
        if self.pending_args == 0 && !unauthenticated && buf.first() == Some(&b'*') {
            if let Some(args) = self.whole(buf) {
                self.scanned = 0;
                return Ok(Some(args));
            }
        }
        while self.pending_args == 0 {
            match buf.first() {
                None => return Ok(None),
                Some(b'*') => {
                    let Some(count) = self.multibulk_count(buf, unauthenticated)? else {
                        return Ok(None);
                    };
                    if let Ok(count @ 1..) = usize::try_from(count) {
                        self.pending_args = count;
                        self.args = Vec::with_capacity(count.min(MAX_PREALLOC_ARGS));
                    }
                }
                Some(_) => match self.inline(buf)? {
                    None => return Ok(None),
                    Some(args) if !args.is_empty() => return Ok(Some(args)),
                    Some(_) => {}
                },
            }
        }
        while self.pending_args > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => match self.bulk_header(buf, unauthenticated)? {
                    Some(len) => *self.bulk_len.insert(len),
                    None => return Ok(None),
                },
            };
            let framed = len.saturating_add(2);
            if buf.len() < framed {
                self.missing = framed - buf.len();
                return Ok(None);
            }
            let mut arg = buf.split_to(framed).freeze();
            arg.truncate(len);
            self.held += len;
            self.args.push(arg);
            self.bulk_len = None;
            self.pending_args -= 1;
        }
        self.held = 0;
        Ok(Some(std::mem::take(&mut self.args)))
    }

    /// The fast path for a small multibulk already wholly in `buf`: its headers are read in place
    /// and it is cut off in one piece, each argument a slice of that piece. None (with `buf`
    /// untouched) for anything else — partly read, more than [`WHOLE_MAX_ARGS`] arguments, or
    /// anything unusual — which the general path then reads, errors included.
    fn whole(&self, buf: &mut BytesMut) -> Option<Vec<Bytes>> {
        let b: &[u8] = buf;
        // A header's `\r`, with the byte after it present, among the line's first 32 bytes (and
        // within the header length limit, as the general path searches).
        let window = self.limits.max_inline_len.saturating_add(1).min(32);
        let line_end = |from: usize| {
            let line = b.get(from..b.len().min(from + window))?;
            let cr = from + line.iter().position(|&c| c == b'\r')?;
            (cr + 2 <= b.len()).then_some(cr)
        };
        let cr = line_end(0)?;
        let count =
            multibulk_count(&b[1..cr]).filter(|n| (1..=WHOLE_MAX_ARGS as i64).contains(n))?;
        let mut spans = [(0usize, 0usize); WHOLE_MAX_ARGS];
        let mut pos = cr + 2;
        for span in spans.iter_mut().take(count as usize) {
            if b.get(pos) != Some(&b'$') {
                return None;
            }
            let cr = line_end(pos)?;
            let len = bulk_len(&b[pos + 1..cr], self.limits.max_bulk_len)?;
            let start = cr + 2;
            pos = start.checked_add(len)?.checked_add(2)?;
            if pos > b.len() {
                return None;
            }
            *span = (start, len);
        }
        let frame = buf.split_to(pos).freeze();
        let n = count as usize;
        let mut args = Vec::with_capacity(n);
        for &(start, len) in &spans[..n - 1] {
            args.push(frame.slice(start..start + len));
        }
        let (start, len) = spans[n - 1];
        let mut last = frame;
        last.advance(start);
        last.truncate(len);
        args.push(last);
        Some(args)
    }

    /// How many more bytes the bulk argument being read needed when `next` last returned `Ok(None)`,
    /// so the connection can reserve room for it; 0 if unknown. This is a length the client claimed
    /// (up to `max_bulk_len`): cap any reservation made from it.
    pub fn bytes_needed_hint(&self) -> usize {
        self.missing
    }

    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some(newline) = self.find(buf, b'\n') else {
            return if buf.len() > self.limits.max_inline_len {
                Err(ProtocolError::new("too big inline request"))
            } else {
                Ok(None)
            };
        };
        self.scanned = 0;
        let mut line = buf.split_to(newline + 1).freeze();
        let eol = if line.ends_with(b"\r\n") { 2 } else { 1 };
        line.truncate(line.len() - eol);
        split_args(&line)
            .map(Some)
            .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))
    }

    /// Reads `*<count>\r\n`; `buf` starts with `*`.
    fn multibulk_count(
        &mut self,
        buf: &mut BytesMut,
        unauthenticated: bool,
    ) -> Result<Option<i64>, ProtocolError> {
        let Some(cr) = self.header_end(buf, "too big mbulk count string")? else {
            return Ok(None);
        };
        let count = buf
            .get(1..cr)
            .and_then(multibulk_count)
            .ok_or_else(|| ProtocolError::new("invalid multibulk length"))?;
        if unauthenticated && count > UNAUTH_MAX_ARGS {
            return Err(ProtocolError::new("unauthenticated multibulk length"));
        }
        self.consume(buf, cr + 2);
        Ok(Some(count))
    }

    /// Reads `$<len>\r\n`.
    fn bulk_header(
        &mut self,
        buf: &mut BytesMut,
        unauthenticated: bool,
    ) -> Result<Option<usize>, ProtocolError> {
        let Some(cr) = self.header_end(buf, "too big bulk count string")? else {
            return Ok(None);
        };
        match buf.first() {
            Some(b'$') => {}
            other => {
                let got = char::from(other.copied().unwrap_or_default());
                return Err(ProtocolError::new(&format!("expected '$', got '{got}'")));
            }
        }
        let len = buf
            .get(1..cr)
            .and_then(|digits| bulk_len(digits, self.limits.max_bulk_len))
            .ok_or_else(|| ProtocolError::new("invalid bulk length"))?;
        if unauthenticated && len > UNAUTH_MAX_BULK {
            return Err(ProtocolError::new("unauthenticated bulk length"));
        }
        self.consume(buf, cr + 2);
        Ok(Some(len))
    }

    /// Finds the `\r` ending the `*`/`$` line at the front of `buf`, once the byte after it (skipped
    /// unchecked, like Redis) has arrived too.
    fn header_end(&mut self, buf: &[u8], too_big: &str) -> Result<Option<usize>, ProtocolError> {
        match self.find(buf, b'\r') {
            Some(cr) if cr + 2 <= buf.len() => Ok(Some(cr)),
            Some(cr) => {
                self.scanned = cr;
                Ok(None)
            }
            None if buf.len() > self.limits.max_inline_len => Err(ProtocolError::new(too_big)),
            None => Ok(None),
        }
    }

    /// Position of the first `byte` within the first `max_inline_len + 1` bytes of `buf`, resuming
    /// after the bytes earlier calls already searched.
    fn find(&mut self, buf: &[u8], byte: u8) -> Option<usize> {
        let window = buf.len().min(self.limits.max_inline_len.saturating_add(1));
        let unsearched = buf.get(self.scanned..window).unwrap_or_default();
        // A `*`/`$` header ends within a few bytes: a short loop finds it faster than memchr's
        // set-up, which was the costliest part of parsing a pipeline of small commands.
        let (head, rest) = unsearched.split_at(unsearched.len().min(QUICK_SCAN));
        if let Some(i) = head.iter().position(|&b| b == byte) {
            return Some(self.scanned + i);
        }
        match memchr::memchr(byte, rest) {
            Some(i) => Some(self.scanned + head.len() + i),
            None => {
                self.scanned = window;
                None
            }
        }
    }

    fn consume(&mut self, buf: &mut BytesMut, n: usize) {
        self.scanned = 0;
        buf.advance(n);
    }
}

/// The argument count of a `*<count>` header line (between `*` and `\r`): a `string2ll` number
/// up to `i32::MAX`, as Redis accepts (0 or less: an empty request). Shared by the general path and
/// the whole-request fast path so the two cannot disagree.
#[inline]
fn multibulk_count(digits: &[u8]) -> Option<i64> {
    string2ll(digits).filter(|&n| n <= i64::from(i32::MAX))
}

/// The length of a `$<len>` header line (between `$` and `\r`): a `string2ll` number from 0 to
/// `max_bulk_len`. Shared by the general path and the whole-request fast path.
#[inline]
fn bulk_len(digits: &[u8], max_bulk_len: usize) -> Option<usize> {
    string2ll(digits)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= max_bulk_len)
}

/// Redis's `string2ll`: an optional `-`, then digits with no leading zero (or just `0`), at most
/// 20 bytes in all, fitting an `i64`. No sign `+`, no spaces.
fn string2ll(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    if s.len() > 20 {
        return None;
    }
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

/// C's `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Splits an inline request like Redis's `sdssplitargs`; `None` for unbalanced quotes.
///
/// Blanks (`isspace`) separate arguments. An argument may end in one quoted part: `"..."` takes the
/// escapes `\n \r \t \b \a \xHH` and `\<any>` for that character, `'...'` only `\'`; the closing
/// quote must be followed by a blank or the end of the line. Unquoted arguments are slices of `line`.
fn split_args(line: &Bytes) -> Option<Vec<Bytes>> {
    let s: &[u8] = line;
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while s.get(i).copied().is_some_and(is_space) {
            i += 1;
        }
        if i >= s.len() {
            return Some(args);
        }
        let start = i;
        while s
            .get(i)
            .is_some_and(|c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t' | b'"' | b'\''))
        {
            i += 1;
        }
        let arg = match s.get(i) {
            Some(&quote @ (b'"' | b'\'')) => {
                let mut arg = s.get(start..i).unwrap_or_default().to_vec();
                i = unquote(s, i + 1, quote, &mut arg)?;
                Bytes::from(arg)
            }
            _ => line.slice(start..i),
        };
        args.push(arg);
    }
}

/// Appends the quoted part starting at `s[i]` (just after the opening `quote`) to `out`; returns the
/// position after the closing quote.
fn unquote(s: &[u8], mut i: usize, quote: u8, out: &mut Vec<u8>) -> Option<usize> {
    loop {
        let c = *s.get(i)?;
        let next = s.get(i + 1).copied();
        if c == quote {
            return match next {
                Some(n) if !is_space(n) => None,
                _ => Some(i + 1),
            };
        }
        match (quote, c, next) {
            (b'"', b'\\', Some(b'x')) => {
                if let (Some(hi), Some(lo)) = (hex_digit(s.get(i + 2)), hex_digit(s.get(i + 3))) {
                    out.push((hi << 4) | lo);
                    i += 4;
                    continue;
                }
                out.push(b'x');
                i += 2;
            }
            (b'"', b'\\', Some(escaped)) => {
                out.push(match escaped {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => b'\x08',
                    b'a' => b'\x07',
                    other => other,
                });
                i += 2;
            }
            (b'\'', b'\\', Some(b'\'')) => {
                out.push(b'\'');
                i += 2;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
}

fn hex_digit(c: Option<&u8>) -> Option<u8> {
    let digit = char::from(*c?).to_digit(16)?;
    u8::try_from(digit).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The requests read from a stream, then the protocol error that ended it, if any.
    type Outcome = (Vec<Vec<Vec<u8>>>, Option<String>);

    /// Feeds `input` cut at `cuts`, reading every complete request after each piece.
    fn parse_cut(input: &[u8], cuts: &[usize], limits: ParseLimits, unauth: bool) -> Outcome {
        let mut parser = RequestParser::new(limits);
        let mut buf = BytesMut::new();
        let mut requests = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain([&input.len()]) {
            buf.extend_from_slice(&input[from..to]);
            from = to;
            loop {
                match parser.next(&mut buf, unauth) {
                    Ok(Some(args)) => requests.push(args.iter().map(|a| a.to_vec()).collect()),
                    Ok(None) => break,
                    Err(e) => return (requests, Some(e.0)),
                }
            }
        }
        (requests, None)
    }

    fn parse(input: &[u8]) -> Outcome {
        parse_cut(input, &[], ParseLimits::default(), false)
    }

    fn requests(input: &[u8]) -> Vec<Vec<Vec<u8>>> {
        let (requests, error) = parse(input);
        assert_eq!(error, None, "input {:?}", String::from_utf8_lossy(input));
        requests
    }

    fn request(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    fn error(input: &[u8], unauth: bool) -> String {
        let (_, error) = parse_cut(input, &[], ParseLimits::default(), unauth);
        error.unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)))
    }

    #[test]
    fn a_partly_read_request_counts_the_arguments_it_holds() {
        let mut p = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$4\r\nwo"[..]);
        assert_eq!(p.next(&mut buf, false).unwrap(), None);
        assert_eq!(p.held_bytes(), 8);
        buf.extend_from_slice(b"rld\r\n");
        assert!(p.next(&mut buf, false).unwrap().is_some());
        assert_eq!(p.held_bytes(), 0);
    }

    #[test]
    fn multibulk_arguments_are_binary_safe() {
        assert_eq!(
            requests(b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$6\r\na\r\n\0b\n\r\n"),
            [request(&[b"SET", b"", b"a\r\n\0b\n"])]
        );
    }

    #[test]
    fn inline_lines_end_at_newline_with_optional_cr() {
        assert_eq!(
            requests(b"PING\r\nset a b\n  get \t x  \r\necho a\rb\n"),
            [
                request(&[b"PING"]),
                request(&[b"set", b"a", b"b"]),
                request(&[b"get", b"x"]),
                request(&[b"echo", b"a", b"b"]),
            ]
        );
    }

    #[test]
    fn empty_requests_are_skipped() {
        assert_eq!(
            requests(b"\r\n\n \t \r\n*0\r\n*-1\r\n*-7\r\nPING\r\n\n"),
            [request(&[b"PING"])]
        );
    }

    #[test]
    fn inline_quoting_follows_sdssplitargs() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"set \"a b\" c", &[b"set", b"a b", b"c"]),
            (b"\"\"", &[b""]),
            (b"''  x", &[b"", b"x"]),
            (b"\"\\x41\\x4a\\x4A\\x00\"", &[b"AJJ\0"]),
            (b"\"\\xZZ\\x4\"", &[b"xZZx4"]),
            (b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"", &[b"\n\r\t\x08\x07\\\"q"]),
            (b"'it\\'s' 'a\\nb' 'c\"d'", &[b"it's", b"a\\nb", b"c\"d"]),
            (b"foo\"bar baz\" x", &[b"foobar baz", b"x"]),
            (b"ab'c d'", &[b"abc d"]),
            (b"\"a\"\x0bb", &[b"a", b"b"]),
            (b"a\x0bb \x0cc", &[b"a\x0bb", b"c"]),
            (b"a\0b", &[b"a\0b"]),
        ];
        for &(line, expected) in cases {
            let mut input = line.to_vec();
            input.extend_from_slice(b"\r\n");
            assert_eq!(requests(&input), [request(expected)], "line {line:?}");
        }
    }

    #[test]
    fn unbalanced_quotes_are_an_error() {
        for line in [
            &b"\"abc"[..],
            b"'abc",
            b"\"abc\\\"",
            b"\"abc\\",
            b"'abc\\'",
            b"\"a\"b",
            b"'a'b",
            b"x \"a\"\"b\"",
        ] {
            let mut input = line.to_vec();
            input.push(b'\n');
            assert_eq!(
                error(&input, false),
                "ERR Protocol error: unbalanced quotes in request",
                "line {line:?}"
            );
        }
    }

    #[test]
    fn every_error_message() {
        let k64 = 64 * 1024;
        let long_line = [b'a'].repeat(k64 + 1);
        let long_mbulk = [&b"*"[..], &[b'1'].repeat(k64)].concat();
        let long_bulk = [&b"*1\r\n$"[..], &[b'1'].repeat(k64)].concat();
        let cases: &[(&[u8], &str)] = &[
            (&long_line, "too big inline request"),
            (&long_mbulk, "too big mbulk count string"),
            (&long_bulk, "too big bulk count string"),
            (b"*abc\r\n", "invalid multibulk length"),
            (b"*\r\n", "invalid multibulk length"),
            (b"*+1\r\n", "invalid multibulk length"),
            (b"*01\r\n", "invalid multibulk length"),
            (b"* 1\r\n", "invalid multibulk length"),
            (b"*-0\r\n", "invalid multibulk length"),
            (b"*1 \r\n", "invalid multibulk length"),
            (b"*2147483648\r\n", "invalid multibulk length"),
            (b"*99999999999999999999\r\n", "invalid multibulk length"),
            (b"*1\r\nX3\r\n", "expected '$', got 'X'"),
            (b"*1\r\n\r\n", "expected '$', got '\r'"),
            (b"*2\r\n$1\r\na\r\n:1\r\n", "expected '$', got ':'"),
            (b"*1\r\n$abc\r\n", "invalid bulk length"),
            (b"*1\r\n$\r\n", "invalid bulk length"),
            (b"*1\r\n$-1\r\n", "invalid bulk length"),
            (b"*1\r\n$01\r\n", "invalid bulk length"),
            (b"*1\r\n$536870913\r\n", "invalid bulk length"),
            (b"*1\r\n$9223372036854775808\r\n", "invalid bulk length"),
            (b"\"x\r\n", "unbalanced quotes in request"),
        ];
        for &(input, message) in cases {
            assert_eq!(
                error(input, false),
                format!("ERR Protocol error: {message}"),
                "input {:?}",
                String::from_utf8_lossy(&input[..input.len().min(40)])
            );
        }
    }

    #[test]
    fn line_limits_are_exact() {
        let limits = ParseLimits {
            max_inline_len: 8,
            ..ParseLimits::default()
        };
        let run = |input: &[u8]| parse_cut(input, &[], limits, false);
        assert_eq!(run(b"aaaaaaaa"), (vec![], None));
        assert_eq!(run(b"aaaaaaaa\n"), (vec![request(&[b"aaaaaaaa"])], None));
        assert_eq!(run(b"aaaaaaa\r\n"), (vec![request(&[b"aaaaaaa"])], None));
        let too_big = Some("ERR Protocol error: too big inline request".to_string());
        assert_eq!(run(b"aaaaaaaaa"), (vec![], too_big.clone()));
        assert_eq!(run(b"aaaaaaaaa\n"), (vec![], too_big));
        assert_eq!(run(b"*1234567\r"), (vec![], None));
        assert_eq!(run(b"*1\r\n$1234567\r"), (vec![], None));
        assert_eq!(
            run(b"*12345678\r\n").1.as_deref(),
            Some("ERR Protocol error: too big mbulk count string")
        );
        assert_eq!(
            run(b"*1\r\n$12345678\r\n").1.as_deref(),
            Some("ERR Protocol error: too big bulk count string")
        );
    }

    #[test]
    fn counts_at_the_limits_are_accepted() {
        assert_eq!(parse(b"*2147483647\r\n"), (vec![], None));
        assert_eq!(parse(b"*1\r\n$536870912\r\n"), (vec![], None));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"9223372036854775808"), None);
        assert_eq!(string2ll(b"00"), None);
        assert_eq!(string2ll(b"-"), None);
        assert_eq!(string2ll(b""), None);
    }

    #[test]
    fn max_bulk_len_follows_set_limits() {
        let mut parser = RequestParser::new(ParseLimits::default());
        parser.set_limits(ParseLimits {
            max_bulk_len: 4,
            ..ParseLimits::default()
        });
        let mut ok = BytesMut::from(&b"*1\r\n$4\r\nabcd\r\n"[..]);
        assert_eq!(
            parser.next(&mut ok, false),
            Ok(Some(vec![Bytes::from("abcd")]))
        );
        let mut too_long = BytesMut::from(&b"*1\r\n$5\r\nabcde\r\n"[..]);
        assert_eq!(
            parser.next(&mut too_long, false).unwrap_err().0,
            "ERR Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn unauthenticated_clients_are_limited() {
        let args = |n: usize| format!("*{n}\r\n{}", "$1\r\na\r\n".repeat(n)).into_bytes();
        let bulk = |n: usize| format!("*1\r\n${n}\r\n{}\r\n", "a".repeat(n)).into_bytes();
        let ok = |input: &[u8], unauth| {
            let (requests, error) = parse_cut(input, &[], ParseLimits::default(), unauth);
            error.is_none() && requests.len() == 1
        };
        assert!(ok(&args(10), true));
        assert!(ok(&bulk(16384), true));
        assert!(ok(&args(11), false));
        assert!(ok(&bulk(16385), false));
        assert_eq!(
            error(&args(11), true),
            "ERR Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(
            error(&bulk(16385), true),
            "ERR Protocol error: unauthenticated bulk length"
        );
        // Redis checks the number first: a malformed one is "invalid" even when unauthenticated.
        assert_eq!(
            error(b"*1\r\n$-5\r\n", true),
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse_cut(b"*-1\r\n*0\r\n", &[], ParseLimits::default(), true),
            (vec![], None)
        );
    }

    #[test]
    fn redis_leniency_after_cr_is_kept() {
        assert_eq!(
            requests(b"*2\rX$3\rYfooZW$1\r\nb\r\n"),
            [request(&[b"foo", b"b"])]
        );
    }

    const PIPELINE: &[u8] = b"*2\r\n$4\r\nECHO\r\n$5\r\nhe\r\nl\r\n\r\nPING\r\n*0\r\n\
        set \"a b\" 'c'\n*-1\r\n*1\r\n$0\r\n\r\n   \r\nget x\r\n*3\r\n$1\r\na\r\n$2\r\nbc\r\n$3\r\ndef\r\n";

    #[test]
    fn any_split_of_a_pipeline_reads_the_same_requests() {
        let whole = parse(PIPELINE);
        assert_eq!(whole.0.len(), 6);
        assert_eq!(whole.1, None);
        let limits = ParseLimits::default();
        for cut in 0..=PIPELINE.len() {
            assert_eq!(
                parse_cut(PIPELINE, &[cut], limits, false),
                whole,
                "cut at {cut}"
            );
        }
        let every_byte: Vec<usize> = (1..PIPELINE.len()).collect();
        assert_eq!(parse_cut(PIPELINE, &every_byte, limits, false), whole);
    }

    #[test]
    fn any_split_of_a_bad_stream_reports_the_same_error() {
        for bad in [
            &b"*1\r\n$3\r\nfoo\r\nGET \"x\r\n"[..],
            b"PING\r\n*1\r\n!3\r\n",
            b"*2\r\n$1\r\na\r\n$x\r\n",
        ] {
            let whole = parse(bad);
            assert!(whole.1.is_some());
            for cut in 0..=bad.len() {
                assert_eq!(parse_cut(bad, &[cut], ParseLimits::default(), false), whole);
            }
        }
    }

    #[test]
    fn huge_claims_allocate_nothing() {
        let mut parser = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::from(&b"*2147483647\r\n$3\r\nfoo\r\n"[..]);
        assert_eq!(parser.next(&mut buf, false), Ok(None));
        assert!(parser.args.capacity() <= MAX_PREALLOC_ARGS);
        assert_eq!(parser.args.len(), 1);
        assert!(buf.is_empty());

        let mut parser = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::with_capacity(64);
        buf.extend_from_slice(b"*1\r\n$536870912\r\nabc");
        assert_eq!(parser.next(&mut buf, false), Ok(None));
        assert_eq!(parser.bytes_needed_hint(), 536870912 + 2 - 3);
        assert!(buf.capacity() <= 64);
    }

    #[test]
    fn hint_is_the_rest_of_the_bulk_being_read() {
        let mut parser = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nabc\r\n$10\r\n0123"[..]);
        assert_eq!(parser.next(&mut buf, false), Ok(None));
        assert_eq!(parser.bytes_needed_hint(), 8);
        buf.extend_from_slice(b"456789\r");
        assert_eq!(parser.next(&mut buf, false), Ok(None));
        assert_eq!(parser.bytes_needed_hint(), 1);
        buf.extend_from_slice(b"\n*1\r\n$5");
        let args = parser.next(&mut buf, false).unwrap().unwrap();
        assert_eq!(args, [Bytes::from("abc"), Bytes::from("0123456789")]);
        assert_eq!(parser.next(&mut buf, false), Ok(None));
        assert_eq!(parser.bytes_needed_hint(), 0);
    }

    #[test]
    fn arguments_share_the_read_buffer() {
        let mut parser = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$5\r\nvalue\r\nget key\r\n"[..]);
        let base = buf.as_ptr() as usize;
        let multibulk = parser.next(&mut buf, false).unwrap().unwrap();
        assert_eq!(multibulk[0].as_ptr() as usize, base + 8);
        assert_eq!(multibulk[1].as_ptr() as usize, base + 17);
        let inline = parser.next(&mut buf, false).unwrap().unwrap();
        assert_eq!(inline[1].as_ptr() as usize, base + 28);
    }

    #[test]
    fn a_terminator_around_the_quick_scan_is_found_in_place() {
        // The `\r` of a header, or the `\n` of an inline line, inside the quick scan, at its edge
        // or in the part memchr searches, first in an unsearched buffer, then after a resumed scan.
        let q = QUICK_SCAN;
        for at in [1, q - 1, q, q + 1, 3 * q] {
            let mut line = vec![b'a'; at];
            line[0] = b'*';
            line.extend_from_slice(b"\r\n");
            let mut parser = RequestParser::new(ParseLimits::default());
            assert_eq!(parser.find(&line, b'\r'), Some(at), "at {at}");
            assert_eq!(parser.find(&line, b'\n'), Some(at + 1), "at {at}");
            let mut parser = RequestParser::new(ParseLimits::default());
            assert_eq!(parser.find(&line[..at / 2], b'\r'), None);
            assert_eq!(parser.scanned, at / 2);
            assert_eq!(parser.find(&line, b'\r'), Some(at), "at {at}, resumed");
        }
    }

    #[test]
    fn header_numbers_read_the_same_on_both_paths() {
        assert_eq!(multibulk_count(b"16"), Some(16));
        assert_eq!(multibulk_count(b"-1"), Some(-1));
        assert_eq!(multibulk_count(b"2147483648"), None);
        assert_eq!(bulk_len(b"0", 4), Some(0));
        assert_eq!(bulk_len(b"4", 4), Some(4));
        assert_eq!(bulk_len(b"5", 4), None);
        assert_eq!(bulk_len(b"-1", 4), None);
        // A small request whole in the buffer (fast path) and fed byte by byte (general path).
        let limits = ParseLimits {
            max_bulk_len: 4,
            ..ParseLimits::default()
        };
        for input in [
            &b"*1\r\n$4\r\nabcd\r\n"[..],
            b"*1\r\n$5\r\nabcde\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$01\r\nx\r\n",
            b"*2\r\n$0\r\n\r\n$1\r\nb\r\n",
            b"*01\r\n$1\r\na\r\n",
        ] {
            let every_byte: Vec<usize> = (1..input.len()).collect();
            assert_eq!(
                parse_cut(input, &[], limits, false),
                parse_cut(input, &every_byte, limits, false),
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_slow_line_is_scanned_once() {
        let mut parser = RequestParser::new(ParseLimits::default());
        let mut buf = BytesMut::new();
        for _ in 0..1000 {
            buf.extend_from_slice(b"x");
            assert_eq!(parser.next(&mut buf, false), Ok(None));
            assert_eq!(parser.scanned, buf.len());
        }
        buf.extend_from_slice(b"\n");
        assert_eq!(parser.next(&mut buf, false).unwrap().unwrap().len(), 1);
        assert_eq!(parser.scanned, 0);
    }
}
