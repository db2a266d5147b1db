//! The few Linux socket calls tokio does not wrap.
//!
//! - `TCP_NOTSENT_LOWAT` keeps a stream from queueing megabytes of unsent
//!   data in the kernel ahead of the client's `Extend`/`End` (the call is
//!   [`ddnet::sys`]'s, shared with ddftp and ddnet).
//! - A block goes out as its 17-byte header (`send` with `MSG_MORE`, so it
//!   shares a segment with the payload) and then `sendfile` from the page
//!   cache: no copy through user space and no block buffer per connection.
//! - Over TLS the bytes must pass through the encryption in user space:
//!   a block is read in pieces of [`COPY_PIECE`] into one buffer per
//!   connection and written through rustls (the kernel here may have no
//!   `tls` module to offload it to; see docs/tls.md).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use ddnet::tls::WriteHalf;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

pub use ddnet::sys::limit_unsent;

fn check(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// What a TLS connection reads of a block at a time.
pub const COPY_PIECE: usize = 256 * 1024;

/// Sends `header` then `len` bytes of `file` from `offset`, waiting for the
/// socket as needed: with `sendfile` on a plain connection, through `buf`
/// and rustls on a TLS one. A file that shrank under us is an error (the
/// frame's promised length cannot be met, so the connection must close).
pub async fn send_block(
    wr: &mut WriteHalf,
    header: &[u8],
    file: &File,
    offset: u64,
    len: usize,
    idle: Duration,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let WriteHalf::Plain(w) = wr else { return copy_block(wr, header, file, offset, len, idle, buf).await };
    sendfile_block(w.as_ref(), header, file, offset, len, idle).await
}

async fn copy_block(
    wr: &mut WriteHalf,
    header: &[u8],
    file: &File,
    offset: u64,
    len: usize,
    idle: Duration,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    write_within(wr, header, idle).await?;
    buf.resize(COPY_PIECE.min(len), 0);
    let end = offset + len as u64;
    let mut at = offset;
    while at < end {
        let want = ((end - at) as usize).min(buf.len());
        let got = file.read_at(&mut buf[..want], at)?;
        if got == 0 {
            return Err(shrank());
        }
        write_within(wr, &buf[..got], idle).await?;
        at += got as u64;
    }
    flush_within(wr, idle).await
}

fn shrank() -> io::Error {
    io::Error::other("file shrank while being served")
}

async fn sendfile_block(
    sock: &TcpStream,
    header: &[u8],
    file: &File,
    offset: u64,
    len: usize,
    idle: Duration,
) -> io::Result<()> {
    let fd = sock.as_raw_fd();
    let mut done = 0;
    while done < header.len() {
        let rest = &header[done..];
        // SAFETY: `rest` is a valid buffer of the length given; fd is a socket.
        let r = sock.try_io(Interest::WRITABLE, || {
            check(unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_MORE | libc::MSG_NOSIGNAL) })
        });
        match r {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => writable(sock, idle).await?,
            Err(e) => return Err(e),
        }
    }
    let end = offset + len as u64;
    let mut off = offset as libc::off_t;
    while (off as u64) < end {
        let want = (end - off as u64) as usize;
        // SAFETY: both descriptors are open; `off` is a valid off_t the call advances.
        let r =
            sock.try_io(Interest::WRITABLE, || check(unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, want) }));
        match r {
            Ok(0) => return Err(shrank()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => writable(sock, idle).await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits until `sock` takes more data; a client that takes nothing for
/// `idle` (it stopped reading) is an error, so it cannot hold a
/// connection slot forever.
async fn writable(sock: &TcpStream, idle: Duration) -> io::Result<()> {
    tokio::time::timeout(idle, sock.writable()).await.unwrap_or_else(|_| Err(not_reading(idle)))
}

/// The error for a client that accepted no data for `idle`.
pub fn not_reading(idle: Duration) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("the client accepted no data for {:.0} s", idle.as_secs_f64()))
}

/// Writes all of `buf` and flushes it (TLS holds its last record until
/// then); a client that accepts nothing for `idle` is an error.
pub async fn write_all_within(wr: &mut WriteHalf, buf: &[u8], idle: Duration) -> io::Result<()> {
    write_within(wr, buf, idle).await?;
    flush_within(wr, idle).await
}

async fn flush_within(wr: &mut (impl AsyncWrite + Unpin), idle: Duration) -> io::Result<()> {
    tokio::time::timeout(idle, wr.flush()).await.unwrap_or_else(|_| Err(not_reading(idle)))
}

async fn write_within(wr: &mut (impl AsyncWrite + Unpin), buf: &[u8], idle: Duration) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match tokio::time::timeout(idle, wr.write(&buf[done..])).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => done += n,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(not_reading(idle)),
        }
    }
    Ok(())
}
