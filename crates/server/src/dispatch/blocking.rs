//! Blocking commands (BLPOP, BLMOVE, BZPOPMIN…): attempt, park, wait, attempt again.
//!
//! A blocking command is a barrier. Its task attempts it as a fresh lock owner, on its shard or
//! through the coordinator; if it parks (queued on its keys in the attempt's shard turn or under
//! the coordinator's locks), the task waits for a wake-up, its deadline, CLIENT UNBLOCK or its
//! client's end ([`wait_woken`]). Meanwhile a shard may serve it in the turn of the write that made
//! one of its keys ready, with the runner given here or when it parked; otherwise the task
//! attempts it again. Whatever way the wait ends the command is withdrawn from every queue
//! ([`Leave`]), and a move across shards already claimed for it is waited for
//! ([`settle_claim`]): its element may be on its way.
//!
//! Nothing is served to a client that left while it waited (unless a claimed move had begun, which
//! completes into its destination), and nothing after the command in its pipeline runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use strata_node::clients::UNBLOCK_ERROR;
use strata_node::table::Resolved;
use strata_node::ClientInfo;
use strata_resp::ReplyBuf;
use strata_shard::{current_shard_id, new_owner, now_ms, with_shard, Parked};

use super::shard_cmd::{peer_gone, serve_on, Run};
use super::sub_batch::{run_locked_here, run_locked_on};
use super::Batch;

impl Batch<'_> {
    /// Runs a blocking command: attempts it; if it parks, waits until one of its keys is written
    /// (then attempts again, as the owner its wake-up reserved the key for), its deadline passes
    /// (timeout reply), or its client is gone (no reply; nothing is served to it). See
    /// `strata_shard::park`.
    pub(super) async fn run_blocking(
        &mut self,
        cmd: Resolved,
        args: Vec<Bytes>,
        run: Run,
        shard: Option<usize>,
        out: &mut ReplyBuf,
    ) {
        let set = self.state.shards.clone();
        // Keys on several shards: the shard of each key argument (by index), hashed once.
        let mut shard_at: Vec<usize> = Vec::new();
        if shard.is_none() {
            shard_at = vec![usize::MAX; args.len()];
            cmd.spec
                .for_each_key(&args, |i, _| shard_at[i] = set.shard_of_key(&args[i]));
        }
        let parked = match shard {
            Some(_) => Parked::new(new_owner(), true),
            None => Parked::spanning(
                new_owner(),
                shard_at.iter().copied().min().unwrap_or(usize::MAX),
            ),
        };
        let _leave = Leave {
            set: &set,
            parked: parked.clone(),
        };
        let info = self.session.info.clone();
        let key = cmd.spec.first_key(&args).unwrap_or(0);
        // Keys on several shards: whichever shard's key becomes ready serves it there. (Set
        // before the first attempt: it can only run once that attempt parked the command, and
        // finds nothing while the attempt holds the keys.)
        let mut runner = None;
        if let (None, Some(per_key)) = (shard, cmd.spec.per_key) {
            parked.set_runner(self.per_shard_runner(cmd, &args, &shard_at, run, per_key, &info));
        }
        // A move between two shards: served by messages between them (see `crate::moving`).
        if let (None, Some((from, to))) = (shard, cmd.spec.moves.and_then(|f| f(&args))) {
            parked.set_runner(crate::moving::runner(crate::moving::Move {
                set: set.clone(),
                db: self.session.db,
                src: args[1].clone(),
                dst: args[2].clone(),
                from,
                to,
                src_shard: shard_at[1],
                dst_shard: shard_at[2],
                info: info.clone(),
                proto: self.session.proto,
                cmd_id: cmd.id,
            }));
        }
        let mut first = true;
        loop {
            // Nothing is served to a client that left while it waited. (The first attempt comes
            // right after its command was read, so only a kill is checked then, as in Redis.)
            let gone = if first {
                info.killed.load(Ordering::Relaxed)
            } else {
                // Its socket's end seen by an event (also behind unread input, as `wait_woken`
                // counts it), or already in the socket though no event said so yet.
                self.conn.is_closed() || peer_gone(&info)
            };
            if gone {
                // Nor does anything after it in its pipeline run (see `Woke::Gone`).
                self.session.close_after_reply = true;
                return;
            }
            first = false;
            let (reply, park) = match (shard, run) {
                (Some(shard), run) => {
                    let mut c = self.shard_cmd(args.clone(), cmd, run, key);
                    c.parked = Some(parked.clone());
                    c.info = Some(info.clone());
                    let owner = parked.owner();
                    let (_, r) = if Some(shard) == current_shard_id() {
                        let one = std::slice::from_ref(&c);
                        run_locked_here(&set, owner, one, true, None, usize::MAX).await
                    } else {
                        run_locked_on(&set, shard, owner, vec![c], true, None, usize::MAX).await
                    };
                    (r.buf, r.park)
                }
                (None, Run::Keys(f)) => {
                    let mut buf = ReplyBuf::new(self.session.proto);
                    let park = self
                        .run_keys_as(&cmd, &args, f, &mut buf, parked.owner(), Some(&parked))
                        .await;
                    (buf.buf, park)
                }
                (None, Run::Shard(_)) => {
                    unreachable!("single-shard commands are routed to a shard")
                }
            };
            // Its shard may have served it (on another thread) before this attempt's answer came.
            if let Some(served) = parked.take_reply() {
                out.buf.extend_from_slice(&served);
                return;
            }
            let Some(park) = park else {
                out.buf.extend_from_slice(&reply);
                return;
            };
            if let Some(r) = runner.take() {
                parked.set_runner(r);
            }
            // Blocked from now on, unless a shard served or claimed it already (which clears
            // these marks under the same mutex).
            parked.while_waiting(|| {
                info.blocked.store(true, Ordering::Relaxed);
                info.unblockable.store(true, Ordering::Release);
            });
            let woke = wait_woken(&parked, park.deadline, &info, self.conn).await;
            info.unblockable.store(false, Ordering::Release);
            info.blocked.store(false, Ordering::Relaxed);
            if matches!(woke, Woke::Gone) {
                // Redis frees a client at the read that finds its end: nothing after this command
                // in its pipeline runs (a move claimed for it still completes, below).
                self.session.close_after_reply = true;
            }
            // Served by its shard in the turn that made its key ready: the reply is there. Any
            // other end of the wait first stops the shard from serving it, unless it just did.
            let mut served = match woke {
                Woke::Written => parked.take_reply(),
                _ => parked.close(),
            };
            if served.is_none() && parked.is_claimed() {
                served = settle_claim(&parked).await;
            }
            if let Some(served) = served {
                out.buf.extend_from_slice(&served);
                return;
            }
            match woke {
                Woke::Written => {
                    parked.set_retried();
                    if shard.is_none() {
                        // Attempted again from here (its keys span shards): no shard may serve it
                        // meanwhile, or both could pop. One may have served it just before.
                        runner = parked.take_runner();
                        let mut served = parked.take_reply();
                        if served.is_none() && parked.is_claimed() {
                            served = settle_claim(&parked).await;
                        }
                        if let Some(served) = served {
                            out.buf.extend_from_slice(&served);
                            return;
                        }
                    }
                    continue;
                }
                Woke::Deadline => {
                    out.proto = self.session.proto;
                    park.timeout.write(out);
                    return;
                }
                Woke::Gone => return,
                Woke::Unblocked(how) => {
                    out.proto = self.session.proto;
                    // Redis 7.0 counts a command ended by CLIENT UNBLOCK as a failed call (its
                    // call was counted when it parked), also when it answers as on timeout; the
                    // UNBLOCKED error is an error reply too (INFO errorstats).
                    with_shard(|s| {
                        s.stats.cmd_mut(cmd.id).failed_calls += 1;
                        if how == UNBLOCK_ERROR {
                            s.stats.count_error(b"UNBLOCKED");
                        }
                    });
                    if how == UNBLOCK_ERROR {
                        out.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                    } else {
                        park.timeout.write(out);
                    }
                    return;
                }
            }
        }
    }

    /// The runner of a parked command whose keys span shards and that serves each key on its own
    /// (see [`CommandSpec::per_key`](strata_node::table::CommandSpec::per_key)): on each shard
    /// of `shard_at` (the shard of each key argument, by index; `usize::MAX` for the others), the
    /// command over that shard's keys.
    fn per_shard_runner(
        &self,
        cmd: Resolved,
        args: &[Bytes],
        shard_at: &[usize],
        run: Run,
        per_key: strata_node::table::PerKey,
        info: &Arc<ClientInfo>,
    ) -> strata_shard::Runner {
        let mut shards: Vec<usize> = shard_at
            .iter()
            .copied()
            .filter(|&s| s != usize::MAX)
            .collect();
        shards.sort_unstable();
        shards.dedup();
        let cmds = shards
            .into_iter()
            .map(|s| {
                let own = per_key(args, &mut |i| shard_at[i] == s);
                let key = cmd.spec.first_key(&own).unwrap_or(0);
                let mut c = self.shard_cmd(own, cmd, run, key);
                c.info = Some(info.clone());
                (s, c)
            })
            .collect();
        serve_on(cmds, info.clone())
    }
}

/// Withdraws a parked command from every queue it is in, whatever way its wait ends.
struct Leave<'a> {
    set: &'a strata_shard::ShardSet,
    parked: Arc<Parked>,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        // Waits for a shard running the command right now (a short, synchronous turn), so none
        // does once the task is gone.
        self.parked.close();
        let Some((db, keys)) = self.parked.withdraw() else {
            return;
        };
        let mut per: Vec<Vec<Bytes>> = vec![Vec::new(); self.set.len()];
        for key in keys {
            per[self.set.shard_of_key(&key)].push(key);
        }
        for (shard, keys) in per.into_iter().enumerate().filter(|(_, k)| !k.is_empty()) {
            let p = self.parked.clone();
            // Posted, not run inline: a drop may happen inside `with_shard`.
            self.set.post(
                shard,
                Box::new(move || {
                    with_shard(|s| {
                        for key in &keys {
                            s.unpark(db, key, &p);
                        }
                    })
                }),
            );
        }
    }
}

/// Waits until a claim on `parked` ends (see `crate::moving`): its reply, or None if the claim was
/// given back (the command is still parked, unless its wait ended meanwhile). Whatever ended the
/// wait, a claimed command waits for this: its element may already be on its way.
async fn settle_claim(parked: &Parked) -> Option<Vec<u8>> {
    while parked.is_claimed() {
        parked.woken().await;
    }
    parked.take_reply()
}

/// How a parked command's wait ended.
enum Woke {
    Written,
    Deadline,
    Gone,
    /// CLIENT UNBLOCK, with its reason (`UNBLOCK_TIMEOUT` or `UNBLOCK_ERROR`).
    Unblocked(u8),
}

/// Waits for a wake-up, CLIENT UNBLOCK, the client's end (a kill, or an event on its socket
/// saying it closed or reset it), or the deadline (unix ms), in that order of precedence.
async fn wait_woken(
    parked: &Parked,
    deadline: Option<i64>,
    info: &ClientInfo,
    conn: &strata_rt::net::Stream,
) -> Woke {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;
    let mut woken = pin!(parked.woken());
    let mut unblocked = pin!(info.unblocked());
    let mut closed = pin!(conn.closed());
    let mut timer = pin!(deadline.map(|at| {
        strata_rt::sleep(std::time::Duration::from_millis(
            (at - now_ms()).max(0) as u64
        ))
    }));
    std::future::poll_fn(|cx| {
        if woken.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Woke::Written);
        }
        if let Poll::Ready(how) = unblocked.as_mut().poll(cx) {
            return Poll::Ready(Woke::Unblocked(how));
        }
        // A kill also wakes this task (through `unblocked`'s waker) and shuts the socket down.
        if info.killed.load(Ordering::Relaxed) || closed.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Woke::Gone);
        }
        match timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Woke::Deadline),
            _ => Poll::Pending,
        }
    })
    .await
}
