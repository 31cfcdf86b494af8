mod harness;

mod atomicity;
mod keys;
mod lifecycle;
mod protocol;
mod server;
mod strings;
