//! Replies: the batch's replies, written in request order.
//!
//! Each command left a [`Slot`] saying where its reply is: in the batch's local buffer, among a
//! sub-batch's replies, an EXEC's header and then its body's, or a split command's parts, merged
//! here as Redis Cluster's response policies say. When one buffer already holds every reply in
//! order, it becomes the output rather than being copied into it ([`Batch::hand_over`]). Only the
//! connection's thread writes replies; a remote shard only fills buffers.

use strata_resp::ReplyBuf;

use super::route::Merge;
use super::shard_cmd::ShardReplies;
use super::spare;
use super::{Batch, Slot};

impl Batch<'_> {
    /// This client's invalidations of keys evicted before its command (by maxmemory or the
    /// tracking table's limit) go before the command's reply, as Redis evicts before the command
    /// runs, not after the batch like those of its own writes.
    pub(super) fn held_invalidations_first(
        &self,
        local: &mut ReplyBuf,
        slots: &mut Vec<(Slot, bool)>,
    ) {
        let Some(t) = self.session.tracking.as_ref() else {
            return;
        };
        let start = local.buf.len();
        for m in t.take_held() {
            local.buf.extend_from_slice(&m);
        }
        if local.buf.len() > start {
            slots.push((Slot::Local(start, local.buf.len()), false));
        }
    }

    /// Appends the replies of `slots`, in order, to `out` and empties `slots`. `starts` tracks how
    /// far each sub-batch's replies have been taken.
    /// When one reply buffer holds the whole batch's replies in order (a lone command, or a
    /// pipeline that ran in one sub-batch) and nothing is in `out` yet, it becomes `out` instead
    /// of being copied into it: a big value was copied twice on its way to the socket (a GET of
    /// 64 KB cost 1.84× Redis's instructions). The buffer given back in exchange is the empty
    /// `out`.
    pub(super) fn hand_over(
        &mut self,
        slots: &mut Vec<(Slot, bool)>,
        local: &mut ReplyBuf,
        done: &mut [ShardReplies],
    ) {
        if !self.out.buf.is_empty() || slots.len() != 1 {
            return;
        }
        let buf = match &slots[0] {
            (Slot::Local(0, end), false) if *end == local.buf.len() => &mut local.buf,
            (Slot::Remote { batch: 0, index: 0 }, false)
                if done.len() == 1 && done[0].ends == [done[0].buf.len()] =>
            {
                &mut done[0].buf
            }
            _ => return,
        };
        std::mem::swap(&mut self.out.buf, buf);
        slots.clear();
    }

    pub(super) fn assemble(
        &mut self,
        slots: &mut Vec<(Slot, bool)>,
        local: &ReplyBuf,
        done: &[ShardReplies],
        starts: &mut Vec<usize>,
    ) {
        if starts.capacity() == 0 && !done.is_empty() {
            *starts = spare::take_starts();
        }
        starts.resize(done.len(), 0);
        let mut remote = |batch: usize, index: usize| {
            let r = &done[batch];
            let (s, e) = (starts[batch], r.ends[index]);
            starts[batch] = e;
            &r.buf[s..e]
        };
        for (slot, suppress) in slots.drain(..) {
            let out = &mut self.out.buf;
            match slot {
                Slot::Local(s, e) if !suppress => out.extend_from_slice(&local.buf[s..e]),
                Slot::Local(..) => {}
                Slot::Remote { batch, index } => {
                    let bytes = remote(batch, index);
                    if !suppress {
                        out.extend_from_slice(bytes);
                    }
                }
                Slot::Txn(s, e, parts) => {
                    if !suppress {
                        out.extend_from_slice(&local.buf[s..e]);
                    }
                    for (batch, index) in parts {
                        let bytes = remote(batch, index);
                        if !suppress {
                            out.extend_from_slice(bytes);
                        }
                    }
                }
                Slot::Split(parts, merge) => {
                    let replies: Vec<&[u8]> =
                        parts.into_iter().map(|(b, i)| remote(b, i)).collect();
                    if !suppress {
                        merge_replies(&merge, &replies, out);
                    }
                }
            }
        }
    }
}

/// Writes the reply of a split command (see [`Merge`]) from its parts' replies, which are the
/// replies of the same command over fewer keys: an integer each (sum), OK each (all succeeded), or
/// an array of bulk strings and nulls each (concatenation). A part that answered anything else (an
/// error) is the reply, as the first failing shard's reply is in Redis Cluster's policies. Nothing
/// if a reply was dropped (the client passed its output limit and is being closed).
fn merge_replies(merge: &Merge, replies: &[&[u8]], out: &mut Vec<u8>) {
    if replies.iter().any(|r| r.is_empty()) {
        return;
    }
    let odd = |want: u8| replies.iter().find(|r| r[0] != want).copied();
    match merge {
        Merge::Sum => {
            if let Some(r) = odd(b':') {
                out.extend_from_slice(r);
                return;
            }
            let total: i64 = replies
                .iter()
                .map(|r| {
                    resp_line(&r[1..])
                        .and_then(strata_core::num::parse_i64)
                        .unwrap_or(0)
                })
                .sum();
            out.push(b':');
            out.extend_from_slice(total.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Merge::AllOk => match replies.iter().find(|r| **r != b"+OK\r\n") {
            Some(r) => out.extend_from_slice(r),
            None => out.extend_from_slice(b"+OK\r\n"),
        },
        Merge::Concat(order) => {
            if let Some(r) = odd(b'*') {
                out.extend_from_slice(r);
                return;
            }
            // Each part's elements, in its keys' order.
            let mut rest: Vec<&[u8]> = replies
                .iter()
                .map(|r| resp_line(&r[1..]).map_or(&[][..], |l| &r[l.len() + 3..]))
                .collect();
            out.push(b'*');
            out.extend_from_slice(order.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            for &p in order {
                let part = &mut rest[p as usize];
                let n = resp_element_len(part).min(part.len());
                out.extend_from_slice(&part[..n]);
                *part = &part[n..];
            }
        }
    }
}

/// The text of a RESP line (up to its CRLF).
fn resp_line(b: &[u8]) -> Option<&[u8]> {
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    Some(&b[..end])
}

/// The length of the RESP element at the start of `b`: a bulk string (`$len`, or `$-1` null), or
/// a one-line element (RESP3 `_` null, integers, simple strings).
fn resp_element_len(b: &[u8]) -> usize {
    let Some(line) = resp_line(b) else {
        return b.len();
    };
    let head = line.len() + 2;
    match (b.first(), strata_core::num::parse_i64(&line[1..])) {
        (Some(b'$'), Some(len)) if len >= 0 => head + len as usize + 2,
        _ => head,
    }
}
