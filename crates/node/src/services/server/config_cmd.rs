//! CONFIG GET, SET, REWRITE, RESETSTAT: the commands over the settings store (`crate::config`);
//! CONFIG SET applies what a setting acts on (the shards' memory policy, client eviction) before it
//! replies.

use super::*;

/// CONFIG GET pattern [pattern ...] → a map of matching settings. An exact name is echoed as the
/// client spelled it; each setting appears once.
pub(super) fn config_get(cx: &mut ConnCtx<'_>) -> CmdResult {
    let config = &cx.server.config;
    let mut found: Vec<(String, &'static str, String)> = Vec::new();
    for pattern in &cx.args[2..] {
        let text = String::from_utf8_lossy(pattern);
        if !text.contains(['[', '*', '?']) {
            if let Some(name) = Config::canonical_name(&text) {
                if !found.iter().any(|(_, n, _)| *n == name) {
                    let value = config.get(name).unwrap_or_default();
                    found.push((text.into_owned(), name, value));
                }
            }
            continue;
        }
        for (name, value) in config.matching(pattern) {
            if !found.iter().any(|(_, n, _)| *n == name) {
                found.push((name.to_string(), name, value));
            }
        }
    }
    cx.out.map(found.len());
    for (shown, _, value) in found {
        cx.out.bulk(shown.as_bytes());
        cx.out.bulk(value.as_bytes());
    }
    Ok(())
}

/// CONFIG SET name value [name value ...] → OK, atomically; settings the shards act on (the access
/// policy behind OBJECT FREQ/IDLETIME) are pushed to every shard before the reply, and every
/// connection is woken to re-read those it acts on (`timeout`).
pub(super) fn config_set<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        config_set_values(cx)?;
        cx.server.wake_clients();
        let server = cx.server.clone();
        cx.shards()
            .call_all(move |s| crate::access::apply_access_policy(s, &server.config))
            .await;
        // A lower `maxmemory-clients` (or `maxmemory`, for a percentage) evicts clients at once;
        // if this client is one of them, it gets no reply, as in Redis.
        if !crate::services::client_evict::configured(cx.server, Some(&cx.session.info)) {
            cx.out.ok();
        }
        Ok(())
    })
}

pub(super) fn config_set_values(cx: &mut ConnCtx<'_>) -> CmdResult {
    let args = &cx.args[2..];
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let text: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let pairs: Vec<(&str, &str)> = text
        .chunks(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    let failed = |arg: &str, why: &str| {
        CmdError::Msg(
            format!("ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}").into(),
        )
    };
    // Protected settings (Redis's PROTECTED_CONFIG), refused unless `enable-protected-configs`
    // allows this client; a bad name or an immutable one before them is reported instead.
    let protected_ok = match cx
        .server
        .config
        .get("enable-protected-configs")
        .unwrap_or_default()
        .as_str()
    {
        "yes" => true,
        "local" => cx.session.info.is_local(),
        _ => false,
    };
    for (name, _) in &pairs {
        let Some(spec) = Config::canonical_name(name)
            .and_then(|c| crate::config::SPECS.iter().find(|s| s.name == c))
        else {
            break;
        };
        if !spec.mutable {
            break;
        }
        if matches!(spec.name, "dir" | "dbfilename") && !protected_ok {
            return Err(failed(name, "can't set protected config"));
        }
    }
    match cx.server.config.set_many(&pairs) {
        Ok(()) => Ok(()),
        Err((i, ConfigSetError::Unknown)) => Err(CmdError::Msg(
            format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                pairs[i].0
            )
            .into(),
        )),
        Err((i, ConfigSetError::Immutable(_))) => {
            Err(failed(pairs[i].0, "can't set immutable config"))
        }
        Err((i, ConfigSetError::Duplicate(_))) => Err(failed(pairs[i].0, "duplicate parameter")),
        Err((_, ConfigSetError::Invalid(name, why))) => Err(failed(name, &why)),
    }
}

/// CONFIG RESETSTAT → OK: zeroes every thread's counters (commands, connections, network bytes,
/// per-command stats, keyspace hits/misses, expired keys) and the memory peak.
pub(super) fn config_resetstat<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        cx.shards()
            .call_all(|s| {
                let st = &mut s.stats;
                st.commands = 0;
                st.connections_received = 0;
                st.rejected_connections = 0;
                st.net_input_bytes = 0;
                st.net_output_bytes = 0;
                st.cmd.clear();
                st.latency.clear();
                st.errors.clear();
                st.errors_untracked = 0;
                crate::settings::reply_buffer::reset_counts();
                for db in s.dbs_mut() {
                    db.reset_stats();
                }
            })
            .await;
        PEAK_MEMORY.store(crate::memory::used_memory(), Ordering::Relaxed);
        strata_shard::evict::reset_stats();
        crate::clients::reset_stats();
        *RATES.lock().unwrap_or_else(|e| e.into_inner()) = None;
        cx.out.ok();
        Ok(())
    })
}

pub(super) fn config_rewrite(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.server
        .config
        .rewrite()
        .map_err(|e| CmdError::Msg(format!("ERR {e}").into()))?;
    cx.out.ok();
    Ok(())
}

pub(super) fn config_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
