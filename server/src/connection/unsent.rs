//! How much a connection may queue unsent in the kernel
//! (`TCP_NOTSENT_LOWAT`), by the rate it sends at.
//!
//! The limit is what lets a stream react to the client's `Extend` or
//! `End` within about a round trip: unsent bytes go out blind. But each
//! time the queue drains below it, the task wakes for one more block and
//! one more `sendfile`; at loopback or 10 GbE rates a fixed 512 KiB is a
//! wake-up every few hundred microseconds, about a fifth of the server's
//! CPU per GiB. So the limit holds what the connection sends in
//! [`REACT`]: at the rates of a WAN or a cluster link (below 256 MB/s)
//! that is the floor, as before; faster, the queue grows (to [`CEIL`])
//! while the time to react stays the same.

use std::time::{Duration, Instant};

/// The least the kernel may hold unsent, whatever the rate.
pub(super) const FLOOR: u32 = 512 * 1024;
/// The most.
const CEIL: u32 = 4 << 20;
/// The limit holds about this much of the connection's sending.
const REACT: Duration = Duration::from_millis(2);
/// The rate is measured over this much time at least.
const WINDOW: Duration = Duration::from_millis(20);

/// The rate a connection sends at, and the limit set for it.
#[derive(Debug)]
pub(super) struct UnsentLimit {
    set: u32,
    since: Instant,
    bytes: u64,
}

impl UnsentLimit {
    /// A connection that starts with the limit at [`FLOOR`].
    pub(super) fn new(now: Instant) -> Self {
        UnsentLimit { set: FLOOR, since: now, bytes: 0 }
    }

    /// `bytes` more were handed to the kernel at `now`: the limit to set
    /// if it changes (a power of two, so that a rate that wavers does not
    /// set it again and again).
    pub(super) fn handle_sent(&mut self, bytes: u64, now: Instant) -> Option<u32> {
        self.bytes += bytes;
        let span = now.saturating_duration_since(self.since);
        if span < WINDOW {
            return None;
        }
        let rate = self.bytes as f64 / span.as_secs_f64();
        (self.since, self.bytes) = (now, 0);
        let want = ((rate * REACT.as_secs_f64()) as u64).clamp(u64::from(FLOOR), u64::from(CEIL));
        let want = want.next_power_of_two().min(u64::from(CEIL)) as u32;
        (want != self.set).then(|| {
            self.set = want;
            want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `mb_per_s` for `ms` milliseconds in 256 KiB blocks; the last
    /// limit set.
    fn run(l: &mut UnsentLimit, t: &mut Instant, mb_per_s: f64, ms: u64) -> Option<u32> {
        let block = 256 * 1024u64;
        let every = Duration::from_secs_f64(block as f64 / (mb_per_s * 1e6));
        let end = *t + Duration::from_millis(ms);
        let mut last = None;
        while *t < end {
            *t += every;
            last = l.handle_sent(block, *t).or(last);
        }
        last
    }

    #[test]
    fn wan_and_cluster_rates_keep_the_floor_and_loopback_rates_grow_it_to_the_ceiling() {
        let mut t = Instant::now();
        let mut l = UnsentLimit::new(t);
        assert_eq!(run(&mut l, &mut t, 40.0, 500), None, "320 Mbit/s");
        assert_eq!(run(&mut l, &mut t, 250.0, 500), None, "2 Gbit/s");
        assert_eq!(run(&mut l, &mut t, 1700.0, 500), Some(CEIL), "loopback");
        assert_eq!(run(&mut l, &mut t, 1500.0, 500), None, "a wavering rate sets nothing new");
        assert_eq!(run(&mut l, &mut t, 700.0, 500), Some(2 << 20));
        assert_eq!(run(&mut l, &mut t, 40.0, 500), Some(FLOOR), "back to a slow link");
    }

    #[test]
    fn idle_time_counts_as_slow() {
        let t = Instant::now();
        let mut l = UnsentLimit::new(t);
        assert_eq!(l.handle_sent(64 << 20, t + Duration::from_millis(25)), Some(CEIL));
        assert_eq!(l.handle_sent(1 << 20, t + Duration::from_secs(5)), Some(FLOOR));
    }
}
