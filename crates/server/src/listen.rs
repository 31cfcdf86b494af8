//! What the server listens on, and the accept loops.
//!
//! **TCP.** `port` and `bind` settle the addresses as Redis's `listenToPort` does
//! ([`tcp_addrs`]). Every shard thread listens on each address through a socket of its own
//! (SO_REUSEPORT: the kernel spreads connections over the threads, and a connection is served by
//! the thread that accepted it). CONFIG SET `port` or `bind` rebinds while the server runs, as
//! Redis 7 does: the thread running CONFIG SET settles the new addresses and binds every
//! thread's socket for each new one before it answers (so a client may connect at once: the
//! connection waits in the socket's backlog until its thread takes the socket), or changes
//! nothing and fails with Redis's error if one cannot be bound; then each thread takes its new
//! sockets and stops accepting on the addresses no longer wanted ([`Slot`]).
//!
//! **Unix socket.** `unixsocket` is bound once, by the main thread, and every shard thread
//! accepts on the same socket; its clients are addressed as `<path>:0`.

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Poll, Waker};
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::task::AtomicWaker;
use strata_node::config::{BindFailed, Config};
use strata_node::server_log;
use strata_node::ServerState;
use strata_rt::net::{Stream, TcpListener, UnixListener};
use strata_shard::with_shard;

use crate::conn;

/// An OS error's text as C's `strerror` gives it (Redis's log lines carry that), without Rust's
/// " (os error N)".
pub(crate) fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The TCP addresses to listen on, as Redis's `listenToPort` settles them: each `bind` address
/// (`*` is every IPv4 address, `::*` every IPv6 one, a name is resolved) is tried in turn; one
/// that cannot be bound is logged, then skipped when its protocol is unsupported or when it is
/// optional (`-addr`) and not available on this host, and is fatal otherwise. The probe binds
/// without SO_REUSEPORT, so an address another process (another Strata included) listens on
/// fails as Redis's own bind does; addresses in `held` (this server's own) are not probed.
/// `port 0`: no TCP at all.
pub(crate) fn tcp_addrs(
    port: u16,
    bind: &str,
    backlog: i32,
    held: &[SocketAddr],
) -> Result<Vec<SocketAddr>, ()> {
    if port == 0 {
        return Ok(Vec::new());
    }
    let mut addrs = Vec::new();
    for word in bind.split_whitespace() {
        let optional = word.starts_with('-');
        let host = word.strip_prefix('-').unwrap_or(word);
        let v6 = host.contains(':');
        let resolved = match host {
            "*" => Ok(SocketAddr::from(([0u8; 4], port))),
            "::*" => Ok(SocketAddr::from(([0u16; 8], port))),
            _ => (host, port)
                .to_socket_addrs()
                .map_err(|e| {
                    let text = os_error_text(&e);
                    // getaddrinfo's own words, as Redis logs them.
                    match text.strip_prefix("failed to lookup address information: ") {
                        Some(why) => why.to_string(),
                        None => text,
                    }
                })
                .and_then(|mut found| {
                    found
                        .find(|a| a.is_ipv6() == v6)
                        .ok_or_else(|| "Name or service not known".to_string())
                }),
        };
        let failure = match resolved {
            Ok(addr) if held.contains(&addr) => {
                addrs.push(addr);
                continue;
            }
            Ok(addr) => match strata_rt::net::tcp_listen_socket(addr, backlog, false) {
                Ok(_) => {
                    addrs.push(addr);
                    continue;
                }
                Err(e) => (format!("bind: {}", os_error_text(&e)), e.raw_os_error()),
            },
            Err(why) => (why, None),
        };
        server_log!(
            Warning,
            "Warning: Could not create server TCP listening socket {host}:{port}: {}",
            failure.0
        );
        let skip = match failure.1 {
            Some(libc::EADDRNOTAVAIL) => optional,
            Some(
                libc::ENOPROTOOPT
                | libc::EPROTONOSUPPORT
                | libc::ESOCKTNOSUPPORT
                | libc::EPFNOSUPPORT
                | libc::EAFNOSUPPORT,
            ) => true,
            _ => optional && failure.1.is_none(),
        };
        if !skip {
            return Err(());
        }
    }
    Ok(addrs)
}

/// The Unix-domain socket `unixsocket` names, bound and listening (any file already there is
/// removed first, as Redis does), or None without one.
pub(crate) fn unix_listener(
    config: &Config,
) -> Result<Option<(String, std::os::fd::OwnedFd)>, String> {
    let path = config.get("unixsocket").unwrap_or_default();
    if path.is_empty() {
        return Ok(None);
    }
    let _ = std::fs::remove_file(&path);
    let perm =
        u32::from_str_radix(&config.get("unixsocketperm").unwrap_or_default(), 8).unwrap_or(0);
    let backlog = config.get_i64("tcp-backlog") as i32;
    match strata_rt::net::unix_listen_socket(std::path::Path::new(&path), backlog, perm) {
        Ok(fd) => Ok(Some((path, fd))),
        Err(e) => Err(format!(
            "Failed opening Unix socket: bind: {}",
            os_error_text(&e)
        )),
    }
}

/// What each shard thread listens on at start-up.
#[derive(Clone)]
pub(crate) struct Listen {
    pub tcp: Vec<SocketAddr>,
    /// The Unix socket's path as configured (what CLIENT LIST shows) and the listening socket.
    pub unix: Option<(Arc<str>, Arc<std::os::fd::OwnedFd>)>,
}

/// A change of TCP addresses for one thread: the addresses it is to listen on, and the sockets
/// bound for it on those it does not listen on yet.
#[derive(Default)]
struct Update {
    addrs: Vec<SocketAddr>,
    new: Vec<(SocketAddr, std::net::TcpListener)>,
}

/// One shard thread's mailbox for [`Update`]s.
#[derive(Default)]
struct Slot {
    pending: Mutex<Option<Update>>,
    waker: AtomicWaker,
}

/// The addresses the server listens on, and each thread's slot.
struct Listeners {
    held: Mutex<Vec<SocketAddr>>,
    slots: Vec<Slot>,
}

static LISTENERS: OnceLock<Listeners> = OnceLock::new();

/// Records the start-up addresses and installs CONFIG SET's rebinding. Before the threads start.
pub(crate) fn init(threads: usize, tcp: &[SocketAddr]) {
    let _ = LISTENERS.set(Listeners {
        held: Mutex::new(tcp.to_vec()),
        slots: (0..threads).map(|_| Slot::default()).collect(),
    });
    strata_node::config::set_listen_hook(rebind);
}

/// CONFIG SET `port`/`bind`: the new addresses are settled and every thread's socket bound for
/// each new one, or nothing changes (Err; Redis's warnings are logged). The threads then take
/// their sockets and let go of the old addresses.
fn rebind(port: u16, bind: &str, backlog: i32) -> Result<(), BindFailed> {
    let Some(listeners) = LISTENERS.get() else {
        return Err(BindFailed);
    };
    let mut held = listeners.held.lock().unwrap_or_else(|e| e.into_inner());
    let addrs = tcp_addrs(port, bind, backlog, &held).map_err(|()| BindFailed)?;
    let mut new: Vec<Vec<(SocketAddr, std::net::TcpListener)>> =
        listeners.slots.iter().map(|_| Vec::new()).collect();
    for addr in addrs.iter().filter(|a| !held.contains(a)) {
        for sockets in new.iter_mut() {
            match strata_rt::net::tcp_listen_socket(*addr, backlog, true) {
                Ok(sock) => sockets.push((*addr, sock)),
                Err(e) => {
                    server_log!(
                        Warning,
                        "Warning: Could not create server TCP listening socket {addr}: bind: {}",
                        os_error_text(&e)
                    );
                    return Err(BindFailed);
                }
            }
        }
    }
    *held = addrs.clone();
    for (slot, sockets) in listeners.slots.iter().zip(new) {
        let mut pending = slot.pending.lock().unwrap_or_else(|e| e.into_inner());
        // Sockets of an earlier change the thread has not taken yet stay, if still wanted.
        let mut update = pending.take().unwrap_or_default();
        update.new.retain(|(a, _)| addrs.contains(a));
        update.new.extend(sockets);
        update.addrs = addrs.clone();
        *pending = Some(update);
        drop(pending);
        slot.waker.wake();
    }
    Ok(())
}

/// Stops an accept loop (its listener is dropped with it).
#[derive(Default)]
struct Stop {
    stopped: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl Stop {
    fn stop(&self) {
        self.stopped.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.stopped.get() {
                Poll::Ready(())
            } else {
                self.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await
    }
}

thread_local! {
    /// This thread's TCP accept loops, by address.
    static ACCEPTING: RefCell<Vec<(SocketAddr, Rc<Stop>)>> = const { RefCell::new(Vec::new()) };
}

fn spawn_accept(addr: SocketAddr, listener: TcpListener, state: &Arc<ServerState>) {
    let stop = Rc::new(Stop::default());
    ACCEPTING.with(|a| a.borrow_mut().push((addr, stop.clone())));
    strata_rt::spawn(accept_loop(listener, state.clone(), stop));
}

/// A shard thread's listeners at start-up, and the task that applies CONFIG SET's changes.
pub(crate) fn start_thread(
    id: usize,
    listen: &Listen,
    state: &Arc<ServerState>,
) -> Result<(), String> {
    let backlog = state.config.get_i64("tcp-backlog") as i32;
    for addr in &listen.tcp {
        let l = TcpListener::bind(*addr, backlog, true)
            .map_err(|e| format!("could not bind {addr}: {e}"))?;
        spawn_accept(*addr, l, state);
    }
    if let Some((path, fd)) = &listen.unix {
        let l = fd
            .try_clone()
            .and_then(UnixListener::from_fd)
            .map_err(|e| format!("could not listen on {path}: {e}"))?;
        strata_rt::spawn(unix_accept_loop(l, path.clone(), state.clone()));
    }
    strata_rt::spawn(apply_updates(id, state.clone()));
    Ok(())
}

/// Waits for this thread's [`Update`]s and applies them.
async fn apply_updates(id: usize, state: Arc<ServerState>) {
    let Some(slot) = LISTENERS.get().and_then(|l| l.slots.get(id)) else {
        return;
    };
    loop {
        let update = std::future::poll_fn(|cx| {
            slot.waker.register(cx.waker());
            match slot
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                Some(u) => Poll::Ready(u),
                None => Poll::Pending,
            }
        })
        .await;
        ACCEPTING.with(|a| {
            a.borrow_mut().retain(|(addr, stop)| {
                let keep = update.addrs.contains(addr);
                if !keep {
                    stop.stop();
                }
                keep
            })
        });
        for (addr, sock) in update.new {
            match TcpListener::from_std(sock) {
                Ok(l) => spawn_accept(addr, l, &state),
                Err(e) => server_log!(Warning, "Can't listen on {addr}: {e}"),
            }
        }
    }
}

/// Whether a new connection may be served: not while shutting down, and not beyond `maxclients`
/// (the client is told so, and the connection counted as rejected).
fn admit(stream: Stream, state: &ServerState) -> Option<Stream> {
    if state.shutting_down.load(Ordering::Relaxed) {
        return None;
    }
    let max = state.config.get_i64("maxclients").max(1) as u64;
    if state.stats.connected_clients.load(Ordering::Relaxed) >= max {
        with_shard(|s| s.stats.rejected_connections += 1);
        strata_rt::spawn(reject(stream));
        return None;
    }
    Some(stream)
}

/// Redis's reply to a client protected mode turns away.
const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// `protected-mode`: with it on and no password, a TCP client from anywhere but the loopback
/// interface is told so and disconnected (counted as a rejected connection), as Redis does
/// whatever `bind` says. Unix-socket clients are local.
fn protected_from(peer: &SocketAddr, state: &ServerState) -> bool {
    !peer.ip().is_loopback()
        && state.config.get_bool("protected-mode")
        && state.config.get("requirepass").is_none_or(|p| p.is_empty())
}

async fn accept_loop(listener: TcpListener, state: Arc<ServerState>, stop: Rc<Stop>) {
    loop {
        let accepted = match select(Box::pin(listener.accept()), Box::pin(stop.wait())).await {
            Either::Left((accepted, _)) => accepted,
            Either::Right(_) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                server_log!(Verbose, "Accepted {peer}");
                let Some(stream) = admit(stream, &state) else {
                    continue;
                };
                if protected_from(&peer, &state) {
                    with_shard(|s| s.stats.rejected_connections += 1);
                    strata_rt::spawn(async move {
                        let _ = stream.write_all(DENIED).await;
                    });
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let laddr = stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let peer = conn::Peer {
                    addr: peer.to_string(),
                    laddr,
                    unix: false,
                };
                strata_rt::spawn(conn::serve(stream, peer, state.clone()));
            }
            Err(e) => {
                server_log!(Warning, "Accepting client connection: {e}");
                strata_rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Accepts on the Unix socket: a client there is addressed as `<path>:0` on both ends, as Redis
/// shows it.
async fn unix_accept_loop(listener: UnixListener, path: Arc<str>, state: Arc<ServerState>) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                server_log!(Verbose, "Accepted connection to {path}");
                let Some(stream) = admit(stream, &state) else {
                    continue;
                };
                let addr = format!("{path}:0");
                let peer = conn::Peer {
                    laddr: addr.clone(),
                    addr,
                    unix: true,
                };
                strata_rt::spawn(conn::serve(stream, peer, state.clone()));
            }
            Err(e) => {
                server_log!(Warning, "Accepting client connection: {e}");
                strata_rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn reject(stream: Stream) {
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}
