//! What the user sees while bytes move: an indicatif bar on a terminal
//! (bytes, rate, ETA and each mirror's share so far), nothing otherwise.
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
}

impl Bar {
    pub fn new(visible: bool) -> Bar {
        let bar = (visible && std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(10));
            b.set_style(
                ProgressStyle::with_template(
                    "{bytes:>10}/{total_bytes} {wide_bar} {binary_bytes_per_sec:>12} ETA {eta:>4}\n{msg}",
                )
                .expect("valid template"),
            );
            b
        });
        Bar { bar, mirrors: vec![], warnings: vec![], entries: None, born: std::time::Instant::now() }
    }
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

impl Progress for Bar {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.mirrors = mirrors.to_vec();
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.reset_elapsed();
        }
    }

    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        let Some(b) = &self.bar else { return };
        b.set_position(done);
        let total = done.max(1) as f64;
        let shares: Vec<String> = self
            .mirrors
            .iter()
            .zip(per_mirror)
            .map(|(m, &bytes)| format!("{m} {:.0}%", 100.0 * bytes as f64 / total))
            .collect();
        let entries = self.entries.map(|c| entries_line(&c, self.born.elapsed().as_secs_f64()));
        b.set_message(format!("  shares: {}{}", shares.join("  "), entries.unwrap_or_default()));
    }

    fn entries(&mut self, counts: EntryCounts) {
        self.entries = Some(counts);
    }

    fn joined(&mut self, mirror: &str) {
        self.mirrors.push(mirror.to_string());
    }

    fn warn(&mut self, msg: &str) {
        self.warnings.push(msg.to_string());
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
