//! Key → hash slot, exactly as Redis Cluster computes it.

/// Number of hash slots.
pub const SLOTS: usize = 16384;

/// `CRC16[k][b]`: the CRC of byte `b` followed by `k` zero bytes, from a zero register. The CRC is
/// linear, so eight bytes fold into the register with eight independent lookups ("slicing by 8")
/// instead of a chain of eight dependent ones: routing hashes every key of every command to its
/// slot when there are several shards, and the byte-at-a-time loop was a tenth of a pipelined GET.
const fn crc16_tables() -> [[u16; 256]; 8] {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static CRC16: [[u16; 256]; 8] = crc16_tables();

/// CRC16-XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    let t = &CRC16;
    let mut crc = 0u16;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let hi = crc ^ u16::from_be_bytes([c[0], c[1]]);
        crc = t[7][(hi >> 8) as usize]
            ^ t[6][(hi & 0xff) as usize]
            ^ t[5][c[2] as usize]
            ^ t[4][c[3] as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| {
        (crc << 8) ^ t[0][(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The first `{` in `key`. Keys are short and rarely have one: eight bytes at a time, a word with
/// no `{` byte is passed over in a few instructions (memchr's set-up costs more at these lengths).
fn find_open_brace(key: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = key.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ (ONES * u64::from(b'{'));
        // A zero byte in `x` is a `{` in the word (the test may also flag a byte above a true
        // zero, never without one, so the search below confirms).
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return memchr::memchr(b'{', &key[at..]).map(|i| at + i);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'{')
        .map(|i| at + i)
}

/// The hash slot of `key`: the CRC16 of its `{hashtag}` if it has a non-empty one, else of the key.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = find_open_brace(key).and_then(|open| {
        let rest = &key[open + 1..];
        let close = memchr::memchr(b'}', rest)?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: one bit at a time.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in data {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    #[test]
    fn sliced_crc_equals_the_definition_at_every_length() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let data: Vec<u8> = (0..300)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in 0..data.len() {
            for start in [0, 1, 5] {
                let d = &data[start.min(len)..len];
                assert_eq!(crc16(d), crc16_bitwise(d), "len {}", d.len());
            }
        }
    }

    #[test]
    fn the_first_brace_is_found_at_any_position() {
        // Bytes next to `{` (0x7b) in value, and with its high bit set, around it.
        let near = [b'z', b'|', 0xfb, 0x7a, 0x00, 0xff, b'}'];
        for len in 0..40 {
            for at in 0..=len {
                let mut k: Vec<u8> = (0..len).map(|i| near[i % near.len()]).collect();
                if at < len {
                    k[at] = b'{';
                    if at + 2 < len {
                        k[at + 2] = b'{';
                    }
                }
                let expect = k.iter().position(|&b| b == b'{');
                assert_eq!(find_open_brace(&k), expect, "len {len} at {at}");
            }
        }
    }

    /// The definition of a key's slot, byte by byte.
    fn slot_by_definition(key: &[u8]) -> u16 {
        let hashed = key
            .iter()
            .position(|&b| b == b'{')
            .and_then(|open| {
                let rest = &key[open + 1..];
                let close = rest.iter().position(|&b| b == b'}')?;
                (close > 0).then(|| &rest[..close])
            })
            .unwrap_or(key);
        crc16_bitwise(hashed) & 16383
    }

    #[test]
    fn key_slot_equals_the_definition_with_braces_anywhere() {
        // Lengths across word boundaries; bytes that trip the word test without being a brace
        // (0xfb, 0x7a next to 0x7b), and a tag opened and closed at every pair of positions.
        let near = [b'k', 0xfb, b'7', 0x7a, b':', 0x00, 0xff, b'|', b'}'];
        // (Under Miri, two words and a remainder: every path, a fraction of the cases.)
        let lens = if cfg!(miri) { 17..20 } else { 0..34 };
        for len in lens {
            let base: Vec<u8> = (0..len).map(|i| near[(i * 7 + len) % near.len()]).collect();
            assert_eq!(key_slot(&base), slot_by_definition(&base), "{base:?}");
            for open in 0..len {
                for close in open..len {
                    let mut k = base.clone();
                    k[open] = b'{';
                    k[close] = b'}';
                    assert_eq!(key_slot(&k), slot_by_definition(&k), "{k:?}");
                }
            }
        }
    }

    #[test]
    fn matches_redis_cluster() {
        // Reference values from the Redis Cluster specification and redis-server's CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        // A hash tag: only "user1000" is hashed.
        assert_eq!(key_slot(b"{user1000}.following"), 3443);
        assert_eq!(key_slot(b"user1000"), 3443);
        // An empty first tag: the whole key is hashed, not "bar".
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_slot(b"{}"), 15257);
        // The tag runs from the first '{' to the first '}' after it.
        assert_eq!(key_slot(b"foo{{bar}}zap"), 4015);
        assert_eq!(key_slot(b"{bar"), 4015);
        assert_eq!(key_slot(b"a{b}c}"), 3300);
        assert_eq!(key_slot(b""), 0);
    }
}
