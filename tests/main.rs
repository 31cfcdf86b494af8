mod harness;

mod atomicity;
mod keys;
mod protocol;
mod server;
mod strings;
