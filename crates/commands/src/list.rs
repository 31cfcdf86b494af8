//! List commands (Redis's t_list.c): LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LINDEX,
//! LINSERT, LPOS, LRANGE, LREM, LSET, LTRIM, LMOVE, RPOPLPUSH and LMPOP.
//!
//! The value is a [`strata_core::List`]. Invariants:
//! * every write goes through [`Db`]: a new list is stored with `Db::set`, an existing one changes
//!   in place through `Db::modify`, and a write that empties a list deletes the key, as Redis does;
//! * arguments are parsed and keys looked up in Redis's order, so the same bad input fails with the
//!   same error (LINDEX and LSET look the key up before parsing the index; LRANGE, LTRIM and LREM
//!   parse first);
//! * LMOVE, RPOPLPUSH and LMPOP are keyed commands: their keys may live on different shards and the
//!   command stays atomic (the dispatcher holds every key's lock); LMOVE with the same source and
//!   destination rotates the list in one step on one shard, so the key and its TTL survive.
//!
//! The `op_*` functions (push, pop, pop-many) are what the blocking variants will reuse.

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::list::{Elem, End, Needle};
use strata_core::{List, Object, Value, ValueRef};
use strata_resp::ReplyBuf;
use strata_shard::{notify, Db};

use strata_node::args::eq_ci;
use strata_node::args::parse_timeout;
use strata_node::ctx::{Park, ShardCtx, TimeoutReply};
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::KeysCtx;
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec, Parts};
use strata_node::value::skip_wrong_type;

#[allow(clippy::too_many_arguments)]
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "list", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

// Key specs, arguments and history as Redis 7.0 declares them (scripts/gen_commands.py).

const LPUSH_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const LPUSH_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("element").multiple()];
const LPUSH_HISTORY: &[(&str, &str)] = &[("2.4.0", "Accepts multiple `element` arguments.")];
const RPUSH_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const RPUSH_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("element").multiple()];
const RPUSH_HISTORY: &[(&str, &str)] = &[("2.4.0", "Accepts multiple `element` arguments.")];
const LPUSHX_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const LPUSHX_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("element").multiple()];
const LPUSHX_HISTORY: &[(&str, &str)] = &[("4.0.0", "Accepts multiple `element` arguments.")];
const RPUSHX_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const RPUSHX_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("element").multiple()];
const RPUSHX_HISTORY: &[(&str, &str)] = &[("4.0.0", "Accepts multiple `element` arguments.")];
const LPOP_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const LPOP_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count").since("6.2.0").optional(),
];
const LPOP_HISTORY: &[(&str, &str)] = &[("6.2.0", "Added the `count` argument.")];
const RPOP_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const RPOP_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count").since("6.2.0").optional(),
];
const RPOP_HISTORY: &[(&str, &str)] = &[("6.2.0", "Added the `count` argument.")];
const LLEN_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const LLEN_ARGS: &[Arg] = &[Arg::key("key", 0)];
const LINDEX_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const LINDEX_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::integer("index")];
const LINSERT_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const LINSERT_WHERE_ARGS: &[Arg] = &[
    Arg::pure_token("before", "BEFORE"),
    Arg::pure_token("after", "AFTER"),
];
const LINSERT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("where", LINSERT_WHERE_ARGS),
    Arg::string("pivot"),
    Arg::string("element"),
];
const LPOS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const LPOS_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("element"),
    Arg::integer("rank").with_token("RANK").optional(),
    Arg::integer("num-matches").with_token("COUNT").optional(),
    Arg::integer("len").with_token("MAXLEN").optional(),
];
const LRANGE_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const LRANGE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("start"),
    Arg::integer("stop"),
];
const LREM_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const LREM_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count"),
    Arg::string("element"),
];
const LSET_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE))];
const LSET_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("index"),
    Arg::string("element"),
];
const LTRIM_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const LTRIM_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("start"),
    Arg::integer("stop"),
];
const LMOVE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE)),
    KeySpec::at(2, KeyFlags::RW.or(KeyFlags::INSERT)),
];
const LMOVE_WHEREFROM_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const LMOVE_WHERETO_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const LMOVE_ARGS: &[Arg] = &[
    Arg::key("source", 0),
    Arg::key("destination", 1),
    Arg::oneof("wherefrom", LMOVE_WHEREFROM_ARGS),
    Arg::oneof("whereto", LMOVE_WHERETO_ARGS),
];
const RPOPLPUSH_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE)),
    KeySpec::at(2, KeyFlags::RW.or(KeyFlags::INSERT)),
];
const RPOPLPUSH_ARGS: &[Arg] = &[Arg::key("source", 0), Arg::key("destination", 1)];
const LMPOP_KEYS: &[KeySpec] = &[KeySpec::numkeys(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const LMPOP_WHERE_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const LMPOP_ARGS: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::oneof("where", LMPOP_WHERE_ARGS),
    Arg::integer("count").with_token("COUNT").optional(),
];

// Blocking commands (generated by scripts/gen_commands.py).
const BLPOP_KEYS: &[KeySpec] = &[KeySpec::range(
    1,
    -2,
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const BLPOP_ARGS: &[Arg] = &[Arg::key("key", 0).multiple(), Arg::double("timeout")];
const BLPOP_HISTORY: &[(&str, &str)] = &[(
    "6.0.0",
    "`timeout` is interpreted as a double instead of an integer.",
)];
const BRPOP_KEYS: &[KeySpec] = &[KeySpec::range(
    1,
    -2,
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const BRPOP_ARGS: &[Arg] = &[Arg::key("key", 0).multiple(), Arg::double("timeout")];
const BRPOP_HISTORY: &[(&str, &str)] = &[(
    "6.0.0",
    "`timeout` is interpreted as a double instead of an integer.",
)];
const BLMOVE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE)),
    KeySpec::at(2, KeyFlags::RW.or(KeyFlags::INSERT)),
];
const BLMOVE_WHEREFROM_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const BLMOVE_WHERETO_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const BLMOVE_ARGS: &[Arg] = &[
    Arg::key("source", 0),
    Arg::key("destination", 1),
    Arg::oneof("wherefrom", BLMOVE_WHEREFROM_ARGS),
    Arg::oneof("whereto", BLMOVE_WHERETO_ARGS),
    Arg::double("timeout"),
];
const BRPOPLPUSH_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE)),
    KeySpec::at(2, KeyFlags::RW.or(KeyFlags::INSERT)),
];
const BRPOPLPUSH_ARGS: &[Arg] = &[
    Arg::key("source", 0),
    Arg::key("destination", 1),
    Arg::double("timeout"),
];
const BRPOPLPUSH_HISTORY: &[(&str, &str)] = &[(
    "6.0.0",
    "`timeout` is interpreted as a double instead of an integer.",
)];
const BLMPOP_KEYS: &[KeySpec] = &[KeySpec::numkeys(
    2,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const BLMPOP_WHERE_ARGS: &[Arg] = &[
    Arg::pure_token("left", "LEFT"),
    Arg::pure_token("right", "RIGHT"),
];
const BLMPOP_ARGS: &[Arg] = &[
    Arg::double("timeout"),
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::oneof("where", BLMPOP_WHERE_ARGS),
    Arg::integer("count").with_token("COUNT").optional(),
];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("lpush", -3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), LPUSH_KEYS,
        "Prepend one or multiple elements to a list", "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        Handler::Shard(lpush))
        .with_args(LPUSH_ARGS)
        .with_history(LPUSH_HISTORY)
        .with_parts(Parts::Ends),
    cmd("rpush", -3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), RPUSH_KEYS,
        "Append one or multiple elements to a list", "1.0.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        Handler::Shard(rpush))
        .with_args(RPUSH_ARGS)
        .with_history(RPUSH_HISTORY)
        .with_parts(Parts::Ends),
    cmd("lpushx", -3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), LPUSHX_KEYS,
        "Prepend an element to a list, only if the list exists", "2.2.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        Handler::Shard(lpushx))
        .with_args(LPUSHX_ARGS)
        .with_history(LPUSHX_HISTORY)
        .with_parts(Parts::Ends),
    cmd("rpushx", -3, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), RPUSHX_KEYS,
        "Append an element to a list, only if the list exists", "2.2.0",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        Handler::Shard(rpushx))
        .with_args(RPUSHX_ARGS)
        .with_history(RPUSHX_HISTORY)
        .with_parts(Parts::Ends),
    cmd("lpop", -2, Flags::WRITE.or(Flags::FAST), LPOP_KEYS,
        "Remove and get the first elements in a list", "1.0.0",
        "O(N) where N is the number of elements returned",
        Handler::Shard(lpop))
        .with_args(LPOP_ARGS)
        .with_history(LPOP_HISTORY)
        .with_parts(Parts::Ends),
    cmd("rpop", -2, Flags::WRITE.or(Flags::FAST), RPOP_KEYS,
        "Remove and get the last elements in a list", "1.0.0",
        "O(N) where N is the number of elements returned",
        Handler::Shard(rpop))
        .with_args(RPOP_ARGS)
        .with_history(RPOP_HISTORY)
        .with_parts(Parts::Ends),
    cmd("llen", 2, Flags::READONLY.or(Flags::FAST), LLEN_KEYS,
        "Get the length of a list", "1.0.0",
        "O(1)",
        Handler::Shard(llen))
        .with_args(LLEN_ARGS)
        .with_parts(Parts::Meta),
    cmd("lindex", 3, Flags::READONLY, LINDEX_KEYS,
        "Get an element from a list by its index", "1.0.0",
        "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        Handler::Shard(lindex))
        .with_args(LINDEX_ARGS)
        .with_parts(Parts::Range),
    cmd("linsert", 5, Flags::WRITE.or(Flags::DENYOOM), LINSERT_KEYS,
        "Insert an element before or after another element in a list", "2.2.0",
        "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
        Handler::Shard(linsert))
        .with_args(LINSERT_ARGS)
        .with_parts(Parts::Whole),
    cmd("lpos", -3, Flags::READONLY, LPOS_KEYS,
        "Return the index of matching elements on a list", "6.0.6",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        Handler::Shard(lpos))
        .with_args(LPOS_ARGS)
        .with_parts(Parts::Whole),
    cmd("lrange", 4, Flags::READONLY, LRANGE_KEYS,
        "Get a range of elements from a list", "1.0.0",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        Handler::Shard(lrange))
        .with_args(LRANGE_ARGS)
        .with_parts(Parts::Range),
    cmd("lrem", 4, Flags::WRITE, LREM_KEYS,
        "Remove elements from a list", "1.0.0",
        "O(N+M) where N is the length of the list and M is the number of elements removed.",
        Handler::Shard(lrem))
        .with_args(LREM_ARGS)
        .with_parts(Parts::Whole),
    cmd("lset", 4, Flags::WRITE.or(Flags::DENYOOM), LSET_KEYS,
        "Set the value of an element in a list by its index", "1.0.0",
        "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        Handler::Shard(lset))
        .with_args(LSET_ARGS)
        .with_parts(Parts::Range),
    cmd("ltrim", 4, Flags::WRITE, LTRIM_KEYS,
        "Trim a list to the specified range", "1.0.0",
        "O(N) where N is the number of elements to be removed by the operation.",
        Handler::Shard(ltrim))
        .with_args(LTRIM_ARGS)
        .with_parts(Parts::Whole),
    cmd("lmove", 5, Flags::WRITE.or(Flags::DENYOOM), LMOVE_KEYS,
        "Pop an element from a list, push it to another list and return it", "6.2.0",
        "O(1)",
        Handler::Keys(lmove))
        .with_args(LMOVE_ARGS)
        .with_parts(Parts::Ends),
    cmd("rpoplpush", 3, Flags::WRITE.or(Flags::DENYOOM), RPOPLPUSH_KEYS,
        "Remove the last element in a list, prepend it to another list and return it", "1.2.0",
        "O(1)",
        Handler::Keys(rpoplpush))
        .with_args(RPOPLPUSH_ARGS)
        .deprecated("6.2.0", "`LMOVE` with the `RIGHT` and `LEFT` arguments")
        .with_parts(Parts::Ends),
    cmd("lmpop", -4, Flags::WRITE, LMPOP_KEYS,
        "Pop elements from a list", "7.0.0",
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        Handler::Keys(lmpop))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(LMPOP_ARGS)
        .with_parts(Parts::Ends),
    cmd("blpop", -3, Flags::WRITE.or(Flags::NOSCRIPT).or(Flags::BLOCKING), BLPOP_KEYS,
        "Remove and get the first element in a list, or block until one is available", "2.0.0",
        "O(N) where N is the number of provided keys.",
        Handler::Keys(blpop))
        .with_args(BLPOP_ARGS)
        .with_history(BLPOP_HISTORY)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::keys_before_last),
    cmd("brpop", -3, Flags::WRITE.or(Flags::NOSCRIPT).or(Flags::BLOCKING), BRPOP_KEYS,
        "Remove and get the last element in a list, or block until one is available", "2.0.0",
        "O(N) where N is the number of provided keys.",
        Handler::Keys(brpop))
        .with_args(BRPOP_ARGS)
        .with_history(BRPOP_HISTORY)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::keys_before_last),
    cmd("blmove", 6, Flags::WRITE.or(Flags::DENYOOM).or(Flags::NOSCRIPT).or(Flags::BLOCKING), BLMOVE_KEYS,
        "Pop an element from a list, push it to another list and return it; or block until one is available", "6.2.0",
        "O(1)",
        Handler::Keys(blmove))
        .with_args(BLMOVE_ARGS)
        .with_parts(Parts::Ends)
        .with_moves(blmove_ends),
    cmd("brpoplpush", 4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::NOSCRIPT).or(Flags::BLOCKING), BRPOPLPUSH_KEYS,
        "Pop an element from a list, push it to another list and return it; or block until one is available", "2.2.0",
        "O(1)",
        Handler::Keys(brpoplpush))
        .with_args(BRPOPLPUSH_ARGS)
        .with_history(BRPOPLPUSH_HISTORY)
        .deprecated("6.2.0", "`BLMOVE` with the `RIGHT` and `LEFT` arguments")
        .with_parts(Parts::Ends)
        .with_moves(|_| Some((End::Right, End::Left))),
    cmd("blmpop", -5, Flags::WRITE.or(Flags::BLOCKING), BLMPOP_KEYS,
        "Pop elements from a list, or block until one is available", "7.0.0",
        "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        Handler::Keys(blmpop))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 2, 3>)
        .with_args(BLMPOP_ARGS)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::numkeys_after_timeout),
];

// ===== reading and writing the value =====

/// The list in `v`, or WRONGTYPE.
fn as_list(v: ValueRef<'_>) -> Result<&List, CmdError> {
    match v {
        ValueRef::Obj(Object::List(l)) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

/// The list at `key` for a read command (counts as an access): None if absent.
fn read_list<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<&'a List>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => as_list(e.value()).map(Some),
    }
}

/// True if `key` holds a list, false if it is absent; WRONGTYPE otherwise. Touches nothing.
pub fn op_check_list(db: &mut Db, key: &[u8], now: i64) -> Result<bool, CmdError> {
    match db.peek(key, now) {
        None => Ok(false),
        Some(e) => as_list(e.value()).map(|_| true),
    }
}

/// What a write found at the key.
enum Found<R> {
    Missing,
    Done(R),
}

/// What running a write on a list did, as its result says.
enum Change {
    /// Nothing: no event, and no `Written` (a WATCH stays intact, tracking clients keep the key).
    Unchanged,
    /// Changed, counted as this many changes; the caller announces it (LMOVE announces its pop
    /// after the push, and counts the move once, there).
    Quiet(u64),
    /// Changed, announced as this list event, counted as this many changes (Redis counts a push
    /// or pop per element, LTRIM per element removed).
    Event(&'static str, u64),
    /// Announced as this list event and signalled as a modification, but not counted as a change
    /// (LTRIM that keeps the whole list, as in Redis).
    Touched(&'static str),
}

impl Change {
    fn event_if(changed: bool, event: &'static str) -> Change {
        if changed {
            Change::Event(event, 1)
        } else {
            Change::Unchanged
        }
    }
}

/// Runs `f` on the list at `key` in place, deleting the key if `f` emptied it. Missing keys are
/// left alone; other types fail with WRONGTYPE before `f` runs. `change` says from the result what
/// happened: the event is announced, then the deletion ("del"), as Redis does; the changes counted
/// are the ones it says (the deletion of an emptied list is not one more).
fn write_list<R>(
    db: &mut Db,
    key: &[u8],
    now: i64,
    f: impl FnOnce(&mut List) -> R,
    change: impl FnOnce(&R) -> Change,
) -> Result<Found<R>, CmdError> {
    let mark = db.dirty();
    let Some(mut e) = db.modify(key, now) else {
        return Ok(Found::Missing);
    };
    as_list(e.value())?;
    let Some(Object::List(l)) = e.object_mut_quiet() else {
        unreachable!("checked to be a list above");
    };
    let r = f(l);
    let empty = l.is_empty();
    let change = change(&r);
    match change {
        Change::Unchanged => {}
        Change::Touched(_) => e.mark_touched(),
        Change::Quiet(_) | Change::Event(..) => e.mark_changed(),
    }
    drop(e);
    if let Change::Event(ev, _) | Change::Touched(ev) = change {
        db.notify(notify::LIST, ev, key);
    }
    if empty {
        db.delete(key, now);
        if matches!(change, Change::Event(..)) {
            db.notify(notify::GENERIC, "del", key);
        }
    }
    if let Change::Quiet(n) | Change::Event(_, n) = change {
        db.count_changes_since(mark, n);
    }
    Ok(Found::Done(r))
}

fn store_new(db: &mut Db, key: &[u8], list: List, now: i64) {
    db.set(key, Value::Obj(Object::List(Box::new(list))), None, now);
}

/// Pushes `elems` one by one at `end` of the list at `key` (so LPUSH a b c leaves c first). A
/// missing key is created, unless `only_existing` (LPUSHX/RPUSHX), which then pushes nothing and
/// answers 0. Returns the new length.
pub fn op_push(
    db: &mut Db,
    key: &[u8],
    elems: &[Bytes],
    end: End,
    only_existing: bool,
    now: i64,
) -> Result<usize, CmdError> {
    let push_all = |l: &mut List| {
        l.push_all(end, elems);
        l.len()
    };
    let event = push_event(end);
    let pushed = elems.len() as u64;
    match write_list(db, key, now, push_all, |_| Change::Event(event, pushed))? {
        Found::Done(n) => Ok(n),
        Found::Missing if only_existing || elems.is_empty() => Ok(0),
        Found::Missing => {
            let mark = db.dirty();
            let mut l = List::new();
            let n = push_all(&mut l);
            store_new(db, key, l, now);
            db.notify(notify::LIST, event, key);
            db.count_changes_since(mark, pushed);
            Ok(n)
        }
    }
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

/// LMOVE's pop: one element from `end` and whether the list became empty (the key is then
/// deleted), with no event: Redis announces the pop after the push to the destination.
fn op_pop_quiet(
    db: &mut Db,
    key: &[u8],
    end: End,
    now: i64,
) -> Result<Option<(Vec<u8>, bool)>, CmdError> {
    let pop = |l: &mut List| l.pop(end).map(|v| (v, l.is_empty()));
    Ok(match write_list(db, key, now, pop, |_| Change::Quiet(0))? {
        Found::Done(v) => v,
        Found::Missing => None,
    })
}

/// Pops up to `count` elements from `end` of the list at `key` (None if the key is absent),
/// deleting the key once empty.
pub fn op_pop(
    db: &mut Db,
    key: &[u8],
    end: End,
    count: usize,
    now: i64,
) -> Result<Option<Vec<Vec<u8>>>, CmdError> {
    let pop = |l: &mut List| {
        let n = count.min(l.len());
        (0..n).filter_map(|_| l.pop(end)).collect()
    };
    let popped = |v: &Vec<Vec<u8>>| Change::Event(pop_event(end), v.len() as u64);
    Ok(match write_list(db, key, now, pop, popped)? {
        Found::Done(v) => Some(v),
        Found::Missing => None,
    })
}

/// LPOP/RPOP without a count: the element at `end` (None if the key is absent), deleting the key
/// once empty.
pub fn op_pop_one(
    db: &mut Db,
    key: &[u8],
    end: End,
    now: i64,
) -> Result<Option<Vec<u8>>, CmdError> {
    let pop = |l: &mut List| l.pop(end);
    Ok(
        match write_list(db, key, now, pop, |_| Change::Event(pop_event(end), 1))? {
            Found::Done(v) => v,
            Found::Missing => None,
        },
    )
}

/// LMOVE with the same source and destination: moves one element from `from` to `to` in place
/// (None if the key is absent).
pub fn op_rotate(
    db: &mut Db,
    key: &[u8],
    from: End,
    to: End,
    now: i64,
) -> Result<Option<Vec<u8>>, CmdError> {
    let rotate = |l: &mut List| {
        let v = l.pop(from)?;
        l.push(to, &v);
        Some(v)
    };
    let v = match write_list(db, key, now, rotate, |_| Change::Quiet(1))? {
        Found::Done(v) => v,
        Found::Missing => None,
    };
    if v.is_some() {
        // Redis announces the push, then the pop (the list cannot have become empty).
        db.notify(notify::LIST, push_event(to), key);
        db.notify(notify::LIST, pop_event(from), key);
    }
    Ok(v)
}

fn reply_elem(out: &mut ReplyBuf, e: Elem<'_>) {
    match e {
        Elem::Bytes(b) => out.bulk(b),
        Elem::Int(i) => out.bulk_int(i),
        Elem::Shared(b) => out.bulk(&b),
    }
}

fn reply_values(out: &mut ReplyBuf, values: &[Vec<u8>]) {
    out.array(values.len());
    for v in values {
        out.bulk(v);
    }
}

/// LEFT or RIGHT (case-insensitive), else `ERR syntax error`.
fn parse_end(a: &[u8]) -> Result<End, CmdError> {
    if eq_ci(a, "left") {
        Ok(End::Left)
    } else if eq_ci(a, "right") {
        Ok(End::Right)
    } else {
        Err(CmdError::Syntax)
    }
}

fn parse_i64(a: &[u8]) -> Result<i64, CmdError> {
    strata_core::num::parse_i64(a).ok_or(CmdError::NotInteger)
}

/// A count that must be ≥ `min`: any other value, or one that is not an integer, fails with `msg`
/// (Redis's getRangeLongFromObjectOrReply with a message).
fn parse_count(a: &[u8], min: i64, msg: &'static str) -> Result<i64, CmdError> {
    strata_core::num::parse_i64(a)
        .filter(|&n| n >= min)
        .ok_or(CmdError::msg(msg))
}

/// An index into a list of `len` elements (negative counts from the tail), if in range.
fn index_of(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

// ===== LPUSH / RPUSH / LPUSHX / RPUSHX =====

fn push_cmd(cx: &mut ShardCtx<'_>, end: End, only_existing: bool) -> CmdResult {
    let now = cx.now;
    let (key, elems) = (&cx.args[1], &cx.args[2..]);
    let n = op_push(cx.shard.db_mut(cx.db), key, elems, end, only_existing, now)?;
    cx.out.int(n as i64);
    Ok(())
}

/// LPUSH key element [element ...] → the new length.
fn lpush(cx: &mut ShardCtx<'_>) -> CmdResult {
    push_cmd(cx, End::Left, false)
}

/// RPUSH key element [element ...] → the new length.
fn rpush(cx: &mut ShardCtx<'_>) -> CmdResult {
    push_cmd(cx, End::Right, false)
}

/// LPUSHX key element [element ...] → the new length, 0 (pushing nothing) if the key is absent.
fn lpushx(cx: &mut ShardCtx<'_>) -> CmdResult {
    push_cmd(cx, End::Left, true)
}

/// RPUSHX key element [element ...] → the new length, 0 (pushing nothing) if the key is absent.
fn rpushx(cx: &mut ShardCtx<'_>) -> CmdResult {
    push_cmd(cx, End::Right, true)
}

// ===== LPOP / RPOP =====

/// LPOP/RPOP key [count]: without a count, the element or a null bulk; with one, an array of up
/// to `count` elements, a null array if the key is absent, an empty array for a count of 0.
fn pop_cmd(cx: &mut ShardCtx<'_>, end: End) -> CmdResult {
    let name = if end == End::Left { "lpop" } else { "rpop" };
    if cx.args.len() > 3 {
        return Err(CmdError::WrongArity(name.into()));
    }
    let count = match cx.args.get(2) {
        Some(a) => Some(parse_count(
            a,
            0,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    let now = cx.now;
    let key = &cx.args[1];
    let db = cx.shard.db_mut(cx.db);
    match count {
        None => match op_pop_one(db, key, end, now)? {
            Some(v) => cx.out.bulk(&v),
            None => cx.out.null(),
        },
        Some(0) => match op_check_list(db, key, now)? {
            true => cx.out.array(0),
            false => cx.out.null_array(),
        },
        Some(n) => match op_pop(db, key, end, n as usize, now)? {
            Some(v) => reply_values(cx.out, &v),
            None => cx.out.null_array(),
        },
    }
    Ok(())
}

/// LPOP key [count]
fn lpop(cx: &mut ShardCtx<'_>) -> CmdResult {
    pop_cmd(cx, End::Left)
}

/// RPOP key [count]
fn rpop(cx: &mut ShardCtx<'_>) -> CmdResult {
    pop_cmd(cx, End::Right)
}

// ===== reads: LLEN / LINDEX / LRANGE / LPOS =====

/// LLEN key → the length (0 if absent).
fn llen(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = read_list(cx.shard.db_mut(cx.db), &cx.args[1], now)?.map_or(0, List::len);
    cx.out.int(n as i64);
    Ok(())
}

/// LINDEX key index → the element or null. The key is looked up before the index is parsed.
fn lindex(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let Some(l) = read_list(cx.shard.db_mut(cx.db), &cx.args[1], now)? else {
        cx.out.null();
        return Ok(());
    };
    let index = parse_i64(&cx.args[2])?;
    match index_of(index, l.len()).and_then(|i| l.get(i)) {
        Some(e) => reply_elem(cx.out, e),
        None => cx.out.null(),
    }
    Ok(())
}

/// The inclusive range `start..=stop` of a `len`-element list, clamped as Redis clamps LRANGE
/// and LTRIM; None when empty.
fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop.min(len - 1) as usize))
}

/// LRANGE key start stop → the elements in the range.
fn lrange(cx: &mut ShardCtx<'_>) -> CmdResult {
    let start = parse_i64(&cx.args[2])?;
    let stop = parse_i64(&cx.args[3])?;
    let now = cx.now;
    let Some(l) = read_list(cx.shard.db_mut(cx.db), &cx.args[1], now)? else {
        cx.out.array(0);
        return Ok(());
    };
    match clamp_range(start, stop, l.len()) {
        None => cx.out.array(0),
        Some((a, b)) => {
            cx.out.array(b - a + 1);
            for e in l.iter_from(a).take(b - a + 1) {
                reply_elem(cx.out, e);
            }
        }
    }
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len] → the index of the first match
/// (or null), or with COUNT an array of up to num-matches indices (0 = all).
fn lpos(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = &args[j];
        if eq_ci(opt, "rank") && more {
            j += 1;
            rank = parse_i64(&args[j])?;
            if rank == 0 {
                return Err(CmdError::msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if eq_ci(opt, "count") && more {
            j += 1;
            count = Some(parse_count(&args[j], 0, "ERR COUNT can't be negative")?);
        } else if eq_ci(opt, "maxlen") && more {
            j += 1;
            maxlen = parse_count(&args[j], 0, "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = cx.now;
    let Some(l) = read_list(cx.shard.db_mut(cx.db), &args[1], now)? else {
        match count {
            Some(_) => cx.out.array(0),
            None => cx.out.null(),
        }
        return Ok(());
    };
    let needle = Needle::new(&args[2]);
    // A negative rank scans from the tail. Redis negates it in a C long, so i64::MIN stays
    // negative and then matches from the first hit on; wrapping arithmetic reproduces that.
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let len = l.len();
    let scan: Box<dyn Iterator<Item = Elem<'_>>> = if from_tail {
        Box::new(l.iter_rev())
    } else {
        Box::new(l.iter())
    };
    let limit = if maxlen == 0 {
        len
    } else {
        (maxlen as usize).min(len)
    };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (i, e) in scan.take(limit).enumerate() {
        if !e.matches(&needle) {
            continue;
        }
        matches += 1;
        if matches >= rank {
            found.push(if from_tail { len - 1 - i } else { i });
            match count {
                None => break,
                Some(c) if c != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= c => break,
                _ => {}
            }
        }
    }
    match count {
        Some(_) => {
            cx.out.array(found.len());
            for i in found {
                cx.out.int(i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => cx.out.int(i as i64),
            None => cx.out.null(),
        },
    }
    Ok(())
}

// ===== in-place writes: LINSERT / LSET / LREM / LTRIM =====

/// LINSERT key BEFORE|AFTER pivot element → the new length, -1 if the pivot is not there, 0 if
/// the key is absent.
fn linsert(cx: &mut ShardCtx<'_>) -> CmdResult {
    let after = if eq_ci(&cx.args[2], "after") {
        true
    } else if eq_ci(&cx.args[2], "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let (key, pivot, elem, now) = (&cx.args[1], &cx.args[3], &cx.args[4], cx.now);
    let insert = |l: &mut List| match l.position(&Needle::new(pivot)) {
        Some(i) => {
            l.insert(i + usize::from(after), elem);
            l.len() as i64
        }
        None => -1,
    };
    let event = |n: &i64| Change::event_if(*n > 0, "linsert");
    let n = match write_list(cx.shard.db_mut(cx.db), key, now, insert, event)? {
        Found::Done(n) => n,
        Found::Missing => 0,
    };
    cx.out.int(n);
    Ok(())
}

/// LSET key index element → OK; `ERR no such key` for a missing key (checked before the index is
/// parsed), `ERR index out of range` outside the list.
fn lset(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, elem, now) = (&cx.args[1], &cx.args[3], cx.now);
    let db = cx.shard.db_mut(cx.db);
    if !op_check_list(db, key, now)? {
        return Err(CmdError::NoSuchKey);
    }
    let index = parse_i64(&cx.args[2])?;
    let set = |l: &mut List| match index_of(index, l.len()) {
        Some(i) => {
            l.set(i, elem);
            Ok(())
        }
        None => Err(CmdError::OutOfRange),
    };
    let event = |r: &Result<(), CmdError>| Change::event_if(r.is_ok(), "lset");
    match write_list(db, key, now, set, event)? {
        Found::Done(r) => r?,
        Found::Missing => return Err(CmdError::NoSuchKey),
    }
    cx.out.ok();
    Ok(())
}

/// LREM key count element → how many were removed: the first `count` matches from the head
/// (count > 0), the last `-count` from the tail (count < 0), or all (0).
fn lrem(cx: &mut ShardCtx<'_>) -> CmdResult {
    let count = parse_i64(&cx.args[2])?;
    let (key, elem, now) = (&cx.args[1], &cx.args[3], cx.now);
    let from = if count < 0 { End::Right } else { End::Left };
    // A limit beyond the list's length removes every match, like 0.
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let remove = |l: &mut List| l.remove_matching(&Needle::new(elem), limit, from);
    let event = |n: &usize| match *n {
        0 => Change::Unchanged,
        n => Change::Event("lrem", n as u64),
    };
    let n = match write_list(cx.shard.db_mut(cx.db), key, now, remove, event)? {
        Found::Done(n) => n,
        Found::Missing => 0,
    };
    cx.out.int(n as i64);
    Ok(())
}

/// LTRIM key start stop → OK, keeping only the range (an empty range deletes the key).
fn ltrim(cx: &mut ShardCtx<'_>) -> CmdResult {
    let start = parse_i64(&cx.args[2])?;
    let stop = parse_i64(&cx.args[3])?;
    let now = cx.now;
    // How many elements went: Redis counts them as the changes (none: announced, not counted).
    let trim = |l: &mut List| {
        let before = l.len();
        match clamp_range(start, stop, before) {
            Some((a, b)) => l.retain_range(a, b),
            None => l.remove_range(0, before),
        }
        before - l.len()
    };
    write_list(cx.shard.db_mut(cx.db), &cx.args[1], now, trim, |removed| {
        if *removed > 0 {
            Change::Event("ltrim", *removed as u64)
        } else {
            Change::Touched("ltrim")
        }
    })?;
    cx.out.ok();
    Ok(())
}

// ===== multi-key: LMOVE / RPOPLPUSH / LMPOP =====

/// Moves one element from `from` of `src` to `to` of `dst` and replies with it (null if `src` is
/// absent). Checks `dst`'s type before popping, as Redis does, so a WRONGTYPE destination leaves
/// the source untouched; an absent source answers null whatever `dst` holds.
async fn move_one(
    cx: &mut KeysCtx<'_>,
    src: Bytes,
    dst: Bytes,
    from: End,
    to: End,
) -> Result<bool, CmdError> {
    let (db, now) = (cx.db, cx.now);
    if src == dst {
        let k = src.clone();
        let moved = cx
            .on(&src, move |s| op_rotate(s.db_mut(db), &k, from, to, now))
            .await?;
        if let Some(v) = &moved {
            cx.out.bulk(v);
        }
        return Ok(moved.is_some());
    }
    let d = dst.clone();
    let dst_ok = cx
        .on(&dst, move |s| op_check_list(s.db_mut(db), &d, now).is_ok())
        .await;
    let k = src.clone();
    let popped = cx
        .on(&src, move |s| {
            let db = s.db_mut(db);
            if !op_check_list(db, &k, now)? {
                return Ok(None);
            }
            if !dst_ok {
                return Err(CmdError::WrongType);
            }
            op_pop_quiet(db, &k, from, now)
        })
        .await?;
    let Some((v, emptied)) = popped else {
        return Ok(false);
    };
    let v = Bytes::from(v);
    let d = dst.clone();
    let pushed = v.clone();
    cx.on(&dst, move |s| {
        moving::push(s.db_mut(db), &src, &d, pushed, from, to, emptied, now)
    })
    .await?;
    cx.out.bulk(&v);
    Ok(true)
}

/// The steps of a parked BLMOVE or BRPOPLPUSH served across shards by messages (see
/// `strata_shard::park`), each run by the shard owning its key while the move holds that key's
/// lock. Together they do what [`move_one`] does, in the same order: the destination's type is
/// checked before anything is popped, and the source's events follow the push.
pub mod moving {
    use super::*;

    /// True if `src` holds a list (with elements: an empty list is deleted), the only value a
    /// parked move is served from.
    pub fn source_ready(db: &mut Db, src: &[u8], now: i64) -> bool {
        matches!(op_check_list(db, src, now), Ok(true))
    }

    /// True if `dst` may receive the element (a list, or absent); false: the move fails with
    /// WRONGTYPE and pops nothing.
    pub fn destination_ok(db: &mut Db, dst: &[u8], now: i64) -> bool {
        op_check_list(db, dst, now).is_ok()
    }

    /// Pops the element to move from `from` of `src`, with no event yet; also whether that emptied
    /// (and deleted) the list. None if there is nothing to pop after all.
    pub fn pop(db: &mut Db, src: &[u8], from: End, now: i64) -> Option<(Vec<u8>, bool)> {
        op_pop_quiet(db, src, from, now).ok().flatten()
    }

    /// The destination half of a move whose source was popped (by [`pop`]): pushes `v` at `to`
    /// of `dst`, then announces the source's pop (and deletion, if `emptied`), in Redis's order.
    /// Returns the destination's new length.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        db: &mut Db,
        src: &[u8],
        dst: &[u8],
        v: Bytes,
        from: End,
        to: End,
        emptied: bool,
        now: i64,
    ) -> Result<usize, CmdError> {
        let r = op_push(db, dst, &[v], to, false, now);
        db.notify(notify::LIST, pop_event(from), src);
        if emptied {
            db.notify(notify::GENERIC, "del", src);
        }
        r
    }
}

/// BLMOVE's ends (`wherefrom`, `whereto`), for [`CommandSpec::moves`].
fn blmove_ends(args: &[Bytes]) -> Option<(End, End)> {
    let from = parse_end(args.get(3)?).ok()?;
    let to = parse_end(args.get(4)?).ok()?;
    Some((from, to))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT → the moved element, or null.
fn lmove<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        let from = parse_end(&args[3])?;
        let to = parse_end(&args[4])?;
        if !move_one(cx, args[1].clone(), args[2].clone(), from, to).await? {
            cx.out.null();
        }
        Ok(())
    })
}

/// RPOPLPUSH source destination → LMOVE source destination RIGHT LEFT.
fn rpoplpush<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let args = cx.args;
        if !move_one(cx, args[1].clone(), args[2].clone(), End::Right, End::Left).await? {
            cx.out.null();
        }
        Ok(())
    })
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count] → [key, [elements]] from the first
/// non-empty list, or a null array. Keys are tried in order; a non-list met before a list
/// fails with WRONGTYPE.
fn lmpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (keys, end, count) = parse_mpop(cx.args, 1)?;
        if !pop_first(cx, keys, end, count).await? {
            cx.out.null_array();
        }
        Ok(())
    })
}

/// LMPOP's and BLMPOP's `numkeys key [key ...] LEFT|RIGHT [COUNT count]` from `numkeys_idx`: the
/// keys' argument range, the end and the count, with Redis's errors in Redis's order.
fn parse_mpop(
    args: &[Bytes],
    numkeys_idx: usize,
) -> Result<(std::ops::Range<usize>, End, usize), CmdError> {
    let numkeys = parse_count(
        &args[numkeys_idx],
        1,
        "ERR numkeys should be greater than 0",
    )?;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_idx + 1))
        .filter(|&w| w < args.len())
        .ok_or(CmdError::Syntax)?;
    let end = parse_end(&args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ci(&args[j], "count") && j + 1 < args.len() {
            j += 1;
            count = Some(parse_count(
                &args[j],
                1,
                "ERR count should be greater than 0",
            )?);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((numkeys_idx + 1..where_idx, end, count.unwrap_or(1) as usize))
}

/// Pops up to `count` elements from `end` of the first non-empty list among `args[keys]` and
/// replies `[key, [elements]]`; false (nothing written) if every list is empty. A non-list met
/// before a list fails with WRONGTYPE.
async fn pop_first(
    cx: &mut KeysCtx<'_>,
    keys: std::ops::Range<usize>,
    end: End,
    count: usize,
) -> Result<bool, CmdError> {
    let (db, now, args) = (cx.db, cx.now, cx.args);
    for key in &args[keys] {
        let k = key.clone();
        let popped = skip_wrong_type(
            cx.woken,
            cx.on(key, move |s| op_pop(s.db_mut(db), &k, end, count, now))
                .await,
        )?;
        if let Some(values) = popped {
            // Propagated as the pop it was (Redis 7.0: LPOP/RPOP key count).
            let n = values.len();
            cx.propagate_as(|| {
                vec![
                    Bytes::from_static(pop_name(end)),
                    key.clone(),
                    Bytes::from(n.to_string()),
                ]
            });
            cx.out.array(2);
            cx.out.bulk(key);
            reply_values(cx.out, &values);
            return Ok(true);
        }
    }
    Ok(false)
}

// ===== blocking commands =====
//
// Each tries its non-blocking form; when that finds nothing it parks on its source keys (see
// `strata_node::ctx::Park`) and is run again once one of them is written, until its timeout.

/// An end as Redis names it in a propagated LMOVE it builds.
pub fn end_name(end: End) -> Bytes {
    match end {
        End::Left => Bytes::from_static(b"left"),
        End::Right => Bytes::from_static(b"right"),
    }
}

/// The non-blocking pop a pop from `end` is propagated as.
fn pop_name(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LPOP",
        End::Right => b"RPOP",
    }
}

/// BLPOP / BRPOP key [key ...] timeout → [key, element] from the first non-empty list.
async fn bpop(cx: &mut KeysCtx<'_>, end: End) -> CmdResult {
    let args = cx.args;
    let deadline = parse_timeout(&args[args.len() - 1], cx.now)?;
    let keys = 1..args.len() - 1;
    let (db, now) = (cx.db, cx.now);
    for key in &args[keys.clone()] {
        let k = key.clone();
        let popped = skip_wrong_type(
            cx.woken,
            cx.on(key, move |s| op_pop_one(s.db_mut(db), &k, end, now))
                .await,
        )?;
        if let Some(value) = popped {
            // Propagated as its non-blocking form on the key it popped from.
            cx.propagate_as(|| vec![Bytes::from_static(pop_name(end)), key.clone()]);
            cx.out.array(2);
            cx.out.bulk(key);
            cx.out.bulk(&value);
            return Ok(());
        }
    }
    cx.park = Some(Park {
        keys: args[keys].to_vec(),
        deadline,
        timeout: TimeoutReply::NullArray,
        no_block: TimeoutReply::NullArray,
    });
    Ok(())
}

/// BLPOP key [key ...] timeout
fn blpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(bpop(cx, End::Left))
}

/// BRPOP key [key ...] timeout
fn brpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(bpop(cx, End::Right))
}

/// BLMOVE / BRPOPLPUSH: LMOVE that waits for the source.
async fn bmove(cx: &mut KeysCtx<'_>, from: End, to: End, timeout_arg: usize) -> CmdResult {
    let args = cx.args;
    let deadline = parse_timeout(&args[timeout_arg], cx.now)?;
    // Woken with a source of another type: it stays blocked (Redis serves a blocked client only
    // from a key of its type), whereas a destination of another type still fails with WRONGTYPE.
    let (db, now) = (cx.db, cx.now);
    let src = args[1].clone();
    let other_type = cx.woken
        && cx
            .on(&args[1], move |s| {
                op_check_list(s.db_mut(db), &src, now).is_err()
            })
            .await;
    // Propagated as its non-blocking form (LMOVE, RPOPLPUSH), if it moved something.
    // Served after blocking, Redis names the ends itself, in lower case.
    let woken = cx.woken;
    cx.propagate_as(|| match timeout_arg {
        5 => {
            let mut argv = vec![Bytes::from_static(b"LMOVE")];
            argv.extend_from_slice(&args[1..3]);
            if woken {
                argv.extend([end_name(from), end_name(to)]);
            } else {
                argv.extend_from_slice(&args[3..5]);
            }
            argv
        }
        _ => vec![
            Bytes::from_static(b"RPOPLPUSH"),
            args[1].clone(),
            args[2].clone(),
        ],
    });
    if other_type || !move_one(cx, args[1].clone(), args[2].clone(), from, to).await? {
        cx.park = Some(Park {
            keys: vec![args[1].clone()],
            deadline,
            // Redis answers a timed-out BLMOVE with a null array too, not a null bulk.
            timeout: TimeoutReply::NullArray,
            no_block: TimeoutReply::NullBulk,
        });
    }
    Ok(())
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
fn blmove<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let from = parse_end(&cx.args[3])?;
        let to = parse_end(&cx.args[4])?;
        bmove(cx, from, to, 5).await
    })
}

/// BRPOPLPUSH source destination timeout
fn brpoplpush<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(bmove(cx, End::Right, End::Left, 3))
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
fn blmpop<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (keys, end, count) = parse_mpop(cx.args, 2)?;
        let deadline = parse_timeout(&cx.args[1], cx.now)?;
        if !pop_first(cx, keys.clone(), end, count).await? {
            cx.park = Some(Park {
                keys: cx.args[keys].to_vec(),
                deadline,
                timeout: TimeoutReply::NullArray,
                no_block: TimeoutReply::NullArray,
            });
        }
        Ok(())
    })
}
