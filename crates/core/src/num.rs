//! Number parsing and formatting with Redis's acceptance rules.

/// Parses a canonical signed 64-bit integer exactly like Redis's `string2ll`: optional '-', no '+',
/// no leading zeros, no spaces, at most 20 characters.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// The value of `s` when it is a short integer (an optional `-`, then at most 15 digits): exact in
/// an f64, so it needs no decimal-to-binary rounding. Most scores, timeouts and SORT weights are.
/// None for anything else, which the caller hands to its general parser.
#[inline]
pub fn short_integer_f64(s: &[u8]) -> Option<f64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64;
    Some(if digits.len() < s.len() { -n } else { n })
}

/// Parses a float like Redis's `string2ld`/`strtold`: no leading space, whole input consumed,
/// NaN rejected; `inf`/`-inf` accepted.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 5000 || s[0].is_ascii_whitespace() {
        return None;
    }
    if let Some(v) = short_integer_f64(s) {
        return Some(v);
    }
    let text = std::str::from_utf8(s).ok()?;
    let body = text.trim_start_matches(['+', '-']);
    let v = if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        if text.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    } else if body.eq_ignore_ascii_case("nan") {
        return None;
    } else {
        text.parse::<f64>().ok()?
    };
    (!v.is_nan()).then_some(v)
}

/// Formats a float for humans like Redis's `ld2string(..., LD_STR_HUMAN)` (used by INCRBYFLOAT):
/// fixed notation, no exponent, trailing zeros removed. Redis computes in `long double`; Strata
/// computes in f64 and rounds to 15 significant digits so that binary noise (0.1 + 0.2) prints the
/// same as Redis's extended-precision result.
pub fn format_human_f64(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == v.trunc() && v.abs() < 1e17 {
        return format!("{}", v as i64);
    }
    let magnitude = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32 + 1
    };
    let decimals = (15 - magnitude).clamp(0, 17) as usize;
    let mut s = format!("{:.*}", decimals, v);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// 2^e for 0 <= e <= 1000, exactly (built from its bits: `powi` may be inexact).
fn pow2(e: i64) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Parses a C99 hexadecimal float as `strtod` does (`0x1p3`, `-0X.8`, `0x1.8p-2`): an optional
/// sign, `0x`, hex digits with an optional point (at least one digit), and an optional binary
/// exponent `p[+-]digits`. The whole input must be consumed. None if `s` is not one.
pub fn parse_hex_f64(s: &[u8]) -> Option<f64> {
    let (neg, rest) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest
        .strip_prefix(b"0x")
        .or_else(|| rest.strip_prefix(b"0X"))?;
    let (mut mant, mut exp, mut digits, mut seen_point) = (0u64, 0i64, 0usize, false);
    let mut i = 0;
    while i < rest.len() {
        let c = rest[i];
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            digits += 1;
            if mant >> 56 == 0 {
                mant = mant << 4 | u64::from(d);
                if seen_point {
                    exp -= 4;
                }
            } else if !seen_point {
                // Digits beyond 64 bits of mantissa only scale it (truncating, as a last resort).
                exp += 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if let Some(&(b'p' | b'P')) = rest.get(i) {
        let e = std::str::from_utf8(&rest[i + 1..]).ok()?;
        if e.is_empty() || e.starts_with(['+', '-']) && e.len() == 1 {
            return None;
        }
        if !e
            .trim_start_matches(['+', '-'])
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let e: i64 = e.parse().unwrap_or(if e.starts_with('-') {
            -100_000
        } else {
            100_000
        });
        exp = exp.saturating_add(e.clamp(-100_000, 100_000));
    } else if i != rest.len() {
        return None;
    }
    let mut v = mant as f64;
    // Scale in steps so that intermediate powers stay finite.
    let mut e = exp;
    while e > 0 {
        let step = e.min(1000);
        v *= pow2(step);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= pow2(step);
        e += step;
    }
    Some(if neg { -v } else { v })
}

/// Formats a double like C's `printf("%.17g")` (Redis's `addReplyDouble`; `inf`, `-inf`, `nan`).
pub fn format_g17(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust rounds exactly like glibc; `{:.16e}` gives the 17 significant digits and the exponent.
    let sci = format!("{:.16e}", v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..17).contains(&exp) {
        trim(format!("{:.*}", (16 - exp) as usize, v))
    } else {
        let m = trim(mantissa.to_string());
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    }
}

/// Formats a double like Redis's `d2string` (how a listpack stores a sorted-set score, which
/// ZSCAN returns as is): integers that fit in a long long in decimal, `-0`/`0`, else `%.17g`.
pub fn format_d2string(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // double2ll: exact integers within half the long long range (Redis's bound, LLONG_MAX / 2).
    const HALF: f64 = (i64::MAX / 2) as f64;
    if v.is_finite() && v == v.trunc() && (-HALF..=HALF).contains(&v) {
        return format!("{}", v as i64);
    }
    format_g17(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1a",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_like_strtold() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"abc"), None);
    }

    #[test]
    fn integer_spellings_parse_as_the_general_path_does() {
        // The short-integer fast path must agree bit for bit with the full parser, the sign of
        // zero included, and leave everything else to it.
        let general = |s: &str| s.parse::<f64>().ok();
        for s in [
            "0",
            "-0",
            "7",
            "-7",
            "007",
            "-00",
            "123456789012345",
            "-999999999999999",
            "1234567890123456",
            "99999999999999999999",
            "+5",
            "-",
            "",
            "1-",
            "--1",
            "1e3",
        ] {
            let got = parse_f64(s.as_bytes()).map(f64::to_bits);
            let want = if s.is_empty() || s == "-" {
                None
            } else {
                general(s)
            };
            assert_eq!(got, want.map(f64::to_bits), "{s:?}");
        }
    }

    #[test]
    fn human_formatting() {
        assert_eq!(format_human_f64(10.5), "10.5");
        assert_eq!(format_human_f64(0.1 + 0.2), "0.3");
        assert_eq!(format_human_f64(1.1 + 2.2), "3.3");
        assert_eq!(format_human_f64(5000.0), "5000");
        assert_eq!(format_human_f64(-3.25), "-3.25");
        assert_eq!(format_human_f64(1e-20), "0");
    }

    #[test]
    fn g17_like_printf() {
        assert_eq!(format_g17(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_g17(1.5), "1.5");
        assert_eq!(format_g17(-0.0), "-0");
        assert_eq!(format_g17(1e300), "1.0000000000000001e+300");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g17(1e16), "10000000000000000");
        assert_eq!(format_g17(0.0001), "0.0001");
        assert_eq!(format_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(format_g17(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_d2string(1e17), "100000000000000000");
        assert_eq!(format_d2string(-0.0), "-0");
        assert_eq!(format_d2string(2.5), "2.5");
        assert_eq!(parse_hex_f64(b"0x1p3"), Some(8.0));
        assert_eq!(parse_hex_f64(b"-0X.8"), Some(-0.5));
        assert_eq!(parse_hex_f64(b"0x1.8p-1"), Some(0.75));
        assert_eq!(parse_hex_f64(b"0x10"), Some(16.0));
        for bad in [&b"0x"[..], b"0x1p", b"0xg", b"0x1p+", b"1"] {
            assert_eq!(parse_hex_f64(bad), None);
        }
    }
}
