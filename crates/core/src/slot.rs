//! Key → hash slot, exactly as Redis Cluster computes it.

/// Number of hash slots.
pub const SLOTS: usize = 16384;

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
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
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC16: [u16; 256] = crc16_table();

/// CRC16-XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The hash slot of `key`: the CRC16 of its `{hashtag}` if it has a non-empty one, else of the key.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
