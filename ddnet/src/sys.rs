//! The few socket calls tokio does not wrap, in one place: ddnet's links,
//! ddftpd's connections and ddftp's connections to mirrors all use them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use tokio::net::{TcpSocket, TcpStream};

/// Caps the unsent bytes the kernel queues on `sock` (`TCP_NOTSENT_LOWAT`):
/// without a cap the socket buffer grows to megabytes, all of it committed
/// ahead of whatever the application decides next.
pub fn limit_unsent(sock: &TcpStream, bytes: u32) -> io::Result<()> {
    set_tcp(sock, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// Fails `sock` once data it sent stays unacknowledged for `ms`
/// milliseconds (`TCP_USER_TIMEOUT`): a link whose cable is pulled errors
/// then (`ETIMEDOUT`), instead of retransmitting for a quarter of an hour
/// while everything it carried waits.
pub fn fail_when_silent(sock: &TcpStream, ms: u32) -> io::Result<()> {
    set_tcp(sock, libc::TCP_USER_TIMEOUT, ms)
}

fn set_tcp(sock: &TcpStream, opt: libc::c_int, value: u32) -> io::Result<()> {
    let v = value as libc::c_int;
    // SAFETY: a valid socket descriptor and a pointer to a c_int of the size given.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A TCP connection to `remote`, from the local address `local` if given
/// (one NIC of several), else from wherever the OS routes.
pub async fn connect_from(local: Option<IpAddr>, remote: SocketAddr) -> io::Result<TcpStream> {
    let sock = if remote.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    if let Some(l) = local {
        sock.bind(SocketAddr::new(l, 0))?;
    }
    sock.connect(remote).await
}

/// Bytes the peer has acknowledged on `sock`, and the microseconds it has
/// had data unacknowledged (the kernel's busy time), from `TCP_INFO`.
pub fn tcp_progress(sock: &TcpStream) -> Option<(u64, u64)> {
    // SAFETY: tcp_info is plain data; getsockopt fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and a buffer of `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some((info.tcpi_bytes_acked, info.tcpi_busy_time))
}
