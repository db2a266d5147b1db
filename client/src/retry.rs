//! One retry policy for everything that asks a mirror again: a producer
//! whose connection failed or stalled, a mirror that did not answer its
//! probe, a server that said it is busy. Waits double from the first
//! (`--retry-wait`) up to [`MAX_WAIT`], for `--retries` tries; a server
//! that says how long to wait (Busy) is believed, within the same bounds.

use std::time::Duration;

/// The longest wait between two tries.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// How often, and after how long, a mirror is asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first failure; 0: none.
    pub retries: u32,
    /// The wait before the first retry; each next one doubles it.
    pub first_wait: Duration,
}

impl Default for RetryPolicy {
    /// 8 retries, waiting 0.5, 1, 2, 4, 8, 16, 30 and 30 s: a mirror back
    /// within a second is used again a moment later, one restarted within
    /// a minute and a half still is.
    fn default() -> Self {
        RetryPolicy { retries: 8, first_wait: Duration::from_millis(500) }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub const NEVER: RetryPolicy = RetryPolicy { retries: 0, first_wait: Duration::ZERO };

    /// The wait before retry `n` (1 for the first), or `None` once the
    /// budget is spent. `hint`: how long the server asked us to wait.
    pub fn wait(&self, n: u32, hint: Option<Duration>) -> Option<Duration> {
        if n == 0 || n > self.retries {
            return None;
        }
        let doubled = self.first_wait.saturating_mul(1u32 << (n - 1).min(16));
        Some(hint.unwrap_or(doubled).min(MAX_WAIT.max(self.first_wait)))
    }
}

/// Where a mirror stands in its retries.
#[derive(Debug, Clone, Default)]
pub struct Retrying {
    /// Retries made so far.
    pub tries: u32,
}

impl Retrying {
    /// The wait before the next try (counting it), or `None`: give up.
    pub fn next(&mut self, policy: &RetryPolicy, hint: Option<Duration>) -> Option<Duration> {
        self.tries += 1;
        policy.wait(self.tries, hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_the_budget_ends_them() {
        let p = RetryPolicy { retries: 7, first_wait: Duration::from_secs(2) };
        let waits: Vec<_> = (1..=8).map(|n| p.wait(n, None).map(|d| d.as_secs())).collect();
        assert_eq!(waits, [Some(2), Some(4), Some(8), Some(16), Some(30), Some(30), Some(30), None]);
        assert_eq!(p.wait(1, Some(Duration::from_millis(300))), Some(Duration::from_millis(300)));
        assert_eq!(p.wait(1, Some(Duration::from_secs(600))), Some(MAX_WAIT), "a server's hint is bounded too");
        assert_eq!(RetryPolicy::NEVER.wait(1, None), None);
        let mut r = Retrying::default();
        let d = RetryPolicy::default();
        let all: Vec<_> = std::iter::from_fn(|| r.next(&d, None)).map(|w| w.as_millis()).collect();
        assert_eq!(all, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    }
}
