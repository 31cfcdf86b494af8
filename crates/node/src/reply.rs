//! Replies several commands share: the HELP text of a container and the error of an unknown
//! subcommand of a command that parses its own.

use bytes::Bytes;
use strata_resp::ReplyBuf;

use crate::error::{echo_128, CmdError};

/// Redis's help reply: `<CMD> <subcommand> ...` header, the lines, and the HELP footer, each a
/// status reply.
pub fn reply_help(out: &mut ReplyBuf, cmd: &[u8], lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        String::from_utf8_lossy(cmd).to_ascii_uppercase()
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CMD> HELP.`, for
/// commands that parse their own subcommands (DEBUG).
pub fn subcommand_syntax_error(args: &[Bytes]) -> CmdError {
    let sub = echo_128(&args[1]);
    CmdError::Msg(
        format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {} HELP.",
            String::from_utf8_lossy(&args[0]).to_ascii_uppercase()
        )
        .into(),
    )
}
