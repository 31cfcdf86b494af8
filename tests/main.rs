mod harness;

mod atomicity;
mod keys;
mod lifecycle;
mod ordering;
mod protocol;
mod server;
mod strings;
mod zset;
