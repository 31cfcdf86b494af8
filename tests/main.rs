mod harness;

mod atomicity;
mod keys;
mod lifecycle;
mod list;
mod ordering;
mod protocol;
mod server;
mod strings;
