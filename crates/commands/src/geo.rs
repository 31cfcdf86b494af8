//! Geo commands (Redis's geo.c): GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE,
//! GEORADIUS, GEORADIUSBYMEMBER and their read-only variants.
//!
//! Points live in a sorted set whose scores are 52-bit geohashes ([`strata_core::geo`] has the
//! math). GEOADD is ZADD with computed scores (it runs ZADD's handler, as Redis does); every search
//! goes through [`search`], one port of Redis's `georadiusGeneric`: same argument walk, same errors
//! in the same order, same cells scanned in the same order, same sorting (a stable full sort, or
//! `pqsort`'s partial sort when COUNT cuts the result), same replies.
//!
//! Invariants:
//! * the source zset is looked up first (WRONGTYPE before any argument error), and a member named
//!   by FROMMEMBER/GEORADIUSBYMEMBER is decoded while the options are walked, as Redis does;
//! * the commands that may store (GEORADIUS, GEORADIUSBYMEMBER with STORE/STOREDIST, and
//!   GEOSEARCHSTORE) are `Handler::Keys`: the search runs on the source's shard, the result is
//!   stored on the destination's, both under the dispatcher's locks, so the command is atomic
//!   across shards;
//! * distances are replied with 4 decimals (`%.4f`), coordinates as Redis's human long double
//!   (`%.17Lf` without trailing zeros; a RESP3 double).
//!
//! GEORADIUS with STORE/STOREDIST repeated naming *different* keys: Redis writes the last, but its
//! key specs (which route and lock the command, here as in Redis Cluster) name the first; such a
//! line declares so (`writes_db`) and runs with its database locked exclusive on every shard.

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_core::geo::{self, Shape, ShapeKind};
use strata_core::ZSet;
use strata_resp::ReplyBuf;
use strata_shard::Db;

use crate::zset::ops::{parse_score, read, store, zadd};
use strata_node::args::eq_ci;
use strata_node::ctx::ShardCtx;
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::KeysCtx;
use strata_node::table::{Arg, CommandSpec, FindKeys, Flags, Handler, KeyFlags, KeySpec};

const R: Flags = Flags::READONLY;
const W: Flags = Flags::WRITE;
const DENYOOM: Flags = Flags::DENYOOM;

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
        "geo", name, arity, flags, keys, summary, since, complexity, handler,
    )
    .with_acl(&["@geo"])
}

// Key specs and COMMAND DOCS arguments, as Redis 7.0 declares them.
const GEOADD_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE))];
const GEOADD_CONDITION_ARGS: &[Arg] = &[Arg::pure_token("nx", "NX"), Arg::pure_token("xx", "XX")];
const GEOADD_LONGITUDE_LATITUDE_MEMBER_ARGS: &[Arg] = &[
    Arg::double("longitude"),
    Arg::double("latitude"),
    Arg::string("member"),
];
const GEOADD_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("condition", GEOADD_CONDITION_ARGS)
        .since("6.2.0")
        .optional(),
    Arg::pure_token("change", "CH").since("6.2.0").optional(),
    Arg::block(
        "longitude_latitude_member",
        GEOADD_LONGITUDE_LATITUDE_MEMBER_ARGS,
    )
    .multiple(),
];
const GEOADD_HISTORY: &[(&str, &str)] = &[("6.2.0", "Added the `CH`, `NX` and `XX` options.")];
const GEODIST_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEODIST_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEODIST_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("member1"),
    Arg::string("member2"),
    Arg::oneof("unit", GEODIST_UNIT_ARGS).optional(),
];
const GEOHASH_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEOHASH_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const GEOPOS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEOPOS_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("member").multiple()];
const GEORADIUS_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS)),
    KeySpec::keyword(
        "STORE",
        6,
        FindKeys::Range {
            lastkey: 0,
            step: 1,
            limit: 0,
        },
        KeyFlags::OW.or(KeyFlags::UPDATE),
    ),
    KeySpec::keyword(
        "STOREDIST",
        6,
        FindKeys::Range {
            lastkey: 0,
            step: 1,
            limit: 0,
        },
        KeyFlags::OW.or(KeyFlags::UPDATE),
    ),
];
const GEORADIUS_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEORADIUS_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").since("6.2.0").optional(),
];
const GEORADIUS_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEORADIUS_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::double("longitude"),
    Arg::double("latitude"),
    Arg::double("radius"),
    Arg::oneof("unit", GEORADIUS_UNIT_ARGS),
    Arg::pure_token("withcoord", "WITHCOORD").optional(),
    Arg::pure_token("withdist", "WITHDIST").optional(),
    Arg::pure_token("withhash", "WITHHASH").optional(),
    Arg::block("count", GEORADIUS_COUNT_ARGS).optional(),
    Arg::oneof("order", GEORADIUS_ORDER_ARGS).optional(),
    Arg::key("key", 1).with_token("STORE").optional(),
    Arg::key("key", 2).with_token("STOREDIST").optional(),
];
const GEORADIUS_HISTORY: &[(&str, &str)] = &[
    ("6.2.0", "Added the `ANY` option for `COUNT`."),
    ("7.0.0", "Added support for uppercase unit names."),
];
const GEORADIUSBYMEMBER_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS)),
    KeySpec::keyword(
        "STORE",
        5,
        FindKeys::Range {
            lastkey: 0,
            step: 1,
            limit: 0,
        },
        KeyFlags::OW.or(KeyFlags::UPDATE),
    ),
    KeySpec::keyword(
        "STOREDIST",
        5,
        FindKeys::Range {
            lastkey: 0,
            step: 1,
            limit: 0,
        },
        KeyFlags::OW.or(KeyFlags::UPDATE),
    ),
];
const GEORADIUSBYMEMBER_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEORADIUSBYMEMBER_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").optional(),
];
const GEORADIUSBYMEMBER_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEORADIUSBYMEMBER_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("member"),
    Arg::double("radius"),
    Arg::oneof("unit", GEORADIUSBYMEMBER_UNIT_ARGS),
    Arg::pure_token("withcoord", "WITHCOORD").optional(),
    Arg::pure_token("withdist", "WITHDIST").optional(),
    Arg::pure_token("withhash", "WITHHASH").optional(),
    Arg::block("count", GEORADIUSBYMEMBER_COUNT_ARGS).optional(),
    Arg::oneof("order", GEORADIUSBYMEMBER_ORDER_ARGS).optional(),
    Arg::key("key", 1).with_token("STORE").optional(),
    Arg::key("key", 2).with_token("STOREDIST").optional(),
];
const GEORADIUSBYMEMBER_HISTORY: &[(&str, &str)] =
    &[("7.0.0", "Added support for uppercase unit names.")];
const GEORADIUS_RO_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEORADIUS_RO_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEORADIUS_RO_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").since("6.2.0").optional(),
];
const GEORADIUS_RO_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEORADIUS_RO_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::double("longitude"),
    Arg::double("latitude"),
    Arg::double("radius"),
    Arg::oneof("unit", GEORADIUS_RO_UNIT_ARGS),
    Arg::pure_token("withcoord", "WITHCOORD").optional(),
    Arg::pure_token("withdist", "WITHDIST").optional(),
    Arg::pure_token("withhash", "WITHHASH").optional(),
    Arg::block("count", GEORADIUS_RO_COUNT_ARGS).optional(),
    Arg::oneof("order", GEORADIUS_RO_ORDER_ARGS).optional(),
];
const GEORADIUS_RO_HISTORY: &[(&str, &str)] = &[("6.2.0", "Added the `ANY` option for `COUNT`.")];
const GEORADIUSBYMEMBER_RO_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEORADIUSBYMEMBER_RO_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEORADIUSBYMEMBER_RO_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").optional(),
];
const GEORADIUSBYMEMBER_RO_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEORADIUSBYMEMBER_RO_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("member"),
    Arg::double("radius"),
    Arg::oneof("unit", GEORADIUSBYMEMBER_RO_UNIT_ARGS),
    Arg::pure_token("withcoord", "WITHCOORD").optional(),
    Arg::pure_token("withdist", "WITHDIST").optional(),
    Arg::pure_token("withhash", "WITHHASH").optional(),
    Arg::block("count", GEORADIUSBYMEMBER_RO_COUNT_ARGS).optional(),
    Arg::oneof("order", GEORADIUSBYMEMBER_RO_ORDER_ARGS).optional(),
];
const GEOSEARCH_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const GEOSEARCH_FROM_LONGITUDE_LATITUDE_ARGS: &[Arg] =
    &[Arg::double("longitude"), Arg::double("latitude")];
const GEOSEARCH_FROM_ARGS: &[Arg] = &[
    Arg::string("member").with_token("FROMMEMBER"),
    Arg::block("longitude_latitude", GEOSEARCH_FROM_LONGITUDE_LATITUDE_ARGS)
        .with_token("FROMLONLAT"),
];
const GEOSEARCH_BY_CIRCLE_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEOSEARCH_BY_CIRCLE_ARGS: &[Arg] = &[
    Arg::double("radius").with_token("BYRADIUS"),
    Arg::oneof("unit", GEOSEARCH_BY_CIRCLE_UNIT_ARGS),
];
const GEOSEARCH_BY_BOX_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEOSEARCH_BY_BOX_ARGS: &[Arg] = &[
    Arg::double("width").with_token("BYBOX"),
    Arg::double("height"),
    Arg::oneof("unit", GEOSEARCH_BY_BOX_UNIT_ARGS),
];
const GEOSEARCH_BY_ARGS: &[Arg] = &[
    Arg::block("circle", GEOSEARCH_BY_CIRCLE_ARGS),
    Arg::block("box", GEOSEARCH_BY_BOX_ARGS),
];
const GEOSEARCH_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEOSEARCH_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").optional(),
];
const GEOSEARCH_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::oneof("from", GEOSEARCH_FROM_ARGS),
    Arg::oneof("by", GEOSEARCH_BY_ARGS),
    Arg::oneof("order", GEOSEARCH_ORDER_ARGS).optional(),
    Arg::block("count", GEOSEARCH_COUNT_ARGS).optional(),
    Arg::pure_token("withcoord", "WITHCOORD").optional(),
    Arg::pure_token("withdist", "WITHDIST").optional(),
    Arg::pure_token("withhash", "WITHHASH").optional(),
];
const GEOSEARCH_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added support for uppercase unit names.")];
const GEOSEARCHSTORE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, KeyFlags::OW.or(KeyFlags::UPDATE)),
    KeySpec::at(2, KeyFlags::RO.or(KeyFlags::ACCESS)),
];
const GEOSEARCHSTORE_FROM_LONGITUDE_LATITUDE_ARGS: &[Arg] =
    &[Arg::double("longitude"), Arg::double("latitude")];
const GEOSEARCHSTORE_FROM_ARGS: &[Arg] = &[
    Arg::string("member").with_token("FROMMEMBER"),
    Arg::block(
        "longitude_latitude",
        GEOSEARCHSTORE_FROM_LONGITUDE_LATITUDE_ARGS,
    )
    .with_token("FROMLONLAT"),
];
const GEOSEARCHSTORE_BY_CIRCLE_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEOSEARCHSTORE_BY_CIRCLE_ARGS: &[Arg] = &[
    Arg::double("radius").with_token("BYRADIUS"),
    Arg::oneof("unit", GEOSEARCHSTORE_BY_CIRCLE_UNIT_ARGS),
];
const GEOSEARCHSTORE_BY_BOX_UNIT_ARGS: &[Arg] = &[
    Arg::pure_token("m", "M"),
    Arg::pure_token("km", "KM"),
    Arg::pure_token("ft", "FT"),
    Arg::pure_token("mi", "MI"),
];
const GEOSEARCHSTORE_BY_BOX_ARGS: &[Arg] = &[
    Arg::double("width").with_token("BYBOX"),
    Arg::double("height"),
    Arg::oneof("unit", GEOSEARCHSTORE_BY_BOX_UNIT_ARGS),
];
const GEOSEARCHSTORE_BY_ARGS: &[Arg] = &[
    Arg::block("circle", GEOSEARCHSTORE_BY_CIRCLE_ARGS),
    Arg::block("box", GEOSEARCHSTORE_BY_BOX_ARGS),
];
const GEOSEARCHSTORE_ORDER_ARGS: &[Arg] = &[
    Arg::pure_token("asc", "ASC"),
    Arg::pure_token("desc", "DESC"),
];
const GEOSEARCHSTORE_COUNT_ARGS: &[Arg] = &[
    Arg::integer("count").with_token("COUNT"),
    Arg::pure_token("any", "ANY").optional(),
];
const GEOSEARCHSTORE_ARGS: &[Arg] = &[
    Arg::key("destination", 0),
    Arg::key("source", 1),
    Arg::oneof("from", GEOSEARCHSTORE_FROM_ARGS),
    Arg::oneof("by", GEOSEARCHSTORE_BY_ARGS),
    Arg::oneof("order", GEOSEARCHSTORE_ORDER_ARGS).optional(),
    Arg::block("count", GEOSEARCHSTORE_COUNT_ARGS).optional(),
    Arg::pure_token("storedist", "STOREDIST").optional(),
];
const GEOSEARCHSTORE_HISTORY: &[(&str, &str)] =
    &[("7.0.0", "Added support for uppercase unit names.")];

/// The family's commands.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("geoadd", -5, W.or(DENYOOM), GEOADD_KEYS,
        "Add one or more geospatial items in the geospatial index represented using a sorted set", "3.2.0",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        Handler::Shard(geoadd))
        .with_args(GEOADD_ARGS)
        .with_history(GEOADD_HISTORY),
    cmd("geodist", -4, R, GEODIST_KEYS,
        "Returns the distance between two members of a geospatial index", "3.2.0",
        "O(log(N))",
        Handler::Shard(geodist))
        .with_args(GEODIST_ARGS),
    cmd("geohash", -2, R, GEOHASH_KEYS,
        "Returns members of a geospatial index as standard geohash strings", "3.2.0",
        "O(log(N)) for each member requested, where N is the number of elements in the sorted set.",
        Handler::Shard(geohash))
        .with_args(GEOHASH_ARGS),
    cmd("geopos", -2, R, GEOPOS_KEYS,
        "Returns longitude and latitude of members of a geospatial index", "3.2.0",
        "O(N) where N is the number of members requested.",
        Handler::Shard(geopos))
        .with_args(GEOPOS_ARGS),
    cmd("georadius", -6, W.or(DENYOOM), GEORADIUS_KEYS,
        "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point", "3.2.0",
        "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        Handler::Keys(georadius))
        .with_writes_db(stores_elsewhere)
        .with_args(GEORADIUS_ARGS)
        .with_history(GEORADIUS_HISTORY)
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument"),
    cmd("georadiusbymember", -5, W.or(DENYOOM), GEORADIUSBYMEMBER_KEYS,
        "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member", "3.2.0",
        "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        Handler::Keys(georadiusbymember))
        .with_writes_db(stores_elsewhere)
        .with_args(GEORADIUSBYMEMBER_ARGS)
        .with_history(GEORADIUSBYMEMBER_HISTORY)
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments"),
    cmd("georadius_ro", -6, R, GEORADIUS_RO_KEYS,
        "A read-only variant for GEORADIUS", "3.2.10",
        "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        Handler::Shard(georadius_ro))
        .with_args(GEORADIUS_RO_ARGS)
        .with_history(GEORADIUS_RO_HISTORY)
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` argument"),
    cmd("georadiusbymember_ro", -5, R, GEORADIUSBYMEMBER_RO_KEYS,
        "A read-only variant for GEORADIUSBYMEMBER", "3.2.10",
        "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        Handler::Shard(georadiusbymember_ro))
        .with_args(GEORADIUSBYMEMBER_RO_ARGS)
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments"),
    cmd("geosearch", -7, R, GEOSEARCH_KEYS,
        "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.", "6.2.0",
        "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        Handler::Shard(geosearch))
        .with_args(GEOSEARCH_ARGS)
        .with_history(GEOSEARCH_HISTORY),
    cmd("geosearchstore", -8, W.or(DENYOOM), GEOSEARCHSTORE_KEYS,
        "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.", "6.2.0",
        "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        Handler::Keys(geosearchstore))
        .with_args(GEOSEARCHSTORE_ARGS)
        .with_history(GEOSEARCHSTORE_HISTORY),
];

// ===== arguments =====

const UNIT_ERR: CmdError = CmdError::msg("ERR unsupported unit provided. please use M, KM, FT, MI");
const MEMBER_ERR: CmdError = CmdError::msg("ERR could not decode requested zset member");

/// A number as Redis's `getDoubleFromObjectOrReply` reads it, failing with `err`.
fn number(a: &[u8], err: CmdError) -> Result<f64, CmdError> {
    parse_score(a).ok_or(err)
}

/// `[longitude, latitude]` from two arguments (`extractLongLatOrReply`).
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let x = number(lon, CmdError::NotFloat)?;
    let y = number(lat, CmdError::NotFloat)?;
    if !(geo::LONG_MIN..=geo::LONG_MAX).contains(&x) || !(geo::LAT_MIN..=geo::LAT_MAX).contains(&y)
    {
        return Err(CmdError::Msg(
            format!("ERR invalid longitude,latitude pair {x:.6},{y:.6}").into(),
        ));
    }
    Ok([x, y])
}

/// Meters per unit (`extractUnitOrReply`).
fn unit(u: &[u8]) -> Result<f64, CmdError> {
    if eq_ci(u, "m") {
        Ok(1.0)
    } else if eq_ci(u, "km") {
        Ok(1000.0)
    } else if eq_ci(u, "ft") {
        Ok(0.3048)
    } else if eq_ci(u, "mi") {
        Ok(1609.34)
    } else {
        Err(UNIT_ERR)
    }
}

/// `radius unit` → (radius, meters per unit) (`extractDistanceOrReply`).
fn radius(args: &[Bytes]) -> Result<(f64, f64), CmdError> {
    let r = number(&args[0], CmdError::msg("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::msg("ERR radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// `width height unit` → (width, height, meters per unit) (`extractBoxOrReply`).
fn bbox(args: &[Bytes]) -> Result<(f64, f64, f64), CmdError> {
    let w = number(&args[0], CmdError::msg("ERR need numeric width"))?;
    let h = number(&args[1], CmdError::msg("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::msg("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(&args[2])?))
}

/// The position of `member` in `z` (`longLatFromMember`).
fn member_pos(z: &ZSet, member: &[u8]) -> Result<[f64; 2], CmdError> {
    z.score(member).map(geo::decode_score).ok_or(MEMBER_ERR)
}

// ===== replies =====

/// A distance as `addReplyDoubleDistance` sends it: a bulk string with 4 decimals, rounded as
/// Redis's `fixedpoint_d2string` rounds (`llrint(d * 10000)`: the product in double precision,
/// ties to even), not from the exact decimal expansion.
fn reply_distance(out: &mut ReplyBuf, d: f64) {
    let scaled = d * 10000.0;
    if !scaled.is_finite() || scaled.abs() >= 9.0e18 {
        out.bulk(format!("{d:.4}").as_bytes());
        return;
    }
    let n = scaled.round_ties_even() as i64;
    let sign = if n < 0 { "-" } else { "" };
    let n = n.unsigned_abs();
    out.bulk(format!("{sign}{}.{:04}", n / 10000, n % 10000).as_bytes());
}

/// `%.17Lf` of the value, trailing zeros and point removed, "-0" as "0" (`LD_STR_HUMAN`).
fn human(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let mut s = format!("{v:.17}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A coordinate as `addReplyHumanLongDouble` sends it.
fn reply_coord(out: &mut ReplyBuf, v: f64) {
    out.double_text(&human(v));
}

// ===== GEOADD =====

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...] → ZADD's
/// reply. The positions become scores and ZADD does the rest, as in Redis.
pub fn geoadd(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let (mut nx, mut xx, mut longidx) = (false, false, 2);
    while longidx < args.len() {
        let o = &args[longidx];
        if eq_ci(o, "nx") {
            nx = true;
        } else if eq_ci(o, "xx") {
            xx = true;
        } else if !eq_ci(o, "ch") {
            break;
        }
        longidx += 1;
    }
    if !(args.len() - longidx).is_multiple_of(3) || (xx && nx) {
        return Err(CmdError::Syntax);
    }
    let mut zargs: Vec<Bytes> = Vec::with_capacity(longidx + (args.len() - longidx) / 3 * 2);
    zargs.push(Bytes::from_static(b"zadd"));
    zargs.extend(args[1..longidx].iter().cloned());
    for t in args[longidx..].chunks_exact(3) {
        let [x, y] = lon_lat(&t[0], &t[1])?;
        let score = geo::score_of(x, y).ok_or(CmdError::NotFloat)?;
        zargs.push(Bytes::from((score as u64).to_string()));
        zargs.push(t[2].clone());
    }
    let mut zcx = ShardCtx {
        shard: &mut *cx.shard,
        db: cx.db,
        args: &zargs,
        out: &mut *cx.out,
        now: cx.now,
        park: None,
    };
    zadd(&mut zcx)
}

// ===== GEODIST / GEOHASH / GEOPOS =====

/// GEODIST key member1 member2 [M|KM|FT|MI] → the distance, or null if a member is missing.
pub fn geodist(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let to_meter = match args.len() {
        5 => unit(&args[4])?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let now = cx.now;
    let Some(z) = read(cx.shard.db_mut(cx.db), &args[1], now)? else {
        cx.out.null();
        return Ok(());
    };
    match (z.score(&args[2]), z.score(&args[3])) {
        (Some(a), Some(b)) => {
            let [x1, y1] = geo::decode_score(a);
            let [x2, y2] = geo::decode_score(b);
            reply_distance(cx.out, geo::distance(x1, y1, x2, y2) / to_meter);
        }
        _ => cx.out.null(),
    }
    Ok(())
}

/// GEOHASH key [member ...] → an 11-character geohash, or null, per member.
pub fn geohash(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let now = cx.now;
    let z = read(cx.shard.db_mut(cx.db), &args[1], now)?;
    cx.out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => cx.out.bulk(&geo::geohash_string(s)),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// GEOPOS key [member ...] → [longitude, latitude], or a null array, per member.
pub fn geopos(cx: &mut ShardCtx<'_>) -> CmdResult {
    let args = cx.args;
    let now = cx.now;
    let z = read(cx.shard.db_mut(cx.db), &args[1], now)?;
    cx.out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let [x, y] = geo::decode_score(s);
                cx.out.array(2);
                reply_coord(cx.out, x);
                reply_coord(cx.out, y);
            }
            None => cx.out.null_array(),
        }
    }
    Ok(())
}

// ===== searches =====

/// Which search command is running (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum From {
    /// GEORADIUS[_RO] key longitude latitude radius unit ...
    Coords,
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    Member,
    /// GEOSEARCH key ... / GEOSEARCHSTORE dst src ...
    Search,
}

#[derive(Clone, Copy)]
struct Variant {
    from: From,
    /// The _RO variants: no STORE/STOREDIST.
    nostore: bool,
    /// GEOSEARCHSTORE.
    searchstore: bool,
}

/// A point found by a search, its member still borrowed from the sorted set (only the members
/// that survive COUNT are copied out).
struct Point<'a> {
    member: &'a [u8],
    score: f64,
    xy: [f64; 2],
    /// From the centre, in the request's unit once the search is done.
    dist: f64,
}

/// A point of a reply: its member is `names[name.0..name.1]` of the reply's name buffer (one
/// buffer per search rather than one allocation per point).
struct Found {
    name: (usize, usize),
    score: f64,
    xy: [f64; 2],
    dist: f64,
}

/// What a search answers: points to reply with, or elements to store (at argument `key`).
enum Outcome {
    Reply {
        points: Vec<Found>,
        names: Vec<u8>,
        withdist: bool,
        withhash: bool,
        withcoord: bool,
    },
    Store {
        key: usize,
        elems: Vec<(Bytes, f64)>,
    },
}

/// Redis's `georadiusGeneric` up to the reply: parses `args` against the source zset in `db`,
/// scans it, sorts and cuts the result.
fn search(db: &mut Db, now: i64, args: &[Bytes], v: Variant) -> Result<Outcome, CmdError> {
    let src = if v.searchstore { 2 } else { 1 };
    let z = read(db, &args[src], now)?;
    let geosearch = v.from == From::Search;
    let mut store: Option<usize> = None;
    let mut storedist = false;
    let mut center = [0.0, 0.0];
    let mut conversion = 1.0;
    let mut kind = ShapeKind::Circle { radius: 0.0 };
    let base = match v.from {
        From::Coords => {
            center = lon_lat(&args[2], &args[3])?;
            let (r, c) = radius(&args[4..6])?;
            (kind, conversion) = (ShapeKind::Circle { radius: r }, c);
            6
        }
        From::Member => {
            if let Some(z) = z {
                center = member_pos(z, &args[2])?;
                let (r, c) = radius(&args[3..5])?;
                (kind, conversion) = (ShapeKind::Circle { radius: r }, c);
            }
            5
        }
        From::Search if v.searchstore => {
            store = Some(1);
            3
        }
        From::Search => 2,
    };
    let (mut withdist, mut withhash, mut withcoord) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort: Option<bool> = None; // Some(true) ascending
    let mut any = false;
    let mut count: i64 = 0;
    let rest = &args[base.min(args.len())..];
    let remaining = rest.len();
    let mut i = 0;
    while i < remaining {
        let a = &rest[i];
        if eq_ci(a, "withdist") {
            withdist = true;
        } else if eq_ci(a, "withhash") {
            withhash = true;
        } else if eq_ci(a, "withcoord") {
            withcoord = true;
        } else if eq_ci(a, "any") {
            any = true;
        } else if eq_ci(a, "asc") {
            sort = Some(true);
        } else if eq_ci(a, "desc") {
            sort = Some(false);
        } else if eq_ci(a, "count") && i + 1 < remaining {
            count = strata_core::num::parse_i64(&rest[i + 1]).ok_or(CmdError::NotInteger)?;
            if count <= 0 {
                return Err(CmdError::msg("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ci(a, "store") || eq_ci(a, "storedist"))
            && i + 1 < remaining
            && !v.nostore
            && !geosearch
        {
            store = Some(base + i + 1);
            storedist = eq_ci(a, "storedist");
            i += 1;
        } else if eq_ci(a, "storedist") && geosearch && v.searchstore {
            storedist = true;
        } else if eq_ci(a, "frommember") && i + 1 < remaining && geosearch && !fromloc {
            if let Some(z) = z {
                center = member_pos(z, &rest[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if eq_ci(a, "fromlonlat") && i + 2 < remaining && geosearch && !frommember {
            center = lon_lat(&rest[i + 1], &rest[i + 2])?;
            fromloc = true;
            i += 2;
        } else if eq_ci(a, "byradius") && i + 2 < remaining && geosearch && !bybox {
            let (r, c) = radius(&rest[i + 1..i + 3])?;
            (kind, conversion) = (ShapeKind::Circle { radius: r }, c);
            byradius = true;
            i += 2;
        } else if eq_ci(a, "bybox") && i + 3 < remaining && geosearch && !byradius {
            let (w, h, c) = bbox(&rest[i + 1..i + 4])?;
            (kind, conversion) = (
                ShapeKind::Box {
                    width: w,
                    height: h,
                },
                c,
            );
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let name = || String::from_utf8_lossy(&args[0]).into_owned();
    if store.is_some() && (withdist || withhash || withcoord) {
        return Err(CmdError::Msg(
            format!(
                "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                if v.searchstore {
                    "GEOSEARCHSTORE"
                } else {
                    "STORE option in GEORADIUS"
                }
            )
            .into(),
        ));
    }
    if geosearch && !(frommember || fromloc) {
        return Err(CmdError::Msg(
            format!(
                "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
                name()
            )
            .into(),
        ));
    }
    if geosearch && !(byradius || bybox) {
        return Err(CmdError::Msg(
            format!(
                "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
                name()
            )
            .into(),
        ));
    }
    if any && count == 0 {
        return Err(CmdError::msg(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    let Some(z) = z else {
        return Ok(match store {
            Some(key) => Outcome::Store {
                key,
                elems: Vec::new(),
            },
            None => Outcome::Reply {
                points: Vec::new(),
                names: Vec::new(),
                withdist,
                withhash,
                withcoord,
            },
        });
    };
    if count != 0 && sort.is_none() && !any {
        sort = Some(true);
    }
    let shape = Shape {
        longitude: center[0],
        latitude: center[1],
        conversion,
        kind,
    };
    let limit = if any { count as usize } else { 0 };
    let mut points = collect(z, &shape, limit);
    let returned = if count == 0 || (points.len() as i64) < count {
        points.len()
    } else {
        count as usize
    };
    if let Some(asc) = sort {
        let cmp = |a: &Point, b: &Point| {
            let o = if a.dist > b.dist {
                std::cmp::Ordering::Greater
            } else if a.dist == b.dist {
                std::cmp::Ordering::Equal
            } else {
                std::cmp::Ordering::Less
            };
            if asc {
                o
            } else {
                o.reverse()
            }
        };
        if returned == points.len() {
            points.sort_by(cmp);
        } else {
            geo::partial_sort(&mut points, returned - 1, &cmp);
        }
    }
    points.truncate(returned);
    for p in &mut points {
        p.dist /= conversion;
    }
    Ok(match store {
        Some(key) => Outcome::Store {
            key,
            elems: points
                .into_iter()
                .map(|p| {
                    let score = if storedist { p.dist } else { p.score };
                    (Bytes::copy_from_slice(p.member), score)
                })
                .collect(),
        },
        None => {
            let mut names = Vec::with_capacity(points.iter().map(|p| p.member.len()).sum());
            let points = points
                .into_iter()
                .map(|p| {
                    let at = names.len();
                    names.extend_from_slice(p.member);
                    Found {
                        name: (at, names.len()),
                        score: p.score,
                        xy: p.xy,
                        dist: p.dist,
                    }
                })
                .collect();
            Outcome::Reply {
                points,
                names,
                withdist,
                withhash,
                withcoord,
            }
        }
    })
}

/// The points of `z` inside `shape`, cell by cell in Redis's order, each cell in score order;
/// at most `limit` of them when `limit` > 0 (`membersOfAllNeighbors`).
fn collect<'a>(z: &'a ZSet, shape: &Shape, limit: usize) -> Vec<Point<'a>> {
    let mut out: Vec<Point<'a>> = Vec::new();
    for cell in shape.cells() {
        if limit > 0 && out.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        z.walk_from(
            |_, s| s < min,
            |m, s| {
                if s >= max {
                    return false;
                }
                if let Some((xy, dist)) = shape.contains(s) {
                    out.push(Point {
                        member: m,
                        score: s,
                        xy,
                        dist,
                    });
                }
                limit == 0 || out.len() < limit
            },
        );
    }
    out
}

fn reply_points(out: &mut ReplyBuf, outcome: Outcome) {
    let Outcome::Reply {
        points,
        names,
        withdist,
        withhash,
        withcoord,
    } = outcome
    else {
        return;
    };
    let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
    out.array(points.len());
    for p in points {
        if options > 0 {
            out.array(options + 1);
        }
        out.bulk(&names[p.name.0..p.name.1]);
        if withdist {
            reply_distance(out, p.dist);
        }
        if withhash {
            out.int(p.score as i64);
        }
        if withcoord {
            out.array(2);
            reply_coord(out, p.xy[0]);
            reply_coord(out, p.xy[1]);
        }
    }
}

/// A search that never stores, on the source's shard.
fn search_here(cx: &mut ShardCtx<'_>, v: Variant) -> CmdResult {
    let now = cx.now;
    let outcome = search(cx.shard.db_mut(cx.db), now, cx.args, v)?;
    reply_points(cx.out, outcome);
    Ok(())
}

/// A search that may store: searched on the source's shard, stored on the destination's.
async fn search_keyed(cx: &mut KeysCtx<'_>, v: Variant) -> CmdResult {
    let (db, now) = (cx.db, cx.now);
    let args: Vec<Bytes> = cx.args.to_vec();
    let src = if v.searchstore { 2 } else { 1 };
    let src_key = cx.args[src].clone();
    let outcome = cx
        .on(&src_key, move |s| search(s.db_mut(db), now, &args, v))
        .await?;
    let (key, elems) = match outcome {
        Outcome::Store { key, elems } => (key, elems),
        reply => {
            reply_points(cx.out, reply);
            return Ok(());
        }
    };
    // The dispatcher locked (and routed by) the keys the key specs find; with STORE or STOREDIST
    // repeated, the last one (which Redis writes) may name another key: then `stores_elsewhere`
    // had the database locked exclusive on every shard, so writing it here is still atomic.
    let dst = cx.args[key].clone();
    let n = elems.len();
    let dst_key = dst.clone();
    let event = if v.searchstore {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    cx.on(&dst_key, move |s| {
        let db = s.db_mut(db);
        let mark = db.dirty();
        store(db, &dst, &elems, event, now);
        // Redis counts one change per point stored (a deleted destination: one).
        if !elems.is_empty() {
            db.count_changes_since(mark, elems.len() as u64);
        }
    })
    .await;
    cx.out.int(n as i64);
    Ok(())
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]
/// GEORADIUS/GEORADIUSBYMEMBER naming more than one distinct STORE/STOREDIST key: Redis's key
/// specs name the first, Redis writes the last, so the command may write a key it has not locked
/// (see [`strata_commands::table::CommandSpec::writes_db`]). Errs on the side of true: a key
/// literally named "store" only costs a database-wide lock.
fn stores_elsewhere(args: &[Bytes]) -> bool {
    let mut first: Option<&Bytes> = None;
    for (i, a) in args.iter().enumerate().skip(2) {
        if strata_node::args::eq_ci(a, "store") || strata_node::args::eq_ci(a, "storedist") {
            if let Some(k) = args.get(i + 1) {
                match first {
                    None => first = Some(k),
                    Some(f) if f != k => return true,
                    Some(_) => {}
                }
            }
        }
    }
    false
}

pub fn georadius<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    let v = Variant {
        from: From::Coords,
        nostore: false,
        searchstore: false,
    };
    Box::pin(search_keyed(cx, v))
}

/// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [options as GEORADIUS]
pub fn georadiusbymember<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    let v = Variant {
        from: From::Member,
        nostore: false,
        searchstore: false,
    };
    Box::pin(search_keyed(cx, v))
}

/// GEOSEARCHSTORE destination source FROMMEMBER member|FROMLONLAT longitude latitude
/// BYRADIUS radius unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [STOREDIST]
/// → the number of members stored.
pub fn geosearchstore<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    let v = Variant {
        from: From::Search,
        nostore: false,
        searchstore: true,
    };
    Box::pin(search_keyed(cx, v))
}

/// GEORADIUS_RO: GEORADIUS without STORE.
pub fn georadius_ro(cx: &mut ShardCtx<'_>) -> CmdResult {
    search_here(
        cx,
        Variant {
            from: From::Coords,
            nostore: true,
            searchstore: false,
        },
    )
}

/// GEORADIUSBYMEMBER_RO: GEORADIUSBYMEMBER without STORE.
pub fn georadiusbymember_ro(cx: &mut ShardCtx<'_>) -> CmdResult {
    search_here(
        cx,
        Variant {
            from: From::Member,
            nostore: true,
            searchstore: false,
        },
    )
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius unit|BYBOX
/// width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
pub fn geosearch(cx: &mut ShardCtx<'_>) -> CmdResult {
    search_here(
        cx,
        Variant {
            from: From::Search,
            nostore: false,
            searchstore: false,
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    fn sicily(s: &mut strata_shard::Shard) {
        let add = [
            "geoadd",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ];
        assert_eq!(run(s, &add), ":2");
    }

    #[test]
    fn positions_hashes_and_distances() {
        let mut s = shard();
        sicily(&mut s);
        assert_eq!(
            run(&mut s, &["geodist", "Sicily", "Palermo", "Catania", "km"]),
            "$8:166.2742"
        );
        assert_eq!(
            run(&mut s, &["geohash", "Sicily", "Palermo", "none"]),
            "*2[$11:sqc8b49rny0,$-1]"
        );
        assert_eq!(
            run(&mut s, &["geopos", "Sicily", "Catania", "none"]),
            "*2[*2[$20:15.08726745843887329,$20:37.50266842333162032],*-1]"
        );
        assert_eq!(
            run(&mut s, &["zscore", "Sicily", "Palermo"]),
            "$16:3479099956230698"
        );
    }

    #[test]
    fn searches_sort_count_and_store() {
        let mut s = shard();
        sicily(&mut s);
        assert_eq!(
            run(
                &mut s,
                &[
                    "georadius",
                    "Sicily",
                    "15",
                    "37",
                    "200",
                    "km",
                    "WITHDIST",
                    "ASC"
                ]
            ),
            "*2[*2[$7:Catania,$7:56.4413],*2[$7:Palermo,$8:190.4424]]"
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "geosearch",
                    "Sicily",
                    "FROMLONLAT",
                    "15",
                    "37",
                    "BYBOX",
                    "400",
                    "400",
                    "km",
                    "DESC",
                    "COUNT",
                    "1"
                ]
            ),
            "*1[$7:Palermo]"
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "geosearchstore",
                    "d",
                    "Sicily",
                    "FROMMEMBER",
                    "Palermo",
                    "BYRADIUS",
                    "300",
                    "km",
                    "STOREDIST"
                ]
            ),
            ":2"
        );
        assert_eq!(
            run(&mut s, &["zrange", "d", "0", "-1", "WITHSCORES"]),
            "*4[$7:Palermo,$1:0,$7:Catania,$18:166.27415156960032]"
        );
    }

    #[test]
    fn errors_in_redis_words() {
        let mut s = shard();
        sicily(&mut s);
        assert_eq!(
            run(&mut s, &["geoadd", "Sicily", "200", "100", "x"]),
            "-ERR invalid longitude,latitude pair 200.000000,100.000000"
        );
        assert_eq!(
            run(&mut s, &["geoadd", "Sicily", "nx", "xx", "1", "2", "x"]),
            "-ERR syntax error"
        );
        assert_eq!(
            run(&mut s, &["geodist", "Sicily", "a", "b", "yd"]),
            "-ERR unsupported unit provided. please use M, KM, FT, MI"
        );
        assert_eq!(
            run(
                &mut s,
                &[
                    "geosearch",
                    "Sicily",
                    "BYRADIUS",
                    "1",
                    "m",
                    "ASC",
                    "WITHDIST"
                ]
            ),
            "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"
        );
        assert_eq!(
            run(&mut s, &["georadius", "Sicily", "1", "2", "1", "m", "ANY"]),
            "-ERR the ANY argument requires COUNT argument"
        );
        assert_eq!(
            run(&mut s, &["georadiusbymember", "Sicily", "none", "1", "m"]),
            "-ERR could not decode requested zset member"
        );
        run(&mut s, &["set", "str", "x"]);
        assert_eq!(
            run(&mut s, &["geosearch", "str", "bogus", "1", "2", "3", "4"]),
            "-WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }
}
