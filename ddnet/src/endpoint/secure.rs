//! A link over TLS. Its writer writes frames without waiting, under its
//! own lock and from whichever task has work (see the module above), so
//! the link's TLS is a rustls connection driven by hand on the socket:
//! plaintext in, records out as far as the socket takes them, and the
//! reader decrypting what arrives. One lock per link guards the rustls
//! connection; each side holds it only to encrypt or decrypt what is at
//! hand, never while waiting.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use rustls::Connection;
use tokio::io::{AsyncRead, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use super::unsent::Unsent;
use crate::tls::{explain, TlsAcceptor, TlsConnector};
use crate::wire::Frame;

/// A link's rustls connection, shared by its reader and writer.
pub(super) type Tls = Arc<Mutex<Connection>>;

/// Encrypted bytes rustls may hold for the socket: a few records, so the
/// kernel's `TCP_NOTSENT_LOWAT` stays what bounds what is queued.
const TLS_BUFFER: usize = 256 * 1024;

/// How a connecting end secures its links: the connector and, per route,
/// the name the receiver's certificate must carry there (default: the
/// route's address).
#[derive(Clone)]
pub struct ClientSide {
    pub connector: TlsConnector,
    pub names: Vec<String>,
}

/// The handshake as a client of `name` on `sock`, then `hello` through it.
pub(super) async fn connect(
    connector: &TlsConnector,
    name: &str,
    sock: TcpStream,
    hello: &[u8],
) -> io::Result<(TcpStream, Tls)> {
    let name = crate::tls::server_name(name)?;
    let mut s = connector.connect(name, sock).await.map_err(|e| io::Error::other(explain(&e)))?;
    s.write_all(hello).await?;
    s.flush().await?;
    let (sock, conn) = s.into_inner();
    Ok((sock, tls(conn.into())))
}

/// The handshake as a server on an accepted `sock`, then the link's Hello.
pub(super) async fn accept(acceptor: &TlsAcceptor, sock: TcpStream) -> io::Result<(Frame, TcpStream, Tls)> {
    let mut s = acceptor.accept(sock).await.map_err(|e| io::Error::other(explain(&e)))?;
    let hello = Frame::read_hello(&mut s).await?;
    let (sock, conn) = s.into_inner();
    Ok((hello, sock, tls(conn.into())))
}

fn tls(mut conn: Connection) -> Tls {
    conn.set_buffer_limit(Some(TLS_BUFFER));
    Arc::new(Mutex::new(conn))
}

/// The socket as rustls reads and writes it: one call each, never waiting.
struct Fd<'a>(&'a TcpStream);

fn check(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

const FLAGS: libc::c_int = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;

impl Write for Fd<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the buffer is valid for its length during the call.
        check(unsafe { libc::send(self.0.as_raw_fd(), buf.as_ptr().cast(), buf.len(), FLAGS) })
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: msghdr is plain data; IoSlice is ABI-compatible with
        // iovec, and the slices outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(64) as _;
        check(unsafe { libc::sendmsg(self.0.as_raw_fd(), &msg, FLAGS) })
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Fd<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the buffer is valid for its length during the call.
        check(unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) })
    }
}

/// Writes what is left of `u` through TLS as far as the socket takes it
/// without waiting: true once all of it is encrypted and on the socket.
pub(super) fn try_flush(sock: &TcpStream, tls: &Mutex<Connection>, u: &mut Unsent) -> io::Result<bool> {
    let mut c = tls.lock().expect("tls");
    loop {
        while c.wants_write() {
            match sock.try_io(Interest::WRITABLE, || c.write_tls(&mut Fd(sock))) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        if u.is_written() {
            return Ok(true);
        }
        let n = c.writer().write_vectored(&u.slices())?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        u.advance(n);
    }
}

/// Plaintext a read hands over at most (what it must zero first).
const READ_PIECE: usize = 64 * 1024;

/// A link's reading side over TLS.
pub(super) struct Reader {
    pub(super) rd: OwnedReadHalf,
    pub(super) tls: Tls,
}

impl AsyncRead for Reader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            {
                let mut c = this.tls.lock().expect("tls");
                let want = buf.remaining().min(READ_PIECE);
                match c.reader().read(buf.initialize_unfilled_to(want)) {
                    Ok(n) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // The socket's end without close_notify: the link's own
                    // Close frame says whether the end was orderly.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                    Err(e) => return Poll::Ready(Err(e)),
                }
                let sock = this.rd.as_ref();
                match sock.try_io(Interest::READABLE, || c.read_tls(&mut Fd(sock))) {
                    Ok(_) => {
                        if let Err(e) = c.process_new_packets() {
                            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            ready!(this.rd.as_ref().poll_read_ready(cx))?;
        }
    }
}

/// A link's reading side, plain or TLS.
pub(super) enum LinkReader {
    Plain(OwnedReadHalf),
    Tls(Reader),
}

impl AsyncRead for LinkReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkReader::Plain(r) => Pin::new(r).poll_read(cx, buf),
            LinkReader::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

/// A link's writing side: the socket, and its TLS if any.
pub(super) struct LinkWriter {
    pub(super) wr: tokio::net::tcp::OwnedWriteHalf,
    pub(super) tls: Option<Tls>,
}

impl LinkWriter {
    pub(super) fn sock(&self) -> &TcpStream {
        self.wr.as_ref()
    }
}
