//! What a finished archive tells a person: the changes asked for, the
//! totals, where the time went, what was not copied, and each mirror's
//! (or rank's) part.

use ddftp::archive::ArchiveReport;
use ddftp::progress::terminal_safe;
use ddftp_proto::units::HumanBytes;

/// The summary of `r` (a dry run's lines and totals, or a run's).
pub fn print(r: &ArchiveReport, to: &mut dyn std::io::Write) -> std::io::Result<()> {
    if let Some(p) = &r.dry_run {
        for l in &p.lines {
            writeln!(to, "{l}")?;
        }
        writeln!(
            to,
            "dry run, nothing changed: {} new files, {} changed ({} to move), {} modes, {} new dirs, {} dirs' times or modes, {} symlinks, {} deletions; {} excluded",
            p.new_files,
            p.changed_files,
            HumanBytes(p.bytes),
            p.mode_only,
            p.new_dirs,
            p.changed_dirs,
            p.new_links,
            p.deletions,
            r.excluded
        )?;
        return Ok(());
    }
    for l in &r.changes {
        writeln!(to, "{l}")?;
    }
    writeln!(
        to,
        "{} -> {}: {} files ({} moved, {} already complete), {} dirs, {} symlinks; {} moved in {:.2} s: {:.0} files/s, {}/s",
        r.src,
        r.dest,
        r.files,
        r.files - r.skipped_files,
        r.skipped_files,
        r.dirs,
        r.links,
        HumanBytes(r.bytes),
        r.seconds,
        r.files_per_second,
        HumanBytes((r.mb_per_s * 1e6) as u64)
    )?;
    if r.matched_bytes > 0 {
        // rsync --stats' words.
        writeln!(
            to,
            "  delta: matched data {} (in DEST's older versions), literal data {} (moved)",
            HumanBytes(r.matched_bytes),
            HumanBytes(r.bytes)
        )?;
    }
    if r.resumed_bytes > 0 {
        writeln!(
            to,
            "  resumed: {} were already there from the interrupted run ({} in all)",
            HumanBytes(r.resumed_bytes),
            HumanBytes(r.bytes + r.resumed_bytes)
        )?;
    }
    let p = &r.phases;
    writeln!(
        to,
        "  list {:.2} s, prepare {:.2} s, mirrors ready {:.2} s, move {:.2} s, finish {:.2} s",
        p.list, p.prepare, p.check, p.moving, p.finish
    )?;
    if r.excluded + r.deleted + r.modes_fixed > 0 {
        writeln!(
            to,
            "  {} excluded by the rules, {} deleted (--delete), {} files' modes set without moving them",
            r.excluded, r.deleted, r.modes_fixed
        )?;
    }
    if !r.failed.is_empty() {
        writeln!(to, "  NOT COPIED: {} entries (everything else was):", r.failed.len())?;
        for f in &r.failed {
            writeln!(to, "    {}", terminal_safe(&format!("{}: {}", f.path, f.why)))?;
        }
    }
    if r.setid_cleared > 0 {
        writeln!(
            to,
            "  note: {} files copied without their setuid/setgid bits (owners are kept only when run as root, without --no-owner)",
            r.setid_cleared
        )?;
    }
    if !r.ranks.is_empty() {
        writeln!(to, "  {:<6} {:<20} {:>12} {:>9} {:>6} {:>9}", "rank", "host", "bytes", "files", "parts", "rate")?;
        for k in &r.ranks {
            let rate = format!("{}/s", HumanBytes((k.bytes as f64 / k.seconds.max(1e-9)) as u64));
            let bytes = HumanBytes(k.bytes).to_string();
            writeln!(to, "  {:<6} {:<20} {:>12} {:>9} {:>6} {:>9}", k.rank, k.host, bytes, k.files, k.parts, rate)?;
        }
    }
    if let Some(t) = &r.transfer {
        writeln!(to, "  {:<28} {:>12} {:>7}", "mirror", "bytes", "share")?;
        for p in &t.producers {
            writeln!(to, "  {:<28} {:>12} {:>6.1}%", p.mirror, HumanBytes(p.bytes).to_string(), 100.0 * p.share)?;
        }
        writeln!(
            to,
            "  every block checked against the seal its mirror sent it with, every file on the mirror against its listed size and mtime"
        )?;
    }
    Ok(())
}
