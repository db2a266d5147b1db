//! What one connection served, for its access log line: the paths it
//! streamed and the bytes of each, written once when the connection ends
//! (target `ddftpd::access`, so an operator can route or filter it).

use std::net::SocketAddr;
use std::time::Duration;

use super::ConnError;

/// Paths named one by one in the line; past them only counted.
const PATHS_NAMED: usize = 8;

/// Paths streamed on one connection, with their bytes, in first-use order.
#[derive(Debug, Default)]
pub(super) struct Served {
    paths: Vec<(String, u64)>,
    /// Bytes of paths past [`PATHS_NAMED`].
    others: u64,
    more: usize,
    blocks: u64,
}

impl Served {
    /// The slot `path`'s bytes are counted in.
    pub(super) fn path(&mut self, path: &str) -> usize {
        if let Some(i) = self.paths.iter().position(|(p, _)| p == path) {
            return i;
        }
        if self.paths.len() < PATHS_NAMED {
            self.paths.push((path.to_string(), 0));
            return self.paths.len() - 1;
        }
        self.more += 1;
        usize::MAX
    }

    /// One block of `bytes` sent for the path in `slot`.
    pub(super) fn sent(&mut self, slot: usize, bytes: u64) {
        self.blocks += 1;
        match self.paths.get_mut(slot) {
            Some((_, n)) => *n += bytes,
            None => self.others += bytes,
        }
    }

    pub(super) fn bytes(&self) -> u64 {
        self.paths.iter().map(|(_, n)| n).sum::<u64>() + self.others
    }

    /// The access log line of a connection that ended with `result`.
    pub(super) fn log(&self, peer: SocketAddr, subject: Option<&str>, took: Duration, result: &Result<(), ConnError>) {
        // A client names its paths: escaped, so a line is always one line.
        let mut paths: Vec<String> = self.paths.iter().map(|(p, n)| format!("{}:{n}", p.escape_debug())).collect();
        if self.more > 0 {
            paths.push(format!("+{} more:{}", self.more, self.others));
        }
        if paths.is_empty() {
            paths.push("-".into());
        }
        let outcome = match result {
            Ok(()) => "ok".to_string(),
            Err(e) => crate::logline::one_line(&e.to_string()).into_owned(),
        };
        tracing::info!(
            target: "ddftpd::access",
            client = %peer,
            subject = %crate::logline::one_line(subject.unwrap_or("-")),
            paths = %paths.join(" "),
            bytes = self.bytes(),
            blocks = self.blocks,
            secs = format_args!("{:.3}", took.as_secs_f64()),
            outcome,
            "served"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_counted_per_path_and_beyond_the_named_ones() {
        let mut s = Served::default();
        let a = s.path("a");
        assert_eq!(s.path("a"), a);
        s.sent(a, 10);
        for i in 0..PATHS_NAMED + 3 {
            let slot = s.path(&format!("p{i}"));
            s.sent(slot, 1);
        }
        assert_eq!(s.paths.len(), PATHS_NAMED);
        assert_eq!(s.bytes(), 10 + PATHS_NAMED as u64 + 3);
        assert_eq!(s.blocks, 1 + PATHS_NAMED as u64 + 3);
    }
}
