//! String commands: GET, SET, MGET, ... (Redis's t_string.c).
//!
//! Strings are stored in one of Redis's three encodings, chosen as Redis chooses them, so that
//! OBJECT ENCODING answers the same: `int` (canonical 64-bit integers), `embstr` (≤ 44 bytes,
//! inline in the entry) and `raw` (longer, or modified in place by APPEND/SETRANGE).

use bytes::Bytes;
use futures_util::future::{join_all, LocalBoxFuture};
use strata_core::num::parse_i64;
use strata_core::{Object, Value, ValueRef};
use strata_resp::ReplyBuf;
use strata_shard::{Db, Mode};

use crate::ctx::{ConnCtx, ShardCtx};
use crate::error::{CmdError, CmdResult};
use crate::table::{CommandSpec, Flags, Handler, KeySpec};

const R: Flags = Flags::READONLY;
const W: Flags = Flags::WRITE;
const FAST: Flags = Flags::FAST;
const DENYOOM: Flags = Flags::DENYOOM;

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        group: "string",
        summary,
        since,
        complexity,
        acl: &[],
        tips: &[],
        handler,
        subcommands: &[],
    }
}

/// The string family.
pub static COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, R.or(FAST), KeySpec::ONE, "Returns the string value of a key.", "1.0.0", "O(1)", Handler::Shard(get)),
    cmd(
        "set",
        -3,
        W.or(DENYOOM),
        KeySpec::ONE,
        "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
        "1.0.0",
        "O(1)",
        Handler::Shard(set),
    ),
    cmd(
        "mget",
        -2,
        R.or(FAST),
        KeySpec::ALL,
        "Atomically returns the string values of one or more keys.",
        "1.0.0",
        "O(N) where N is the number of keys to retrieve.",
        Handler::Keys { shard: mget, multi: mget_multi },
    ),
];

// ----- the string type -----

/// A string value as stored: bytes, or an integer to be formatted on output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Str<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Str<'_> {
    /// Writes the value as a bulk string.
    pub fn reply(self, out: &mut ReplyBuf) {
        match self {
            Str::Bytes(b) => out.bulk(b),
            Str::Int(i) => out.bulk_int(i),
        }
    }

    /// The value as owned bytes.
    pub fn to_bytes(self) -> Bytes {
        match self {
            Str::Bytes(b) => Bytes::copy_from_slice(b),
            Str::Int(i) => Bytes::from(i.to_string()),
        }
    }
}

/// The string in `v`, or WRONGTYPE.
pub fn as_str(v: ValueRef<'_>) -> Result<Str<'_>, CmdError> {
    match v {
        ValueRef::Inline(b) => Ok(Str::Bytes(b)),
        ValueRef::Int(i) => Ok(Str::Int(i)),
        ValueRef::Obj(Object::Str(s)) => Ok(Str::Bytes(s)),
    }
}

/// The value Redis would store for `bytes` (tryObjectEncoding): int-encoded when it is a canonical
/// integer of at most 20 characters, else a string.
pub fn encode(bytes: &Bytes) -> Value {
    match parse_i64(bytes) {
        Some(i) if bytes.len() <= 20 => Value::Int(i),
        _ => Value::Str(bytes.clone()),
    }
}

// ----- GET / SET -----

/// Reads the string at `key`: None if absent, WRONGTYPE if not a string.
pub fn op_get<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<Str<'a>>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => as_str(e.value()).map(Some),
    }
}

/// GET key → bulk string or null.
fn get(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let key = &cx.args[1];
    match op_get(&mut cx.shard.dbs[cx.db], key, now)? {
        Some(s) => s.reply(cx.out),
        None => cx.out.null(),
    }
    Ok(())
}

/// SET key value → OK. (Options are parsed by the full implementation.)
fn set(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut a = cx.args();
    let key = a.next_bytes()?;
    let value = a.next_bytes()?;
    a.finish()?;
    let now = cx.now;
    cx.db().set(key, encode(value), None, now);
    cx.out.ok();
    Ok(())
}

// ----- MGET -----

/// Values of `keys` (None for missing or non-string keys, as MGET answers).
pub fn op_mget(db: &mut Db, keys: &[Bytes], now: i64) -> Vec<Option<Bytes>> {
    keys.iter()
        .map(|k| op_get(db, k, now).ok().flatten().map(Str::to_bytes))
        .collect()
}

/// MGET on one shard: replies straight from the shard.
fn mget(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    cx.out.array(cx.args.len() - 1);
    for k in &cx.args[1..] {
        match op_get(db, k, now) {
            Ok(Some(s)) => s.reply(cx.out),
            _ => cx.out.null(),
        }
    }
    Ok(())
}

/// MGET across shards: shared locks on every key, one read per shard, replies merged in order.
fn mget_multi<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.session.db, cx.now);
        let keys = &cx.args[1..];
        let set = cx.shards().clone();
        let lock = set
            .lock_keys(db as u32, keys.iter().map(|k| (k.clone(), Mode::Shared)))
            .await;
        let parts = lock.shards().map(|shard| {
            let (idx, ks): (Vec<usize>, Vec<Bytes>) = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| set.shard_of_key(k) == shard)
                .map(|(i, k)| (i, k.clone()))
                .unzip();
            let run = lock.run(shard, move |s| op_mget(&mut s.dbs[db], &ks, now));
            async move { (idx, run.await) }
        });
        let parts = join_all(parts).await;
        lock.release();
        let mut values = vec![None; keys.len()];
        for (idx, vals) in parts {
            for (i, v) in idx.into_iter().zip(vals) {
                values[i] = v;
            }
        }
        cx.out.array(values.len());
        for v in values {
            match v {
                Some(b) => cx.out.bulk(&b),
                None => cx.out.null(),
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    #[test]
    fn get_set_mget() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["get", "k"]), "$-1");
        assert_eq!(run(&mut s, &["set", "k", "v"]), "+OK");
        assert_eq!(run(&mut s, &["get", "k"]), "$1:v");
        assert_eq!(run(&mut s, &["set", "n", "42"]), "+OK");
        assert_eq!(run(&mut s, &["mget", "k", "n", "x"]), "*3[$1:v,$2:42,$-1]");
        assert_eq!(
            run(&mut s, &["get"]),
            "-ERR wrong number of arguments for 'get' command"
        );
    }
}
