//! An open-loop load generator for latency percentiles at a fixed, moderate rate (what memtier's
//! `--rate-limiting` gives; memtier is not packaged in Debian). `bench/latency.py` drives it.
//!
//! Each of `--conns` connections has its own thread and sends one command every `conns / rate`
//! seconds on a fixed schedule (threads start staggered). A command's latency is measured from
//! the time it was *scheduled*, not sent: when a reply is late and the schedule slips, the wait
//! counts, so a stall shows in the tail instead of lowering the load (no coordinated omission).
//! Commands are SET and GET on random keys of `--keyspace` in a `--ratio` of SET:GET.
//!
//! Prints one line: `requests=N rate=R p50=.. p90=.. p99=.. p999=.. max=..` (microseconds).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Opts {
    host: String,
    port: u16,
    conns: usize,
    rate: f64,
    seconds: f64,
    sets: u32,
    gets: u32,
    keyspace: u64,
    data_size: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: strata-loadgen --port P [--host H] [--conns 50] [--rate 20000] [--seconds 20] \
         [--ratio 1:4] [--keyspace 100000] [--data-size 32]"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        host: "127.0.0.1".into(),
        port: 0,
        conns: 50,
        rate: 20_000.0,
        seconds: 20.0,
        sets: 1,
        gets: 4,
        keyspace: 100_000,
        data_size: 32,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--host" => o.host = v,
            "--port" => o.port = v.parse().unwrap_or_else(|_| usage()),
            "--conns" => o.conns = v.parse().unwrap_or_else(|_| usage()),
            "--rate" => o.rate = v.parse().unwrap_or_else(|_| usage()),
            "--seconds" => o.seconds = v.parse().unwrap_or_else(|_| usage()),
            "--keyspace" => o.keyspace = v.parse().unwrap_or_else(|_| usage()),
            "--data-size" => o.data_size = v.parse().unwrap_or_else(|_| usage()),
            "--ratio" => {
                let (s, g) = v.split_once(':').unwrap_or_else(|| usage());
                o.sets = s.parse().unwrap_or_else(|_| usage());
                o.gets = g.parse().unwrap_or_else(|_| usage());
            }
            _ => usage(),
        }
        i += 2;
    }
    if o.port == 0
        || o.conns == 0
        || o.rate <= 0.0
        || o.seconds <= 0.0
        || o.keyspace == 0
        || o.sets + o.gets == 0
    {
        usage();
    }
    o
}

/// xorshift64*: the keys and the SET/GET choice, seeded per connection.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Reads one reply (simple string, error, integer, or bulk string); the tool sends nothing else.
fn read_reply(r: &mut BufReader<TcpStream>, line: &mut Vec<u8>) -> std::io::Result<()> {
    line.clear();
    r.read_until(b'\n', line)?;
    match line.first() {
        Some(b'$') => {
            let n: i64 = std::str::from_utf8(&line[1..])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| std::io::Error::other("bad bulk length"))?;
            if n >= 0 {
                let mut body = vec![0; n as usize + 2];
                r.read_exact(&mut body)?;
            }
            Ok(())
        }
        Some(b'+' | b'-' | b':') => Ok(()),
        _ => Err(std::io::Error::other("unexpected reply")),
    }
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.clear();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection's run: its latencies in microseconds.
fn run_conn(o: &Opts, index: usize, start: Instant) -> std::io::Result<Vec<u32>> {
    let stream = TcpStream::connect((o.host.as_str(), o.port))?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let interval = Duration::from_secs_f64(o.conns as f64 / o.rate);
    // Stagger the connections evenly over one interval.
    let offset = interval.mul_f64(index as f64 / o.conns as f64);
    let total = (o.seconds * o.rate / o.conns as f64).ceil() as u64;
    let value = vec![b'x'; o.data_size];
    let mut rng =
        Rng(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    let (mut buf, mut line) = (Vec::new(), Vec::new());
    let mut lat = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = start + offset + interval.mul_f64(i as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let key = format!("key:{:012}", rng.next() % o.keyspace);
        if (rng.next() % (o.sets + o.gets) as u64) < o.sets as u64 {
            encode(&mut buf, &[b"SET", key.as_bytes(), &value]);
        } else {
            encode(&mut buf, &[b"GET", key.as_bytes()]);
        }
        writer.write_all(&buf)?;
        read_reply(&mut reader, &mut line)?;
        let us = due.elapsed().as_micros().min(u32::MAX as u128) as u32;
        lat.push(us);
    }
    Ok(lat)
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let o = parse_opts();
    // Give every thread time to connect before the schedule starts.
    let start = Instant::now() + Duration::from_millis(200);
    let results: Vec<std::io::Result<Vec<u32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.conns)
            .map(|i| {
                let o = &o;
                s.spawn(move || run_conn(o, i, start))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        match r {
            Ok(l) => all.extend(l),
            Err(e) => {
                eprintln!("strata-loadgen: connection failed: {e}");
                std::process::exit(1);
            }
        }
    }
    all.sort_unstable();
    println!(
        "requests={} rate={:.0} p50={} p90={} p99={} p999={} max={}",
        all.len(),
        all.len() as f64 / elapsed,
        percentile(&all, 50.0),
        percentile(&all, 90.0),
        percentile(&all, 99.0),
        percentile(&all, 99.9),
        all.last().copied().unwrap_or(0)
    );
}
