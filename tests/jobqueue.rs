//! A job-queue workload, the way Sidekiq/BullMQ-style reliable queues use Redis, run against Strata
//! with more threads than cores: producers LPUSH jobs; consumers take them with BLMOVE or
//! BRPOPLPUSH into a per-consumer processing list and complete them with MULTI/EXEC (LREM from the
//! processing list + SADD to the done set); one consumer dies holding jobs, and a reaper returns its
//! processing list to the queue with WATCH/MULTI/EXEC. Every job must be done exactly once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{key_in, wait_blocked, Conn, Reply, Server};

const PRODUCERS: usize = 3;
const JOBS_PER_PRODUCER: usize = 250;
const CONSUMERS: usize = 4;

fn bulk(r: &Reply) -> Option<String> {
    r.as_bytes().map(|b| String::from_utf8_lossy(b).to_string())
}

/// Asserts that `items` holds `total` distinct jobs, none twice (`what` names what happened to
/// them, for the message).
fn assert_each_once(items: &[String], total: usize, what: &str) {
    let unique: HashSet<&String> = items.iter().collect();
    assert_eq!(unique.len(), items.len(), "a job was {what} twice");
    assert_eq!(
        items.len(),
        total,
        "jobs were lost: {} {what} of {total}",
        items.len()
    );
}

/// Takes one job into `processing` (BLMOVE or BRPOPLPUSH), waiting up to 0.2 s.
fn take(c: &mut Conn, queue: &str, processing: &str, legacy: bool) -> Option<String> {
    let r = if legacy {
        c.call_decoded(&["BRPOPLPUSH", queue, processing, "0.2"])
    } else {
        c.call_decoded(&["BLMOVE", queue, processing, "RIGHT", "LEFT", "0.2"])
    };
    assert!(!r.is_error(), "take failed: {r:?}");
    bulk(&r)
}

#[test]
fn no_job_is_lost_or_done_twice() {
    let s = Server::strata(&["--threads", "5"]);
    // On shard 2: processing lists live on lower and higher shards (both lock orders of a move).
    let queue = key_in(2, "jobs");
    let done = key_in(3, "done");
    let total = PRODUCERS * JOBS_PER_PRODUCER;
    let completions = Arc::new(Mutex::new(Vec::<String>::new()));
    let finished = Arc::new(AtomicBool::new(false));

    // A consumer that dies: takes a few jobs into its processing list and disconnects.
    let dead_processing = key_in(1, "processing:dead");
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (port, queue) = (s.port(), queue.clone());
            thread::spawn(move || {
                let mut c = Conn::connect(port, &format!("producer{p}"));
                for n in 0..JOBS_PER_PRODUCER {
                    let job = format!("p{p}:{n}");
                    assert!(c.call_decoded(&["LPUSH", &queue, &job]).as_int().is_some());
                }
            })
        })
        .collect();
    {
        let mut dead = s.conn();
        for _ in 0..5 {
            // Waits for the producers' first jobs.
            let deadline = Instant::now() + Duration::from_secs(10);
            while take(&mut dead, &queue, &dead_processing, false).is_none() {
                assert!(Instant::now() < deadline, "no job arrived");
            }
        }
    } // disconnected with 5 jobs in its processing list

    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|i| {
            let (port, queue, done) = (s.port(), queue.clone(), done.clone());
            let (completions, finished) = (completions.clone(), finished.clone());
            let processing = key_in((i % 4) as u16, &format!("processing:{i}"));
            thread::spawn(move || {
                let mut c = Conn::connect(port, &format!("consumer{i}"));
                let deadline = Instant::now() + Duration::from_secs(120);
                while !finished.load(Ordering::Relaxed) {
                    assert!(Instant::now() < deadline, "consumers did not finish");
                    let Some(job) = take(&mut c, &queue, &processing, i % 2 == 1) else {
                        continue;
                    };
                    assert_eq!(c.call(&["MULTI"]), b"+OK\r\n");
                    c.call(&["LREM", &processing, "1", &job]);
                    c.call(&["SADD", &done, &job]);
                    let r = c.call_decoded(&["EXEC"]);
                    let replies = r.as_array().expect("EXEC runs: nothing is watched");
                    assert_eq!(replies[0].as_int(), Some(1), "{job} not in {processing}");
                    assert_eq!(replies[1].as_int(), Some(1), "{job} done twice");
                    completions.lock().unwrap().push(job);
                }
                assert_eq!(
                    c.call_decoded(&["LLEN", &processing]).as_int(),
                    Some(0),
                    "jobs left in {processing}"
                );
            })
        })
        .collect();

    // The reaper: returns the dead consumer's jobs to the queue atomically (WATCH, so a concurrent
    // change to the processing list makes it retry).
    let mut reaper = s.conn();
    loop {
        reaper.call(&["WATCH", &dead_processing]);
        let held = reaper.call_decoded(&["LRANGE", &dead_processing, "0", "-1"]);
        let jobs: Vec<String> = held
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(bulk)
            .collect();
        assert_eq!(jobs.len(), 5, "the dead consumer's jobs");
        reaper.call(&["MULTI"]);
        let mut push = vec!["RPUSH", queue.as_str()];
        push.extend(jobs.iter().map(String::as_str));
        reaper.call(&push);
        reaper.call(&["DEL", &dead_processing]);
        if !reaper.call_decoded(&["EXEC"]).is_nil() {
            break;
        }
    }

    for p in producers {
        p.join().expect("producer");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut check = s.conn();
    while check.call_decoded(&["SCARD", &done]).as_int() != Some(total as i64) {
        assert!(Instant::now() < deadline, "jobs were lost");
        thread::sleep(Duration::from_millis(20));
    }
    finished.store(true, Ordering::Relaxed);
    for c in consumers {
        c.join().expect("consumer");
    }
    assert_each_once(&completions.lock().unwrap(), total, "completed");
    assert_eq!(check.call_decoded(&["LLEN", &queue]).as_int(), Some(0));
    assert_eq!(
        check.call_decoded(&["EXISTS", &dead_processing]).as_int(),
        Some(0)
    );
}

/// Sidekiq's fetch: every consumer waits with one BRPOP (or BLMPOP / BZPOPMIN for the sorted-set
/// queues) on several queues that live on different shards, so each waiter is parked on several
/// shards at once and served by whichever shard's queue gets a job. Producers push to all queues,
/// and every job must be taken exactly once — including by clients parked on all the queues that
/// were killed or disconnected before the first job: nothing may be popped for them.
#[test]
fn consumers_waiting_on_queues_of_several_shards_take_every_job_once() {
    let s = Server::strata(&["--threads", "5"]);
    let lists: Vec<String> = (0..4).map(|q| key_in(q, "queue")).collect();
    let zsets: Vec<String> = (0..4).map(|q| key_in(q, "zqueue")).collect();
    let total = PRODUCERS * JOBS_PER_PRODUCER;
    let taken = Arc::new(Mutex::new(Vec::<String>::new()));
    let finished = Arc::new(AtomicBool::new(false));

    // Victims first: parked on every queue (lists and sorted sets, so on every shard), then
    // killed or disconnected before any job exists. Their places in the queues come before every
    // consumer's: a job served to one of them would be lost.
    let mut admin = s.conn();
    let mut victims: Vec<Conn> = (0..6).map(|_| s.conn()).collect();
    let ids: Vec<i64> = victims
        .iter_mut()
        .map(|v| v.call_decoded(&["CLIENT", "ID"]).as_int().expect("an id"))
        .collect();
    for (n, v) in victims.iter_mut().enumerate() {
        let queues = if n % 2 == 0 { &lists } else { &zsets };
        let mut cmd = vec![if n % 2 == 0 { "BRPOP" } else { "BZPOPMIN" }];
        cmd.extend(queues.iter().map(String::as_str));
        cmd.push("0");
        v.send(&cmd);
        wait_blocked(&mut admin, n as i64 + 1);
    }
    for id in &ids[..4] {
        let killed = admin.call_decoded(&["CLIENT", "KILL", "ID", &id.to_string()]);
        assert_eq!(killed.as_int(), Some(1));
    }
    victims.clear();

    let consumers: Vec<_> = (0..CONSUMERS * 2)
        .map(|i| {
            let (port, lists, zsets) = (s.port(), lists.clone(), zsets.clone());
            let (taken, finished) = (taken.clone(), finished.clone());
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut c = Conn::connect(port, &format!("fetcher{i}"));
                while !finished.load(Ordering::Relaxed) {
                    assert!(Instant::now() < deadline, "consumers did not finish");
                    let (jobs, zset) = match i % 3 {
                        0 => {
                            let mut cmd = vec!["BRPOP"];
                            cmd.extend(lists.iter().rev().map(String::as_str));
                            cmd.push("0.1");
                            (c.call_decoded(&cmd), false)
                        }
                        1 => {
                            let mut cmd = vec!["BLMPOP", "0.1", "4"];
                            cmd.extend(lists.iter().map(String::as_str));
                            cmd.extend(["RIGHT", "COUNT", "3"]);
                            (c.call_decoded(&cmd), false)
                        }
                        _ => {
                            let mut cmd = vec!["BZPOPMIN"];
                            cmd.extend(zsets.iter().map(String::as_str));
                            cmd.push("0.1");
                            (c.call_decoded(&cmd), true)
                        }
                    };
                    assert!(!jobs.is_error(), "fetch failed: {jobs:?}");
                    let Some(parts) = jobs.as_array() else {
                        continue;
                    };
                    // BLMPOP: [key, [jobs]]; BRPOP: [key, job]; BZPOPMIN: [key, job, score].
                    let got: Vec<String> = match parts[1].as_array() {
                        Some(items) if !zset => items.iter().filter_map(bulk).collect(),
                        _ => bulk(&parts[1]).into_iter().collect(),
                    };
                    taken.lock().unwrap().extend(got);
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (port, lists, zsets) = (s.port(), lists.clone(), zsets.clone());
            thread::spawn(move || {
                let mut c = Conn::connect(port, &format!("producer{p}"));
                for n in 0..JOBS_PER_PRODUCER {
                    let job = format!("p{p}:{n}");
                    let q = (p + n) % 4;
                    let r = if n % 3 == 2 {
                        c.call_decoded(&["ZADD", &zsets[q], &n.to_string(), &job])
                    } else {
                        c.call_decoded(&["LPUSH", &lists[q], &job])
                    };
                    assert!(r.as_int().is_some(), "push failed: {r:?}");
                }
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while taken.lock().unwrap().len() < total {
        assert!(
            Instant::now() < deadline,
            "jobs were lost: {} of {total} taken",
            taken.lock().unwrap().len()
        );
        thread::sleep(Duration::from_millis(20));
    }
    finished.store(true, Ordering::Relaxed);
    for c in consumers {
        c.join().expect("consumer");
    }
    assert_each_once(&taken.lock().unwrap(), total, "taken");
    let mut check = s.conn();
    for k in lists.iter().chain(&zsets) {
        assert_eq!(check.call_decoded(&["EXISTS", k]).as_int(), Some(0), "{k}");
    }
}

/// Moves between lists on different shards, in both lock orders, under load (more threads than
/// cores): movers wait with BLMOVE or BRPOPLPUSH and short timeouts and are killed while blocked,
/// producers push, a reader holds the destinations in transactions (so some moves wait for a
/// destination's lock, and some give their claim back), and an auditor reads every list in one
/// MULTI/EXEC. No snapshot may show an element in two lists or an acknowledged element in none (a
/// torn move), and at the end every element is in exactly one destination.
#[test]
fn moves_across_shards_stay_atomic_under_kills_timeouts_and_contention() {
    use std::sync::atomic::AtomicUsize;
    const PRODUCERS: usize = 3;
    const PER_PRODUCER: usize = 1000;
    const MOVERS: usize = 8;
    let s = Server::strata(&["--threads", "4"]);
    let srcs: Vec<String> = (0..4).map(|q| key_in(q, "msrc")).collect();
    let dsts: Vec<String> = (0..4).map(|q| key_in(q, "mdst")).collect();
    let all: Vec<String> = srcs.iter().chain(&dsts).cloned().collect();
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let ids = Arc::new(Mutex::new(vec![0i64; MOVERS]));

    // Mover i moves from the source on shard i % 4 to a destination on another shard: movers 0-3
    // one shard up (3 wraps to 0), movers 4-7 two shards up, so both lock orders occur.
    let movers: Vec<_> = (0..MOVERS)
        .map(|i| {
            let src = srcs[i % 4].clone();
            let dst = dsts[(i % 4 + 1 + i / 4) % 4].clone();
            let (port, stop, ids) = (s.port(), stop.clone(), ids.clone());
            thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let mut c = Conn::connect(port, &format!("mover{i}"));
                    ids.lock().unwrap()[i] = c.call_decoded(&["CLIENT", "ID"]).as_int().unwrap();
                    loop {
                        n += 1;
                        let timeout = format!("0.{:02}", 5 + n % 25);
                        if n.is_multiple_of(3) {
                            c.send(&["BRPOPLPUSH", &src, &dst, &timeout]);
                        } else {
                            c.send(&["BLMOVE", &src, &dst, "RIGHT", "LEFT", &timeout]);
                        }
                        // Killed: connect again (whatever it was moving still lands in `dst`).
                        let Ok(raw) = c.try_read_reply() else { break };
                        let r = Reply::decode(&raw);
                        assert!(!r.is_error(), "mover {i}: {r:?}");
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                }
            })
        })
        .collect();

    let killer = {
        let (port, stop, ids) = (s.port(), stop.clone(), ids.clone());
        thread::spawn(move || {
            let mut c = Conn::connect(port, "killer");
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = ids.lock().unwrap()[(n * 5) % MOVERS];
                c.call(&["CLIENT", "KILL", "ID", &id.to_string()]);
                thread::sleep(Duration::from_millis(15));
            }
        })
    };

    // Holds destinations in transactions (shared locks across shards) over and over.
    let contender = {
        let (port, stop, dsts) = (s.port(), stop.clone(), dsts.clone());
        thread::spawn(move || {
            let mut c = Conn::connect(port, "contender");
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                c.call(&["MULTI"]);
                c.call(&["LLEN", &dsts[n % 4]]);
                c.call(&["LRANGE", &dsts[(n + 1) % 4], "0", "-1"]);
                c.call(&["LLEN", &dsts[(n + 3) % 4]]);
                assert!(c.call_decoded(&["EXEC"]).as_array().is_some());
            }
        })
    };

    let auditor = {
        let (port, stop, acked, all) = (s.port(), stop.clone(), acked.clone(), all.clone());
        thread::spawn(move || {
            let mut c = Conn::connect(port, "auditor");
            let mut audits = 0;
            while !stop.load(Ordering::Relaxed) {
                let before = acked.load(Ordering::SeqCst);
                c.call(&["MULTI"]);
                for k in &all {
                    c.call(&["LRANGE", k, "0", "-1"]);
                }
                let r = c.call_decoded(&["EXEC"]);
                let lists = r.as_array().expect("EXEC runs");
                let mut seen = HashSet::new();
                for (k, l) in all.iter().zip(lists) {
                    for e in l.as_array().expect("a list").iter().filter_map(bulk) {
                        assert!(seen.insert(e.clone()), "{e} in two lists at once ({k})");
                    }
                }
                assert!(
                    seen.len() >= before,
                    "{} elements seen, {before} acknowledged before: a move was torn",
                    seen.len()
                );
                audits += 1;
            }
            audits
        })
    };

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (port, srcs, acked) = (s.port(), srcs.clone(), acked.clone());
            thread::spawn(move || {
                let mut c = Conn::connect(port, &format!("producer{p}"));
                for n in 0..PER_PRODUCER {
                    let src = &srcs[(n * 7 + p) % 4];
                    assert!(c
                        .call_decoded(&["LPUSH", src, &format!("p{p}:{n}")])
                        .as_int()
                        .is_some());
                    acked.fetch_add(1, Ordering::SeqCst);
                    if n.is_multiple_of(50) {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    let mut check = s.conn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while srcs
        .iter()
        .any(|k| check.call_decoded(&["LLEN", k]).as_int() != Some(0))
    {
        assert!(Instant::now() < deadline, "the sources were never drained");
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for m in movers {
        m.join().expect("mover");
    }
    killer.join().expect("killer");
    contender.join().expect("contender");
    let audits = auditor.join().expect("auditor");
    assert!(audits > 0);

    let total = PRODUCERS * PER_PRODUCER;
    let mut everything = Vec::new();
    for k in &dsts {
        let l = check.call_decoded(&["LRANGE", k, "0", "-1"]);
        everything.extend(l.as_array().expect("a list").iter().filter_map(bulk));
    }
    assert_each_once(&everything, total, "moved");
}
