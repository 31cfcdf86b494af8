//! Glob-style pattern matching with Redis's `stringmatchlen` semantics (KEYS, SCAN MATCH, CONFIG GET).
//!
//! Supports `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\x` escapes. Recursion on `*` is bounded by a
//! nesting limit, like Redis, so a hostile pattern cannot blow the stack or take exponential time.

const MAX_NESTING: u32 = 1000;

/// True when `text` matches `pattern`; `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    matches(pattern, text, nocase, &mut skip_longer, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn matches(mut p: &[u8], mut s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if matches(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut hit = false;
                loop {
                    match p {
                        [b'\\', c, ..] => {
                            hit |= eq(*c, s[0], nocase);
                            p = &p[2..];
                        }
                        [b']', ..] => break,
                        [] => {
                            // Unterminated class: Redis treats the end of pattern as the end of class.
                            break;
                        }
                        [lo, b'-', hi, ..] if *hi != b']' || p.len() > 3 => {
                            let (mut lo, mut hi, mut c) = (*lo, *hi, s[0]);
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            if nocase {
                                lo = lo.to_ascii_lowercase();
                                hi = hi.to_ascii_lowercase();
                                c = c.to_ascii_lowercase();
                            }
                            hit |= c >= lo && c <= hi;
                            p = &p[3..];
                        }
                        [c, ..] => {
                            hit |= eq(*c, s[0], nocase);
                            p = &p[1..];
                        }
                    }
                }
                if hit == not {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Pattern ended inside the class.
                    return s.is_empty();
                }
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn redis_glob_cases() {
        assert!(m(b"*", b"anything", false));
        // Like Redis, an empty string matches nothing; KEYS/SCAN special-case the lone "*".
        assert!(!m(b"*", b"", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(!m(b"h?llo", b"hllo", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h[b-a]llo", b"hallo", false));
        assert!(m(b"h\\*llo", b"h*llo", false));
        assert!(!m(b"h\\*llo", b"hello", false));
        assert!(m(b"HELLO", b"hello", true));
        assert!(m(b"key:*", b"key:1", false));
        assert!(!m(b"key:*", b"ke", false));
        assert!(m(b"a*b*c", b"aXXbYYc", false));
        assert!(!m(b"a*b*c", b"aXXbYY", false));
    }

    #[test]
    fn pathological_pattern_is_bounded() {
        let pat = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        // Shorter under Miri, which interprets every step; still far beyond naive backtracking.
        let text = vec![b'a'; if cfg!(miri) { 300 } else { 5000 }];
        assert!(!m(pat, &text, false));
    }
}
