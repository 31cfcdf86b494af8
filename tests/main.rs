mod harness;

mod atomicity;
mod blocking;
mod geo;
mod hash;
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
