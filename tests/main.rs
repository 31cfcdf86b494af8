mod harness;

mod atomicity;
mod protocol;
