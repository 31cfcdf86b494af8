//! Pure data structures of Strata. Nothing here knows about threads, sockets or commands.
//!
//! * [`entry`]: one key and its value packed into a single heap allocation (the keyspace's unit of memory).
//! * [`dict`]: the chained hash table holding entries, with Redis's reverse-binary SCAN cursor.
//! * [`slot`]: key → hash slot (CRC16-XMODEM of the key or its `{hashtag}`, mod 16384).
//! * [`glob`]: Redis-compatible glob matching for KEYS / SCAN MATCH.
//! * [`num`]: integer and float parsing/formatting with Redis's exact acceptance rules.
//! * [`long_double`]: Redis's `long double` INCRBYFLOAT arithmetic, emulated exactly.
//! * [`hash`], [`list`], [`set`], [`zset`]: the collection values, compact while small.
//! * [`limits`]: their encoding thresholds (the redis.conf `*-max-listpack-*` settings).
//! * [`bitops`], [`hll`]: bitmap and HyperLogLog algorithms over string values, byte-exact to Redis.

pub mod bitops;
pub mod dict;
pub mod entry;
pub mod geo;
pub mod glob;
pub mod hash;
pub mod histogram;
pub mod hll;
pub mod limits;
pub mod list;
pub mod long_double;
pub mod lzf;
pub mod num;
pub mod pack;
pub mod set;
pub mod slot;
pub mod zset;

pub use dict::{Dict, Drain, TableStats};
pub use entry::{Entry, Object, Value, ValueRef};
pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use zset::ZSet;
