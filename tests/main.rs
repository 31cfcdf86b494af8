mod harness;

mod atomicity;
mod blocking;
mod hash;
mod keys;
mod lifecycle;
mod list;
mod multi;
mod ordering;
mod protocol;
mod pubsub;
mod server;
mod set;
mod sort;
mod strings;
mod zset;
