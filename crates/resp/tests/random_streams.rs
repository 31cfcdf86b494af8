//! Random, mutated and well-formed request streams fed in random read sizes: the parser never panics,
//! what it reads from a stream never depends on how the stream was split, and well-formed streams
//! round-trip. Seeds are fixed, so a failure names the seed that reproduces it.

use bytes::BytesMut;
use strata_resp::{ParseLimits, RequestParser};

/// xorshift64*: enough randomness for test data, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`; `n > 0`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = self.below(max_len + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The requests read from a stream, then the protocol error that ended it, if any.
type Outcome = (Vec<Vec<Vec<u8>>>, Option<String>);

/// Feeds `stream` in reads of `read_size()` bytes, reading every complete request after each.
fn parse(
    stream: &[u8],
    mut read_size: impl FnMut() -> usize,
    limits: ParseLimits,
    unauth: bool,
) -> Outcome {
    let mut parser = RequestParser::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let (read, tail) = rest.split_at(read_size().clamp(1, rest.len()));
        rest = tail;
        buf.extend_from_slice(read);
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

fn random_reads(rng: &mut Rng) -> impl FnMut() -> usize + '_ {
    let max = [1, 3, 16, 512, 1 << 16][rng.below(5)];
    move || 1 + rng.below(max)
}

/// Appends one random well-formed request to `out`; returns its arguments, or `None` for the
/// requests Redis skips (`*0`, `*-1`, blank lines).
fn write_request(rng: &mut Rng, out: &mut Vec<u8>) -> Option<Vec<Vec<u8>>> {
    let eol: &[u8] = if rng.one_in(2) { b"\r\n" } else { b"\n" };
    match rng.below(8) {
        0..=3 => {
            let max_len = if rng.one_in(8) { 5000 } else { 12 };
            let args: Vec<Vec<u8>> = (0..1 + rng.below(6)).map(|_| rng.bytes(max_len)).collect();
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for arg in &args {
                out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                out.extend_from_slice(arg);
                out.extend_from_slice(b"\r\n");
            }
            Some(args)
        }
        4 | 5 => {
            let args: Vec<Vec<u8>> = (0..1 + rng.below(5))
                .map(|_| {
                    let plain = rng.bytes(10).iter().map(|b| b'a' + b % 26).collect();
                    match rng.below(3) {
                        0 => plain,
                        _ => rng.bytes(10),
                    }
                })
                .collect();
            for (i, arg) in args.iter().enumerate() {
                if i > 0 || rng.one_in(4) {
                    out.extend_from_slice([&b" "[..], b"\t", b"  \x0b"][rng.below(3)]);
                }
                write_inline_arg(rng, arg, out);
            }
            out.extend_from_slice(eol);
            Some(args)
        }
        6 => {
            out.extend_from_slice([&b"*0\r\n"[..], b"*-1\r\n", b"*-3\r\n"][rng.below(3)]);
            None
        }
        _ => {
            out.extend_from_slice([&b""[..], b" ", b"\t \x0c"][rng.below(3)]);
            out.extend_from_slice(eol);
            None
        }
    }
}

/// Writes `arg` as an inline token: bare when it can be, otherwise quoted.
fn write_inline_arg(rng: &mut Rng, arg: &[u8], out: &mut Vec<u8>) {
    if !arg.is_empty() && arg.iter().all(u8::is_ascii_lowercase) && rng.one_in(2) {
        out.extend_from_slice(arg);
    } else if !arg.iter().any(|b| b"'\\\n".contains(b)) && rng.one_in(3) {
        out.push(b'\'');
        out.extend_from_slice(arg);
        out.push(b'\'');
    } else {
        out.push(b'"');
        for &b in arg {
            match b {
                b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                b'\n' => out.extend_from_slice(b"\\n"),
                b' '..=b'~' => out.push(b),
                _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        out.push(b'"');
    }
}

fn random_stream(rng: &mut Rng, max_requests: usize) -> (Vec<u8>, Vec<Vec<Vec<u8>>>) {
    let mut stream = Vec::new();
    let requests = (0..1 + rng.below(max_requests))
        .filter_map(|_| write_request(rng, &mut stream))
        .collect();
    (stream, requests)
}

#[test]
fn well_formed_streams_round_trip_in_any_reads() {
    for seed in 0..2000 {
        let mut rng = Rng::new(seed);
        let (stream, expected) = random_stream(&mut rng, 30);
        let (requests, error) = parse(
            &stream,
            random_reads(&mut rng),
            ParseLimits::default(),
            false,
        );
        assert_eq!(error, None, "seed {seed}");
        assert_eq!(requests.len(), expected.len(), "seed {seed}");
        for (i, (got, want)) in requests.iter().zip(&expected).enumerate() {
            assert!(
                got == want,
                "seed {seed}, request {i}: got {got:?}, want {want:?}"
            );
        }
    }
}

#[test]
fn mutated_streams_read_the_same_in_any_reads() {
    const INTERESTING: &[u8] = b"*$\r\n\r\n-0123456789 \"'\\x\t";
    for seed in 0..20_000 {
        let mut rng = Rng::new(seed);
        let (mut stream, _) = random_stream(&mut rng, 8);
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(stream.len() + 1);
            let byte = match rng.one_in(2) {
                true => INTERESTING[rng.below(INTERESTING.len())],
                false => rng.next() as u8,
            };
            match rng.below(4) {
                0 => stream.insert(at, byte),
                1 if at < stream.len() => stream[at] = byte,
                2 if at < stream.len() => drop(stream.remove(at)),
                _ => stream.truncate(at),
            }
        }
        let limits = ParseLimits {
            max_bulk_len: rng.below(6000),
            max_inline_len: 1 + rng.below(64),
        };
        let unauth = rng.one_in(3);
        let whole = parse(&stream, || usize::MAX, limits, unauth);
        let pieces = parse(&stream, random_reads(&mut rng), limits, unauth);
        assert_eq!(pieces, whole, "seed {seed}");
    }
}

#[test]
fn noise_never_panics_and_reads_the_same_in_any_reads() {
    const ALPHABET: &[u8] = b"*$\r\n0123456789-+ \"'\\xa";
    for seed in 0..20_000 {
        let mut rng = Rng::new(seed);
        let noise: Vec<u8> = (0..rng.below(300))
            .map(|_| match rng.one_in(8) {
                true => rng.next() as u8,
                false => ALPHABET[rng.below(ALPHABET.len())],
            })
            .collect();
        let limits = ParseLimits {
            max_bulk_len: rng.below(100),
            max_inline_len: 1 + rng.below(32),
        };
        let whole = parse(&noise, || usize::MAX, limits, false);
        let pieces = parse(&noise, random_reads(&mut rng), limits, false);
        assert_eq!(pieces, whole, "seed {seed}");
    }
}
