//! TCP listeners and streams on the thread's epoll set.
//!
//! A stream is used through `&self` (its reader and writer tasks share it in an `Rc`); each
//! direction has one waiting task at a time.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
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

/// A listening socket.
pub struct TcpListener {
    sock: std::net::TcpListener,
    io: Rc<IoState>,
}

impl TcpListener {
    /// Binds `addr` with SO_REUSEADDR (and SO_REUSEPORT when `reuse_port`, so that every shard
    /// thread can listen on the same port and the kernel spreads connections over them).
    pub fn bind(addr: SocketAddr, backlog: i32, reuse_port: bool) -> io::Result<TcpListener> {
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
        let sock: std::net::TcpListener = sock.into();
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(TcpListener { sock, io })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The next connection, non-blocking and close-on-exec, with its peer's address.
    pub fn accept(&self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + '_ {
        std::future::poll_fn(move |cx| loop {
            if !self.io.ready(Dir::Read) {
                self.io.register(Dir::Read, cx);
                return Poll::Pending;
            }
            // SAFETY: `try_init` hands accept4 room for any socket address and its length; a
            // returned descriptor is owned by the stream below.
            let accepted = unsafe {
                socket2::SockAddr::try_init(|addr, len| {
                    let fd = libc::accept4(
                        self.sock.as_raw_fd(),
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
                Err(e) => match failed(e, &self.io, Dir::Read, cx) {
                    Failed::Wait => return Poll::Pending,
                    Failed::Retry => continue,
                    Failed::Error(e) => return Poll::Ready(Err(e)),
                },
            };
            // SAFETY: `fd` was just returned by accept4 and nothing else owns it.
            let sock = unsafe { std::net::TcpStream::from_raw_fd(fd) };
            let Some(peer) = peer.as_socket() else {
                // Not an IP peer (a TCP listener has none such): drop it, take the next one.
                continue;
            };
            return Poll::Ready(TcpStream::registered(sock).map(|s| (s, peer)));
        })
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        try_with_core(|c| c.reactor.deregister(self.sock.as_raw_fd(), &self.io));
    }
}

/// A connected socket.
pub struct TcpStream {
    sock: std::net::TcpStream,
    io: Rc<IoState>,
}

impl TcpStream {
    fn registered(sock: std::net::TcpStream) -> io::Result<TcpStream> {
        let io = with_core(|c| c.reactor.register(sock.as_raw_fd()))?;
        Ok(TcpStream { sock, io })
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.sock.set_nodelay(on)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
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
    /// [`TcpStream::closed`].
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

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        try_with_core(|c| c.reactor.deregister(self.sock.as_raw_fd(), &self.io));
    }
}

/// See [`TcpStream::read`].
pub struct Read<'a> {
    stream: &'a TcpStream,
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

/// See [`TcpStream::write_all`].
pub struct WriteAll<'a> {
    stream: &'a TcpStream,
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
    async fn pinged(l: &TcpListener) -> (std::net::TcpStream, TcpStream) {
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
}
