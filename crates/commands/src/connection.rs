//! Connection commands: PING, ECHO, SELECT, HELLO, AUTH, CLIENT, QUIT, RESET.

use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::table::{CommandSpec, Flags, Handler, KeySpec};

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: KeySpec::NONE,
        group: "connection",
        summary,
        since,
        complexity: "O(1)",
        acl: &[],
        tips: &[],
        handler,
        subcommands: &[],
    }
}

/// The connection family.
pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "ping",
        -1,
        Flags::FAST,
        "Returns the server's liveliness response.",
        "1.0.0",
        Handler::Conn(ping),
    ),
    cmd(
        "echo",
        2,
        Flags::FAST,
        "Returns the given string.",
        "1.0.0",
        Handler::Conn(echo),
    ),
    cmd(
        "select",
        2,
        Flags::LOADING.or(Flags::STALE).or(Flags::FAST),
        "Changes the selected database.",
        "1.0.0",
        Handler::Conn(select),
    ),
];

fn ping(cx: &mut ConnCtx<'_>) -> CmdResult {
    match cx.args.len() {
        1 => cx.out.simple("PONG"),
        2 => cx.out.bulk(&cx.args[1]),
        _ => return Err(CmdError::WrongArity("ping".into())),
    }
    Ok(())
}

fn echo(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.bulk(&cx.args[1]);
    Ok(())
}

fn select(cx: &mut ConnCtx<'_>) -> CmdResult {
    let db = cx.args_from(1).next_i64()?;
    let max = cx.server.config.get_i64("databases");
    if db < 0 || db >= max {
        return Err(CmdError::DbIndexOutOfRange);
    }
    cx.session.select(db as usize);
    cx.out.ok();
    Ok(())
}
