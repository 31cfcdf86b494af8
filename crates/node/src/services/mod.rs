//! The server's own commands and the work behind them, each written against the command context
//! (`crate::ctx`, `crate::state`) and the registries. Listed lowest first: a service imports only
//! services listed before it (`scripts/check-layers.sh`).

pub mod aof;
pub mod client_evict;
pub mod connection;
pub mod digest;
pub mod latency;
pub mod monitor;
pub mod multi;
pub mod persist;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod slowlog;
pub mod tracking;
