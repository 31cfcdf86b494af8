//! Command errors and their exact Redis texts, in one place.

use std::borrow::Cow;

/// Why a command failed. [`CmdError::message`] is the reply text (with its error code), identical
/// to Redis's so that clients matching on it keep working.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    WrongType,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR syntax error`
    Syntax,
    /// `ERR no such key`
    NoSuchKey,
    /// `ERR index out of range`
    OutOfRange,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `NOAUTH Authentication required.`
    NoAuth,
    /// `ERR wrong number of arguments for '<cmd>' command`
    WrongArity(String),
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand { cmd: String, sub: String },
    /// Any other message, complete with its code (e.g. "ERR ...", "BUSYKEY ...").
    Msg(Cow<'static, str>),
}

/// An argument as Redis echoes it inside an error text: Redis formats it with `%s`, which stops at
/// the first NUL byte, so only the bytes before it show (lossily, as text).
pub fn echo(arg: &[u8]) -> Cow<'_, str> {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    String::from_utf8_lossy(&arg[..end])
}

/// [`echo`] of at most the first 128 bytes of `arg` (Redis's `%.128s`, for command and subcommand
/// names in its "unknown ..." errors).
pub fn echo_128(arg: &[u8]) -> Cow<'_, str> {
    echo(&arg[..arg.len().min(128)])
}

/// A command's outcome: its reply was written to the reply buffer, or it failed with an error.
pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    /// An error with a fixed text (must include its code, e.g. "ERR ...").
    pub const fn msg(text: &'static str) -> CmdError {
        CmdError::Msg(Cow::Borrowed(text))
    }

    /// The reply text, exactly as Redis words it (without the leading '-').
    pub fn message(&self) -> Cow<'_, str> {
        match self {
            CmdError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            }
            CmdError::NotInteger => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::OutOfRange => "ERR index out of range".into(),
            CmdError::DbIndexOutOfRange => "ERR DB index is out of range".into(),
            CmdError::InvalidExpire(cmd) => {
                format!("ERR invalid expire time in '{cmd}' command").into()
            }
            CmdError::NoAuth => "NOAUTH Authentication required.".into(),
            CmdError::WrongArity(cmd) => {
                format!("ERR wrong number of arguments for '{cmd}' command").into()
            }
            CmdError::UnknownSubcommand { cmd, sub } => format!(
                "ERR unknown subcommand '{sub}'. Try {} HELP.",
                cmd.to_uppercase()
            )
            .into(),
            CmdError::Msg(m) => m.as_ref().into(),
        }
    }
}

/// A HyperLogLog whose bytes do not add up (strata_core::hll), in Redis's words.
impl From<strata_core::hll::Corrupt> for CmdError {
    fn from(_: strata_core::hll::Corrupt) -> CmdError {
        CmdError::msg("INVALIDOBJ Corrupted HLL object detected")
    }
}
