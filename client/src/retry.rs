//! One retry policy for everything that asks a mirror again: a producer
//! whose connection failed or stalled, a mirror that did not answer its
//! probe, a server that said it is busy. For the first [`QUICK`] a mirror
//! is asked every [`QUICK_EVERY`] (a restarted server or a flapping link
//! is back within that, and each second away costs its share of the
//! transfer; a refused connection costs nothing); then `--retries` times
//! more, the waits doubling from `--retry-wait` up to [`MAX_WAIT`]. A
//! server that says how long to wait (Busy) is believed, within the same
//! bounds.

use std::time::Duration;

/// The longest wait between two tries.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// How long after a failure a mirror is asked again every [`QUICK_EVERY`].
pub const QUICK: Duration = Duration::from_secs(2);
/// The wait between the quick tries.
pub const QUICK_EVERY: Duration = Duration::from_millis(100);
/// Quick tries before the doubling waits.
const QUICK_TRIES: u32 = (QUICK.as_millis() / QUICK_EVERY.as_millis()) as u32;

/// How often, and after how long, a mirror is asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the quick ones, waits doubling; 0: no retries at all.
    pub retries: u32,
    /// The wait before the first of those; each next one doubles it.
    pub first_wait: Duration,
}

impl Default for RetryPolicy {
    /// Every 0.1 s for 2 s, then 8 retries after 1, 2, 4, 8, 16, 30, 30
    /// and 30 s: a mirror back within a second is used again at once, one
    /// restarted within two minutes still is.
    fn default() -> Self {
        RetryPolicy { retries: 8, first_wait: Duration::from_secs(1) }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub const NEVER: RetryPolicy = RetryPolicy { retries: 0, first_wait: Duration::ZERO };

    /// The wait before try `n` (1 for the first), or `None` once the
    /// budget is spent. `hint`: how long the server asked us to wait.
    pub fn wait(&self, n: u32, hint: Option<Duration>) -> Option<Duration> {
        if n == 0 || self.retries == 0 || n > QUICK_TRIES + self.retries {
            return None;
        }
        let wait = match n.checked_sub(QUICK_TRIES + 1) {
            None => QUICK_EVERY,
            Some(k) => self.first_wait.saturating_mul(1u32 << k.min(16)),
        };
        Some(hint.unwrap_or(wait).min(MAX_WAIT.max(self.first_wait)))
    }

    /// The waits of every try together: how long a peer that tries by this
    /// policy may be away before it gives up.
    pub fn total(&self) -> Duration {
        (1..=self.tries()).filter_map(|n| self.wait(n, None)).sum()
    }

    /// Tries in all (the quick ones and the retries).
    pub fn tries(&self) -> u32 {
        if self.retries == 0 {
            0
        } else {
            QUICK_TRIES + self.retries
        }
    }
}

/// Why none of the mirrors answered at the start, the least final of
/// their failures deciding: retries are for a mirror that answered once
/// and went away, or that is busy, not for one never reached. A name
/// that does not resolve fails at once (as curl, wget and aria2c do); a
/// refused connection gets the quick tries (a server restarting) and no
/// more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtStart {
    /// Every mirror's name resolves to nothing.
    NoSuchHost,
    /// Every mirror refused the connection (or did not resolve).
    Refused,
    /// Some mirror may answer later (busy, timed out, cut off).
    Other,
}

impl AtStart {
    /// Of the failures of one round, each as [`crate::reach::unreached`]
    /// gives it (`None`: reached, or not for that reason).
    pub fn of(failures: impl IntoIterator<Item = Option<crate::reach::Unreached>>) -> AtStart {
        use crate::reach::Unreached;
        failures.into_iter().fold(AtStart::NoSuchHost, |at, f| match (at, f) {
            (AtStart::Other, _) | (_, None) => AtStart::Other,
            (_, Some(Unreached::Refused)) => AtStart::Refused,
            (at, Some(Unreached::NoSuchHost)) => at,
        })
    }
}

impl RetryPolicy {
    /// The wait before try `n` of a start that no mirror answered, `why`
    /// saying how they failed; `None`: give up now.
    pub fn wait_at_start(&self, n: u32, hint: Option<Duration>, why: AtStart) -> Option<Duration> {
        match why {
            AtStart::NoSuchHost => None,
            AtStart::Refused if n > QUICK_TRIES => None,
            _ => self.wait(n, hint),
        }
    }

    /// Tries in all at a start that failed as `why` says.
    pub fn tries_at_start(&self, why: AtStart) -> u32 {
        match why {
            AtStart::NoSuchHost => 0,
            AtStart::Refused => self.tries().min(QUICK_TRIES),
            AtStart::Other => self.tries(),
        }
    }
}

/// Where a mirror stands in its retries.
#[derive(Debug, Clone, Default)]
pub struct Retrying {
    /// Retries made so far.
    pub tries: u32,
    /// The longest wait told so far.
    told: Duration,
}

impl Retrying {
    /// The wait before the next try (counting it), or `None`: give up.
    pub fn next(&mut self, policy: &RetryPolicy, hint: Option<Duration>) -> Option<Duration> {
        self.tries += 1;
        policy.wait(self.tries, hint)
    }

    /// [`next`](Self::next) for a start no mirror answered ([`AtStart`]).
    pub fn next_at_start(&mut self, policy: &RetryPolicy, hint: Option<Duration>, why: AtStart) -> Option<Duration> {
        self.tries += 1;
        policy.wait_at_start(self.tries, hint, why)
    }

    /// What to tell the user of `wait`, the wait before the try just
    /// counted ("{what} again ..."): once for the quick tries, then
    /// whenever the wait grows (a first wait a server asked for is told
    /// as it is). Nothing otherwise: a line every 0.1 s helps no one.
    pub fn tell(&mut self, what: &str, wait: Duration, policy: &RetryPolicy) -> Option<String> {
        let told = match self.tries {
            1 if wait == QUICK_EVERY => format!(
                "{what} again every {:.1} s for {:.0} s, then {} times less often",
                QUICK_EVERY.as_secs_f64(),
                QUICK.as_secs_f64(),
                policy.retries
            ),
            n if wait > self.told.max(QUICK_EVERY) || n == 1 => {
                format!("{what} again in {:.1} s (try {n} of {})", wait.as_secs_f64(), policy.tries())
            }
            _ => return None,
        };
        self.told = wait;
        Some(told)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_tries_then_waits_double_up_to_the_cap_and_the_budget_ends_them() {
        let p = RetryPolicy { retries: 7, first_wait: Duration::from_secs(2) };
        let waits: Vec<_> = (1..=28).map(|n| p.wait(n, None).map(|d| d.as_millis())).collect();
        assert!(waits[..20].iter().all(|w| *w == Some(100)), "{waits:?}");
        let after: Vec<_> = waits[20..].iter().map(|w| w.map(|ms| ms / 1000)).collect();
        assert_eq!(after, [Some(2), Some(4), Some(8), Some(16), Some(30), Some(30), Some(30), None]);
        assert_eq!(p.wait(21, Some(Duration::from_millis(300))), Some(Duration::from_millis(300)));
        assert_eq!(p.wait(1, Some(Duration::from_secs(600))), Some(MAX_WAIT), "a server's hint is bounded too");
        assert_eq!(RetryPolicy::NEVER.wait(1, None), None);
        let mut r = Retrying::default();
        let d = RetryPolicy::default();
        let all: Vec<_> = std::iter::from_fn(|| r.next(&d, None)).map(|w| w.as_millis()).collect();
        assert_eq!(all.len() as u32, d.tries());
        assert_eq!(all[20..], [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        assert_eq!(d.total(), Duration::from_secs(2 + 1 + 2 + 4 + 8 + 16 + 30 + 30 + 30));
        assert_eq!(RetryPolicy::NEVER.total(), Duration::ZERO);
    }

    #[test]
    fn a_start_never_reached_gives_up_sooner() {
        use crate::reach::Unreached::*;
        let p = RetryPolicy::default();
        assert_eq!(AtStart::of([Some(NoSuchHost)]), AtStart::NoSuchHost);
        assert_eq!(AtStart::of([Some(NoSuchHost), Some(Refused)]), AtStart::Refused);
        assert_eq!(AtStart::of([Some(Refused), None]), AtStart::Other);
        assert_eq!(p.wait_at_start(1, None, AtStart::NoSuchHost), None);
        let refused: Vec<_> = (1..).map_while(|n| p.wait_at_start(n, None, AtStart::Refused)).collect();
        assert_eq!(refused.iter().sum::<Duration>(), QUICK, "the quick tries, about 2 s, and no more");
        assert_eq!(refused.len() as u32, p.tries_at_start(AtStart::Refused));
        assert_eq!(p.wait_at_start(25, None, AtStart::Other), p.wait(25, None));
        assert_eq!(RetryPolicy::NEVER.wait_at_start(1, None, AtStart::Refused), None);
    }

    #[test]
    fn the_waits_are_told_once_for_the_quick_tries_then_as_they_grow() {
        let p = RetryPolicy { retries: 3, first_wait: Duration::from_secs(1) };
        let mut r = Retrying::default();
        let mut told = vec![];
        while let Some(w) = r.next(&p, None) {
            told.extend(r.tell("m: asking", w, &p));
        }
        assert_eq!(
            told,
            [
                "m: asking again every 0.1 s for 2 s, then 3 times less often",
                "m: asking again in 1.0 s (try 21 of 23)",
                "m: asking again in 2.0 s (try 22 of 23)",
                "m: asking again in 4.0 s (try 23 of 23)"
            ]
        );
        // A busy server's first wait is told as it is.
        let mut r = Retrying::default();
        let w = r.next(&p, Some(Duration::from_secs(3))).unwrap();
        assert_eq!(r.tell("m: asking", w, &p).unwrap(), "m: asking again in 3.0 s (try 1 of 23)");
    }
}
