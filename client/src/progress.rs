//! What the user sees while bytes move: an indicatif bar on a terminal
//! (bytes, rate, ETA and each mirror's share so far); on a stderr that is
//! not a terminal (cron, CI, a batch job's log), one line at an interval.
//! Warnings always go to stderr, above the bar.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::transfer::{EntryCounts, Progress};

/// A bar when stderr is a terminal and the user did not ask for quiet.
pub struct Bar {
    bar: Option<ProgressBar>,
    mirrors: Vec<String>,
    /// A tree's entries (an archive).
    entries: Option<EntryCounts>,
    /// When the command began (what a walk's rate is counted from).
    born: std::time::Instant,
    /// Every warning shown, for a report that needs them after a failure.
    warnings: Vec<String>,
    /// Lines for a log, when stderr is not a terminal.
    log: Option<LogLines>,
}

/// One progress line every `every`, for a stderr that is not a terminal.
struct LogLines {
    every: std::time::Duration,
    total: u64,
    /// When, and at how many bytes, the last line was written (or the start).
    last: (std::time::Instant, u64),
}

impl Bar {
    /// A bar on a terminal; elsewhere a line every `log_every` (if visible).
    pub fn new(visible: bool, log_every: std::time::Duration) -> Bar {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let log = (visible && !terminal).then(|| LogLines {
            every: log_every,
            total: 0,
            last: (std::time::Instant::now(), 0),
        });
        let bar = (visible && terminal).then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(10));
            b.set_style(
                ProgressStyle::with_template(
                    "{bytes:>10}/{total_bytes} {wide_bar} {binary_bytes_per_sec:>12} ETA {eta:>4}\n{msg}",
                )
                .expect("valid template"),
            );
            b
        });
        Bar { bar, mirrors: vec![], warnings: vec![], entries: None, born: std::time::Instant::now(), log }
    }
}

/// `ddftp: 1.50 GiB of 4.00 GiB (37.5%), 112.0 MiB/s, ETA 23 s; mirrors: a 60%, b 40%`
fn log_line(done: u64, total: u64, rate: f64, shares: &str) -> String {
    use ddftp_proto::units::HumanBytes;
    let pct = if total > 0 { 100.0 * done as f64 / total as f64 } else { 100.0 };
    let eta = match rate > 0.0 {
        true => format!("{:.0} s", total.saturating_sub(done) as f64 / rate),
        false => "unknown".into(),
    };
    format!(
        "ddftp: {} of {} ({pct:.1}%), {}/s, ETA {eta}; mirrors: {shares}",
        HumanBytes(done),
        HumanBytes(total),
        HumanBytes(rate as u64)
    )
}

/// `\n  1234 entries (2.1 GiB) listed (walking, 5000/s); ~800 of 1000 files and links moved, ~200 to go`
fn entries_line(c: &EntryCounts, seconds: f64) -> String {
    let walk = match c.walking {
        true => format!(" (walking, {:.0}/s)", c.listed as f64 / seconds.max(1e-3)),
        false => String::new(),
    };
    format!(
        "\n  {} entries ({}) listed{walk}; ~{} of {} files and links moved, ~{} to go",
        c.listed,
        ddftp_proto::units::HumanBytes(c.listed_bytes),
        c.moved,
        c.to_move,
        c.to_move.saturating_sub(c.moved)
    )
}

impl Bar {
    /// The warnings shown so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// `msg` as it may reach a terminal: a control character other than a
/// newline or tab (an escape sequence in a name a mirror sent, say) is
/// shown as `\#ooo`, never sent to the terminal.
pub fn terminal_safe(msg: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| ddftp_proto::shown::must_escape(c) && c != '\n' && c != '\t';
    if !msg.chars().any(bad) {
        return msg.into();
    }
    let mut out = String::with_capacity(msg.len() + 8);
    for c in msg.chars() {
        if bad(c) {
            push_octal(&mut out, c.encode_utf8(&mut [0; 4]).as_bytes());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A name or symlink target as rsync prints it: the bytes of a control
/// character, and those that are not UTF-8, as `\#ooo` (octal), so that a mirror's name
/// can neither end a line early nor drive the terminal.
pub(crate) fn escaped(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c.is_control() {
                true => push_octal(&mut out, c.encode_utf8(&mut [0; 4]).as_bytes()),
                false => out.push(c),
            }
        }
        push_octal(&mut out, chunk.invalid());
    }
    out
}

/// Appends each of `bytes` as rsync shows a byte that must not reach a
/// terminal as it is: `\#ooo` (octal).
pub(crate) fn push_octal(out: &mut String, bytes: &[u8]) {
    use std::fmt::Write;
    for x in bytes {
        let _ = write!(out, "\\#{x:03o}");
    }
}

impl Progress for Bar {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.mirrors = mirrors.to_vec();
        if let Some(l) = &mut self.log {
            l.total = total;
            l.last = (std::time::Instant::now(), 0);
        }
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.reset_elapsed();
        }
    }

    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        let total = done.max(1) as f64;
        let shares = || -> Vec<String> {
            self.mirrors
                .iter()
                .zip(per_mirror)
                .map(|(m, &bytes)| format!("{m} {:.0}%", 100.0 * bytes as f64 / total))
                .collect()
        };
        let entries = || self.entries.map(|c| entries_line(&c, self.born.elapsed().as_secs_f64()));
        if let Some(l) = &self.log {
            let now = std::time::Instant::now();
            let (at, was) = l.last;
            if now.duration_since(at) >= l.every {
                let rate = done.saturating_sub(was) as f64 / now.duration_since(at).as_secs_f64();
                let line = log_line(done, l.total, rate, &shares().join(", "));
                eprintln!("{line}{}", entries().unwrap_or_default());
                self.log.as_mut().expect("checked").last = (now, done);
            }
            return;
        }
        let Some(b) = &self.bar else { return };
        b.set_position(done);
        b.set_message(format!("  shares: {}{}", shares().join("  "), entries().unwrap_or_default()));
    }

    fn entries(&mut self, counts: EntryCounts) {
        self.entries = Some(counts);
    }

    fn joined(&mut self, mirror: &str) {
        self.mirrors.push(mirror.to_string());
    }

    fn warn(&mut self, msg: &str) {
        self.warnings.push(msg.to_string());
        let msg = terminal_safe(msg);
        match &self.bar {
            Some(b) => b.suspend(|| eprintln!("ddftp: warning: {msg}")),
            None => eprintln!("ddftp: warning: {msg}"),
        }
    }

    fn status(&mut self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("  {msg}"));
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_line_says_bytes_percent_rate_eta_and_mirrors() {
        let l = super::log_line(1 << 30, 4 << 30, 100.0 * 1048576.0, "a 60%, b 40%");
        assert_eq!(l, "ddftp: 1.00 GiB of 4.00 GiB (25.0%), 100.00 MiB/s, ETA 31 s; mirrors: a 60%, b 40%");
        assert!(super::log_line(0, 10, 0.0, "").contains("ETA unknown"));
    }

    #[test]
    fn escape_sequences_never_reach_the_terminal() {
        assert_eq!(super::terminal_safe("not copying a\x1b[2Jb: why"), "not copying a\\#033[2Jb: why");
        assert_eq!(super::terminal_safe("two\nlines\tand a tab"), "two\nlines\tand a tab");
    }

    proptest::proptest! {
        #[test]
        fn only_newlines_and_tabs_are_left(s in ".{0,40}") {
            let safe = super::terminal_safe(&s);
            proptest::prop_assert!(!safe.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
        }
    }
}
