//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: the commands that set a client's side of
//! client-side caching (`crate::tracking`), and what the dispatcher asks of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::state::Session;

use crate::tracking::*;

/// Turns tracking off for the session's client (CLIENT TRACKING OFF, RESET, disconnect).
pub fn disable(session: &mut Session) {
    if session.tracking.take().is_some() {
        strata_shard::tracking::unregister(session.info.id);
    }
    session.caching = false;
    session.info.tracking.store(0, Ordering::Relaxed);
}

/// True if `a` is a prefix of `b` or `b` of `a` (Redis's stringCheckPrefix).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP] → OK.
pub fn client_tracking(cx: &mut ConnCtx<'_>) -> CmdResult {
    let args = cx.args;
    let mut redir: i64 = 0;
    let mut opts = Options::default();
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut target = None;
    let mut j = 3;
    while j < args.len() {
        let a = &args[j];
        let more = j + 1 < args.len();
        if crate::args::eq_ci(a, "redirect") && more {
            j += 1;
            if redir != 0 {
                return Err(CmdError::Msg(
                    "ERR A client can only redirect to a single other client".into(),
                ));
            }
            redir = strata_core::num::parse_i64(&args[j]).ok_or(CmdError::NotInteger)?;
            let found = cx
                .server
                .clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(redir as u64))
                .filter(|c| redir > 0 && !c.killed.load(Ordering::Relaxed))
                .cloned();
            match found {
                Some(c) => target = Some(c),
                None => {
                    return Err(CmdError::Msg(
                        "ERR The client ID you want redirect to does not exist".into(),
                    ))
                }
            }
        } else if crate::args::eq_ci(a, "bcast") {
            opts.bcast = true;
        } else if crate::args::eq_ci(a, "optin") {
            opts.optin = true;
        } else if crate::args::eq_ci(a, "optout") {
            opts.optout = true;
        } else if crate::args::eq_ci(a, "noloop") {
            opts.noloop = true;
        } else if crate::args::eq_ci(a, "prefix") && more {
            j += 1;
            // A copy: kept while tracking lasts, it must not pin the connection's read buffer.
            prefixes.push(Bytes::copy_from_slice(&args[j]));
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let mode = &args[2];
    if crate::args::eq_ci(mode, "off") {
        disable(cx.session);
        cx.out.ok();
        return Ok(());
    }
    if !crate::args::eq_ci(mode, "on") {
        return Err(CmdError::Syntax);
    }
    let err = |m: &str| Err(CmdError::Msg(format!("ERR {m}").into()));
    if !opts.bcast && !prefixes.is_empty() {
        return err("PREFIX option requires BCAST mode to be enabled");
    }
    let old = cx.session.tracking.clone();
    if let Some(old) = &old {
        if old.opts.bcast != opts.bcast {
            return err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return err("OPTIN and OPTOUT are not compatible with BCAST");
    }
    if opts.optin && opts.optout {
        return err("You can't specify both OPTIN mode and OPTOUT mode");
    }
    if let Some(old) = &old {
        if (opts.optin && old.opts.optout) || (opts.optout && old.opts.optin) {
            return err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
    }
    let existing: &[Bytes] = old.as_ref().map_or(&[], |o| &o.prefixes[..]);
    if opts.bcast {
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                return err(&format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    crate::error::echo(p),
                    crate::error::echo(e)
                ));
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return err(&format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    crate::error::echo(p),
                    crate::error::echo(q)
                ));
            }
        }
    }
    let mut all = existing.to_vec();
    if opts.bcast {
        for p in prefixes {
            if !all.contains(&p) {
                all.push(p);
            }
        }
        if all.is_empty() {
            all.push(Bytes::new());
        }
        // Redis keeps them in a radix tree: sorted (TRACKINGINFO, one message per prefix).
        all.sort();
    }
    let t = Arc::new(ClientTracking::new(
        cx.session.info.clone(),
        redir as u64,
        target,
        opts,
        all,
    ));
    cx.session.tracking = Some(t.clone());
    cx.session.info.tracking.store(
        FLAG_ON | if opts.bcast { FLAG_BCAST } else { 0 },
        Ordering::Relaxed,
    );
    cx.session
        .info
        .tracking_redir
        .store(redir as u64, Ordering::Relaxed);
    strata_shard::tracking::register(cx.session.info.id, t);
    cx.out.ok();
    Ok(())
}

/// CLIENT CACHING YES|NO → OK: the next command's keys are (OPTIN) or are not (OPTOUT) tracked.
pub fn client_caching(cx: &mut ConnCtx<'_>) -> CmdResult {
    let Some(t) = &cx.session.tracking else {
        return Err(CmdError::Msg("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled".into()));
    };
    let v = &cx.args[2];
    if crate::args::eq_ci(v, "yes") {
        if !t.opts.optin {
            return Err(CmdError::Msg(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
                    .into(),
            ));
        }
    } else if crate::args::eq_ci(v, "no") {
        if !t.opts.optout {
            return Err(CmdError::Msg(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
                    .into(),
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    cx.session.caching = true;
    cx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR → the redirect client id, 0 without redirect, -1 when tracking is off.
pub fn client_getredir(cx: &mut ConnCtx<'_>) -> CmdResult {
    let v = cx
        .session
        .tracking
        .as_ref()
        .map_or(-1, |t| t.redirect as i64);
    cx.out.int(v);
    Ok(())
}

/// CLIENT TRACKINGINFO → map of flags, redirect and prefixes.
pub fn client_trackinginfo(cx: &mut ConnCtx<'_>) -> CmdResult {
    let t = cx.session.tracking.clone();
    let broken = cx.session.info.tracking.load(Ordering::Relaxed) & FLAG_BROKEN != 0;
    let caching = cx.session.caching;
    let out = &mut *cx.out;
    out.map(3);
    out.bulk(b"flags");
    match &t {
        None => {
            out.set(1);
            out.bulk(b"off");
        }
        Some(t) => {
            let mut flags: Vec<&[u8]> = vec![b"on"];
            if t.opts.bcast {
                flags.push(b"bcast");
            }
            if t.opts.optin {
                flags.push(b"optin");
                if caching {
                    flags.push(b"caching-yes");
                }
            }
            if t.opts.optout {
                flags.push(b"optout");
                if caching {
                    flags.push(b"caching-no");
                }
            }
            if t.opts.noloop {
                flags.push(b"noloop");
            }
            if broken {
                flags.push(b"broken_redirect");
            }
            out.set(flags.len());
            for f in flags {
                out.bulk(f);
            }
        }
    }
    out.bulk(b"redirect");
    out.int(t.as_ref().map_or(-1, |t| t.redirect as i64));
    out.bulk(b"prefixes");
    let prefixes: &[Bytes] = match &t {
        Some(t) if t.opts.bcast => &t.prefixes,
        _ => &[],
    };
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(p);
    }
    Ok(())
}

/// Whether a read command's keys are to be remembered for the session's client now: tracking on
/// in default mode, and OPTIN's CLIENT CACHING YES given / OPTOUT's CLIENT CACHING NO not given.
pub fn tracks_reads(session: &Session) -> bool {
    match &session.tracking {
        None => false,
        Some(t) => {
            !t.opts.bcast
                && (!t.opts.optin || session.caching)
                && (!t.opts.optout || !session.caching)
        }
    }
}
