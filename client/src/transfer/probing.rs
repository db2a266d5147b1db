//! How long a transfer waits for its mirrors' probes: while none has
//! answered, as long as they take (a ddftpd hashing a large file for its
//! first `Stat` may take minutes, and is the only way to start); once one
//! has, the others get a grace of four times that mirror's answer (at
//! least [`GRACE_MIN`]), and the download starts with those that answered.
//! One slow or silent mirror (redirects that each take 29 s) no longer
//! holds the start of everyone else.

use std::time::{Duration, Instant};

/// The least grace the other mirrors get after the first answer.
pub(super) const GRACE_MIN: Duration = Duration::from_secs(3);

/// The deadline of the probes still out, if one has answered: `first` is
/// when the first answer came, `started` when probing began; the grace is
/// never longer than the connect timeout (a mirror that has not answered
/// by then joins later, when it does).
pub(super) fn deadline(started: Instant, first: Option<Instant>, connect_timeout: Duration) -> Option<Instant> {
    let first = first?;
    Some(first + (4 * first.saturating_duration_since(started)).max(GRACE_MIN).min(connect_timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_deadline_until_one_answers_then_a_grace_of_four_times_its_wait() {
        let t0 = Instant::now();
        let ct = Duration::from_secs(60);
        assert_eq!(deadline(t0, None, ct), None);
        assert_eq!(deadline(t0, Some(t0 + Duration::from_millis(100)), ct), Some(t0 + Duration::from_millis(3100)));
        assert_eq!(deadline(t0, Some(t0 + Duration::from_secs(2)), ct), Some(t0 + Duration::from_secs(10)));
        let short = Duration::from_secs(1);
        assert_eq!(deadline(t0, Some(t0 + Duration::from_secs(2)), short), Some(t0 + Duration::from_secs(3)));
    }
}
