//! What one thread waking another costs on this machine: the floor under the hop table.
//!
//! Two threads pass a token back and forth `--rounds` times. In `sleep` mode each waits for the
//! token in `epoll_wait` on an eventfd and is woken by the other's eventfd write, which is what a
//! Strata shard thread pays when a message reaches it while it sleeps. In `spin` mode each polls
//! an atomic instead: the same hand-over between cores without any thread going to sleep.
//!
//! Prints, per mode, the process's CPU time (user + system, both threads) and the wall time per
//! one-way hand-over, in microseconds: `mode=sleep handovers=N cpu_us=.. wall_us=..`.
//! `bench/hops.py` runs it and divides Strata's extra CPU per operation by it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn cpu_us() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn check(r: libc::c_int, what: &str) -> libc::c_int {
    if r < 0 {
        eprintln!("{what}: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
    r
}

/// One side of the sleeping ping-pong: wait on `mine`, then write `theirs`, `rounds` times.
fn sleeper(mine: libc::c_int, theirs: libc::c_int, rounds: u64, starts: bool) {
    // SAFETY: plain syscalls on descriptors this process owns for the whole run.
    unsafe {
        let ep = check(libc::epoll_create1(0), "epoll_create1");
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        check(
            libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, mine, &mut ev),
            "epoll_ctl",
        );
        let one: u64 = 1;
        let mut buf: u64 = 0;
        if starts {
            libc::write(theirs, (&one as *const u64).cast(), 8);
        }
        for _ in 0..rounds {
            let mut out = libc::epoll_event { events: 0, u64: 0 };
            while libc::epoll_wait(ep, &mut out, 1, -1) != 1 {}
            libc::read(mine, (&mut buf as *mut u64).cast(), 8);
            libc::write(theirs, (&one as *const u64).cast(), 8);
        }
        libc::close(ep);
    }
}

fn run_sleep(rounds: u64) -> (f64, f64) {
    // SAFETY: eventfd creates descriptors this process owns.
    let fds: Vec<libc::c_int> = (0..2)
        .map(|_| check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) }, "eventfd"))
        .collect();
    let (a, b) = (fds[0], fds[1]);
    let (c0, t0) = (cpu_us(), Instant::now());
    let peer = std::thread::spawn(move || sleeper(b, a, rounds, false));
    sleeper(a, b, rounds, true);
    peer.join().expect("peer thread");
    let (cpu, wall) = (cpu_us() - c0, t0.elapsed().as_secs_f64() * 1e6);
    for fd in fds {
        // SAFETY: closing our own descriptors once.
        unsafe { libc::close(fd) };
    }
    (cpu, wall)
}

fn run_spin(rounds: u64) -> (f64, f64) {
    let turn = Arc::new(AtomicU64::new(0));
    let side = |me: u64, turn: Arc<AtomicU64>| {
        move || {
            for i in 0..rounds {
                let want = 2 * i + me;
                while turn.load(Ordering::Acquire) != want {
                    std::hint::spin_loop();
                }
                turn.store(want + 1, Ordering::Release);
            }
        }
    };
    let (c0, t0) = (cpu_us(), Instant::now());
    let peer = std::thread::spawn(side(1, turn.clone()));
    side(0, turn)();
    peer.join().expect("peer thread");
    (cpu_us() - c0, t0.elapsed().as_secs_f64() * 1e6)
}

fn main() {
    let mut rounds: u64 = 50_000;
    let mut modes = vec!["sleep".to_string(), "spin".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--rounds", Some(v)) => rounds = v.parse().unwrap_or(rounds).max(1),
            ("--modes", Some(v)) => modes = v.split(',').map(str::to_string).collect(),
            _ => {
                eprintln!("usage: strata-wakecost [--rounds 50000] [--modes sleep,spin]");
                std::process::exit(2);
            }
        }
    }
    for mode in modes {
        let (cpu, wall) = match mode.as_str() {
            "sleep" => run_sleep(rounds),
            "spin" => run_spin(rounds),
            other => {
                eprintln!("unknown mode {other}: sleep or spin");
                std::process::exit(2);
            }
        };
        let n = (2 * rounds) as f64;
        println!(
            "mode={mode} handovers={} cpu_us={:.2} wall_us={:.2}",
            2 * rounds,
            cpu / n,
            wall / n
        );
    }
}
