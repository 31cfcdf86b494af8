//! Redis's CRC-64 (`crc64.c`): the "Jones" polynomial 0xad93d23594c935a9, reflected input and
//! output, initial value 0, no final xor. `crc64(0, "123456789") == 0xe9c6d914c4b8d9ca`.
//!
//! Table-driven, eight bytes per step ("slicing by 8"): an RDB file is checksummed as it is
//! written and read, so this runs over every byte of a snapshot.

/// The polynomial, bit-reversed (the reflected algorithm shifts right).
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn make_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ POLY_REFLECTED
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = make_tables();

/// Continues the CRC `crc` over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = crc ^ u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        crc = TABLES[7][(v & 0xff) as usize]
            ^ TABLES[6][((v >> 8) & 0xff) as usize]
            ^ TABLES[5][((v >> 16) & 0xff) as usize]
            ^ TABLES[4][((v >> 24) & 0xff) as usize]
            ^ TABLES[3][((v >> 32) & 0xff) as usize]
            ^ TABLES[2][((v >> 40) & 0xff) as usize]
            ^ TABLES[1][((v >> 48) & 0xff) as usize]
            ^ TABLES[0][(v >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = TABLES[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bitwise(data: &[u8]) -> u64 {
        let mut crc = 0u64;
        for &b in data {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn redis_test_vectors() {
        // The check value of Redis's crc64.c self test.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    #[test]
    fn sliced_equals_bitwise_and_is_incremental() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1000] {
            assert_eq!(crc64(0, &data[..len]), bitwise(&data[..len]), "len {len}");
        }
        for split in [0, 3, 8, 500, 999] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc64(crc64(0, a), b), crc64(0, &data));
        }
    }
}
