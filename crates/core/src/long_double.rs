//! Redis's `long double` arithmetic for INCRBYFLOAT and HINCRBYFLOAT, emulated exactly.
//!
//! Redis parses both operands with `strtold`, adds them in x87 extended precision (a 64-bit
//! mantissa) and prints the sum with `%.17Lf`, trailing zeros removed. f64 arithmetic cannot
//! reproduce that digit for digit (5000 + 1.5e-5 prints `5000.00001499999999988` in Redis), so this
//! module does it with exact integer arithmetic:
//!
//! * [`LongDouble::parse`]: correctly rounded (round-half-even) decimal and hexadecimal parsing,
//!   with `string2ld`'s acceptance rules: no leading space, the whole input consumed, no NaN, and
//!   a result that overflows or underflows to zero rejected;
//! * `+`: the exact sum rounded once to 64 bits;
//! * [`LongDouble::to_human`]: the exact `%.17Lf` digits (ties to even, as glibc), trimmed as
//!   Redis's `ld2string(LD_STR_HUMAN)` trims them.
//!
//! Values are `mant × 2^exp` with a normalized 64-bit mantissa. Subnormals (below 2^-16382) keep a
//! full mantissa instead of losing precision gradually — a difference only below 3.4e-4932.

/// The smallest and largest `exp` of a normalized value (x87: 2^-16382 ..= just under 2^16384).
const MIN_EXP: i64 = -16445 - 63;
const MAX_EXP: i64 = 16383 - 63;

/// An x87 extended-precision number: ±mant × 2^exp (mant == 0 for zero), or an infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
    inf: bool,
}

/// A non-negative big integer, little-endian 32-bit limbs, no trailing zero limbs.
#[derive(Clone, Debug, Default)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn mul_add_small(&mut self, mul: u32, add: u32) {
        let mut carry = u64::from(add);
        for l in &mut self.0 {
            let v = u64::from(*l) * u64::from(mul) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    /// Divides in place by `d`, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*l);
            *l = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn shl(&mut self, bits: usize) {
        if self.is_zero() {
            return;
        }
        let (limbs, bits) = (bits / 32, bits % 32);
        if bits != 0 {
            let mut carry = 0u32;
            for l in &mut self.0 {
                let v = (*l << bits) | carry;
                carry = *l >> (32 - bits);
                *l = v;
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, limbs));
    }

    fn bit_len(&self) -> usize {
        match self.0.last() {
            None => 0,
            Some(&top) => self.0.len() * 32 - top.leading_zeros() as usize,
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.0.get(i / 32).is_some_and(|l| l >> (i % 32) & 1 == 1)
    }

    /// True if any bit below `i` is set.
    fn any_below(&self, i: usize) -> bool {
        let (limbs, bits) = (i / 32, i % 32);
        self.0[..limbs.min(self.0.len())].iter().any(|&l| l != 0)
            || (bits != 0
                && self
                    .0
                    .get(limbs)
                    .is_some_and(|l| l & ((1 << bits) - 1) != 0))
    }

    /// The 64 bits starting at bit `from`.
    fn bits64(&self, from: usize) -> u64 {
        (0..64).fold(0u64, |acc, i| acc | (u64::from(self.bit(from + i)) << i))
    }

    fn add(&self, other: &Big) -> Big {
        let n = self.0.len().max(other.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(*self.0.get(i).unwrap_or(&0))
                + u64::from(*other.0.get(i).unwrap_or(&0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// self - other, for self ≥ other.
    fn sub(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(*other.0.get(i).unwrap_or(&0)) - borrow;
            borrow = i64::from(v < 0);
            out.push((v + (borrow << 32)) as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, other: &Big) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// Decimal digits.
    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(1_000_000_000));
        }
        let mut s = chunks
            .pop()
            .map_or_else(|| "0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// Rounds `n` (plus a fraction below its last bit when `sticky`) to 64 significant bits, ties to
/// even: (mantissa, exponent) with n ≈ mantissa × 2^exponent. None for zero.
fn round_big(n: &Big, sticky: bool) -> Option<(u64, i64)> {
    let len = n.bit_len();
    if len == 0 {
        return None;
    }
    if len <= 64 {
        let shift = 64 - len;
        return Some((n.bits64(0) << shift, -(shift as i64)));
    }
    let shift = len - 64;
    let mut mant = n.bits64(shift);
    let half = n.bit(shift - 1);
    let rest = sticky || n.any_below(shift - 1);
    let mut exp = shift as i64;
    if half && (rest || mant & 1 == 1) {
        mant = mant.wrapping_add(1);
        if mant == 0 {
            mant = 1 << 63;
            exp += 1;
        }
    }
    Some((mant, exp))
}

impl LongDouble {
    const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
        inf: false,
    };

    /// An integer, exactly (every i64 fits a 64-bit mantissa).
    pub fn from_i64(v: i64) -> LongDouble {
        let m = v.unsigned_abs();
        if m == 0 {
            return LongDouble::ZERO;
        }
        let z = m.leading_zeros();
        LongDouble {
            neg: v < 0,
            mant: m << z,
            exp: -i64::from(z),
            inf: false,
        }
    }

    /// True for ±infinity.
    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    /// A finite value from a rounded magnitude, or None when it over- or underflows.
    fn finite(neg: bool, rounded: Option<(u64, i64)>) -> Option<LongDouble> {
        match rounded {
            None => Some(LongDouble {
                neg,
                ..LongDouble::ZERO
            }),
            Some((mant, exp)) if (MIN_EXP..=MAX_EXP).contains(&exp) => Some(LongDouble {
                neg,
                mant,
                exp,
                inf: false,
            }),
            Some(_) => None,
        }
    }

    /// Parses like Redis's `string2ld` (strtold): None if the input is not a valid float for
    /// Redis — leading space, trailing garbage, NaN, or a finite input that overflows or rounds to
    /// zero from a nonzero value.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= 5 * 1024 || s[0].is_ascii_whitespace() {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Some(LongDouble {
                neg,
                mant: 0,
                exp: 0,
                inf: true,
            });
        }
        if lower.len() > 2 && lower.starts_with(b"0x") {
            return Self::parse_hex(neg, &lower[2..]);
        }
        Self::parse_decimal(neg, &lower)
    }

    /// Digits with an optional point, then an optional exponent introduced by `marker`:
    /// (digit values, digits after the point, exponent). None unless it is all consumed.
    fn split(body: &[u8], radix: u32, marker: u8) -> Option<(Vec<u32>, i64, i64)> {
        let mut digits = Vec::new();
        let (mut frac, mut seen_point, mut i) = (0i64, false, 0);
        while i < body.len() {
            let c = body[i];
            if c == b'.' && !seen_point {
                seen_point = true;
            } else if let Some(d) = char::from(c).to_digit(radix) {
                digits.push(d);
                frac += i64::from(seen_point);
            } else {
                break;
            }
            i += 1;
        }
        if digits.is_empty() {
            return None;
        }
        let mut exp = 0i64;
        if i < body.len() {
            if body[i] != marker {
                return None;
            }
            let rest = &body[i + 1..];
            let (eneg, edigits) = match rest.first() {
                Some(b'-') => (true, &rest[1..]),
                Some(b'+') => (false, &rest[1..]),
                _ => (false, rest),
            };
            if edigits.is_empty() || !edigits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            for &d in edigits {
                // Saturate: anything this large over- or underflows anyway.
                exp = (exp * 10 + i64::from(d - b'0')).min(1 << 40);
            }
            if eneg {
                exp = -exp;
            }
        }
        Some((digits, frac, exp))
    }

    fn parse_decimal(neg: bool, body: &[u8]) -> Option<LongDouble> {
        let (digits, frac, exp) = Self::split(body, 10, b'e')?;
        let start = digits.iter().position(|&d| d != 0);
        let Some(start) = start else {
            return Some(LongDouble {
                neg,
                ..LongDouble::ZERO
            });
        };
        let mut digits = &digits[start..];
        let mut e = exp - frac;
        while let [rest @ .., 0] = digits {
            digits = rest;
            e += 1;
        }
        let magnitude = digits.len() as i64 + e; // value < 10^magnitude
        if magnitude > 4940 {
            return None;
        }
        if magnitude < -4960 {
            return None;
        }
        let mut n = Big::default();
        for &d in digits {
            n.mul_add_small(10, d);
        }
        let rounded = if e >= 0 {
            for _ in 0..e {
                n.mul_add_small(10, 0);
            }
            round_big(&n, false)
        } else {
            let k = (-e) as usize;
            // Enough extra bits that the quotient keeps at least 66.
            let s = (66 + k * 3322 / 1000 + 2).saturating_sub(n.bit_len());
            n.shl(s);
            let mut rem = false;
            for _ in 0..k / 9 {
                rem |= n.div_small(1_000_000_000) != 0;
            }
            rem |= n.div_small(10u32.pow((k % 9) as u32)) != 0;
            round_big(&n, rem).map(|(m, x)| (m, x - s as i64))
        };
        Self::finite(neg, rounded).filter(|v| v.mant != 0)
    }

    fn parse_hex(neg: bool, body: &[u8]) -> Option<LongDouble> {
        let (digits, frac, exp) = Self::split(body, 16, b'p')?;
        let mut n = Big::default();
        for &d in &digits {
            n.mul_add_small(16, d);
        }
        if n.is_zero() {
            return Some(LongDouble {
                neg,
                ..LongDouble::ZERO
            });
        }
        let shift = exp - 4 * frac;
        let rounded = round_big(&n, false).map(|(m, x)| (m, x.saturating_add(shift)));
        Self::finite(neg, rounded)
    }

    /// The magnitude as a big integer scaled by 2^-base: mant × 2^(exp - base).
    fn scaled(&self, base: i64) -> Big {
        let mut b = Big::from_u64(self.mant);
        b.shl((self.exp - base) as usize);
        b
    }

    /// `%.17Lf` with trailing zeros (and a trailing point) removed, and "-0" printed as "0": what
    /// Redis's `ld2string(..., LD_STR_HUMAN)` prints.
    pub fn to_human(&self) -> String {
        if self.inf {
            return if self.neg { "-inf" } else { "inf" }.into();
        }
        const SCALE: u128 = 100_000_000_000_000_000; // 10^17
        let (int, frac_digits) = if self.exp >= 0 {
            (self.scaled(0), 0u128)
        } else {
            let k = (-self.exp) as u32;
            let (int, frac) = if k >= 64 {
                (0u64, self.mant)
            } else {
                (self.mant >> k, self.mant & ((1u64 << k) - 1))
            };
            let x = u128::from(frac) * SCALE;
            let mut q = 0u128;
            if k <= 127 {
                q = x >> k;
                let r = x & ((1u128 << k) - 1);
                let half = 1u128 << (k - 1);
                if r > half || (r == half && q & 1 == 1) {
                    q += 1;
                }
            }
            let mut int = Big::from_u64(int);
            if q == SCALE {
                q = 0;
                int = int.add(&Big::from_u64(1));
            }
            (int, q)
        };
        let mut s = String::new();
        if self.neg {
            s.push('-');
        }
        s.push_str(&int.to_decimal());
        let frac = format!("{frac_digits:017}");
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// The sum, rounded once to nearest (ties to even); an infinity if it overflows.
    fn add(self, other: LongDouble) -> LongDouble {
        if self.inf || other.inf {
            return if self.inf { self } else { other };
        }
        if other.mant == 0 {
            return if self.mant == 0 {
                LongDouble {
                    neg: self.neg && other.neg,
                    ..LongDouble::ZERO
                }
            } else {
                self
            };
        }
        if self.mant == 0 {
            return other;
        }
        let base = self.exp.min(other.exp);
        let (a, b) = (self.scaled(base), other.scaled(base));
        let (neg, sum) = if self.neg == other.neg {
            (self.neg, a.add(&b))
        } else {
            match a.cmp(&b) {
                std::cmp::Ordering::Less => (other.neg, b.sub(&a)),
                _ => (self.neg, a.sub(&b)),
            }
        };
        match round_big(&sum, false) {
            None => LongDouble::ZERO,
            Some((_, exp)) if exp + base > MAX_EXP => LongDouble {
                neg,
                mant: 0,
                exp: 0,
                inf: true,
            },
            Some((mant, exp)) => LongDouble {
                neg,
                mant,
                exp: exp + base,
                inf: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> String {
        let a = LongDouble::parse(a.as_bytes()).expect("a");
        let b = LongDouble::parse(b.as_bytes()).expect("b");
        (a + b).to_human()
    }

    #[test]
    #[cfg_attr(miri, ignore)] // no unsafe code here; big-number loops are slow under Miri
    fn sums_print_as_redis_prints_them() {
        // Expected strings are redis-server 7.0's HINCRBYFLOAT / INCRBYFLOAT replies.
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("5000", "1.5e-5"), "5000.00001499999999988");
        assert_eq!(sum("1", "1"), "2");
        assert_eq!(sum("1e3", "1"), "1001");
        assert_eq!(sum("9223372036854775807", "1"), "9223372036854775808");
        assert_eq!(sum("0.1", "-0.1"), "0");
        assert_eq!(sum("-0", "0"), "0");
        assert_eq!(
            sum("1e308", "2.5"),
            "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // no unsafe code here; big-number loops are slow under Miri
    fn parsing_follows_string2ld() {
        for ok in [
            "1",
            "-1.5",
            "+2",
            ".5",
            "5.",
            "1e3",
            "1E-3",
            "0x10",
            "0x1.8p1",
            "inf",
            "-Infinity",
            "0",
            "-0.0",
        ] {
            assert!(LongDouble::parse(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "", " 1", "1 ", "nan", "abc", ".", "1e", "1e+", "0x", "1.2.3", "--1", "1e99999",
            "1e-99999",
        ] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad}");
        }
        assert_eq!(
            LongDouble::parse(b"0x10").map(|v| v.to_human()),
            Some("16".into())
        );
        assert_eq!(
            LongDouble::parse(b"1e4000").map(|v| v.to_human().len()),
            Some(4000)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // no unsafe code here; big-number loops are slow under Miri
    fn integers_are_exact_and_overflow_is_infinite() {
        let max = LongDouble::from_i64(i64::MAX);
        assert_eq!(max.to_human(), i64::MAX.to_string());
        assert_eq!(
            LongDouble::from_i64(i64::MIN).to_human(),
            i64::MIN.to_string()
        );
        let huge = LongDouble::parse(b"1e4932").expect("finite");
        assert!((huge + huge).is_infinite());
        assert!(!(huge + LongDouble::from_i64(1)).is_infinite());
    }
}
