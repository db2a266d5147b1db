//! Failed token proofs, throttled per client address: each failure from an
//! address puts it in a penalty twice as long as the last (0.1 s, 0.2 s,
//! ... at most 30 s); a proof that comes during the penalty is refused
//! without being checked, so guessing a token costs its time, not a
//! round trip. A right proof clears the address. Pure: `now` is passed in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first penalty and the longest.
const FIRST: Duration = Duration::from_millis(100);
const LONGEST: Duration = Duration::from_secs(30);
/// Addresses remembered at most; past it those whose penalty ended go.
const REMEMBERED: usize = 65_536;

#[derive(Debug, Default)]
pub struct Throttle {
    strikes: Mutex<HashMap<IpAddr, Strikes>>,
}

#[derive(Debug, Clone, Copy)]
struct Strikes {
    failed: u32,
    until: Instant,
}

impl Throttle {
    /// `Err(wait)` while `ip` is in a penalty: its proof is not checked.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let strikes = self.strikes.lock().expect("not poisoned");
        match strikes.get(&ip) {
            Some(s) if s.until > now => Err(s.until - now),
            _ => Ok(()),
        }
    }

    /// A wrong proof from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut strikes = self.strikes.lock().expect("not poisoned");
        if strikes.len() >= REMEMBERED && !strikes.contains_key(&ip) {
            strikes.retain(|_, s| s.until > now);
        }
        let s = strikes.entry(ip).or_insert(Strikes { failed: 0, until: now });
        s.failed = s.failed.saturating_add(1);
        let penalty = FIRST.saturating_mul(1 << (s.failed - 1).min(16)).min(LONGEST);
        s.until = now + penalty;
    }

    /// A right proof from `ip`: its record goes.
    pub fn succeeded(&self, ip: IpAddr) {
        self.strikes.lock().expect("not poisoned").remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_double_up_to_the_longest_and_a_right_proof_clears_them() {
        let t = Throttle::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let now = Instant::now();
        assert!(t.check(a, now).is_ok());
        t.failed(a, now);
        assert_eq!(t.check(a, now), Err(FIRST));
        assert!(t.check(b, now).is_ok(), "another address is not held back");
        let later = now + FIRST;
        assert!(t.check(a, later).is_ok());
        t.failed(a, later);
        assert_eq!(t.check(a, later), Err(FIRST * 2));
        let mut at = later;
        for _ in 0..20 {
            at += LONGEST;
            t.failed(a, at);
        }
        assert_eq!(t.check(a, at), Err(LONGEST));
        t.succeeded(a);
        assert!(t.check(a, at).is_ok());
    }
}
