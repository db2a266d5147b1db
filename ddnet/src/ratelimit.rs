//! One token bucket for a whole process: ddftpd's `--rate-limit` (operators
//! cap what it takes from a shared link; tests make mirrors of different
//! speeds on one machine) and `ddftp`'s `--limit-rate` (the total over all
//! mirrors: every producer takes from it as its blocks arrive, so a slow
//! mirror keeps its pace and the fast ones are held back). The rate can
//! change while running (the demo slows a mirror down half way).

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Shared byte budget; `None` rate means unlimited. Nothing a holder of
/// its lock does can poison it for the others (a lock poisoned by a panic
/// elsewhere is taken as it is: the bucket is always consistent).
#[derive(Debug)]
pub struct RateLimiter {
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rate: Option<u64>,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    pub fn new(rate: Option<u64>) -> Self {
        RateLimiter { state: Mutex::new(Bucket { rate, tokens: 0.0, last: Instant::now() }) }
    }

    pub fn set_rate(&self, rate: Option<u64>) {
        let mut b = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        b.rate = rate;
        b.tokens = b.tokens.min(0.0);
        b.last = Instant::now();
    }

    pub fn rate(&self) -> Option<u64> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).rate
    }

    /// Takes `n` bytes from the bucket, waiting as long as the debt needs.
    /// The bucket holds at most 50 ms of tokens, so an idle period does not
    /// turn into a burst.
    pub async fn acquire(&self, n: usize) {
        let wait = {
            let mut b = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // (A rate of 0 is no limit: it never divides a wait.)
            let Some(rate) = b.rate.filter(|&r| r > 0) else { return };
            let now = Instant::now();
            let rate = rate as f64;
            let burst = rate * 0.05;
            b.tokens = (b.tokens + rate * now.duration_since(b.last).as_secs_f64()).min(burst);
            b.last = now;
            b.tokens -= n as f64;
            if b.tokens >= 0.0 {
                return;
            }
            Duration::from_secs_f64(-b.tokens / rate)
        };
        tokio::time::sleep(wait).await;
    }
}
