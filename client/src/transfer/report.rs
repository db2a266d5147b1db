//! What a finished transfer reports (`--json` prints it).

/// Per-mirror result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProducerReport {
    pub mirror: String,
    pub blocks: u64,
    pub bytes: u64,
    pub share: f64,
    /// Of `bytes`, those its producers that joined while the transfer ran
    /// delivered (a late mirror, or one back after a failure).
    pub joined_bytes: u64,
    /// Another receiver of the file (`--share`), not a mirror.
    pub peer: bool,
}

/// Per route (mirror and local address).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LinkReport {
    pub route: String,
    pub blocks: u64,
    pub bytes: u64,
}

impl LinkReport {
    /// The blocks and bytes each producer (`routes[s]`, `delivered(s)`)
    /// delivered, summed per route.
    pub(super) fn per_route(routes: &[String], delivered: impl Fn(usize) -> (u64, u64)) -> Vec<LinkReport> {
        let mut links: Vec<LinkReport> = vec![];
        for (s, route) in routes.iter().enumerate() {
            let i = links.iter().position(|l| l.route == *route).unwrap_or_else(|| {
                links.push(LinkReport { route: route.clone(), blocks: 0, bytes: 0 });
                links.len() - 1
            });
            let (blocks, bytes) = delivered(s);
            links[i].blocks += blocks;
            links[i].bytes += bytes;
        }
        links
    }
}

/// What a finished transfer did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TransferReport {
    pub path: String,
    pub output: String,
    pub bytes: u64,
    /// Bytes in place before the transfer began, not fetched: an
    /// interrupted run's, and those matched in an older copy.
    pub reused_bytes: u64,
    /// Of those, the bytes the older copy at the output held (delta;
    /// rsync's "matched data").
    pub matched_bytes: u64,
    /// Of `reused_bytes`, those fetched before the transfer as pieces of
    /// changed chunks (delta: the rest of each such chunk was matched).
    pub piece_bytes: u64,
    pub seconds: f64,
    pub block_size: u32,
    pub starts: u64,
    pub extends: u64,
    pub ends: u64,
    pub duplicate_bytes: u64,
    /// SHA-256 of the output (checked against what the mirrors reported);
    /// none for a bundle, whose blocks are sealed one by one instead.
    pub sha256: Option<String>,
    /// Every block was verified as it arrived (against the chunk manifest,
    /// or its seal).
    pub verified: bool,
    /// What the output's SHA-256 was checked against.
    pub sha256_checked: Sha256Checked,
    /// `sha256` was computed over the output; otherwise it is the mirrors'
    /// (every block matched their chunk manifest, whose root is tied to
    /// it: computing it again would only cost a core).
    pub sha256_computed: bool,
    pub producers: Vec<ProducerReport>,
    /// Of the bytes moved, those other receivers sent (`--share`).
    pub from_peers: u64,
    /// Per route: with `--bind`, what each link carried.
    pub links: Vec<LinkReport>,
    pub warnings: Vec<String>,
    /// The output already held the file (its size and SHA-256): nothing
    /// moved.
    pub already_complete: bool,
}

impl TransferReport {
    /// Bytes the mirrors sent for this file (rsync's "literal data"): all
    /// but those in place before (an interrupted run's, an older copy's),
    /// counting the pieces of changed chunks fetched before the transfer.
    pub fn literal_bytes(&self) -> u64 {
        self.bytes.saturating_sub(self.reused_bytes) + self.piece_bytes
    }

    /// Bytes an interrupted run had already written.
    pub fn resumed_bytes(&self) -> u64 {
        self.reused_bytes.saturating_sub(self.matched_bytes + self.piece_bytes)
    }
}

/// What a download's SHA-256 was compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sha256Checked {
    /// The ddftpd mirrors' reported digest.
    Mirrors,
    /// `--checksum`.
    Checksum,
    /// A `-i` list entry's `checksum=` (in `--json` as `--checksum`'s: the
    /// same check, only the words differ).
    #[serde(rename = "checksum")]
    ListChecksum,
    /// The Metalink's whole-file hash.
    Metalink,
    /// The `--checksum-url` listing's.
    ChecksumUrl,
    /// The HTTP mirrors' `Repr-Digest`/`Digest` header.
    DigestHeader,
    /// Nothing: HTTP mirrors only and no `--checksum`.
    Nothing,
    /// No whole-file digest, but every block was checked against the
    /// Metalink's piece hashes as it arrived.
    Pieces,
    /// A bundle: none computed, its blocks are sealed.
    Sealed,
}

impl Sha256Checked {
    /// Where the expected SHA-256 came from, in words.
    pub fn source(self) -> &'static str {
        match self {
            Sha256Checked::Mirrors => "the mirrors' digest",
            Sha256Checked::Checksum => "--checksum",
            Sha256Checked::ListChecksum => "the list's checksum=",
            Sha256Checked::Metalink => "the Metalink file",
            Sha256Checked::ChecksumUrl => "the --checksum-url listing",
            Sha256Checked::Pieces => "the Metalink's piece hashes",
            Sha256Checked::DigestHeader => "the servers' Repr-Digest/Digest header",
            Sha256Checked::Nothing => "nothing",
            Sha256Checked::Sealed => "the blocks' seals",
        }
    }
}
