//! The Redis wire protocol (RESP2 and RESP3), and nothing else: this crate knows no command, key or
//! connection.
//!
//! Data flow: the connection reads bytes into a `BytesMut`, and [`RequestParser::next`] cuts complete
//! requests off its front as vectors of `Bytes` arguments that share the read buffer's memory (bulk
//! arguments are never copied). A handler answers through a [`ReplyBuf`], which encodes straight into
//! the output byte vector for the protocol version the client chose with `HELLO`.
//!
//! Invariants, each enforced by tests in its module:
//! - no input makes the parser panic, and nothing it allocates is sized by a length the client claimed
//!   before the claimed bytes arrived;
//! - the requests (and the protocol error, if any) read from a byte stream do not depend on how the
//!   stream was split into reads, and parsing is linear in the bytes received;
//! - protocol error texts and reply bytes are exactly Redis 7.0's.

pub mod parse;
pub mod reply;

pub use parse::{ParseLimits, ProtocolError, RequestParser};
pub use reply::{Protocol, ReplyBuf};
