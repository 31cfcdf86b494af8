//! Unit-test harness: run shard-side commands against a [`Shard`] without sockets or threads.
//!
//! `run(&mut shard, &["set", "k", "v"])` returns the RESP2 reply as a readable string, e.g. "+OK",
//! ":1", "$1:v" (bulk), "*2[$1:a,$-1]" (array), "-ERR ..." (error).

use bytes::Bytes;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::Shard;

use strata_node::ctx::ShardCtx;
use strata_node::keyed::KeysCtx;
use strata_node::table::{Handler, Lookup};

/// A command line as the parser hands it over: each word as a `Bytes`.
pub fn args(words: &[&str]) -> Vec<Bytes> {
    words
        .iter()
        .map(|w| Bytes::copy_from_slice(w.as_bytes()))
        .collect()
}

/// A one-shard world for family unit tests.
pub fn shard() -> Shard {
    Shard::new(0, 16)
}

/// Runs `cmd` (a Shard or Keys command) on `shard` in database 0 at time `now` (unix ms).
pub fn run_at(shard: &mut Shard, db: usize, now: i64, cmd: &[&str]) -> String {
    let args: Vec<Bytes> = cmd
        .iter()
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        .collect();
    let mut out = ReplyBuf::new(Protocol::Resp2);
    match crate::table().resolve(&args) {
        Lookup::Unknown(e) | Lookup::BadArity(_, e) => out.error(&e),
        Lookup::Found(r) => match r.spec.handler {
            Handler::Shard(f) => {
                let mut cx = ShardCtx {
                    shard,
                    db,
                    args: &args,
                    out: &mut out,
                    now,
                    park: None,
                };
                strata_node::run_shard_handler(f, &mut cx);
                if let Some(p) = cx.park {
                    // No one to wait: answer as if the deadline had passed.
                    p.timeout.write(&mut out);
                }
            }
            Handler::Keys(f) => {
                let mut cx = KeysCtx::here(shard, db, &args, &mut out, now);
                if let Err(e) = strata_node::keyed::run_here(f, &mut cx) {
                    cx.out.error(&e.message());
                }
                if let Some(p) = cx.park.take() {
                    p.timeout.write(cx.out);
                }
            }
            _ => panic!("{} does not run on a shard", r.name),
        },
    }
    render(&out.buf)
}

/// Runs `cmd` in database 0 at the current time.
pub fn run(shard: &mut Shard, cmd: &[&str]) -> String {
    run_at(shard, 0, strata_shard::now_ms(), cmd)
}

/// Renders RESP2 bytes compactly for assertions.
pub fn render(buf: &[u8]) -> String {
    let mut pos = 0;
    let mut out = String::new();
    while pos < buf.len() {
        render_one(buf, &mut pos, &mut out);
    }
    out
}

fn line<'a>(buf: &'a [u8], pos: &mut usize) -> &'a str {
    let start = *pos;
    let end = buf[start..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| start + i)
        .unwrap_or(buf.len());
    *pos = (end + 2).min(buf.len());
    std::str::from_utf8(&buf[start..end]).unwrap_or("?")
}

fn render_one(buf: &[u8], pos: &mut usize, out: &mut String) {
    let kind = buf[*pos];
    *pos += 1;
    let l = line(buf, pos).to_string();
    match kind {
        b'$' => {
            let n: i64 = l.parse().unwrap_or(-1);
            if n < 0 {
                out.push_str("$-1");
            } else {
                let end = (*pos + n as usize).min(buf.len());
                out.push_str(&format!(
                    "${n}:{}",
                    String::from_utf8_lossy(&buf[*pos..end])
                ));
                *pos = (end + 2).min(buf.len());
            }
        }
        b'*' => {
            let n: i64 = l.parse().unwrap_or(-1);
            if n < 0 {
                out.push_str("*-1");
                return;
            }
            out.push_str(&format!("*{n}["));
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                render_one(buf, pos, out);
            }
            out.push(']');
        }
        k => {
            out.push(k as char);
            out.push_str(&l);
        }
    }
}
