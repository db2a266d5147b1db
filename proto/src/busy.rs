//! How long a busy server asks a client to wait: a `Busy` refusal's
//! message ends with `(retry in 1.5 s)`, which people read and clients
//! parse (the frame stays as it was: older clients still show the text).

use std::time::Duration;

/// The longest wait a server may ask for; a longer one is read as this.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// `why`, followed by when to ask again.
pub fn message(why: &str, wait: Duration) -> String {
    format!("{why} (retry in {:.1} s)", wait.as_secs_f64())
}

/// The wait a `Busy` message asks for, if it says one.
pub fn wait(message: &str) -> Option<Duration> {
    let rest = &message[message.rfind("(retry in ")? + "(retry in ".len()..];
    let secs: f64 = rest.strip_suffix(" s)")?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::from_millis((secs.min(MAX_WAIT.as_secs_f64()) * 1000.0).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_wait_said_is_the_wait_read() {
        let m = message("server busy: it serves at most 8 connections", Duration::from_millis(1500));
        assert_eq!(m, "server busy: it serves at most 8 connections (retry in 1.5 s)");
        assert_eq!(wait(&m), Some(Duration::from_millis(1500)));
        assert_eq!(wait("server busy"), None);
        assert_eq!(wait("(retry in NaN s)"), None);
        assert_eq!(wait("(retry in -3 s)"), None);
        assert_eq!(wait("(retry in 1e30 s)"), Some(MAX_WAIT));
    }

    proptest! {
        #[test]
        fn any_message_reads_without_panic(s in ".*") {
            let _ = wait(&s);
        }

        #[test]
        fn any_wait_round_trips(ms in 0u64..300_000) {
            let d = Duration::from_millis(ms / 100 * 100);
            prop_assert_eq!(wait(&message("busy", d)), Some(d));
        }
    }
}
