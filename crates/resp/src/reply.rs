//! Reply encoder: RESP2 or RESP3 frames appended straight to the connection's output bytes.
//!
//! Invariants:
//! - every method appends exactly one complete frame, or the header of an aggregate whose elements the
//!   caller appends next, so the buffer is always a prefix of a valid reply stream;
//! - a RESP3-only type is downgraded for RESP2 clients exactly as Redis 7.0 does (map → flat array,
//!   set/push → array, null → `$-1`/`*-1`, boolean → integer, double → bulk string, verbatim → bulk);
//! - simple strings and errors never carry `\r` or `\n` (they become spaces), so client data cannot
//!   inject frames;
//! - integers and lengths are formatted without `fmt` or allocation: this is the hottest path.

use std::fmt::Write as _;

/// The protocol version a client chose with `HELLO` (RESP2 until it does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// Reply encoder writing straight into an output byte buffer.
#[derive(Clone, Debug, Default)]
pub struct ReplyBuf {
    pub buf: Vec<u8>,
    pub proto: Protocol,
    /// The length `buf` may reach before the client is closed for its output limit (its
    /// `client-output-buffer-limit` hard limit, less what it has not read yet); None without a
    /// limit. A reply that runs past it is dropped whole, so a command building a huge reply may
    /// stop as soon as [`ReplyBuf::over_room`] says so, as Redis stops one for a client it is
    /// closing.
    pub room: Option<usize>,
}

impl ReplyBuf {
    pub fn new(proto: Protocol) -> Self {
        Self {
            buf: Vec::new(),
            proto,
            room: None,
        }
    }

    /// Whether the replies so far ran past [`ReplyBuf::room`]: the client will be closed and
    /// none of them sent.
    pub fn over_room(&self) -> bool {
        self.room.is_some_and(|r| self.buf.len() > r)
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// `+s`
    pub fn simple(&mut self, s: &str) {
        self.line(b'+', s);
    }

    /// `-msg`; `msg` starts with its error code, e.g. `ERR syntax error` or `WRONGTYPE ...`.
    pub fn error(&mut self, msg: &str) {
        self.line(b'-', msg);
    }

    /// `:v`
    pub fn int(&mut self, v: i64) {
        self.buf.push(b':');
        self.buf.extend_from_slice(Decimal::signed(v).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `$len` then the bytes.
    pub fn bulk(&mut self, v: &[u8]) {
        self.buf.reserve(v.len() + 16);
        self.header(b'$', v.len());
        self.buf.extend_from_slice(v);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer as a bulk string, e.g. `$2\r\n42\r\n`.
    pub fn bulk_int(&mut self, v: i64) {
        self.bulk(Decimal::signed(v).as_bytes());
    }

    /// The null bulk string: RESP2 `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        self.buf.extend_from_slice(match self.proto {
            Protocol::Resp2 => b"$-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }

    /// The null array: RESP2 `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        self.buf.extend_from_slice(match self.proto {
            Protocol::Resp2 => b"*-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }

    /// `*len`; `len` elements follow.
    pub fn array(&mut self, len: usize) {
        self.header(b'*', len);
    }

    /// RESP3 `%pairs`, RESP2 `*(2*pairs)`; key and value of each pair follow.
    pub fn map(&mut self, pairs: usize) {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', 2 * pairs),
            Protocol::Resp3 => self.header(b'%', pairs),
        }
    }

    /// RESP3 `~len`, RESP2 `*len`.
    pub fn set(&mut self, len: usize) {
        self.aggregate(b'~', len);
    }

    /// RESP3 `>len` (out-of-band data such as pub/sub messages), RESP2 `*len`.
    pub fn push(&mut self, len: usize) {
        self.aggregate(b'>', len);
    }

    /// A double formatted like Redis 7.0's `addReplyDouble` (`%.17g`; `inf`, `-inf`, `nan`):
    /// RESP3 `,v`, RESP2 a bulk string.
    pub fn double(&mut self, v: f64) {
        let text = G17::new(v);
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                self.buf.push(b',');
                self.buf.extend_from_slice(text.as_bytes());
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A double already formatted as `text` (Redis's human long doubles): RESP3 `,text`, RESP2 a
    /// bulk string.
    pub fn double_text(&mut self, text: &str) {
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.line(b',', text),
        }
    }

    /// RESP3 `#t`/`#f`, RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, v: bool) {
        self.buf.extend_from_slice(match (self.proto, v) {
            (Protocol::Resp2, true) => b":1\r\n",
            (Protocol::Resp2, false) => b":0\r\n",
            (Protocol::Resp3, true) => b"#t\r\n",
            (Protocol::Resp3, false) => b"#f\r\n",
        });
    }

    /// RESP3 verbatim string `=len\r\nfmt:text` (`format` is cut or space-padded to 3 bytes, e.g.
    /// `txt`), RESP2 a bulk string of `text`.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if self.proto == Protocol::Resp2 {
            return self.bulk(text);
        }
        let mut tag = *b"   :";
        for (slot, &b) in tag.iter_mut().zip(format.as_bytes().iter().take(3)) {
            *slot = b;
        }
        self.buf.reserve(text.len() + 20);
        self.header(b'=', text.len() + tag.len());
        self.buf.extend_from_slice(&tag);
        self.buf.extend_from_slice(text);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Hands over the encoded bytes, leaving the buffer empty.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    fn aggregate(&mut self, resp3_prefix: u8, len: usize) {
        let prefix = match self.proto {
            Protocol::Resp2 => b'*',
            Protocol::Resp3 => resp3_prefix,
        };
        self.header(prefix, len);
    }

    fn header(&mut self, prefix: u8, len: usize) {
        self.buf.push(prefix);
        self.buf
            .extend_from_slice(Decimal::unsigned(len as u64).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    fn line(&mut self, prefix: u8, s: &str) {
        self.buf.reserve(s.len() + 3);
        self.buf.push(prefix);
        if memchr::memchr2(b'\r', b'\n', s.as_bytes()).is_none() {
            self.buf.extend_from_slice(s.as_bytes());
        } else {
            self.buf.extend(s.bytes().map(|b| match b {
                b'\r' | b'\n' => b' ',
                b => b,
            }));
        }
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// `"00" "01" ... "99"`: two digits per division, as the `itoa` crate does.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// An integer in decimal, formatted on the stack (20 bytes fit `u64::MAX` and `i64::MIN`).
struct Decimal {
    bytes: [u8; 20],
    start: usize,
}

impl Decimal {
    fn unsigned(mut v: u64) -> Self {
        let mut d = Self {
            bytes: [0; 20],
            start: 20,
        };
        while v >= 100 {
            d.push_pair((v % 100) as usize);
            v /= 100;
        }
        if v >= 10 {
            d.push_pair(v as usize);
        } else {
            d.start -= 1;
            d.bytes[d.start] = b'0' + v as u8;
        }
        d
    }

    fn signed(v: i64) -> Self {
        let mut d = Self::unsigned(v.unsigned_abs());
        if v < 0 {
            d.start -= 1;
            d.bytes[d.start] = b'-';
        }
        d
    }

    fn push_pair(&mut self, pair: usize) {
        self.start -= 2;
        self.bytes[self.start..self.start + 2]
            .copy_from_slice(&DIGIT_PAIRS[2 * pair..2 * pair + 2]);
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
}

/// A double as C's `printf("%.17g")` writes it, which is what Redis 7.0 replies; infinities and NaN
/// are spelled `inf`, `-inf` and `nan` whatever the libc.
struct G17 {
    bytes: [u8; 32],
    len: usize,
}

impl G17 {
    const DIGITS: usize = 17;

    fn new(v: f64) -> Self {
        let mut out = Self {
            bytes: [0; 32],
            len: 0,
        };
        if v.is_nan() {
            out.extend(b"nan");
        } else if v.is_infinite() {
            out.extend(if v > 0.0 { b"inf" } else { b"-inf" });
        } else {
            out.finite(v);
        }
        out
    }

    /// `%g`: the 17 significant digits of `%.16e`, written in fixed notation when the exponent is in
    /// -4..17 and in exponent notation otherwise, trailing fraction zeros removed.
    fn finite(&mut self, v: f64) {
        // Fast path for the common integral score: an integer below 1e17 has at most 17 digits,
        // so `%.17g` prints it exactly, in fixed notation, with no fraction (`-0` keeps its sign).
        if v == v.trunc() && v.abs() < 1e17 {
            if v.is_sign_negative() {
                self.extend(b"-");
            }
            self.extend(Decimal::unsigned(v.abs() as u64).as_bytes());
        } else {
            self.digits17(v);
        }
    }

    /// `%.17g` from the digits of `%.16e` (any finite value).
    fn digits17(&mut self, v: f64) {
        let mut sci = Self {
            bytes: [0; 32],
            len: 0,
        };
        // Rust rounds exactly, ties to even, like glibc: `d.dddddddddddddddde[-]x`, at most 24 bytes.
        let _ = write!(sci, "{:.16e}", v.abs());
        let sci = sci.as_bytes();
        let (mantissa, exp) =
            sci.split_at(sci.iter().position(|&b| b == b'e').unwrap_or(sci.len()));
        let mut digits = [b'0'; Self::DIGITS];
        for (slot, &d) in digits
            .iter_mut()
            .zip(mantissa.iter().filter(|b| b.is_ascii_digit()))
        {
            *slot = d;
        }
        let exp: i32 = std::str::from_utf8(exp.get(1..).unwrap_or_default())
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        let significant = digits.iter().rposition(|&d| d != b'0').map_or(1, |i| i + 1);
        if v.is_sign_negative() {
            self.extend(b"-");
        }
        match exp {
            0..=16 => {
                let (int, frac) = digits.split_at(exp as usize + 1);
                self.extend(int);
                if significant > int.len() {
                    self.extend(b".");
                    self.extend(&frac[..significant - int.len()]);
                }
            }
            -4..=-1 => {
                self.extend(b"0.");
                for _ in exp..-1 {
                    self.extend(b"0");
                }
                self.extend(&digits[..significant]);
            }
            _ => {
                self.extend(&digits[..1]);
                if significant > 1 {
                    self.extend(b".");
                    self.extend(&digits[1..significant]);
                }
                self.extend(if exp < 0 { b"e-" } else { b"e+" });
                let exp = exp.unsigned_abs();
                if exp < 10 {
                    self.extend(b"0");
                }
                self.extend(Decimal::unsigned(u64::from(exp)).as_bytes());
            }
        }
    }

    fn extend(&mut self, s: &[u8]) {
        let end = self.len + s.len();
        self.bytes[self.len..end].copy_from_slice(s);
        self.len = end;
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::fmt::Write for G17 {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.len + s.len() > self.bytes.len() {
            return Err(std::fmt::Error);
        }
        self.extend(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `write` encodes for a RESP2 client and for a RESP3 client.
    fn both(write: impl Fn(&mut ReplyBuf)) -> (String, String) {
        let encode = |proto| {
            let mut reply = ReplyBuf::new(proto);
            write(&mut reply);
            String::from_utf8(reply.take()).unwrap()
        };
        (encode(Protocol::Resp2), encode(Protocol::Resp3))
    }

    fn same(s: &str) -> (String, String) {
        (s.to_string(), s.to_string())
    }

    #[test]
    fn scalars() {
        assert_eq!(both(|r| r.ok()), same("+OK\r\n"));
        assert_eq!(both(|r| r.simple("PONG")), same("+PONG\r\n"));
        assert_eq!(
            both(|r| r.error("ERR syntax error")),
            same("-ERR syntax error\r\n")
        );
        assert_eq!(both(|r| r.bulk(b"")), same("$0\r\n\r\n"));
        assert_eq!(both(|r| r.bulk(b"a\r\nb")), same("$4\r\na\r\nb\r\n"));
        assert_eq!(both(|r| r.bulk_int(-42)), same("$3\r\n-42\r\n"));
        assert_eq!(both(|r| r.null()), ("$-1\r\n".into(), "_\r\n".into()));
        assert_eq!(both(|r| r.null_array()), ("*-1\r\n".into(), "_\r\n".into()));
        assert_eq!(
            both(|r| r.boolean(true)),
            (":1\r\n".into(), "#t\r\n".into())
        );
        assert_eq!(
            both(|r| r.boolean(false)),
            (":0\r\n".into(), "#f\r\n".into())
        );
    }

    #[test]
    fn line_breaks_cannot_inject_frames() {
        assert_eq!(both(|r| r.simple("a\r\n:1")), same("+a  :1\r\n"));
        assert_eq!(both(|r| r.error("ERR a\nb\rc")), same("-ERR a b c\r\n"));
    }

    #[test]
    fn integers() {
        for v in [
            0,
            7,
            -7,
            9,
            10,
            99,
            100,
            101,
            12345,
            -100,
            i64::MAX,
            i64::MIN,
        ] {
            let mut reply = ReplyBuf::default();
            reply.int(v);
            assert_eq!(reply.buf, format!(":{v}\r\n").into_bytes());
        }
        for n in [0, 9, 10, 99, 100, 999_999, usize::MAX] {
            assert_eq!(both(|r| r.array(n)), same(&format!("*{n}\r\n")));
        }
    }

    #[test]
    fn aggregates() {
        assert_eq!(both(|r| r.map(3)), ("*6\r\n".into(), "%3\r\n".into()));
        assert_eq!(both(|r| r.set(2)), ("*2\r\n".into(), "~2\r\n".into()));
        assert_eq!(both(|r| r.push(3)), ("*3\r\n".into(), ">3\r\n".into()));
    }

    #[test]
    fn verbatim_strings() {
        assert_eq!(
            both(|r| r.verbatim("txt", b"hi\r\n")),
            ("$4\r\nhi\r\n\r\n".into(), "=8\r\ntxt:hi\r\n\r\n".into())
        );
        assert_eq!(both(|r| r.verbatim("md", b"x")).1, "=5\r\nmd :x\r\n");
        assert_eq!(both(|r| r.verbatim("json", b"")).1, "=4\r\njso:\r\n");
    }

    #[test]
    fn doubles_match_printf_g17() {
        // Expected texts are glibc's printf("%.17g").
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (0.1, "0.10000000000000001"),
            (1.1, "1.1000000000000001"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (123.456, "123.456"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (1e-5, "1.0000000000000001e-05"),
            (0.00012345, "0.00012344999999999999"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (12345678901234567.0, "12345678901234568"),
            (99999999999999984.0, "99999999999999984"),
            (-43320.0, "-43320"),
            (1e100, "1e+100"),
            (-1e-100, "-1e-100"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            // 2^53 - 1 over 4 ends in an exact tie at 17 digits, which printf rounds to even.
            (9007199254740991.0 / 4.0, "2251799813685247.8"),
            (1.0 / 3.0, "0.33333333333333331"),
            (1234567.0, "1234567"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for &(v, text) in cases {
            assert_eq!(
                both(|r| r.double(v)),
                (
                    format!("${}\r\n{text}\r\n", text.len()),
                    format!(",{text}\r\n")
                ),
                "{v:e}"
            );
        }
    }

    #[test]
    fn integral_doubles_take_the_fast_path_with_the_same_text() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![
            0.0,
            -0.0,
            9007199254740992.0,
            99999999999999984.0,
            -99999999999999984.0,
        ];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> (x % 64)) as i64 as f64;
            values.push(v);
            values.push(-v);
        }
        for v in values {
            let mut slow = G17 {
                bytes: [0; 32],
                len: 0,
            };
            slow.digits17(v);
            assert_eq!(G17::new(v).as_bytes(), slow.as_bytes(), "{v:e}");
        }
    }

    #[test]
    fn buffer_accessors() {
        let mut reply = ReplyBuf::new(Protocol::Resp3);
        assert!(reply.is_empty());
        reply.ok();
        reply.int(1);
        assert_eq!(reply.len(), 9);
        assert_eq!(reply.take(), b"+OK\r\n:1\r\n");
        assert!(reply.is_empty());
        reply.null();
        reply.clear();
        assert_eq!(reply.len(), 0);
        assert_eq!(reply.proto, Protocol::Resp3);
    }
}
