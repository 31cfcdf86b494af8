//! Listeners (TCP and Unix-domain) and connected stream sockets on the thread's epoll set.
//!
//! A [`Stream`] is any connected stream socket, TCP or Unix: reads and writes are the same
//! `recv`/`send` on its descriptor, so one connection loop serves both. It is used through `&self`
//! (its reader and writer tasks share it in an `Rc`); each direction has one waiting task at a time.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::executor::{try_with_core, with_core};
use crate::reactor::{Dir, IoState};

/// What a system call on a registered socket that failed with `err` calls for.
enum Failed {
    /// Nothing more until the next event (EAGAIN); `cx`'s task is registered for it.
    Wait,
    /// Interrupted: make the call again.
    Retry,
    Error(io::Error),
}

fn failed(err: io::Error, io: &IoState, dir: Dir, cx: &mut Context<'_>) -> Failed {
    match err.raw_os_error() {
        Some(libc::EAGAIN) => {
            io.wait(dir, cx);
            Failed::Wait
        }
        Some(libc::EINTR) => Failed::Retry,
        _ => Failed::Error(err),
    }
}

/// A non-blocking TCP socket listening on `addr`, as [`TcpListener::bind`] makes it (an IPv6
/// address listens for IPv6 only, as Redis's do), without an event loop: what a thread that will
/// not accept on it uses to learn whether the address can be bound.
pub fn tcp_listen_socket(
    addr: SocketAddr,
    backlog: i32,
    reuse_port: bool,
) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        None,
    )?;
    sock.set_reuse_address(true)?;
    if reuse_port {
        sock.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// A listening TCP socket.
pub struct TcpListener {
    sock: std::net::TcpListener,
    io: Rc<IoState>,
}

impl TcpListener {
    /// Binds `addr` with SO_REUSEADDR (and SO_REUSEPORT when `reuse_port`, so that every shard
    /// thread can listen on the same port and the kernel spreads connections over them).
    pub fn bind(addr: SocketAddr, backlog: i32, reuse_port: bool) -> io::Result<TcpListener> {
        let sock = tcp_listen_socket(addr, backlog, reuse_port)?;
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(TcpListener { sock, io })
    }

    /// Takes over a listening socket made elsewhere ([`tcp_listen_socket`], maybe on another
    /// thread), registered on the calling thread's loop; it must be non-blocking.
    pub fn from_std(sock: std::net::TcpListener) -> io::Result<TcpListener> {
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(TcpListener { sock, io })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The next connection, non-blocking and close-on-exec, with its peer's address.
    pub fn accept(&self) -> impl Future<Output = io::Result<(Stream, SocketAddr)>> + '_ {
        std::future::poll_fn(move |cx| loop {
            let (stream, peer) = match poll_accept(self.sock.as_raw_fd(), &self.io, cx) {
                Poll::Ready(Ok(got)) => got,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            // Not an IP peer (a TCP listener has none such): drop it, take the next one.
            if let Some(peer) = peer.as_socket() {
                return Poll::Ready(Ok((stream, peer)));
            }
        })
    }
}

/// One `accept4` on the listening socket `fd`: the connection, registered, with its peer's
/// address; Pending (the task registered) when none is waiting.
fn poll_accept(
    fd: RawFd,
    io: &IoState,
    cx: &mut Context<'_>,
) -> Poll<io::Result<(Stream, socket2::SockAddr)>> {
    loop {
        if !io.ready(Dir::Read) {
            io.register(Dir::Read, cx);
            return Poll::Pending;
        }
        // SAFETY: `try_init` hands accept4 room for any socket address and its length; a
        // returned descriptor is owned by the stream below.
        let accepted = unsafe {
            socket2::SockAddr::try_init(|addr, len| {
                let fd = libc::accept4(
                    fd,
                    addr.cast(),
                    len,
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                );
                if fd < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(fd)
                }
            })
        };
        let (fd, peer) = match accepted {
            Ok(got) => got,
            // A peer gone before it was taken: take the next one.
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) => match failed(e, io, Dir::Read, cx) {
                Failed::Wait => return Poll::Pending,
                Failed::Retry => continue,
                Failed::Error(e) => return Poll::Ready(Err(e)),
            },
        };
        // SAFETY: `fd` was just returned by accept4 and nothing else owns it.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        return Poll::Ready(Stream::registered(sock).map(|s| (s, peer)));
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        try_with_core(|c| c.reactor.deregister(self.sock.as_raw_fd(), &self.io));
    }
}

/// A non-blocking Unix-domain stream socket bound to `path` (which must not exist) and listening;
/// `perm`, when not 0, is the socket file's mode, set before it listens (Redis's
/// `unixsocketperm`). Needs no event loop: a thread may make it and hand it to others
/// ([`UnixListener::from_fd`]).
pub fn unix_listen_socket(path: &Path, backlog: i32, perm: u32) -> io::Result<OwnedFd> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let sock = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
    sock.bind(&SockAddr::unix(path)?)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// A listening Unix-domain stream socket. Several threads may each hold one on the same socket
/// ([`UnixListener::try_clone`]): a connection wakes them all, and the first to accept takes it.
pub struct UnixListener {
    sock: OwnedFd,
    io: Rc<IoState>,
}

impl UnixListener {
    /// Binds `path` and listens on it, on the calling thread's loop (see [`unix_listen_socket`]).
    pub fn bind(path: &Path, backlog: i32, perm: u32) -> io::Result<UnixListener> {
        UnixListener::registered(unix_listen_socket(path, backlog, perm)?)
    }

    fn registered(sock: OwnedFd) -> io::Result<UnixListener> {
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(UnixListener { sock, io })
    }

    /// The same listening socket, registered on the calling thread's loop.
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        UnixListener::registered(self.sock.try_clone()?)
    }

    /// Takes over a listening socket bound elsewhere (on another thread), registered on the
    /// calling thread's loop; it must be non-blocking.
    pub fn from_fd(sock: OwnedFd) -> io::Result<UnixListener> {
        UnixListener::registered(sock)
    }

    /// The next connection, non-blocking and close-on-exec.
    pub fn accept(&self) -> impl Future<Output = io::Result<Stream>> + '_ {
        std::future::poll_fn(move |cx| {
            poll_accept(self.sock.as_raw_fd(), &self.io, cx).map_ok(|(stream, _)| stream)
        })
    }
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        try_with_core(|c| c.reactor.deregister(self.sock.as_raw_fd(), &self.io));
    }
}

/// A connected stream socket, TCP or Unix-domain.
pub struct Stream {
    sock: OwnedFd,
    io: Rc<IoState>,
}

impl Stream {
    fn registered(sock: OwnedFd) -> io::Result<Stream> {
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(Stream { sock, io })
    }

    /// TCP_NODELAY (an error on a Unix-domain socket, which has no such option).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        socket2::SockRef::from(&self.sock).set_nodelay(on)
    }

    /// The local address of a TCP connection (an error on a Unix-domain one).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        socket2::SockRef::from(&self.sock)
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))
    }

    /// Reads what has arrived into `buf` (which must have room for at least one byte); 0 at end
    /// of input. Waits only when the last read found the socket drained and no event came since:
    /// a read that fills less than `buf` is taken as draining it, so the next one waits for an
    /// event instead of asking the kernel again.
    pub fn read<'a>(&'a self, buf: &'a mut [MaybeUninit<u8>]) -> Read<'a> {
        Read { stream: self, buf }
    }

    /// Completes when a read would find input (or the end of it), without taking any.
    pub fn readable(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.io.ready(Dir::Read) {
                Poll::Ready(())
            } else {
                self.io.register(Dir::Read, cx);
                Poll::Pending
            }
        })
    }

    /// Whether an event has said the peer closed its side (or reset, or the socket failed); see
    /// [`Stream::closed`].
    pub fn is_closed(&self) -> bool {
        self.io.read_closed()
    }

    /// Completes once an event says the peer closed its side (or reset, or the socket failed),
    /// whatever input is still unread before that end; takes nothing from the socket. For a task
    /// that is not reading meanwhile (it holds the stream's one read-side wait): a connection
    /// whose command waits learns at once that its client is gone.
    pub fn closed(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.is_closed() {
                Poll::Ready(())
            } else {
                self.io.register(Dir::Read, cx);
                Poll::Pending
            }
        })
    }

    /// Writes all of `buf`, waiting whenever the socket's buffer is full.
    pub fn write_all<'a>(&'a self, buf: &'a [u8]) -> WriteAll<'a> {
        WriteAll { stream: self, buf }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        try_with_core(|c| c.reactor.deregister(self.sock.as_raw_fd(), &self.io));
    }
}

/// See [`Stream::read`].
pub struct Read<'a> {
    stream: &'a Stream,
    buf: &'a mut [MaybeUninit<u8>],
}

impl Future for Read<'_> {
    type Output = io::Result<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let io = &this.stream.io;
        loop {
            if !io.ready(Dir::Read) {
                io.register(Dir::Read, cx);
                return Poll::Pending;
            }
            let room = this.buf.len();
            // SAFETY: `buf` is valid for writes of `room` bytes; the kernel writes at most that.
            let n = unsafe {
                libc::recv(
                    this.stream.sock.as_raw_fd(),
                    this.buf.as_mut_ptr().cast(),
                    room,
                    0,
                )
            };
            if n >= 0 {
                let n = n as usize;
                if n > 0 && n < room {
                    io.drained();
                }
                return Poll::Ready(Ok(n));
            }
            match failed(io::Error::last_os_error(), io, Dir::Read, cx) {
                Failed::Wait => return Poll::Pending,
                Failed::Retry => continue,
                Failed::Error(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// See [`Stream::write_all`].
pub struct WriteAll<'a> {
    stream: &'a Stream,
    buf: &'a [u8],
}

impl Future for WriteAll<'_> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let io = &this.stream.io;
        while !this.buf.is_empty() {
            if !io.ready(Dir::Write) {
                io.register(Dir::Write, cx);
                return Poll::Pending;
            }
            // SAFETY: `buf` is valid for reads of its length; MSG_NOSIGNAL: no SIGPIPE on a
            // closed peer, an EPIPE error instead.
            let n = unsafe {
                libc::send(
                    this.stream.sock.as_raw_fd(),
                    this.buf.as_ptr().cast(),
                    this.buf.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                this.buf = &this.buf[n as usize..];
                continue;
            }
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            match failed(io::Error::last_os_error(), io, Dir::Write, cx) {
                Failed::Wait => return Poll::Pending,
                Failed::Retry => continue,
                Failed::Error(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{block_on, spawn};
    use std::io::{Read as _, Write as _};

    fn listener() -> TcpListener {
        TcpListener::bind("127.0.0.1:0".parse().unwrap(), 16, false).unwrap()
    }

    /// A client connected to `l`, the server's side of it, and "PING\r\n" sent by the client.
    async fn pinged(l: &TcpListener) -> (std::net::TcpStream, Stream) {
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().await.unwrap();
        (&client).write_all(b"PING\r\n").unwrap();
        (client, s)
    }

    /// Counts the system calls a read makes: the reason this crate exists is that a read which
    /// drained the socket is not followed by one that fails.
    #[test]
    fn a_short_read_leaves_the_next_read_waiting_without_a_system_call() {
        block_on(async {
            let l = listener();
            let (mut client, s) = pinged(&l).await;
            let mut buf = vec![MaybeUninit::new(0u8); 64];
            let n = s.read(&mut buf).await.unwrap();
            assert_eq!(n, 6);
            // Drained: the state says so, and a poll of the next read is Pending without reading.
            assert!(!s.io.ready(Dir::Read));
            assert!(crate::poll_once(&mut s.read(&mut buf)).is_pending());
            // New bytes raise a new edge, and the read completes.
            client.write_all(b"PONG\r\n").unwrap();
            let n = s.read(&mut buf).await.unwrap();
            assert_eq!(n, 6);
            // A read that fills the buffer does not assume the socket drained.
            client.write_all(&[b'x'; 100]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut small = vec![MaybeUninit::new(0u8); 10];
            let mut got = 0;
            while got < 100 {
                got += s.read(&mut small).await.unwrap();
            }
            assert_eq!(got, 100);
            drop(client);
            assert_eq!(s.read(&mut buf).await.unwrap(), 0);
        })
        .unwrap();
    }

    /// Input and its end arriving before the server looks: the read that takes the input comes
    /// back short, but the end still has to be read — no new edge will announce it.
    #[test]
    fn the_end_of_input_is_seen_after_a_short_read_of_what_came_before_it() {
        block_on(async {
            let l = listener();
            for how in [std::net::Shutdown::Write, std::net::Shutdown::Both] {
                let (client, s) = pinged(&l).await;
                client.shutdown(how).unwrap();
                // Both the bytes and the FIN are in before the first look.
                std::thread::sleep(std::time::Duration::from_millis(20));
                let mut buf = vec![MaybeUninit::new(0u8); 64];
                assert_eq!(s.read(&mut buf).await.unwrap(), 6);
                let polled = crate::poll_once(&mut s.read(&mut buf));
                assert!(
                    matches!(polled, Poll::Ready(Ok(0))),
                    "{how:?}: end of input not seen"
                );
            }
        })
        .unwrap();
    }

    /// A task that is not reading learns of the peer's end at once, even with input unread before
    /// it (a client gone while its command waits); input alone does not complete it, and takes
    /// nothing from the socket.
    #[test]
    fn closed_completes_at_the_peers_end_behind_unread_input() {
        block_on(async {
            let l = listener();
            for how in [std::net::Shutdown::Write, std::net::Shutdown::Both] {
                let (client, s) = pinged(&l).await;
                // Let the loop see the input's event.
                crate::sleep(std::time::Duration::from_millis(20)).await;
                assert!(
                    crate::poll_once(&mut Box::pin(s.closed())).is_pending(),
                    "{how:?}: input taken for the end"
                );
                client.shutdown(how).unwrap();
                s.closed().await;
                let mut buf = vec![MaybeUninit::new(0u8); 64];
                assert_eq!(s.read(&mut buf).await.unwrap(), 6, "{how:?}: input lost");
                assert_eq!(
                    s.read(&mut buf).await.unwrap(),
                    0,
                    "{how:?}: no end of input"
                );
            }
        })
        .unwrap();
    }

    #[test]
    fn streams_echo_across_tasks_and_big_writes_wait_for_room() {
        block_on(async {
            let l = listener();
            let addr = l.local_addr().unwrap();
            let payload: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
            let expect = payload.clone();
            let reader = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(b"go").unwrap();
                let mut got = Vec::new();
                c.read_to_end(&mut got).unwrap();
                got
            });
            let (s, _) = l.accept().await.unwrap();
            let s = Rc::new(s);
            let mut buf = vec![MaybeUninit::new(0u8); 8];
            assert_eq!(s.read(&mut buf).await.unwrap(), 2);
            let w = s.clone();
            spawn(async move {
                w.write_all(&payload).await.unwrap();
                // SAFETY: the stream's own descriptor.
                unsafe { libc::shutdown(w.as_raw_fd(), libc::SHUT_WR) };
            })
            .await;
            assert_eq!(reader.join().unwrap(), expect);
        })
        .unwrap();
    }

    /// A Unix-domain listener: its file gets the mode asked for, a connection is served like a
    /// TCP one, and a second handle on the same socket (another thread's) takes connections too.
    #[test]
    fn unix_listener_accepts_streams_and_sets_the_files_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("strata-rt-unix-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        block_on(async {
            let l = UnixListener::bind(&path, 16, 0o700).unwrap();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            let other = l.try_clone().unwrap();
            for listener in [&l, &other] {
                let mut client = std::os::unix::net::UnixStream::connect(&path).unwrap();
                let s = listener.accept().await.unwrap();
                assert!(s.set_nodelay(true).is_err());
                assert!(s.local_addr().is_err());
                client.write_all(b"PING\r\n").unwrap();
                let mut buf = vec![MaybeUninit::new(0u8); 64];
                assert_eq!(s.read(&mut buf).await.unwrap(), 6);
                s.write_all(b"+PONG\r\n").await.unwrap();
                let mut got = [0u8; 7];
                client.read_exact(&mut got).unwrap();
                assert_eq!(&got, b"+PONG\r\n");
                drop(client);
                assert_eq!(s.read(&mut buf).await.unwrap(), 0);
            }
        })
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
