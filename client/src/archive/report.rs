//! What an archive reports: counts, where the time went, what was not
//! copied, and the engine's report for the parts together.

use crate::transfer::TransferReport;

use super::sync;

/// What an archive did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArchiveReport {
    pub src: String,
    pub dest: String,
    /// Regular files in the list, moved or skipped.
    pub files: u64,
    pub dirs: u64,
    /// Directories finished while the last part moved (every entry in
    /// them made by then); the others were finished at the end.
    pub dirs_finished_early: u64,
    pub links: u64,
    /// Bytes of regular files moved in this run.
    pub bytes: u64,
    /// Bytes of the range an interrupted run had moved already (resumed
    /// from its journal; not in `bytes` nor in the rate).
    pub resumed_bytes: u64,
    /// Bytes of changed files that their older versions in DEST held
    /// (delta: copied there, not moved; rsync's "matched data").
    pub matched_bytes: u64,
    /// Files skipped because they were already complete and correct.
    pub skipped_files: u64,
    pub skipped_bytes: u64,
    pub seconds: f64,
    pub files_per_second: f64,
    pub mb_per_s: f64,
    /// Where the time went.
    pub phases: Phases,
    /// Files copied without their setuid/setgid bits (owners are not kept).
    pub setid_cleared: u64,
    /// Entries that could not be copied (unreadable on the mirrors), with
    /// why; everything else was. Not empty: exit code 5.
    pub failed: Vec<Failure>,
    /// Bundles the files moved in: one, or in a streamed archive as many
    /// as were cut while the mirror walked.
    pub parts: u64,
    /// Entries below SRC that a rule excluded here (a mirror given the
    /// rules leaves its own out of the walk: they are not counted).
    pub excluded: u64,
    /// Entries removed from DEST (`--delete`).
    pub deleted: u64,
    /// Entries SRC no longer has that `--max-delete` kept from deletion.
    pub deletions_skipped: u64,
    /// Files whose mode alone differed, set without moving them.
    pub modes_fixed: u64,
    /// FIFOs, sockets and device nodes made (or already right).
    pub specials: u64,
    /// Hard links made (second names of a file, linked to its first).
    pub hard_links: u64,
    /// Entries whose owner or extended attributes were set (without moving them).
    pub attrs_set: u64,
    /// With `--dry-run`: what a run would do (nothing was changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<sync::Plan>,
    /// With `--itemize-changes`: the changes this run made, one line each
    /// as a dry run gives them (an entry not copied has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// The engine's report for the range (shares per mirror, ...), if
    /// anything moved (the parts' together) in one process.
    pub transfer: Option<TransferReport>,
    /// Under `mpirun`: what each rank moved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankReport>,
}

/// What one rank of an MPI job moved.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RankReport {
    pub rank: usize,
    pub host: String,
    /// Bytes of the parts it moved, the files it finished, and the parts.
    pub bytes: u64,
    pub files: u64,
    pub parts: u64,
    /// Seconds it spent moving its parts.
    pub seconds: f64,
    /// Bytes each mirror sent it.
    pub mirrors: Vec<(String, u64)>,
}

/// An entry that could not be copied.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failure {
    /// Below the mirrors' root.
    pub path: String,
    pub why: String,
}

/// Seconds of each part of a run. They add up to the whole, except in a
/// streamed archive, where the walk runs while the first parts move:
/// there `list` ends when the walk does, the next three are summed over
/// the parts, and `finish` is the rest.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Phases {
    /// Getting the list (a mirror's walk, or reading LIST) and sorting it.
    pub list: f64,
    /// Directories, the check of what is already there, empty files.
    pub prepare: f64,
    /// Waiting for the mirrors to register the bundle (they start during `prepare`).
    pub check: f64,
    /// Moving the bytes.
    pub moving: f64,
    /// Symlinks, modes and mtimes.
    pub finish: f64,
}

/// One report for the parts of a streamed archive: sums, and each
/// mirror's share of all of it.
pub(super) fn merge_reports(a: Option<TransferReport>, b: Option<TransferReport>) -> Option<TransferReport> {
    let (mut a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => return a.or(b),
    };
    a.bytes += b.bytes;
    a.reused_bytes += b.reused_bytes;
    a.seconds += b.seconds;
    a.starts += b.starts;
    a.extends += b.extends;
    a.ends += b.ends;
    a.duplicate_bytes += b.duplicate_bytes;
    a.verified &= b.verified;
    add_up(
        &mut a.producers,
        b.producers,
        |p| p.mirror.clone(),
        |q, p| {
            (q.blocks, q.bytes, q.joined_bytes) =
                (q.blocks + p.blocks, q.bytes + p.bytes, q.joined_bytes + p.joined_bytes)
        },
    );
    let total: u64 = a.producers.iter().map(|p| p.bytes).sum();
    for p in &mut a.producers {
        p.share = if total > 0 { p.bytes as f64 / total as f64 } else { 0.0 };
    }
    add_up(
        &mut a.links,
        b.links,
        |l| l.route.clone(),
        |m, l| (m.blocks, m.bytes) = (m.blocks + l.blocks, m.bytes + l.bytes),
    );
    a.warnings.extend(b.warnings);
    Some(a)
}

/// Adds each of `from` to the entry of `into` with the same key, or
/// appends it.
fn add_up<T, K: PartialEq>(into: &mut Vec<T>, from: Vec<T>, key: impl Fn(&T) -> K, add: impl Fn(&mut T, &T)) {
    for x in from {
        match into.iter_mut().find(|y| key(y) == key(&x)) {
            Some(y) => add(y, &x),
            None => into.push(x),
        }
    }
}
