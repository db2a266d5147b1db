//! When the kernel wakes a reader that knows more bytes are coming: once
//! about [`PACE`] worth of them at the connection's own rate are there
//! (`SO_RCVLOWAT`), at most [`MOST`], never more than are coming. On
//! loopback or a fast LAN that is a wake and a read per half megabyte
//! instead of one per segment, the largest share of a receiver's CPU after
//! the copy itself; a slow link is woken as often as before (its pace in
//! bytes is small), so no link looks stalled for want of a wake.
//!
//! The bytes "coming" must be ones the peer has committed to send (the
//! rest of a frame whose header arrived): a peer that stops short leaves
//! the reader waiting as a silent peer would, and an end or an error wakes
//! it whatever the mark.

use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// The wait a wake may hold bytes back for, at the rate they came.
pub const PACE: Duration = Duration::from_millis(2);
/// The most bytes a reader waits for.
pub const MOST: usize = 512 * 1024;

/// A socket's low-water mark, set from what its reader knows is coming
/// and the rate reads have brought bytes at.
pub struct Lowat {
    fd: RawFd,
    /// The mark set now (1: the kernel's default).
    set: usize,
    /// Bytes per second the reads brought, if measured.
    rate: Option<f64>,
    /// When the last read ended.
    last: Option<Instant>,
}

impl Lowat {
    pub fn new(sock: &impl AsRawFd) -> Lowat {
        Lowat { fd: sock.as_raw_fd(), set: 1, rate: None, last: None }
    }

    /// Before a read: `coming` bytes are sure to come (0: none known).
    pub fn expect(&mut self, coming: usize) {
        self.mark(mark_for(coming, self.rate));
    }

    /// After a read that brought `n` bytes.
    pub fn got(&mut self, n: usize, now: Instant) {
        if let Some(last) = self.last {
            let secs = now.saturating_duration_since(last).as_secs_f64();
            if secs > 0.0 && n > 0 {
                self.rate = Some(n as f64 / secs);
            }
        }
        self.last = Some(now);
    }

    /// Back to the default: woken by any byte.
    pub fn reset(&mut self) {
        self.mark(1);
    }

    fn mark(&mut self, bytes: usize) {
        if bytes == self.set {
            return;
        }
        let v = bytes as libc::c_int;
        // SAFETY: setsockopt on the socket this mark belongs to, with an int.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        // A socket that refuses keeps waking at every byte: only slower.
        if r == 0 {
            self.set = bytes;
        }
    }
}

/// The mark for `coming` bytes at `rate`: [`PACE`] worth at that rate
/// (nothing measured yet: any byte), within 1..=[`MOST`] and `coming`.
pub fn mark_for(coming: usize, rate: Option<f64>) -> usize {
    let paced = rate.map_or(1.0, |r| r * PACE.as_secs_f64());
    (paced as usize).clamp(1, MOST).min(coming.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_fast_link_waits_for_half_a_megabyte_a_slow_one_for_little() {
        assert_eq!(mark_for(4 << 20, Some(3e9)), MOST);
        assert_eq!(mark_for(100_000, Some(3e9)), 100_000, "never more than is coming");
        assert_eq!(mark_for(4 << 20, Some(20e6)), 40_000);
        assert_eq!(mark_for(4 << 20, Some(10e3)), 20);
        assert_eq!(mark_for(4 << 20, None), 1, "nothing measured: any byte");
        assert_eq!(mark_for(0, Some(3e9)), 1);
    }

    proptest! {
        #[test]
        fn the_mark_is_within_what_is_coming_and_the_pace(coming in 0usize..64 << 20, rate in proptest::option::of(0.0f64..1e11)) {
            let m = mark_for(coming, rate);
            prop_assert!((1..=MOST).contains(&m) && m <= coming.max(1));
            if let Some(r) = rate {
                prop_assert!(m as f64 <= (r * PACE.as_secs_f64()).max(1.0));
            }
        }
    }

    #[tokio::test]
    async fn a_reader_is_woken_once_the_mark_is_there_or_at_the_end() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut a = tokio::net::TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut b, _) = l.accept().await.unwrap();
        let mut mark = Lowat::new(&b);
        mark.rate = Some(1e12);
        mark.expect(1000);
        let mut buf = vec![0; 1000];
        // A read that finds nothing waits for a wake (a read that finds
        // bytes takes them whatever the mark: only the wake waits).
        let early = tokio::time::timeout(Duration::from_millis(100), async {
            let (r, _) = tokio::join!(b.read(&mut buf), async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                a.write_all(&[1; 600]).await.unwrap();
            });
            r
        })
        .await;
        assert!(early.is_err(), "woken before the mark");
        a.write_all(&[2; 400]).await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), b.read(&mut buf)).await.unwrap().unwrap();
        assert_eq!(n, 1000);
        // Short of the mark, the peer's end wakes it.
        mark.expect(1000);
        a.write_all(&[3; 10]).await.unwrap();
        a.shutdown().await.unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), b.read(&mut buf)).await.unwrap().unwrap();
        assert_eq!(n, 10);
        mark.reset();
        assert_eq!(mark.set, 1);
    }
}
