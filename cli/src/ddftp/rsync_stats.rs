//! `archive --stats` and `--info=FLAGS`: rsync's words for what a run
//! did, for scripts and eyes that know rsync's. Only the lines whose
//! numbers mean here what they mean to rsync are printed (rsync's
//! "created files", "file list size" and "bytes sent" have no counterpart
//! ddftp keeps; its total file size also counts symlinks' target lengths).

use std::io::Write;

use ddftp::archive::ArchiveReport;

/// The `--info` flags `archive` understands (rsync's names): `progress2`
/// (the whole transfer's progress: what ddftp shows anyway) and `stats`
/// (as `--stats`); `NAME0` turns one off.
pub fn parse_info(s: &str) -> Result<Info, String> {
    let mut info = Info::default();
    for flag in s.split(',').filter(|f| !f.is_empty()) {
        match flag.to_ascii_lowercase().as_str() {
            "progress2" | "progress1" | "progress" => info.progress = true,
            "progress0" => info.progress = false,
            "stats" | "stats1" | "stats2" | "stats3" => info.stats = true,
            "stats0" => info.stats = false,
            other => {
                return Err(format!(
                    "--info={other}: ddftp archive understands progress2 (shown by default) and stats; for the names of what changes use -i"
                ))
            }
        }
    }
    Ok(info)
}

/// What `--info` asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Info {
    pub progress: bool,
    pub stats: bool,
}

/// `n` with commas every three digits, as rsync 3 prints its counts.
fn commas(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// rsync's `--stats` block for an archive's report. Bytes received are
/// the data moved (rsync counts its protocol's bytes too; ddftp's
/// framing is a few bytes a block).
pub fn print(r: &ArchiveReport, to: &mut dyn Write) -> std::io::Result<()> {
    let entries = r.files + r.dirs + r.links + r.specials;
    let moved = r.files - r.skipped_files;
    let transferred = r.bytes + r.matched_bytes + r.resumed_bytes;
    let total = transferred + r.skipped_bytes;
    let received = r.bytes;
    writeln!(to)?;
    // Kinds with none are left out, as rsync does.
    let kinds: Vec<String> = [("reg", r.files), ("dir", r.dirs), ("link", r.links), ("special", r.specials)]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}: {}", commas(*n)))
        .collect();
    match kinds.is_empty() {
        true => writeln!(to, "Number of files: 0")?,
        false => writeln!(to, "Number of files: {} ({})", commas(entries), kinds.join(", "))?,
    }
    writeln!(to, "Number of deleted files: {}", commas(r.deleted))?;
    writeln!(to, "Number of regular files transferred: {}", commas(moved))?;
    writeln!(to, "Total file size: {} bytes", commas(total))?;
    writeln!(to, "Total transferred file size: {} bytes", commas(transferred))?;
    writeln!(to, "Literal data: {} bytes", commas(received))?;
    writeln!(to, "Matched data: {} bytes", commas(r.matched_bytes))?;
    writeln!(to, "File list generation time: {:.3} seconds", r.phases.list)?;
    writeln!(to, "Total bytes received: {}", commas(received))?;
    writeln!(to)?;
    let rate = (received as f64 / r.seconds.max(1e-9) * 100.0).round() as u64;
    writeln!(to, "received {} bytes  {}.{:02} bytes/sec", commas(received), commas(rate / 100), rate % 100)?;
    let speedup = total as f64 / received.max(1) as f64;
    writeln!(to, "total size is {}  speedup is {:.2}", commas(total), speedup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_commas_as_rsync_prints_them() {
        assert_eq!(commas(0), "0");
        assert_eq!(commas(999), "999");
        assert_eq!(commas(1000), "1,000");
        assert_eq!(commas(2_147_483_648), "2,147,483,648");
    }

    #[test]
    fn info_takes_rsyncs_progress_and_stats_flags_and_refuses_the_rest() {
        assert_eq!(parse_info("progress2").unwrap(), Info { progress: true, stats: false });
        assert_eq!(parse_info("progress2,stats2").unwrap(), Info { progress: true, stats: true });
        assert_eq!(parse_info("stats,stats0").unwrap(), Info::default());
        let e = parse_info("name1").unwrap_err();
        assert!(e.contains("--info=name1") && e.contains("-i"), "{e}");
    }
}
