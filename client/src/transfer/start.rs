//! A download's start as one plan. The driver (`get_joining`) gathers the
//! facts (what the probes and the vote said, the hashes in hand, the
//! flags, an interrupted run's journal and part file); [`plan`] turns them
//! into what it then does: the journal's identity, whether to resume, the
//! block size, how blocks are checked, which blocks are already in, and
//! what to tell the user. No I/O here, so every decision has a test.

use std::ops::Range;
use std::path::Path;

use super::plan::{self, Checking};
use super::{Sha256Checked, TransferError};
use crate::journal::{Journal, PartFile};

/// How blocks are checked as they arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockCheck {
    /// Against the chunk manifest (or a Metalink's pieces), each block on
    /// its own.
    Hashes,
    /// Against pieces that span several blocks, once each piece is whole.
    WholePieces,
    /// Against the seal each came with (a bundle's).
    Sealed,
    /// Not until the whole file's SHA-256.
    Nothing,
}

/// Where the hashes that check each block come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HashesFrom {
    /// None are wanted (`--no-verify`, an empty file, a bundle's sealed
    /// blocks) or there are none to have.
    None,
    /// The manifest a ddftpd sent with its probe's `Stat`.
    Probe,
    /// A Metalink's pieces: with web mirrors only (a ddftpd's manifest
    /// checks chunks of its own size, and is always there).
    Metalink,
    /// Asked of the ddftpd mirrors now.
    Fetch,
}

/// Where the block hashes come from: `(wanted, sealed)` whether blocks are
/// verified at all and whether they are a bundle's; `in_probe` a ddftpd
/// sent its manifest with its `Stat`; `ddftpd` some ddftpd mirror is used;
/// `pieces` the Metalink has piece hashes.
pub(super) fn hashes_from((wanted, sealed): (bool, bool), in_probe: bool, ddftpd: bool, pieces: bool) -> HashesFrom {
    match () {
        _ if !wanted || sealed => HashesFrom::None,
        _ if in_probe => HashesFrom::Probe,
        _ if ddftpd => HashesFrom::Fetch,
        _ if pieces => HashesFrom::Metalink,
        _ => HashesFrom::None,
    }
}

/// An interrupted run's journal, as found beside the output.
#[derive(Clone, Copy)]
pub(super) struct Earlier<'a> {
    pub(super) journal: &'a Journal,
    /// Where it was read from (for messages).
    pub(super) file: &'a Path,
    /// The part file its data went to, and what that is now (none for an
    /// archive, whose data is in the destination files).
    pub(super) part: Option<(&'a Path, &'a PartFile)>,
}

/// What a download starts from.
pub(super) struct Facts<'a> {
    pub(super) path: &'a str,
    pub(super) size: u64,
    /// A bundle's range: no `Stat`, blocks checked by their seals.
    pub(super) sealed: bool,
    /// Only web mirrors answered.
    pub(super) http_only: bool,
    /// `--no-verify` not given.
    pub(super) verify: bool,
    /// `-o -`.
    pub(super) to_stdout: bool,
    /// `--block-size`.
    pub(super) asked_block: u32,
    /// The largest block every ddftpd in use serves (`u32::MAX`: none).
    pub(super) limit: u32,
    /// The chunk size of the hashes in hand (manifest or Metalink pieces).
    pub(super) hashes: Option<u32>,
    /// Those hashes are the ddftpd mirrors' chunk manifest, whose root is
    /// in the digest they agreed on with `mirrors_sha256`.
    pub(super) tied: bool,
    /// How many ddftpd mirrors agreed on that digest.
    pub(super) agreeing: usize,
    /// The SHA-256 the ddftpd mirrors agreed on.
    pub(super) mirrors_sha256: Option<&'a str>,
    /// A published SHA-256 (`--checksum`, a list, a Metalink, a URL) and
    /// where it came from.
    pub(super) expected: Option<(&'a str, Sha256Checked)>,
    /// The web mirrors' `Last-Modified`.
    pub(super) http_date: Option<&'a str>,
    pub(super) earlier: Option<Earlier<'a>>,
    /// Every producer ignores Range.
    pub(super) whole_only: bool,
    /// An archive rank's share of a bundle, in bytes.
    pub(super) range: Option<Range<u64>>,
}

/// What the driver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// What the journal is bound to.
    pub(super) identity: String,
    pub(super) block_size: u32,
    pub(super) blocks: u64,
    pub(super) check: BlockCheck,
    /// The interrupted run's journal and part file are taken up.
    pub(super) resume: bool,
    /// Block ranges already in place (an interrupted run's, and those
    /// outside an archive rank's range).
    pub(super) done: Vec<(u64, u64)>,
    /// The journal is written before a byte moves (a file of one block
    /// has nothing to resume; `-o -` keeps nothing).
    pub(super) save_journal: bool,
    /// The whole file's SHA-256 is computed as it completes (a bundle's
    /// blocks are each sealed; its range's SHA-256 would match nothing),
    /// unless every block is checked against the mirrors' chunk manifest
    /// ([`manifest_vouches`]).
    pub(super) hash_whole: bool,
    pub(super) sha256_checked: Sha256Checked,
    /// What to tell the user, in order.
    pub(super) warnings: Vec<String>,
}

/// The plan for the facts, or why the download cannot start (a journal
/// for another download).
pub(super) fn plan(f: &Facts) -> Result<Plan, TransferError> {
    let mut warnings = vec![];
    let identity = plan::journal_identity(
        f.sealed,
        f.mirrors_sha256.filter(|_| !f.http_only),
        f.expected.map(|(sha, _)| sha),
        f.size,
        f.http_date,
    );
    let earlier = match f.earlier {
        _ if f.to_stdout => None,
        // A server that ignores Range alone cannot send what is missing in
        // the middle: the download starts over.
        Some(_) if f.whole_only => {
            warnings.push(format!(
                "{}: its only mirror ignores Range, so the interrupted run's data cannot be resumed; starting over",
                f.path
            ));
            None
        }
        Some(e) => {
            e.journal.check(e.file, f.path, f.size, &identity, e.part)?;
            Some(e.journal)
        }
        None => None,
    };
    let chosen = plan::blocks(plan::Facts {
        asked: f.asked_block,
        limit: f.limit,
        chunk: f.hashes,
        earlier: earlier.map(|j| j.block_size),
        stdout: f.to_stdout,
    })?;
    let block_size = chosen.size;
    let hashes = match (chosen.check, f.hashes) {
        (Checking::Dropped(why), Some(chunk)) => {
            warnings.push(format!(
                "not checking {}'s pieces of {chunk} bytes as they arrive ({why}); the whole file's SHA-256 is still checked",
                f.path
            ));
            false
        }
        (_, hashes) => hashes.is_some(),
    };
    if let Some(why) = chosen.why {
        warnings.push(format!("using block size {block_size} ({why})"));
    }
    let check = match (hashes, chosen.check) {
        (true, Checking::WholePieces) => BlockCheck::WholePieces,
        (true, _) => BlockCheck::Hashes,
        (false, _) if f.sealed && f.verify => BlockCheck::Sealed,
        (false, _) => BlockCheck::Nothing,
    };
    let blocks = f.size.div_ceil(u64::from(block_size));
    Ok(Plan {
        identity,
        block_size,
        blocks,
        check,
        resume: earlier.is_some(),
        done: done_before(earlier, f.range.as_ref(), blocks, block_size),
        save_journal: !f.to_stdout && blocks > 1,
        hash_whole: !f.sealed && !manifest_vouches(f, hashes, earlier.is_some()),
        sha256_checked: match checked_against(f.sealed, f.http_only, f.expected.map(|(_, from)| from)) {
            // Every block checked against the Metalink's piece hashes.
            Sha256Checked::Nothing if hashes => Sha256Checked::Pieces,
            c => c,
        },
        warnings,
    })
}

/// Whether the mirrors' chunk manifest vouches for the whole file, so its
/// SHA-256 need not be computed again: every block of this run is checked
/// against it as it arrives (`hashes`), and its root is in the digest two
/// or more mirrors agreed on with their SHA-256, so a file whose every
/// block matches is the one they hashed (BLAKE3 and SHA-256 alike resist
/// collisions; mirrors that agree on a lie are the list checksum's to
/// catch, as they are now). A single mirror's word is checked: it could
/// pair the right manifest with another file's SHA-256. Delta's local
/// chunks count as checked: each is hashed where it was placed and kept
/// only if it matches. Not where a SHA-256 comes from elsewhere
/// (`--checksum`, a Metalink, a listing: the file must be that one,
/// whatever the mirrors say), where blocks were written before this run
/// (resumed: the part file may have changed on disk since), and not for
/// `-o -`, whose bytes go out through the hash.
fn manifest_vouches(f: &Facts, hashes: bool, resumed: bool) -> bool {
    hashes
        && f.tied
        && f.agreeing >= 2
        && f.mirrors_sha256.is_some()
        && f.expected.is_none()
        && !f.http_only
        && !f.to_stdout
        && !resumed
        && f.range.is_none()
}

/// The blocks already in place: those an interrupted run wrote, and, for
/// an archive rank's part of a bundle, every block outside its `range`.
fn done_before(earlier: Option<&Journal>, range: Option<&Range<u64>>, blocks: u64, block_size: u32) -> Vec<(u64, u64)> {
    let mut done = earlier.map_or(vec![], |j| j.done.clone());
    if let Some(r) = range {
        let (first, end) = (r.start / u64::from(block_size), r.end.div_ceil(u64::from(block_size)).min(blocks));
        if first > 0 {
            done.push((0, first - 1));
        }
        if end < blocks {
            done.push((end, blocks - 1));
        }
    }
    done
}

/// What a download's SHA-256 is checked against.
pub(super) fn checked_against(sealed: bool, http_only: bool, expected: Option<Sha256Checked>) -> Sha256Checked {
    match (sealed, http_only, expected) {
        (true, ..) => Sha256Checked::Sealed,
        (_, _, Some(from)) => from,
        (_, false, None) => Sha256Checked::Mirrors,
        (_, true, None) => Sha256Checked::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "ab";

    fn facts() -> Facts<'static> {
        Facts {
            path: "f",
            size: 10 << 20,
            sealed: false,
            http_only: false,
            verify: true,
            to_stdout: false,
            asked_block: 256 << 10,
            limit: 16 << 20,
            hashes: Some(64 << 10),
            tied: false,
            agreeing: 2,
            mirrors_sha256: Some(SHA),
            expected: None,
            http_date: None,
            earlier: None,
            whole_only: false,
            range: None,
        }
    }

    fn journal(block_size: u32, done: &[(u64, u64)]) -> Journal {
        let mut j = Journal::new("f", 10 << 20, SHA, block_size);
        j.done = done.to_vec();
        j
    }

    #[test]
    fn block_hashes_come_from_the_probe_the_ddftpd_mirrors_or_the_metalink() {
        use HashesFrom::*;
        assert_eq!(hashes_from((false, false), true, true, true), None, "--no-verify or an empty file");
        assert_eq!(hashes_from((true, true), true, true, true), None, "a bundle's blocks are sealed");
        assert_eq!(hashes_from((true, false), true, true, true), Probe);
        assert_eq!(hashes_from((true, false), false, true, true), Fetch, "a ddftpd's manifest before the pieces");
        assert_eq!(hashes_from((true, false), false, false, true), Metalink);
        assert_eq!(hashes_from((true, false), false, false, false), None);
    }

    #[test]
    fn a_fresh_download_is_checked_by_its_hashes_journaled_and_hashed_whole() {
        let p = plan(&facts()).unwrap();
        assert_eq!((p.block_size, p.blocks, p.check), (256 << 10, 40, BlockCheck::Hashes));
        assert_eq!((p.resume, p.save_journal, p.hash_whole), (false, true, true));
        assert_eq!((p.identity.as_str(), p.sha256_checked), (SHA, Sha256Checked::Mirrors));
        assert!(p.done.is_empty() && p.warnings.is_empty());
    }

    #[test]
    fn an_interrupted_run_is_resumed_with_its_block_size_and_blocks() {
        let j = journal(128 << 10, &[(0, 9), (50, 79)]);
        let part = PartFile::Len(10 << 20);
        let earlier = Earlier { journal: &j, file: Path::new("f.ddftp-journal"), part: Some((Path::new("p"), &part)) };
        let p = plan(&Facts { earlier: Some(earlier), ..facts() }).unwrap();
        assert!(p.resume);
        assert_eq!((p.block_size, p.blocks), (128 << 10, 80));
        assert_eq!(p.done, vec![(0, 9), (50, 79)]);
        assert_eq!(p.warnings, ["using block size 131072 (the interrupted run's block size)"]);
    }

    #[test]
    fn a_journal_of_another_download_or_a_wrong_part_file_stops_it() {
        let other = Journal::new("f", 10 << 20, "cd", 256 << 10);
        let e = Earlier { journal: &other, file: Path::new("j"), part: None };
        assert!(matches!(plan(&Facts { earlier: Some(e), ..facts() }), Err(TransferError::Journal(_))));
        let j = journal(256 << 10, &[]);
        for part in [PartFile::Len(5), PartFile::NotRegular, PartFile::Unreadable("gone".into())] {
            let e = Earlier { journal: &j, file: Path::new("j"), part: Some((Path::new("p"), &part)) };
            assert!(matches!(plan(&Facts { earlier: Some(e), ..facts() }), Err(TransferError::Journal(_))), "{part:?}");
        }
    }

    #[test]
    fn a_mirror_that_ignores_range_starts_over_and_says_so() {
        let j = journal(256 << 10, &[(0, 3)]);
        let e = Earlier { journal: &j, file: Path::new("j"), part: None };
        let p = plan(&Facts { earlier: Some(e), whole_only: true, ..facts() }).unwrap();
        assert!(!p.resume && p.done.is_empty());
        assert!(p.warnings[0].contains("ignores Range"), "{:?}", p.warnings);
    }

    #[test]
    fn stdout_keeps_no_journal_and_resumes_nothing() {
        let j = journal(256 << 10, &[(0, 3)]);
        let e = Earlier { journal: &j, file: Path::new("j"), part: None };
        let p = plan(&Facts { earlier: Some(e), to_stdout: true, ..facts() }).unwrap();
        assert!(!p.resume && !p.save_journal && p.done.is_empty());
    }

    #[test]
    fn one_block_writes_no_journal() {
        let p = plan(&Facts { size: 1000, ..facts() }).unwrap();
        assert_eq!((p.blocks, p.save_journal), (1, false));
    }

    #[test]
    fn hashes_that_cannot_be_checked_per_block_are_dropped_with_a_warning() {
        // Metalink pieces whose length no block size divides.
        let p = plan(&Facts { hashes: Some(2_147_483_647), ..facts() }).unwrap();
        assert_eq!(p.check, BlockCheck::Nothing);
        assert!(p.warnings.iter().any(|w| w.contains("not checking")), "{:?}", p.warnings);
    }

    #[test]
    fn pieces_larger_than_a_block_are_checked_once_whole() {
        let p = plan(&Facts { hashes: Some(256 << 20), ..facts() }).unwrap();
        assert_eq!((p.check, p.block_size), (BlockCheck::WholePieces, 256 << 10));
        // Not to stdout: blocks are written out before a piece is whole.
        let p = plan(&Facts { hashes: Some(256 << 20), to_stdout: true, ..facts() }).unwrap();
        assert_eq!(p.check, BlockCheck::Nothing);
        assert!(p.warnings[0].contains("before a piece is whole"), "{:?}", p.warnings);
    }

    #[test]
    fn a_bundle_is_checked_by_its_seals_and_not_hashed_whole() {
        let p = plan(&Facts { sealed: true, hashes: None, mirrors_sha256: None, ..facts() }).unwrap();
        assert_eq!((p.check, p.hash_whole, p.sha256_checked), (BlockCheck::Sealed, false, Sha256Checked::Sealed));
        assert_eq!(p.identity, "");
        let p = plan(&Facts { sealed: true, verify: false, hashes: None, ..facts() }).unwrap();
        assert_eq!(p.check, BlockCheck::Nothing);
    }

    #[test]
    fn a_rank_s_range_leaves_the_blocks_outside_it_done() {
        let p = plan(&Facts { range: Some((1 << 20)..(3 << 20)), ..facts() }).unwrap();
        assert_eq!(p.done, vec![(0, 3), (12, 39)]);
    }

    #[test]
    fn the_sha256_is_checked_against_what_was_published_else_the_mirrors() {
        let p = plan(&Facts { expected: Some(("ef", Sha256Checked::Metalink)), ..facts() }).unwrap();
        assert_eq!((p.identity.as_str(), p.sha256_checked), (SHA, Sha256Checked::Metalink));
        let web = Facts { http_only: true, hashes: None, http_date: Some("D"), ..facts() };
        let p = plan(&web).unwrap();
        assert_eq!(
            (p.identity.as_str(), p.sha256_checked),
            ("HTTP: 10485760 bytes, Last-Modified D", Sha256Checked::Nothing)
        );
        let p = plan(&Facts { expected: Some(("ef", Sha256Checked::Checksum)), ..web }).unwrap();
        assert_eq!((p.identity.as_str(), p.sha256_checked), ("ef", Sha256Checked::Checksum));
    }

    #[test]
    fn the_whole_sha256_is_left_out_only_where_the_mirrors_manifest_checks_every_block_of_this_run() {
        let tied = || Facts { tied: true, ..facts() };
        assert!(!plan(&tied()).unwrap().hash_whole);
        assert!(plan(&facts()).unwrap().hash_whole, "Metalink pieces are not the mirrors' manifest");
        for f in [
            Facts { expected: Some(("ef", Sha256Checked::Checksum)), ..tied() },
            Facts { hashes: None, ..tied() },
            Facts { verify: false, hashes: None, ..tied() },
            Facts { to_stdout: true, ..tied() },
            Facts { http_only: true, ..tied() },
            Facts { mirrors_sha256: None, ..tied() },
            Facts { agreeing: 1, ..tied() },
        ] {
            assert!(plan(&f).unwrap().hash_whole);
        }
        let j = journal(256 << 10, &[(0, 9)]);
        let part = PartFile::Len(10 << 20);
        let e = Earlier { journal: &j, file: Path::new("j"), part: Some((Path::new("p"), &part)) };
        assert!(
            plan(&Facts { earlier: Some(e), ..tied() }).unwrap().hash_whole,
            "resumed: the part file may have changed"
        );
    }
}
