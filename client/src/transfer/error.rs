//! What went wrong with a transfer, and what a rerun would do.

use std::io;
use std::path::PathBuf;

use crate::journal::JournalError;

/// What a rerun of the same command would do after a failure: told only
/// where it is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// The data and its journal are kept; the same command fetches only
    /// what is missing.
    Kept,
    /// Kept too, but the cause (permissions, a full disk) must be fixed first.
    KeptOnceFixed,
    /// Every mirror's copy failed verification: the file changed on them
    /// (or is damaged); a rerun only helps once they agree again.
    Changed,
    /// Nothing was kept that a rerun could use.
    Nothing,
}

impl std::fmt::Display for Resume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Resume::Kept => "\nthe data received so far is kept: run the same command again to fetch only what is missing",
            Resume::KeptOnceFixed => "\nthe data received so far is kept: once that is fixed, run the same command again to fetch only what is missing",
            Resume::Changed => "\nevery mirror sent blocks that fail verification: the file changed on the mirrors or their copies are damaged; once they agree again, rerun with --restart",
            Resume::Nothing => "",
        })
    }
}

/// What went wrong with a transfer, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("no mirror given")]
    NoMirrors,
    #[error("--share: {0}")]
    Share(#[from] super::share::ShareError),
    #[error("no mirror could serve {path}:\n{}", .failures.join("\n"))]
    NoUsableMirror { path: String, failures: Vec<String> },
    #[error("no mirror could serve {path}, and TLS is why (nothing was moved):\n{}", .failures.join("\n"))]
    Untrusted { path: String, failures: Vec<String> },
    #[error(
        "{path} is not a regular file on the mirrors: `get` moves one file; if it is a directory, copy the tree with `ddftp archive {path} --mirrors ... --dest DIR`\n{}",
        .failures.join("\n")
    )]
    NotAFile { path: String, failures: Vec<String> },
    #[error(
        "no mirror has {path}: each says it is not there (check the path, and what the mirrors serve: `ddftp ls HOST:DIR` for a ddftpd)\n{}",
        .failures.join("\n")
    )]
    NotFound { path: String, failures: Vec<String> },
    #[error("{} holds another file and --no-clobber keeps it: nothing was moved (remove it, or drop --no-clobber to replace it)", .path.display())]
    Clobber { path: PathBuf },
    #[error("mirrors disagree on {path} and no majority says which copy is right: {}", .versions.join("; "))]
    NoMajority { path: String, versions: Vec<String> },
    #[error(
        "{path}: SHA-256 of the download is {got}, but the mirrors reported {expected}; the download was discarded"
    )]
    DigestMismatch { path: String, expected: String, got: String },
    #[error("resume journal block size {block_size} does not fit the verification chunk size {chunk_size}; rerun with --restart")]
    BlockSizeMismatch { block_size: u32, chunk_size: u32 },
    #[error("resume journal block size {block_size} is over the mirrors' limit {limit}; rerun with --restart")]
    BlockSizeOverLimit { block_size: u32, limit: u32 },
    #[error("cannot write {}: {source}{resume}", .path.display())]
    Output { path: PathBuf, source: io::Error, resume: Resume },
    #[error("every mirror failed with {missing} of {total} bytes still missing; last errors:\n{}{resume}", .errors.join("\n"))]
    AllMirrorsFailed { missing: u64, total: u64, errors: Vec<String>, resume: Resume },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{path}: SHA-256 is {got}, but the one expected ({from}) is {expected}; nothing was kept (are the mirrors serving another version?)")]
    ChecksumMismatch { path: String, expected: String, got: String, from: String },
    #[error("{0}")]
    UnconfirmedDigest(Box<Unconfirmed>),
    #[error("{path}: SHA-256 is {got}, not the {expected} expected, and its bytes have already gone to standard output: whatever read them must discard them")]
    WrittenOut { path: String, expected: String, got: String },
    #[error("the checksum to check {path} against: {why}")]
    NoChecksum { path: String, why: String },
    #[error(transparent)]
    CaFile(#[from] crate::http::tls::CaFileError),
    #[error("{} needs {} and its file system has less room; nothing more was fetched", .path.display(), ddftp_proto::units::HumanBytes(*.size))]
    NoSpace { path: PathBuf, size: u64 },
    #[error("{path}: piece {piece} failed verification {tries} times, each time from blocks of several mirrors; the data received so far is kept, but one of the mirrors sends wrong data: rerun without it, or with --restart once they agree")]
    PieceKeepsFailing { path: String, piece: u64, tries: u32 },
    #[error("interrupted with {missing} of {total} bytes still missing{}", Resume::Kept)]
    Interrupted { missing: u64, total: u64 },
}

/// A download that does not match the digest only some mirrors sent.
#[derive(Debug)]
pub struct Unconfirmed {
    pub path: String,
    pub expected: String,
    pub got: String,
    /// The mirrors that sent the digest.
    pub senders: String,
    /// Where the data is kept, or why it could not be.
    pub kept: Result<PathBuf, String>,
}

impl std::fmt::Display for Unconfirmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Unconfirmed { path, expected, got, senders, kept } = self;
        write!(
            f,
            "{path}: SHA-256 is {got}, but the Repr-Digest of {senders} says {expected}, and no other mirror sent one: \
             either that header or some mirror's bytes are wrong; "
        )?;
        match kept {
            Ok(p) => write!(
                f,
                "the data is kept at {} (check it against a published checksum, or rerun without that mirror)",
                p.display()
            ),
            Err(e) => write!(f, "the data could not be kept ({e})"),
        }
    }
}
