//! Connection commands: PING, ECHO, SELECT, HELLO, AUTH, QUIT, RESET and the CLIENT container
//! (Redis's networking.c and the connection parts of server.c).
//!
//! Everything here runs on the connection's own thread (`Handler::Conn`) and touches only its
//! [`Session`](crate::Session), its shared [`ClientInfo`] and, for CLIENT LIST/KILL, the server's
//! client registry. The connection layer owns what happens around a command: NOAUTH gating of
//! commands without `no_auth`, suppressing replies under CLIENT REPLY OFF/SKIP, and closing the
//! socket once `close_after_reply` (QUIT, CLIENT KILL of oneself) has been answered.
//!
//! Authentication: Strata has one user, `default`, whose password is `requirepass` (no password
//! when empty, in which case any password is accepted for it, as Redis's `nopass` user does).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use strata_resp::Protocol;

use crate::args::eq_ci;
use crate::clients::client_line;
use crate::clients::ClientInfo;
use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::reply::reply_help;
use crate::services::server::REDIS_VERSION;
use crate::state::{ReplyMode, ServerState, Session};
use crate::table::{Arg, CommandSpec, Flags, Handler};

const LOADING_STALE: Flags = Flags::LOADING.or(Flags::STALE);
/// The flags of every CLIENT subcommand but HELP.
const CLIENT_FLAGS: Flags = Flags::NOSCRIPT.or(LOADING_STALE);
const CLIENT_ADMIN: Flags = Flags::ADMIN.or(CLIENT_FLAGS);
/// Handshake commands: allowed before AUTH, while loading, and while a script is busy.
const HANDSHAKE: Flags = Flags::NOSCRIPT
    .or(LOADING_STALE)
    .or(Flags::FAST)
    .or(Flags::NO_AUTH)
    .or(Flags::ALLOW_BUSY);

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    tips: &'static [&'static str],
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "connection",
        name,
        arity,
        flags,
        &[],
        summary,
        since,
        "O(1)",
        handler,
    )
    .with_tips(tips)
}

#[allow(clippy::too_many_arguments)]
const fn client_cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    tips: &'static [&'static str],
    handler: fn(&mut ConnCtx<'_>) -> CmdResult,
) -> CommandSpec {
    CommandSpec::new(
        "connection",
        name,
        arity,
        flags,
        &[],
        summary,
        since,
        complexity,
        Handler::Conn(handler),
    )
    .with_tips(tips)
}

/// The connection family.
pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "ping",
        -1,
        Flags::FAST,
        "Ping the server",
        "1.0.0",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
        Handler::Conn(ping),
    ),
    cmd(
        "echo",
        2,
        LOADING_STALE.or(Flags::FAST),
        "Echo the given string",
        "1.0.0",
        &[],
        Handler::Conn(echo),
    ),
    cmd(
        "select",
        2,
        LOADING_STALE.or(Flags::FAST),
        "Change the selected database for the current connection",
        "1.0.0",
        &[],
        Handler::Conn(select),
    ),
    cmd(
        "hello",
        -1,
        HANDSHAKE,
        "Handshake with Redis",
        "6.0.0",
        &[],
        Handler::Conn(hello),
    ),
    CommandSpec {
        complexity: "O(N) where N is the number of passwords defined for the user",
        ..cmd(
            "auth",
            -2,
            HANDSHAKE,
            "Authenticate to the server",
            "1.0.0",
            &[],
            Handler::Conn(auth),
        )
    },
    cmd(
        "quit",
        -1,
        HANDSHAKE,
        "Close the connection",
        "1.0.0",
        &[],
        Handler::Conn(quit),
    ),
    cmd(
        "reset",
        1,
        HANDSHAKE,
        "Reset the connection",
        "6.2.0",
        &[],
        Handler::Async(reset),
    ),
    CommandSpec::new(
        "server",
        "monitor",
        1,
        Flags::ADMIN.or(Flags::NOSCRIPT).or(LOADING_STALE),
        &[],
        "Listen for all requests received by the server in real time",
        "1.0.0",
        "",
        Handler::Conn(crate::services::monitor::monitor),
    ),
    CommandSpec::new(
        "connection",
        "client",
        -2,
        Flags::NONE,
        &[],
        "A container for client connection commands",
        "2.4.0",
        "Depends on subcommand.",
        Handler::Container,
    )
    .with_subcommands(CLIENT_SUBCOMMANDS),
];

const CLIENT_TRACKING_STATUS_ARGS: &[Arg] =
    &[Arg::pure_token("on", "ON"), Arg::pure_token("off", "OFF")];
const CLIENT_TRACKING_ARGS: &[Arg] = &[
    Arg::oneof("status", CLIENT_TRACKING_STATUS_ARGS),
    Arg::integer("client-id").with_token("REDIRECT").optional(),
    Arg::string("prefix")
        .with_token("PREFIX")
        .optional()
        .multiple()
        .multiple_token(),
    Arg::pure_token("bcast", "BCAST").optional(),
    Arg::pure_token("optin", "OPTIN").optional(),
    Arg::pure_token("optout", "OPTOUT").optional(),
    Arg::pure_token("noloop", "NOLOOP").optional(),
];
const CLIENT_CACHING_MODE_ARGS: &[Arg] =
    &[Arg::pure_token("yes", "YES"), Arg::pure_token("no", "NO")];
const CLIENT_CACHING_ARGS: &[Arg] = &[Arg::oneof("mode", CLIENT_CACHING_MODE_ARGS)];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    client_cmd(
        "id",
        2,
        CLIENT_FLAGS,
        "Returns the client ID for the current connection",
        "5.0.0",
        "O(1)",
        &[],
        client_id,
    ),
    client_cmd(
        "info",
        2,
        CLIENT_FLAGS,
        "Returns information about the current client connection.",
        "6.2.0",
        "O(1)",
        &["nondeterministic_output"],
        client_info,
    ),
    client_cmd(
        "getname",
        2,
        CLIENT_FLAGS,
        "Get the current connection name",
        "2.6.9",
        "O(1)",
        &[],
        client_getname,
    ),
    client_cmd(
        "setname",
        3,
        CLIENT_FLAGS,
        "Set the current connection name",
        "2.6.9",
        "O(1)",
        &[],
        client_setname,
    ),
    client_cmd(
        "setinfo",
        4,
        CLIENT_FLAGS,
        "Set client or connection specific info",
        "7.2.0",
        "O(1)",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        client_setinfo,
    ),
    client_cmd(
        "list",
        -2,
        CLIENT_ADMIN,
        "Get the list of client connections",
        "2.4.0",
        "O(N) where N is the number of client connections",
        &["nondeterministic_output"],
        client_list,
    ),
    client_cmd(
        "kill",
        -3,
        CLIENT_ADMIN,
        "Kill the connection of a client",
        "2.4.0",
        "O(N) where N is the number of client connections",
        &[],
        client_kill,
    ),
    client_cmd(
        "pause",
        -3,
        CLIENT_ADMIN,
        "Stop processing commands from clients for some time",
        "2.9.50",
        "O(1)",
        &[],
        client_pause,
    ),
    client_cmd(
        "unpause",
        2,
        CLIENT_ADMIN,
        "Resume processing of clients that were paused",
        "6.2.0",
        "O(N) Where N is the number of paused clients",
        &[],
        client_unpause,
    ),
    client_cmd(
        "unblock",
        -3,
        CLIENT_ADMIN,
        "Unblock a client blocked in a blocking command from a different connection",
        "5.0.0",
        "O(log N) where N is the number of client connections",
        &[],
        client_unblock,
    ),
    client_cmd(
        "no-evict",
        3,
        CLIENT_ADMIN,
        "Set client eviction mode for the current connection",
        "7.0.0",
        "O(1)",
        &[],
        client_no_evict,
    ),
    client_cmd(
        "reply",
        3,
        CLIENT_FLAGS,
        "Instruct the server whether to reply to commands",
        "3.2.0",
        "O(1)",
        &[],
        client_reply,
    ),
    client_cmd(
        "tracking",
        -3,
        CLIENT_FLAGS,
        "Enable or disable server assisted client side caching support",
        "6.0.0",
        "O(1). Some options may introduce additional complexity.",
        &[],
        crate::services::tracking::client_tracking,
    )
    .with_args(CLIENT_TRACKING_ARGS),
    client_cmd(
        "caching",
        3,
        CLIENT_FLAGS,
        "Instruct the server about tracking or not keys in the next request",
        "6.0.0",
        "O(1)",
        &[],
        crate::services::tracking::client_caching,
    )
    .with_args(CLIENT_CACHING_ARGS),
    client_cmd(
        "getredir",
        2,
        CLIENT_FLAGS,
        "Get tracking notifications redirection client ID if any",
        "6.0.0",
        "O(1)",
        &[],
        crate::services::tracking::client_getredir,
    ),
    client_cmd(
        "trackinginfo",
        2,
        CLIENT_FLAGS,
        "Return information about server assisted client side caching for the current connection",
        "6.2.0",
        "O(1)",
        &[],
        crate::services::tracking::client_trackinginfo,
    ),
    client_cmd(
        "help",
        2,
        LOADING_STALE,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
        &[],
        client_help,
    ),
];

// ----- authentication -----

/// The `default` user's password; empty means the user needs none.
fn requirepass(server: &ServerState) -> String {
    server.config.get("requirepass").unwrap_or_default()
}

/// Whether `user`/`pass` authenticate: only the `default` user exists (user names are
/// case-sensitive, as in Redis's ACL), and it takes any password when none is configured.
fn credentials_ok(server: &ServerState, user: &[u8], pass: &[u8]) -> bool {
    let required = requirepass(server);
    user == b"default" && (required.is_empty() || pass == required.as_bytes())
}

/// Whether a connection may run commands: it authenticated, or the default user needs no
/// password (any more: `requirepass` may have been cleared since the connection was made). This
/// is the test for NOAUTH gating, as Redis's `authRequired`.
pub fn is_authenticated(session: &Session, server: &ServerState) -> bool {
    session.authenticated || requirepass(server).is_empty()
}

// ----- PING, ECHO, SELECT -----

/// PING [message] → PONG or the message; in RESP2 pub/sub mode, `["pong", message-or-""]`.
fn ping(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.args.len() > 2 {
        return Err(CmdError::WrongArity("ping".into()));
    }
    let message = cx.args.get(1);
    if cx.session.proto == Protocol::Resp2 && cx.session.info.subscriptions() > 0 {
        cx.out.array(2);
        cx.out.bulk(b"pong");
        cx.out.bulk(message.map_or(&b""[..], |m| &m[..]));
    } else {
        match message {
            None => cx.out.simple("PONG"),
            Some(m) => cx.out.bulk(m),
        }
    }
    Ok(())
}

/// ECHO message → message.
fn echo(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.bulk(&cx.args[1]);
    Ok(())
}

/// SELECT index → OK. The index must fit a C int, then name a database.
fn select(cx: &mut ConnCtx<'_>) -> CmdResult {
    let db = cx.args_from(1).next_i64()?;
    if i32::try_from(db).is_err() {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if db < 0 || db >= cx.server.config.get_i64("databases") {
        return Err(CmdError::DbIndexOutOfRange);
    }
    cx.session.select(db as usize);
    cx.out.ok();
    Ok(())
}

// ----- HELLO, AUTH, QUIT, RESET -----

/// HELLO [protover [AUTH username password] [SETNAME clientname]] → the server's handshake map,
/// after switching the connection to `protover`.
fn hello(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut a = cx.args_from(1);
    let mut proto = None;
    if let Some(v) = a.peek() {
        let v = strata_core::num::parse_i64(v).ok_or(CmdError::msg(
            "ERR Protocol version is not an integer or out of range",
        ))?;
        proto = match v {
            2 => Some(Protocol::Resp2),
            3 => Some(Protocol::Resp3),
            _ => return Err(CmdError::msg("NOPROTO unsupported protocol version")),
        };
        a.next_bytes()?;
    }
    let (mut credentials, mut name) = (None, None);
    while let Ok(opt) = a.next_bytes() {
        if eq_ci(opt, "auth") && a.remaining() >= 2 {
            credentials = Some((a.next_bytes()?, a.next_bytes()?));
        } else if eq_ci(opt, "setname") && a.remaining() >= 1 {
            let n = a.next_bytes()?;
            validate_name(n)?;
            name = Some(n);
        } else {
            return Err(CmdError::Msg(
                format!(
                    "ERR Syntax error in HELLO option '{}'",
                    crate::error::echo(opt)
                )
                .into(),
            ));
        }
    }
    if let Some((user, pass)) = credentials {
        if !credentials_ok(cx.server, user, pass) {
            return Err(wrongpass());
        }
        cx.session.authenticated = true;
    }
    if !is_authenticated(cx.session, cx.server) {
        return Err(CmdError::msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
             the RESP protocol version at the same time",
        ));
    }
    if let Some(n) = name {
        set_name(&cx.session.info, n);
    }
    if let Some(p) = proto {
        set_proto(cx, p);
    }
    let out = &mut *cx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if cx.session.proto == Protocol::Resp3 {
        3
    } else {
        2
    });
    out.bulk(b"id");
    out.int(cx.session.info.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn set_proto(cx: &mut ConnCtx<'_>, proto: Protocol) {
    cx.session.proto = proto;
    cx.out.proto = proto;
    let v = if proto == Protocol::Resp3 { 3 } else { 2 };
    cx.session.info.resp.store(v, Ordering::Relaxed);
}

fn wrongpass() -> CmdError {
    CmdError::msg("WRONGPASS invalid username-password pair or user is disabled.")
}

/// AUTH [username] password → OK, or WRONGPASS (a failed attempt keeps an earlier success).
fn auth(cx: &mut ConnCtx<'_>) -> CmdResult {
    let (user, pass) = match cx.args {
        [_, pass] => {
            if requirepass(cx.server).is_empty() {
                return Err(CmdError::msg(
                    "ERR AUTH <password> called without any password configured for the default \
                     user. Are you sure your configuration is correct?",
                ));
            }
            (&b"default"[..], pass)
        }
        [_, user, pass] => (&user[..], pass),
        _ => return Err(CmdError::Syntax),
    };
    if !credentials_ok(cx.server, user, pass) {
        return Err(wrongpass());
    }
    cx.session.authenticated = true;
    cx.out.ok();
    Ok(())
}

/// QUIT → OK, then the connection closes.
fn quit(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.ok();
    cx.session.close_after_reply = true;
    Ok(())
}

/// RESET → +RESET: leaves MULTI, withdraws watches, drops every subscription (without
/// confirmations), then resets the connection's settings: RESP2, database 0, no name, replies on,
/// and authenticated only if the default user needs no password (CLIENT NO-EVICT stays, as in
/// Redis 7.0).
fn reset<'a>(cx: &'a mut ConnCtx<'_>) -> futures_util::future::LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        cx.session.multi = None;
        cx.session.multi_failed = false;
        cx.session.info.multi.store(-1, Ordering::Relaxed);
        cx.session.pubsub.clear();
        crate::services::tracking::disable(cx.session);
        if std::mem::take(&mut cx.session.monitor) {
            crate::services::monitor::remove(cx.session.info.id);
        }
        crate::services::multi::unwatch_all(cx.session, &cx.server.shards).await;
        reset_settings(cx)
    })
}

fn reset_settings(cx: &mut ConnCtx<'_>) -> CmdResult {
    set_proto(cx, Protocol::Resp2);
    cx.session.select(0);
    cx.session.reply_mode = ReplyMode::On;
    cx.session.authenticated = requirepass(cx.server).is_empty();
    set_name(&cx.session.info, b"");
    cx.out.simple("RESET");
    Ok(())
}

// ----- CLIENT -----

/// Redis accepts names (and library names/versions) made of printable ASCII without spaces, so
/// that CLIENT LIST stays splittable on spaces.
fn printable(v: &[u8]) -> bool {
    v.iter().all(|b| (b'!'..=b'~').contains(b))
}

fn validate_name(name: &[u8]) -> CmdResult {
    if printable(name) {
        Ok(())
    } else {
        Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ))
    }
}

/// Sets (or, with an empty name, clears) the connection name.
fn set_name(info: &ClientInfo, name: &[u8]) {
    let v = (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
    *info.name.lock().unwrap_or_else(|e| e.into_inner()) = v;
}

fn client_id(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.int(cx.session.info.id as i64);
    Ok(())
}

fn client_getname(cx: &mut ConnCtx<'_>) -> CmdResult {
    match &*cx
        .session
        .info
        .name
        .lock()
        .unwrap_or_else(|e| e.into_inner())
    {
        Some(n) => cx.out.bulk(n),
        None => cx.out.null(),
    }
    Ok(())
}

fn client_setname(cx: &mut ConnCtx<'_>) -> CmdResult {
    let name = &cx.args[2];
    validate_name(name)?;
    set_name(&cx.session.info, name);
    cx.out.ok();
    Ok(())
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value → OK (Redis 7.2; shown by CLIENT LIST/INFO).
fn client_setinfo(cx: &mut ConnCtx<'_>) -> CmdResult {
    let (attr, value) = (&cx.args[2], &cx.args[3]);
    let info = &cx.session.info;
    let slot = if eq_ci(attr, "lib-name") {
        &info.lib_name
    } else if eq_ci(attr, "lib-ver") {
        &info.lib_ver
    } else {
        return Err(CmdError::Msg(
            format!("ERR Unrecognized option '{}'", crate::error::echo(attr)).into(),
        ));
    };
    if !printable(value) {
        return Err(CmdError::Msg(
            format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                crate::error::echo(attr)
            )
            .into(),
        ));
    }
    // A copy, not a slice of the read buffer the whole of which it would keep alive.
    *slot.lock().unwrap_or_else(|e| e.into_inner()) =
        (!value.is_empty()).then(|| Bytes::copy_from_slice(value));
    cx.out.ok();
    Ok(())
}

/// Bytes of the arguments of the command being run (CLIENT LIST's `argv-mem` for the caller).
fn argv_mem(args: &[Bytes]) -> usize {
    args.iter().map(Bytes::len).sum()
}

fn client_info(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut line = client_line(&cx.session.info, cx.now, argv_mem(cx.args));
    line.push('\n');
    cx.out.verbatim("txt", line.as_bytes());
    Ok(())
}

/// A client as CLIENT LIST/KILL TYPE classify it. Strata has no replication links, so only
/// `normal` and `pubsub` clients exist; `master` and `replica` match nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, CmdError> {
        Ok(
            match crate::args::c_string(name).to_ascii_lowercase().as_slice() {
                b"normal" => ClientType::Normal,
                b"slave" | b"replica" => ClientType::Replica,
                b"master" => ClientType::Master,
                b"pubsub" => ClientType::PubSub,
                _ => {
                    return Err(CmdError::Msg(
                        format!("ERR Unknown client type '{}'", crate::error::echo(name)).into(),
                    ))
                }
            },
        )
    }

    fn of(c: &ClientInfo) -> ClientType {
        if c.subscriptions() > 0 {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// Clients still connected (a killed client lingers in the registry until its thread notices).
fn live_clients(server: &ServerState) -> Vec<std::sync::Arc<ClientInfo>> {
    let mut list = server.client_list();
    list.retain(|c| !c.killed.load(Ordering::Relaxed));
    list
}

/// CLIENT LIST [TYPE type] | [ID id ...] → one line per client, oldest first (ID: in the order
/// asked, unknown ids skipped).
fn client_list(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut a = cx.args_from(2);
    let clients = live_clients(cx.server);
    let me = cx.session.info.id;
    let my_argv = argv_mem(cx.args);
    let line = |c: &ClientInfo| {
        let mem = if c.id == me { my_argv } else { 0 };
        let mut l = client_line(c, cx.now, mem);
        l.push('\n');
        l
    };
    let mut text = String::new();
    if cx.args.len() == 4 && a.eat("type") {
        let wanted = ClientType::parse(a.next_bytes()?)?;
        for c in clients.iter().filter(|c| ClientType::of(c) == wanted) {
            text.push_str(&line(c));
        }
    } else if cx.args.len() > 3 && a.eat("id") {
        let ids = a
            .take_rest()
            .iter()
            .map(|id| strata_core::num::parse_i64(id))
            .collect::<Option<Vec<i64>>>()
            .ok_or(CmdError::msg("ERR Invalid client ID"))?;
        for id in ids {
            if let Some(c) = clients.iter().find(|c| c.id as i64 == id) {
                text.push_str(&line(c));
            }
        }
    } else if cx.args.len() != 2 {
        return Err(CmdError::Syntax);
    } else {
        for c in &clients {
            text.push_str(&line(c));
        }
    }
    cx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// CLIENT KILL addr:port → OK or "No such client"; CLIENT KILL [ID id] [TYPE type] [USER user]
/// [ADDR addr] [LADDR laddr] [SKIPME yes|no] ... → how many clients were killed. Killing oneself
/// takes effect after the reply.
fn client_kill(cx: &mut ConnCtx<'_>) -> CmdResult {
    let old_form = cx.args.len() == 3;
    let (mut addr, mut laddr, mut id, mut kind) = (None, None, None, None);
    let mut skip_me = !old_form;
    if old_form {
        addr = Some(&cx.args[2]);
    } else {
        let mut a = cx.args_from(2);
        while let Ok(opt) = a.next_bytes() {
            let Ok(value) = a.next_bytes() else {
                return Err(CmdError::Syntax);
            };
            if eq_ci(opt, "id") {
                id = Some(
                    strata_core::num::parse_i64(value)
                        .filter(|&v| v >= 1)
                        .ok_or(CmdError::msg("ERR client-id should be greater than 0"))?
                        as u64,
                );
            } else if eq_ci(opt, "type") {
                kind = Some(ClientType::parse(value)?);
            } else if eq_ci(opt, "addr") {
                addr = Some(value);
            } else if eq_ci(opt, "laddr") {
                laddr = Some(value);
            } else if eq_ci(opt, "user") {
                if value.as_ref() != b"default" {
                    return Err(CmdError::Msg(
                        format!("ERR No such user '{}'", crate::error::echo(value)).into(),
                    ));
                }
            } else if eq_ci(opt, "skipme") {
                skip_me = if eq_ci(value, "yes") {
                    true
                } else if eq_ci(value, "no") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                };
            } else {
                return Err(CmdError::Syntax);
            }
        }
    }
    let me = cx.session.info.id;
    let mut killed = 0;
    for c in live_clients(cx.server) {
        let matches = addr.is_none_or(|a| c.addr.as_bytes() == a.as_ref())
            && laddr.is_none_or(|a| c.laddr.as_bytes() == a.as_ref())
            && kind.is_none_or(|k| ClientType::of(&c) == k)
            && id.is_none_or(|i| c.id == i)
            && !(skip_me && c.id == me);
        if !matches {
            continue;
        }
        if c.id == me {
            cx.session.close_after_reply = true;
        } else {
            c.kill();
        }
        killed += 1;
    }
    if old_form {
        if killed == 0 {
            return Err(CmdError::msg("ERR No such client"));
        }
        cx.out.ok();
    } else {
        cx.out.int(killed);
    }
    Ok(())
}

/// CLIENT NO-EVICT ON|OFF → OK.
/// Redis's reply to a CLIENT subcommand given too many arguments for its handler.
fn client_syntax(sub: &[u8]) -> CmdError {
    let sub = String::from_utf8_lossy(sub);
    CmdError::Msg(
        format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
        )
        .into(),
    )
}

/// CLIENT PAUSE timeout [WRITE|ALL] → OK: until `timeout` ms from now (or CLIENT UNPAUSE), commands
/// of other clients wait before running: every command (ALL, the default), or only those that
/// write or may replicate (WRITE). A transaction that started runs to its end first.
fn client_pause(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.args.len() > 4 {
        return Err(client_syntax(&cx.args[1]));
    }
    let ms = crate::args::parse_timeout_ms(&cx.args[2])?;
    let all = match cx.args.get(3) {
        None => true,
        Some(m) if eq_ci(m, "all") => true,
        Some(m) if eq_ci(m, "write") => false,
        Some(_) => return Err(CmdError::msg("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let until = if ms > 0 { cx.now.saturating_add(ms) } else { 0 };
    cx.server.pause.pause(until, all, cx.now);
    cx.out.ok();
    Ok(())
}

/// CLIENT UNPAUSE → OK
fn client_unpause(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.server.pause.unpause();
    cx.out.ok();
    Ok(())
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR] → 1 if that client was blocked in a blocking command
/// (or WAIT) and is now unblocked: it answers as on timeout, or with an UNBLOCKED error.
fn client_unblock(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.args.len() > 4 {
        return Err(client_syntax(&cx.args[1]));
    }
    let id = strata_core::num::parse_i64(&cx.args[2]).ok_or(CmdError::NotInteger)?;
    let how = match cx.args.get(3) {
        None => crate::clients::UNBLOCK_TIMEOUT,
        Some(m) if eq_ci(m, "timeout") => crate::clients::UNBLOCK_TIMEOUT,
        Some(m) if eq_ci(m, "error") => crate::clients::UNBLOCK_ERROR,
        Some(_) => {
            return Err(CmdError::msg(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let target = live_clients(cx.server)
        .into_iter()
        .find(|c| c.id as i64 == id);
    let done = target.is_some_and(|c| c.request_unblock(how));
    cx.out.int(done as i64);
    Ok(())
}

fn client_no_evict(cx: &mut ConnCtx<'_>) -> CmdResult {
    let v = &cx.args[2];
    let on = if eq_ci(v, "on") {
        true
    } else if eq_ci(v, "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    cx.session.info.no_evict.store(on, Ordering::Relaxed);
    cx.out.ok();
    Ok(())
}

/// CLIENT REPLY ON → OK; OFF and SKIP answer nothing (the connection layer drops the replies of
/// the commands that follow: all of them for OFF, the next one for SKIP).
fn client_reply(cx: &mut ConnCtx<'_>) -> CmdResult {
    let v = &cx.args[2];
    if eq_ci(v, "on") {
        cx.session.reply_mode = ReplyMode::On;
        cx.out.ok();
    } else if eq_ci(v, "off") {
        cx.session.reply_mode = ReplyMode::Off;
    } else if eq_ci(v, "skip") {
        if cx.session.reply_mode != ReplyMode::Off {
            cx.session.reply_mode = ReplyMode::Skip;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn client_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients with the specified IDs.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set the library name or version of the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}
