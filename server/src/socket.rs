//! The few Linux socket calls tokio does not wrap.
//!
//! - `TCP_NOTSENT_LOWAT` keeps a stream from queueing megabytes of unsent
//!   data in the kernel ahead of the client's `Extend`/`End`.
//! - A block goes out as its 17-byte header (`send` with `MSG_MORE`, so it
//!   shares a segment with the payload) and then `sendfile` from the page
//!   cache: no copy through user space and no block buffer per connection.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// Caps the unsent bytes the kernel will queue on `sock`.
pub fn limit_unsent(sock: &TcpStream, bytes: u32) -> io::Result<()> {
    let v = bytes as libc::c_int;
    // SAFETY: a valid socket descriptor and a pointer to a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn check(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends `header` then `len` bytes of `file` from `offset`, waiting for the
/// socket as needed. A file that shrank under us is an error (the frame's
/// promised length cannot be met, so the connection must close).
pub async fn send_block(sock: &TcpStream, header: &[u8], file: &File, offset: u64, len: usize) -> io::Result<()> {
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
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => sock.writable().await?,
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
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being served")),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => sock.writable().await?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
