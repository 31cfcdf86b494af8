mod harness;

mod atomicity;
mod bitmap;
mod blocking;
mod hash;
mod hll;
mod keys;
mod lifecycle;
mod list;
mod ordering;
mod protocol;
mod server;
mod set;
mod sort;
mod strings;
mod zset;
