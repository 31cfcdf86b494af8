//! Loading the AOF at start-up (Redis's loadAppendOnlyFiles): the manifest's base file, then its
//! incremental files, each command replayed through the ordinary request path by a client of its
//! own (MULTI/EXEC, SELECT and every command's own checks as when it first ran), while every other
//! client is answered -LOADING. A base in RDB format (a file starting with `REDIS`) is loaded by
//! the RDB loader.
//!
//! A file that ends inside a command, or inside a MULTI without its EXEC, is *truncated*: with
//! `aof-load-truncated yes` and if it is the last file, the complete commands are kept and the file
//! is cut after them (Redis's warnings); otherwise start-up fails with Redis's message. Anything
//! that is not a RESP array of bulk strings is a *bad format*: start-up fails naming the file and
//! the offset. Neither ever panics, and nothing is kept of a load that fails.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use strata_node::services::aof;
use strata_node::services::persist;
use strata_node::{server_log, ClientInfo, ServerState, Session};
use strata_resp::{Protocol, ReplyBuf};

use crate::dispatch::Batch;

/// Commands handed to the request path at once.
const CHUNK: usize = 1024;

/// What one AOF file holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub cmds: Vec<Vec<Bytes>>,
    /// Bytes of the file the complete commands span.
    pub valid_up_to: usize,
    /// The file ended inside a command, or inside a MULTI (whose commands are not in `cmds`).
    pub truncated: bool,
    /// It ended inside a MULTI.
    pub open_multi: bool,
}

/// A file that is not an AOF: the offset of the first byte that is not.
#[derive(Debug, PartialEq, Eq)]
pub struct BadFormat {
    pub offset: usize,
}

/// Parses an AOF file's commands (Redis's loadSingleAppendOnlyFile's reading).
pub fn parse(bytes: &[u8]) -> Result<Parsed, BadFormat> {
    let mut cmds = Vec::new();
    let mut pos = 0;
    let mut valid = 0;
    let mut multi_at: Option<(usize, usize)> = None;
    let line = |pos: &mut usize| -> Option<&[u8]> {
        let rest = bytes.get(*pos..)?;
        let end = rest.iter().position(|&b| b == b'\n')?;
        let l = &rest[..end];
        *pos += end + 1;
        Some(l.strip_suffix(b"\r").unwrap_or(l))
    };
    let number =
        |l: &[u8]| -> Option<usize> { std::str::from_utf8(l).ok()?.trim().parse::<usize>().ok() };
    let truncated = loop {
        if pos >= bytes.len() {
            break false;
        }
        let start = pos;
        if bytes[pos] == b'#' {
            // An annotation (Redis's timestamps): skipped.
            match line(&mut pos) {
                Some(_) => {
                    valid = pos;
                    continue;
                }
                None => break true,
            }
        }
        if bytes[pos] != b'*' {
            return Err(BadFormat { offset: pos });
        }
        let Some(head) = line(&mut pos) else {
            break true;
        };
        let argc = match number(&head[1..]) {
            Some(n) if n >= 1 => n,
            _ => return Err(BadFormat { offset: start }),
        };
        let mut argv = Vec::with_capacity(argc.min(1024));
        let mut short = false;
        for _ in 0..argc {
            let at = pos;
            if pos >= bytes.len() {
                short = true;
                break;
            }
            if bytes[pos] != b'$' {
                return Err(BadFormat { offset: at });
            }
            let Some(l) = line(&mut pos) else {
                short = true;
                break;
            };
            let Some(len) = number(&l[1..]) else {
                return Err(BadFormat { offset: at });
            };
            if bytes.len() < pos || bytes.len() - pos < len.saturating_add(2) {
                short = true;
                break;
            }
            if &bytes[pos + len..pos + len + 2] != b"\r\n" {
                return Err(BadFormat { offset: pos + len });
            }
            argv.push(Bytes::copy_from_slice(&bytes[pos..pos + len]));
            pos += len + 2;
        }
        if short {
            break true;
        }
        if argv[0].eq_ignore_ascii_case(b"multi") {
            multi_at = Some((start, cmds.len()));
        } else if argv[0].eq_ignore_ascii_case(b"exec") {
            multi_at = None;
        }
        cmds.push(argv);
        valid = pos;
    };
    let open_multi = multi_at.is_some();
    if let Some((at, n)) = multi_at {
        cmds.truncate(n);
        valid = at;
    }
    Ok(Parsed {
        cmds,
        valid_up_to: valid,
        truncated: truncated || open_multi,
        open_multi,
    })
}

/// Loads the AOF directory at start-up (`appendonly yes`). Returns false if the server must exit.
/// A directory without a manifest is an empty dataset.
pub fn load_at_startup(state: &Arc<ServerState>) -> bool {
    let config = &state.config;
    if let Err(e) = aof::upgrade_old_file(config) {
        server_log!(Warning, "{e}");
        return false;
    }
    let manifest = match aof::read_manifest(config) {
        Ok(Some(m)) => m,
        Ok(None) => return true,
        Err(e) => {
            server_log!(Warning, "{e}");
            return false;
        }
    };
    let (dir, _) = aof::paths(config);
    let truncated_ok = config.get_bool("aof-load-truncated");
    let began = Instant::now();
    persist::mark_loading();
    let mut files: Vec<(&str, &str)> = Vec::new();
    if let Some((b, _)) = &manifest.base {
        files.push((b, "base"));
    }
    for (i, _) in &manifest.incr {
        files.push((i, "incr"));
    }
    let n = files.len();
    for (i, (name, kind)) in files.into_iter().enumerate() {
        let path = dir.join(name);
        let last = i + 1 == n;
        let t = Instant::now();
        let ok = match load_file(state, &path, name, last, truncated_ok) {
            Ok(()) => true,
            Err(()) => false,
        };
        if !ok {
            persist::flush_all(state);
            persist::end_loading();
            return false;
        }
        server_log!(
            Notice,
            "DB loaded from {kind} file {name}: {:.3} seconds",
            t.elapsed().as_secs_f64()
        );
    }
    persist::end_loading();
    server_log!(
        Notice,
        "DB loaded from append only file: {:.3} seconds",
        began.elapsed().as_secs_f64()
    );
    true
}

/// DEBUG LOADAOF (on a thread of its own, not a shard's): empties every database and loads the
/// AOF again, its replay not appended again. False if the load failed.
pub fn reload(state: &Arc<ServerState>) -> bool {
    let appending = strata_shard::propagate::on();
    strata_shard::propagate::set_on(false);
    persist::flush_all(state);
    let ok = load_at_startup(state);
    strata_shard::propagate::set_on(appending);
    ok
}

fn load_file(
    state: &Arc<ServerState>,
    path: &Path,
    name: &str,
    last: bool,
    truncated_ok: bool,
) -> Result<(), ()> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            server_log!(
                Warning,
                "The append log file {name} doesn't exist: No such file or directory"
            );
            return Err(());
        }
        Err(e) => {
            server_log!(
                Warning,
                "Fatal error: can't open the append log file {name} for reading: {e}"
            );
            return Err(());
        }
    };
    if bytes.starts_with(b"REDIS") {
        // An RDB base (aof-use-rdb-preamble).
        let r = persist::load_file(state, path);
        persist::mark_loading();
        return match r {
            Ok(_) => Ok(()),
            Err(persist::LoadError::Bad(e)) => {
                persist::log_bad_file(path, &e);
                Err(())
            }
            Err(_) => {
                server_log!(Warning, "Fatal error loading the AOF base file {name}");
                Err(())
            }
        };
    }
    let parsed = match parse(&bytes) {
        Ok(p) => p,
        Err(BadFormat { offset }) => {
            // Redis's line last: it is what its tests look for at the end of the log.
            server_log!(
                Warning,
                "The append only file {} is not a valid AOF at offset {offset}",
                path.display()
            );
            server_log!(
                Warning,
                "Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
            );
            return Err(());
        }
    };
    if parsed.open_multi {
        server_log!(
            Warning,
            "Revert incomplete MULTI/EXEC transaction in AOF file {name}"
        );
    }
    if parsed.truncated {
        if !truncated_ok || !last {
            if truncated_ok {
                server_log!(
                    Warning,
                    "Fatal error: the truncated file is not the last file"
                );
            } else {
                server_log!(
                    Warning,
                    "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
                );
            }
            return Err(());
        }
        server_log!(
            Warning,
            "!!! Warning: short read while loading the AOF file {name}!!!"
        );
        server_log!(
            Warning,
            "!!! Truncating the AOF {name} at offset {} !!!",
            parsed.valid_up_to
        );
        let cut = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| {
                f.set_len(parsed.valid_up_to as u64)
                    .and_then(|_| f.sync_all())
            });
        if let Err(e) = cut {
            server_log!(Warning, "Error truncating the AOF file {name}: {e}");
            return Err(());
        }
        server_log!(
            Warning,
            "AOF {name} loaded anyway because aof-load-truncated is enabled"
        );
    }
    // A command this server does not know stops the load (Redis's loader exits on it).
    for argv in &parsed.cmds {
        if let strata_node::Lookup::Unknown(_) = strata_commands::table().resolve(argv) {
            server_log!(
                Warning,
                "Unknown command '{}' reading the append only file {name}",
                String::from_utf8_lossy(&argv[0])
            );
            return Err(());
        }
    }
    strata_shard::db::set_replaying(true);
    let r = replay(state, parsed.cmds);
    strata_shard::db::set_replaying(false);
    r
}

/// Runs `cmds` through the request path on shard thread 0, as a client of its own.
fn replay(state: &Arc<ServerState>, cmds: Vec<Vec<Bytes>>) -> Result<(), ()> {
    if cmds.is_empty() {
        return Ok(());
    }
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let st = state.clone();
    state.shards.post(
        0,
        Box::new(move || {
            strata_rt::spawn(async move {
                let _ = tx.send(run_commands(&st, cmds).await);
            });
        }),
    );
    match rx.recv() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            server_log!(Warning, "{e}");
            Err(())
        }
        Err(_) => {
            server_log!(Warning, "The AOF loader stopped");
            Err(())
        }
    }
}

async fn run_commands(state: &Arc<ServerState>, cmds: Vec<Vec<Bytes>>) -> Result<(), String> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("Can't create the AOF loading client: {e}"))?;
    ours.set_nonblocking(true)
        .map_err(|e| format!("Can't create the AOF loading client: {e}"))?;
    let conn = strata_rt::net::Stream::from_fd(ours.into())
        .map_err(|e| format!("Can't create the AOF loading client: {e}"))?;
    let id = state
        .next_client_id
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let info = Arc::new(ClientInfo::new(
        id,
        String::new(),
        String::new(),
        -1,
        strata_shard::now_ms(),
        state.config.output_limits().clone(),
    ));
    let mut session = Session::new(info, true);
    session.replaying = true;
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let mut it = cmds.into_iter();
    loop {
        let mut chunk: Vec<Vec<Bytes>> = it.by_ref().take(CHUNK).collect();
        if chunk.is_empty() {
            break;
        }
        Batch {
            state,
            session: &mut session,
            out: &mut out,
            conn: &conn,
        }
        .run(&mut chunk)
        .await;
        out.buf.clear();
    }
    drop(theirs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: &Parsed) -> Vec<String> {
        p.cmds
            .iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    const FILE: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n#TS:1\r\n*3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\n1\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nincr\r\n$1\r\na\r\n*1\r\n$4\r\nEXEC\r\n";

    #[test]
    fn reads_commands_and_annotations() {
        let p = parse(FILE).unwrap();
        assert_eq!(
            words(&p),
            ["SELECT 0", "set a 1", "MULTI", "incr a", "EXEC"]
        );
        assert!(!p.truncated);
        assert_eq!(p.valid_up_to, FILE.len());
    }

    #[test]
    fn every_cut_is_truncation_never_wrong_data() {
        let whole = parse(FILE).unwrap();
        for cut in 0..FILE.len() {
            let p = parse(&FILE[..cut]).unwrap();
            // A prefix of the whole file's commands, never a half MULTI.
            assert!(whole.cmds.starts_with(&p.cmds), "cut {cut}");
            let multis = p.cmds.iter().filter(|c| &c[0][..] == b"MULTI").count();
            let execs = p.cmds.iter().filter(|c| &c[0][..] == b"EXEC").count();
            assert_eq!(multis, execs, "cut {cut}");
            assert!(p.valid_up_to <= cut);
            let again = parse(&FILE[..p.valid_up_to]).unwrap();
            assert_eq!(again.cmds, p.cmds);
            assert!(!again.truncated, "cut {cut}");
        }
    }

    #[test]
    fn bad_format_names_the_offset() {
        assert_eq!(parse(b"hello").unwrap_err(), BadFormat { offset: 0 });
        assert_eq!(
            parse(b"*1\r\n$3\r\nset\r\nxx").unwrap_err(),
            BadFormat { offset: 13 }
        );
        assert_eq!(
            parse(b"*1\r\n$3\r\nsetXX").unwrap_err(),
            BadFormat { offset: 11 }
        );
        assert!(parse(b"*0\r\n").is_err());
        assert!(parse(b"*1\r\n$x\r\n").is_err());
    }

    #[test]
    fn flipped_bytes_never_panic() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            let mut f = FILE.to_vec();
            for _ in 0..3 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng as usize) % f.len();
                f[i] = (rng >> 32) as u8;
            }
            let _ = parse(&f);
        }
    }
}
