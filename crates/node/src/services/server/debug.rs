//! DEBUG (Redis's debug.c): the subcommands Strata implements, among them OBJECT, DIGEST,
//! DIGEST-VALUE, SLEEP, SET-ACTIVE-EXPIRE, and the RDB lengths DEBUG OBJECT reports.

use super::*;

/// Whether `enable-debug-command` lets this connection run DEBUG (`local`: loopback only).
pub(super) fn debug_allowed(cx: &ConnCtx<'_>) -> bool {
    match cx
        .server
        .config
        .get("enable-debug-command")
        .unwrap_or_default()
        .as_str()
    {
        "yes" => true,
        "local" => {
            let addr = &cx.session.info.addr;
            addr.starts_with("127.0.0.1:") || addr.starts_with("[::1]:")
        }
        _ => false,
    }
}

/// DEBUG SLEEP seconds | OBJECT key | SET-ACTIVE-EXPIRE 0|1 | PAUSE-CRON 0|1 | ERROR message |
/// LOG message | HELP (and the other subcommands below).
pub(super) fn debug<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if !debug_allowed(cx) {
            return Err(CmdError::msg(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
                 \"local\", you can run it from a local connection, otherwise you need to set \
                 this option in the configuration file, and then restart the server.",
            ));
        }
        let sub = String::from_utf8_lossy(&cx.args[1]).to_ascii_lowercase();
        match (sub.as_str(), cx.args.len()) {
            ("help", 2) => debug_help(cx),
            ("sleep", 3) => {
                // SLEEP suspends this connection only; Redis stops the whole server.
                let secs = c_strtod(&cx.args[2]);
                if secs > 0.0 && secs.is_finite() {
                    (cx.server.sleep)(Duration::from_secs_f64(secs.min(1e9))).await;
                }
                cx.out.ok();
            }
            ("object", 3) => {
                let key = cx.args[2].clone();
                let (db, now) = (cx.session.db, cx.now);
                let shard = cx.shards().shard_of_key(&key);
                let text = cx
                    .shards()
                    .call(shard, move |s| {
                        s.db_mut(db).peek(&key, now).map(|e| debug_object(e, now))
                    })
                    .await
                    .ok_or(CmdError::NoSuchKey)?;
                cx.out.simple(&text);
            }
            ("digest-value", _) => {
                let db = cx.session.db;
                let keys = cx.args[2..].to_vec();
                cx.out.array(keys.len());
                for key in keys {
                    let shard = cx.shards().shard_of_key(&key);
                    let d = cx
                        .shards()
                        .call(shard, move |s| {
                            // As Redis: logically expired keys count until they are removed.
                            s.db(db)
                                .stored(&key)
                                .map_or([0; 20], crate::services::digest::value_digest)
                        })
                        .await;
                    cx.out.simple(&crate::services::digest::hex(&d));
                }
            }
            ("digest", 2) => {
                let per_shard = cx
                    .shards()
                    .call_all(move |s| {
                        (0..s.db_count())
                            .map(|i| {
                                let mut keys = [0u8; 20];
                                let mut any = false;
                                for e in s.db(i).iter_stored() {
                                    any = true;
                                    crate::services::digest::xor(
                                        &mut keys,
                                        &crate::services::digest::key_digest(e),
                                    );
                                }
                                (any, keys)
                            })
                            .collect::<Vec<_>>()
                    })
                    .await;
                let mut dbs = vec![(false, [0u8; 20]); per_shard.first().map_or(0, Vec::len)];
                for shard in per_shard {
                    for (acc, (any, keys)) in dbs.iter_mut().zip(shard) {
                        acc.0 |= any;
                        acc.1.iter_mut().zip(keys).for_each(|(a, b)| *a ^= b);
                    }
                }
                cx.out.simple(&crate::services::digest::hex(
                    &crate::services::digest::dataset_digest(&dbs),
                ));
            }
            ("set-active-expire", 3) => {
                // Redis reads it with atoi: (int) strtol.
                let on = crate::args::c_strtol(&cx.args[2]) as i32 != 0;
                cx.shards().call_all(move |s| s.active_expire = on).await;
                cx.out.ok();
            }
            ("pause-cron", 3) => {
                strata_shard::pause_cron(crate::args::c_strtol(&cx.args[2]) as i32 != 0);
                cx.out.ok();
            }
            ("error", 3) => {
                // The argument is the whole error line, code included.
                cx.out.error(&String::from_utf8_lossy(&cx.args[2]));
            }
            ("quicklist-packed-threshold", 3) => {
                let ok = std::str::from_utf8(&cx.args[2])
                    .ok()
                    .and_then(crate::config::memtoull)
                    .is_some_and(strata_core::list::set_packed_threshold);
                if !ok {
                    return Err(CmdError::msg(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    ));
                }
                cx.out.ok();
            }
            ("log", 3) => {
                crate::server_log!(
                    Warning,
                    "DEBUG LOG: {}",
                    String::from_utf8_lossy(&cx.args[2])
                );
                cx.out.ok();
            }
            ("protocol", 3) => debug_protocol(cx)?,
            _ => return Err(subcommand_syntax_error(cx.args)),
        }
        Ok(())
    })
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type, as Redis sends them (for client tests).
pub(super) fn debug_protocol(cx: &mut ConnCtx<'_>) -> CmdResult {
    let resp3 = cx.out.proto == strata_resp::Protocol::Resp3;
    let out = &mut *cx.out;
    match String::from_utf8_lossy(&cx.args[2])
        .to_ascii_lowercase()
        .as_str()
    {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        "double" => out.double_text("3.141"),
        "bignum" => {
            let n = "1234567999999999999999999999999999999";
            if resp3 {
                out.buf.extend_from_slice(format!("({n}\r\n").as_bytes());
            } else {
                out.bulk(n.as_bytes());
            }
        }
        "null" => out.null(),
        "array" => {
            out.array(3);
            (0..3).for_each(|j| out.int(j));
        }
        "set" => {
            out.set(3);
            (0..3).for_each(|j| out.int(j));
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            // An attribute is not a reply: a real one follows it (RESP2 gets only that).
            if resp3 {
                out.buf.extend_from_slice(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !resp3 {
                return Err(CmdError::msg("ERR RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        _ => {
            return Err(CmdError::msg(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

pub(super) fn debug_help(cx: &mut ConnCtx<'_>) {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
        ],
    );
}

/// DEBUG OBJECT's line, in Redis's format.
pub(super) fn debug_object(e: &strata_core::Entry, now: i64) -> String {
    let v = e.value();
    let refcount = if crate::value::is_shared_int(e) {
        i32::MAX
    } else {
        1
    };
    let lru = e.lru();
    let idle = strata_shard::db::lru_idle(lru_clock(now), lru);
    format!(
        "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{} lru:{lru} \
         lru_seconds_idle:{idle}",
        e as *const strata_core::Entry,
        crate::value::encoding_name(v),
        serialized_len(v)
    )
}

/// The length of a value in an RDB file (Redis's rdbSavedObjectLen), with `rdbcompression` on.
pub(super) fn serialized_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Int(i) => int_encoded_len(i).unwrap_or_else(|| {
            let digits = i.to_string().len();
            rdb_len_size(digits) + digits
        }),
        ValueRef::Inline(s) => rdb_string_len(s),
        ValueRef::Obj(Object::Str(s)) => rdb_string_len(s),
        // Collections: their heap size stands in until the RDB encodings land with persistence.
        ValueRef::Obj(o) => o.heap_size(),
    }
}

/// Bytes of an RDB length prefix.
pub(super) fn rdb_len_size(len: usize) -> usize {
    match len {
        0..=63 => 1,
        64..=16383 => 2,
        _ if len <= u32::MAX as usize => 5,
        _ => 9,
    }
}

/// Bytes of an integer stored in RDB's integer encodings (8, 16 or 32 bits), if it fits one.
pub(super) fn int_encoded_len(i: i64) -> Option<usize> {
    if i8::try_from(i).is_ok() {
        Some(2)
    } else if i16::try_from(i).is_ok() {
        Some(3)
    } else if i32::try_from(i).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// Bytes of a string in RDB: as an integer when it is a short canonical one, LZF-compressed when
/// longer than 20 bytes and compression saves at least 4 bytes, raw otherwise.
pub(super) fn rdb_string_len(s: &[u8]) -> usize {
    if s.len() <= 11 {
        if let Some(n) = strata_core::num::parse_i64(s)
            .filter(|i| i.to_string().as_bytes() == s)
            .and_then(int_encoded_len)
        {
            return n;
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf_compressed_len(s, s.len() - 4) {
            return 1 + rdb_len_size(c) + rdb_len_size(s.len()) + c;
        }
    }
    rdb_len_size(s.len()) + s.len()
}

/// The size liblzf's `lzf_compress` (as built into Redis: HLOG 16, VERY_FAST) produces for
/// `input` with `out_len` bytes of room, or None where it gives up (returns 0). Only the size is
/// computed; the algorithm's decisions are replayed exactly so the size matches Redis's.
pub(super) fn lzf_compressed_len(input: &[u8], out_len: usize) -> Option<usize> {
    const HLOG: u32 = 16;
    const HSIZE: usize = 1 << HLOG;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let idx = |h: u32| ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1);
    let frst = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let next = |v: u32, p: usize| (v << 8) | u32::from(input[p + 2]);

    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    // Positions + 1 (0 = empty slot), like the C version's NULL pointers.
    let mut htab = vec![0usize; HSIZE];
    let (mut ip, mut op, mut lit) = (0usize, 1usize, 0usize);
    let mut hval = frst(ip);
    while ip + 2 < in_len {
        hval = next(hval, ip);
        let slot = idx(hval);
        let reference = htab[slot];
        htab[slot] = ip + 1;
        let matched = reference > 1 && {
            let r = reference - 1;
            r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = reference - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= out_len && op - (lit == 0) as usize + 3 + 1 >= out_len {
                return None;
            }
            op -= (lit == 0) as usize;
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            op += if len < 7 { 1 } else { 2 };
            op += 1; // the low offset byte
            lit = 0;
            op += 1; // start a literal run
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            lit = 0;
            op += 1;
        }
    }
    op -= (lit == 0) as usize;
    Some(op)
}

/// C's strtod on the longest numeric prefix (0 when there is none), as DEBUG SLEEP parses.
pub(super) fn c_strtod(arg: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(64)]);
    let text = text.trim_start();
    (1..=text.len())
        .rev()
        .filter(|&n| text.is_char_boundary(n))
        .find_map(|n| text[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
}
