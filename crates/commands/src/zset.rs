//! Sorted-set commands (Redis's t_zset.c): ZADD, ZINCRBY, ZREM, ZCARD, ZCOUNT, ZLEXCOUNT, ZSCORE,
//! ZMSCORE, ZRANK, ZREVRANK, the ZRANGE family and ZRANGESTORE, the ZREMRANGEBY* commands, ZPOPMIN,
//! ZPOPMAX, ZMPOP, the blocking BZPOPMIN, BZPOPMAX and BZMPOP, ZRANDMEMBER, ZUNION/ZINTER/ZDIFF
//! (and their STORE forms), ZINTERCARD and ZSCAN.
//!
//! The value is [`strata_core::ZSet`] (listpack or skiplist, converted on writes exactly where
//! Redis 7.0 converts). The handlers live in [`ops`]; this file is the table, with key specs,
//! flags and COMMAND DOCS byte-identical to Redis 7.0's.
//!
//! Invariants:
//! * arguments are parsed in Redis's order, so the same bad input fails with the same error (e.g.
//!   ZADD's option conflicts before its scores, a score range before the key lookup);
//! * a write that empties a sorted set deletes the key, and reads never change the encoding;
//! * multi-key commands (ZUNION/ZINTER/ZDIFF and STORE, ZINTERCARD, ZRANGESTORE, ZMPOP) are
//!   `Handler::Keys`: their sources are read on their shards and the result computed and stored
//!   while the dispatcher holds every key's lock, so they are atomic across shards;
//! * scores are replied as Redis's `addReplyDouble` does (`%.17g`; a bulk string in RESP2, a
//!   double in RESP3);
//! * the blocking pops park on their keys when every one is empty, like the blocking list
//!   commands (see `strata_shard::park`).

pub mod ops;

use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec, Parts};

const R: Flags = Flags::READONLY;
const W: Flags = Flags::WRITE;
const FAST: Flags = Flags::FAST;
const DENYOOM: Flags = Flags::DENYOOM;
/// The members named from argument 2 on (ZREM, ZSCORE, ZMSCORE).
const MEMBERS: Parts = Parts::Members { first: 2, step: 1 };

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
        "sorted-set",
        name,
        arity,
        flags,
        keys,
        summary,
        since,
        complexity,
        handler,
    )
    .with_acl(&["@sortedset"])
}

// Key specs and COMMAND DOCS arguments, as Redis 7.0 declares them.
const K_ZADD: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE))];
const A_ZADD_CONDITION: &[Arg] = &[Arg::pure_token("nx", "NX"), Arg::pure_token("xx", "XX")];
const A_ZADD_COMPARISON: &[Arg] = &[Arg::pure_token("gt", "GT"), Arg::pure_token("lt", "LT")];
const A_ZADD_SCORE_MEMBER: &[Arg] = &[Arg::double("score"), Arg::string("member")];
const A_ZADD: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("condition", A_ZADD_CONDITION)
        .since("3.0.2")
        .optional(),
    Arg::oneof("comparison", A_ZADD_COMPARISON)
        .since("6.2.0")
        .optional(),
    Arg::pure_token("change", "CH").since("3.0.2").optional(),
    Arg::pure_token("increment", "INCR")
        .since("3.0.2")
        .optional(),
    Arg::block("score_member", A_ZADD_SCORE_MEMBER).multiple(),
];
const K_ZINCRBY: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE),
)];
const A_ZINCRBY: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("increment"),
    Arg::string("member"),
];
const K_ZREM: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const A_ZREM: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const K_ZCARD: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const A_ZCARD: &[Arg] = &[Arg::key("key", 0)];
const K_ZCOUNT: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZCOUNT: &[Arg] = &[Arg::key("key", 0), Arg::double("min"), Arg::double("max")];
const K_ZLEXCOUNT: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZLEXCOUNT: &[Arg] = &[Arg::key("key", 0), Arg::string("min"), Arg::string("max")];
const K_ZSCORE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZSCORE: &[Arg] = &[Arg::key("key", 0), Arg::string("member")];
const K_ZMSCORE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZMSCORE: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const K_ZRANK: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZRANK: &[Arg] = &[Arg::key("key", 0), Arg::string("member")];
const K_ZREVRANK: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZREVRANK: &[Arg] = &[Arg::key("key", 0), Arg::string("member")];
const K_ZRANGE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZRANGE_SORTBY: &[Arg] = &[
    Arg::pure_token("byscore", "BYSCORE"),
    Arg::pure_token("bylex", "BYLEX"),
];
const A_ZRANGE_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZRANGE: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("start"),
    Arg::string("stop"),
    Arg::oneof("sortby", A_ZRANGE_SORTBY)
        .since("6.2.0")
        .optional(),
    Arg::pure_token("rev", "REV").since("6.2.0").optional(),
    Arg::block("offset_count", A_ZRANGE_OFFSET_COUNT)
        .with_token("LIMIT")
        .since("6.2.0")
        .optional(),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const K_ZRANGESTORE: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::at(2, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const A_ZRANGESTORE_SORTBY: &[Arg] = &[
    Arg::pure_token("byscore", "BYSCORE"),
    Arg::pure_token("bylex", "BYLEX"),
];
const A_ZRANGESTORE_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZRANGESTORE: &[Arg] = &[
    Arg::key("dst", 0),
    Arg::key("src", 1),
    Arg::string("min"),
    Arg::string("max"),
    Arg::oneof("sortby", A_ZRANGESTORE_SORTBY).optional(),
    Arg::pure_token("rev", "REV").optional(),
    Arg::block("offset_count", A_ZRANGESTORE_OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
];
const K_ZREVRANGE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZREVRANGE: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("start"),
    Arg::integer("stop"),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const K_ZRANGEBYSCORE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZRANGEBYSCORE_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZRANGEBYSCORE: &[Arg] = &[
    Arg::key("key", 0),
    Arg::double("min"),
    Arg::double("max"),
    Arg::pure_token("withscores", "WITHSCORES")
        .since("2.0.0")
        .optional(),
    Arg::block("offset_count", A_ZRANGEBYSCORE_OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
];
const K_ZREVRANGEBYSCORE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZREVRANGEBYSCORE_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZREVRANGEBYSCORE: &[Arg] = &[
    Arg::key("key", 0),
    Arg::double("max"),
    Arg::double("min"),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
    Arg::block("offset_count", A_ZREVRANGEBYSCORE_OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
];
const K_ZRANGEBYLEX: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZRANGEBYLEX_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZRANGEBYLEX: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("min"),
    Arg::string("max"),
    Arg::block("offset_count", A_ZRANGEBYLEX_OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
];
const K_ZREVRANGEBYLEX: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZREVRANGEBYLEX_OFFSET_COUNT: &[Arg] = &[Arg::integer("offset"), Arg::integer("count")];
const A_ZREVRANGEBYLEX: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("max"),
    Arg::string("min"),
    Arg::block("offset_count", A_ZREVRANGEBYLEX_OFFSET_COUNT)
        .with_token("LIMIT")
        .optional(),
];
const K_ZREMRANGEBYRANK: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const A_ZREMRANGEBYRANK: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("start"),
    Arg::integer("stop"),
];
const K_ZREMRANGEBYSCORE: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const A_ZREMRANGEBYSCORE: &[Arg] = &[Arg::key("key", 0), Arg::double("min"), Arg::double("max")];
const K_ZREMRANGEBYLEX: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const A_ZREMRANGEBYLEX: &[Arg] = &[Arg::key("key", 0), Arg::string("min"), Arg::string("max")];
const K_ZPOPMIN: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const A_ZPOPMIN: &[Arg] = &[Arg::key("key", 0), Arg::integer("count").optional()];
const K_ZPOPMAX: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const A_ZPOPMAX: &[Arg] = &[Arg::key("key", 0), Arg::integer("count").optional()];
const K_ZMPOP: &[KeySpec] = &[KeySpec::numkeys(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const A_ZMPOP_WHERE: &[Arg] = &[Arg::pure_token("min", "MIN"), Arg::pure_token("max", "MAX")];
const A_ZMPOP: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::oneof("where", A_ZMPOP_WHERE),
    Arg::integer("count").with_token("COUNT").optional(),
];
const K_BZPOP: &[KeySpec] = &[KeySpec::range(
    1,
    -2,
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const A_BZPOP: &[Arg] = &[Arg::key("key", 0).multiple(), Arg::double("timeout")];
const H_BZPOP: &[(&str, &str)] = &[(
    "6.0.0",
    "`timeout` is interpreted as a double instead of an integer.",
)];
const K_BZMPOP: &[KeySpec] = &[KeySpec::numkeys(
    2,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE),
)];
const A_BZMPOP: &[Arg] = &[
    Arg::double("timeout"),
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::oneof("where", A_ZMPOP_WHERE),
    Arg::integer("count").with_token("COUNT").optional(),
];
const K_ZRANDMEMBER: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZRANDMEMBER_OPTIONS: &[Arg] = &[
    Arg::integer("count"),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const A_ZRANDMEMBER: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("options", A_ZRANDMEMBER_OPTIONS).optional(),
];
const K_ZUNION: &[KeySpec] = &[KeySpec::numkeys(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZUNION_AGGREGATE: &[Arg] = &[
    Arg::pure_token("sum", "SUM"),
    Arg::pure_token("min", "MIN"),
    Arg::pure_token("max", "MAX"),
];
const A_ZUNION: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::integer("weight")
        .with_token("WEIGHTS")
        .optional()
        .multiple(),
    Arg::oneof("aggregate", A_ZUNION_AGGREGATE)
        .with_token("AGGREGATE")
        .optional(),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const K_ZUNIONSTORE: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::numkeys(2, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const A_ZUNIONSTORE_AGGREGATE: &[Arg] = &[
    Arg::pure_token("sum", "SUM"),
    Arg::pure_token("min", "MIN"),
    Arg::pure_token("max", "MAX"),
];
const A_ZUNIONSTORE: &[Arg] = &[
    Arg::key("destination", 0),
    Arg::integer("numkeys"),
    Arg::key("key", 1).multiple(),
    Arg::integer("weight")
        .with_token("WEIGHTS")
        .optional()
        .multiple(),
    Arg::oneof("aggregate", A_ZUNIONSTORE_AGGREGATE)
        .with_token("AGGREGATE")
        .optional(),
];
const K_ZINTER: &[KeySpec] = &[KeySpec::numkeys(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZINTER_AGGREGATE: &[Arg] = &[
    Arg::pure_token("sum", "SUM"),
    Arg::pure_token("min", "MIN"),
    Arg::pure_token("max", "MAX"),
];
const A_ZINTER: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::integer("weight")
        .with_token("WEIGHTS")
        .optional()
        .multiple(),
    Arg::oneof("aggregate", A_ZINTER_AGGREGATE)
        .with_token("AGGREGATE")
        .optional(),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const K_ZINTERSTORE: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::numkeys(2, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const A_ZINTERSTORE_AGGREGATE: &[Arg] = &[
    Arg::pure_token("sum", "SUM"),
    Arg::pure_token("min", "MIN"),
    Arg::pure_token("max", "MAX"),
];
const A_ZINTERSTORE: &[Arg] = &[
    Arg::key("destination", 0),
    Arg::integer("numkeys"),
    Arg::key("key", 1).multiple(),
    Arg::integer("weight")
        .with_token("WEIGHTS")
        .optional()
        .multiple(),
    Arg::oneof("aggregate", A_ZINTERSTORE_AGGREGATE)
        .with_token("AGGREGATE")
        .optional(),
];
const K_ZINTERCARD: &[KeySpec] = &[KeySpec::numkeys(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZINTERCARD: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::integer("limit").with_token("LIMIT").optional(),
];
const K_ZDIFF: &[KeySpec] = &[KeySpec::numkeys(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZDIFF: &[Arg] = &[
    Arg::integer("numkeys"),
    Arg::key("key", 0).multiple(),
    Arg::pure_token("withscores", "WITHSCORES").optional(),
];
const K_ZDIFFSTORE: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::numkeys(2, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const A_ZDIFFSTORE: &[Arg] = &[
    Arg::key("destination", 0),
    Arg::integer("numkeys"),
    Arg::key("key", 1).multiple(),
];
const K_ZSCAN: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const A_ZSCAN: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("cursor"),
    Arg::pattern("pattern").with_token("MATCH").optional(),
    Arg::integer("count").with_token("COUNT").optional(),
];

/// The sorted-set family.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("zadd", -4, W.or(DENYOOM).or(FAST), K_ZADD, "Add one or more members to a sorted set, or update its score if it already exists", "1.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", Handler::Shard(ops::zadd))
        .with_args(A_ZADD)
        .with_history(&[("2.4.0", "Accepts multiple elements."), ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."), ("6.2.0", "Added the `GT` and `LT` options.")])
        .with_parts(Parts::Whole),
    cmd("zincrby", 4, W.or(DENYOOM).or(FAST), K_ZINCRBY, "Increment the score of a member in a sorted set", "1.2.0", "O(log(N)) where N is the number of elements in the sorted set.", Handler::Shard(ops::zincrby))
        .with_args(A_ZINCRBY)
        .with_parts(Parts::Members { first: 3, step: 1 }),
    cmd("zrem", -3, W.or(FAST), K_ZREM, "Remove one or more members from a sorted set", "1.2.0", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.", Handler::Shard(ops::zrem))
        .with_args(A_ZREM)
        .with_history(&[("2.4.0", "Accepts multiple elements.")])
        .with_parts(MEMBERS),
    cmd("zcard", 2, R.or(FAST), K_ZCARD, "Get the number of members in a sorted set", "1.2.0", "O(1)", Handler::Shard(ops::zcard))
        .with_args(A_ZCARD)
        .with_parts(Parts::Meta),
    cmd("zcount", 4, R.or(FAST), K_ZCOUNT, "Count the members in a sorted set with scores within the given values", "2.0.0", "O(log(N)) with N being the number of elements in the sorted set.", Handler::Shard(ops::zcount))
        .with_args(A_ZCOUNT)
        .with_parts(Parts::Range),
    cmd("zlexcount", 4, R.or(FAST), K_ZLEXCOUNT, "Count the number of members in a sorted set between a given lexicographical range", "2.8.9", "O(log(N)) with N being the number of elements in the sorted set.", Handler::Shard(ops::zlexcount))
        .with_args(A_ZLEXCOUNT)
        .with_parts(Parts::Range),
    cmd("zscore", 3, R.or(FAST), K_ZSCORE, "Get the score associated with the given member in a sorted set", "1.2.0", "O(1)", Handler::Shard(ops::zscore))
        .with_args(A_ZSCORE)
        .with_parts(MEMBERS),
    cmd("zmscore", -3, R.or(FAST), K_ZMSCORE, "Get the score associated with the given members in a sorted set", "6.2.0", "O(N) where N is the number of members being requested.", Handler::Shard(ops::zmscore))
        .with_args(A_ZMSCORE)
        .with_parts(MEMBERS),
    cmd("zrank", 3, R.or(FAST), K_ZRANK, "Determine the index of a member in a sorted set", "2.0.0", "O(log(N))", Handler::Shard(ops::zrank))
        .with_args(A_ZRANK)
        .with_parts(Parts::Range),
    cmd("zrevrank", 3, R.or(FAST), K_ZREVRANK, "Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0", "O(log(N))", Handler::Shard(ops::zrevrank))
        .with_args(A_ZREVRANK)
        .with_parts(Parts::Range),
    cmd("zrange", -4, R, K_ZRANGE, "Return a range of members in a sorted set", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", Handler::Shard(ops::zrange))
        .with_args(A_ZRANGE)
        .with_history(&[("6.2.0", "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.")])
        .with_parts(Parts::Range),
    cmd("zrangestore", -5, W.or(DENYOOM), K_ZRANGESTORE, "Store a range of members from sorted set into another key", "6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", Handler::Keys(ops::zrangestore))
        .with_args(A_ZRANGESTORE)
        .with_parts(Parts::Range),
    cmd("zrevrange", -4, R, K_ZREVRANGE, "Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", Handler::Shard(ops::zrevrange))
        .with_args(A_ZREVRANGE)
        .deprecated("6.2.0", "`ZRANGE` with the `REV` argument")
        .with_parts(Parts::Range),
    cmd("zrangebyscore", -4, R, K_ZRANGEBYSCORE, "Return a range of members in a sorted set, by score", "1.0.5", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", Handler::Shard(ops::zrangebyscore))
        .with_args(A_ZRANGEBYSCORE)
        .with_history(&[("2.0.0", "Added the `WITHSCORES` modifier.")])
        .deprecated("6.2.0", "`ZRANGE` with the `BYSCORE` argument")
        .with_parts(Parts::Range),
    cmd("zrevrangebyscore", -4, R, K_ZREVRANGEBYSCORE, "Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", Handler::Shard(ops::zrevrangebyscore))
        .with_args(A_ZREVRANGEBYSCORE)
        .with_history(&[("2.1.6", "`min` and `max` can be exclusive.")])
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYSCORE` arguments")
        .with_parts(Parts::Range),
    cmd("zrangebylex", -4, R, K_ZRANGEBYLEX, "Return a range of members in a sorted set, by lexicographical range", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", Handler::Shard(ops::zrangebylex))
        .with_args(A_ZRANGEBYLEX)
        .deprecated("6.2.0", "`ZRANGE` with the `BYLEX` argument")
        .with_parts(Parts::Range),
    cmd("zrevrangebylex", -4, R, K_ZREVRANGEBYLEX, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", Handler::Shard(ops::zrevrangebylex))
        .with_args(A_ZREVRANGEBYLEX)
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYLEX` arguments")
        .with_parts(Parts::Range),
    cmd("zremrangebyrank", 4, W, K_ZREMRANGEBYRANK, "Remove all members in a sorted set within the given indexes", "2.0.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", Handler::Shard(ops::zremrangebyrank))
        .with_args(A_ZREMRANGEBYRANK)
        .with_parts(Parts::Range),
    cmd("zremrangebyscore", 4, W, K_ZREMRANGEBYSCORE, "Remove all members in a sorted set within the given scores", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", Handler::Shard(ops::zremrangebyscore))
        .with_args(A_ZREMRANGEBYSCORE)
        .with_parts(Parts::Range),
    cmd("zremrangebylex", 4, W, K_ZREMRANGEBYLEX, "Remove all members in a sorted set between the given lexicographical range", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", Handler::Shard(ops::zremrangebylex))
        .with_args(A_ZREMRANGEBYLEX)
        .with_parts(Parts::Range),
    cmd("zpopmin", -2, W.or(FAST), K_ZPOPMIN, "Remove and return members with the lowest scores in a sorted set", "5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.", Handler::Shard(ops::zpopmin))
        .with_args(A_ZPOPMIN)
        .with_parts(Parts::Ends),
    cmd("zpopmax", -2, W.or(FAST), K_ZPOPMAX, "Remove and return members with the highest scores in a sorted set", "5.0.0", "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.", Handler::Shard(ops::zpopmax))
        .with_args(A_ZPOPMAX)
        .with_parts(Parts::Ends),
    cmd("zmpop", -4, W, K_ZMPOP, "Remove and return members with scores in a sorted set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", Handler::Keys(ops::zmpop))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(A_ZMPOP)
        .with_parts(Parts::Ends),
    cmd("bzpopmin", -3, W.or(Flags::NOSCRIPT).or(Flags::BLOCKING).or(FAST), K_BZPOP, "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.", Handler::Keys(ops::bzpopmin))
        .with_args(A_BZPOP)
        .with_history(H_BZPOP)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::keys_before_last),
    cmd("bzpopmax", -3, W.or(Flags::NOSCRIPT).or(Flags::BLOCKING).or(FAST), K_BZPOP, "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.", Handler::Keys(ops::bzpopmax))
        .with_args(A_BZPOP)
        .with_history(H_BZPOP)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::keys_before_last),
    cmd("bzmpop", -5, W.or(Flags::BLOCKING), K_BZMPOP, "Remove and return members with scores in a sorted set or block until one is available", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", Handler::Keys(ops::bzmpop))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 2, 3>)
        .with_args(A_BZMPOP)
        .with_parts(Parts::Ends)
        .with_per_key(strata_node::keyspec::numkeys_after_timeout),
    cmd("zrandmember", -2, R, K_ZRANDMEMBER, "Get one or multiple random elements from a sorted set", "6.2.0", "O(N) where N is the number of elements returned", Handler::Shard(ops::zrandmember))
        .with_args(A_ZRANDMEMBER)
        .with_tips(&["nondeterministic_output"])
        .with_parts(Parts::Whole),
    cmd("zunion", -3, R, K_ZUNION, "Add multiple sorted sets", "6.2.0", "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", Handler::Keys(ops::zunion))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(A_ZUNION)
        .with_parts(Parts::Whole),
    cmd("zunionstore", -4, W.or(DENYOOM), K_ZUNIONSTORE, "Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", Handler::Keys(ops::zunionstore))
        .with_getkeys(strata_node::keyspec::counted_keys::<1, 2, 3>)
        .with_args(A_ZUNIONSTORE)
        .with_parts(Parts::Whole),
    cmd("zinter", -3, R, K_ZINTER, "Intersect multiple sorted sets", "6.2.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", Handler::Keys(ops::zinter))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(A_ZINTER)
        .with_parts(Parts::Whole),
    cmd("zinterstore", -4, W.or(DENYOOM), K_ZINTERSTORE, "Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", Handler::Keys(ops::zinterstore))
        .with_getkeys(strata_node::keyspec::counted_keys::<1, 2, 3>)
        .with_args(A_ZINTERSTORE)
        .with_parts(Parts::Whole),
    cmd("zintercard", -3, R, K_ZINTERCARD, "Intersect multiple sorted sets and return the cardinality of the result", "7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", Handler::Keys(ops::zintercard))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(A_ZINTERCARD)
        .with_parts(Parts::Whole),
    cmd("zdiff", -3, R, K_ZDIFF, "Subtract multiple sorted sets", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", Handler::Keys(ops::zdiff))
        .with_getkeys(strata_node::keyspec::counted_keys::<0, 1, 2>)
        .with_args(A_ZDIFF)
        .with_parts(Parts::Whole),
    cmd("zdiffstore", -4, W.or(DENYOOM), K_ZDIFFSTORE, "Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", Handler::Keys(ops::zdiffstore))
        .with_getkeys(strata_node::keyspec::counted_keys::<1, 2, 3>)
        .with_args(A_ZDIFFSTORE)
        .with_parts(Parts::Whole),
    cmd("zscan", -3, R, K_ZSCAN, "Incrementally iterate sorted sets elements and associated scores", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..", Handler::Shard(ops::zscan))
        .with_args(A_ZSCAN)
        .with_tips(&["nondeterministic_output"])
        .with_parts(Parts::Whole),
];
