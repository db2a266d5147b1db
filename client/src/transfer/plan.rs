//! The rules that set a download up, as pure functions with no I/O: which
//! routes count as one mirror, the order producers pair in, what block
//! size it uses and how its blocks are checked. The driver
//! (`transfer/mod.rs`) gathers the facts (the flags, the mirrors' limits,
//! the manifest or Metalink pieces, an interrupted run's journal) and does
//! what these say; a late or rejoining mirror meets the same rules.

use ddftp_proto::manifest::MAX_CHUNK;

use super::TransferError;
use crate::http::HttpVersion;

/// Blocks smaller than this would cost more in messages than they save.
pub(super) const SMALLEST_PIECE_BLOCK: u32 = 64 << 10;

/// What a download is told about its blocks before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Blocks {
    pub(super) size: u32,
    pub(super) check: Checking,
    /// Why `size` is not what was asked for, if it is not.
    pub(super) why: Option<&'static str>,
}

/// How the blocks are checked against the chunk hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checking {
    /// No chunk hashes.
    None,
    /// Each block is whole chunks, checked as it arrives.
    EachBlock,
    /// Chunks (Metalink pieces) larger than a block, each checked once all
    /// its blocks are in.
    WholePieces,
    /// Pieces too large to check before their blocks leave (`-o -`), or
    /// with no usable divisor: not checked; the whole file's hash is.
    Dropped(&'static str),
}

/// The facts the block size follows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Facts {
    /// `--block-size`.
    pub(super) asked: u32,
    /// The largest block every mirror in use serves.
    pub(super) limit: u32,
    /// The chunk (or piece) size of the hashes blocks are checked against.
    pub(super) chunk: Option<u32>,
    /// The interrupted run's block size, to resume into.
    pub(super) earlier: Option<u32>,
    /// Blocks leave for standard output as soon as they are in order.
    pub(super) stdout: bool,
}

/// Which routes to use, by their greetings' server ids: one server under
/// two names (`127.0.0.1:7400`, `localhost:7400`) is one mirror, used under
/// its first name, or it would vote twice; one name over several local
/// addresses is several routes of one mirror. For each route: `Ok` to use
/// it, or `Err` with the name it is a second name of.
pub(super) fn one_name_per_server<I: PartialEq, N: PartialEq + Clone>(routes: &[(I, N)]) -> Vec<Result<(), N>> {
    let mut first: Vec<(&I, &N)> = vec![];
    routes
        .iter()
        .map(|(id, name)| match first.iter().find(|(i, _)| *i == id) {
            Some((_, n)) if *n != name => Err((*n).clone()),
            Some(_) => Ok(()),
            None => {
                first.push((id, name));
                Ok(())
            }
        })
        .collect()
}

/// The order producers pair in, (0, 1), (2, 3), ..., and whether the last
/// one gets a second stream (the paper's virtual pair: an odd count would
/// leave it alone on its partition). `whole_only[i]`: producer `i` is a
/// server that ignores Range, which can only send from block 0: it comes
/// first (the low edge of the partition at block 0); a second such server
/// would only repeat the first (`Err`: not used). The others keep their
/// order.
pub(super) fn pairing(whole_only: &[bool]) -> (Vec<Result<usize, usize>>, bool) {
    let mut order: Vec<Result<usize, usize>> = vec![];
    let mut whole = whole_only.iter().enumerate().filter(|(_, &w)| w).map(|(i, _)| i);
    if let Some(first) = whole.next() {
        order.push(Ok(first));
    }
    order.extend(whole.map(Err));
    order.extend((0..whole_only.len()).filter(|&i| !whole_only[i]).map(Ok));
    let used: Vec<usize> = order.iter().filter_map(|o| o.ok()).collect();
    let second = used.len() % 2 == 1 && used.last().is_some_and(|&i| !whole_only[i]);
    (order, second)
}

/// The block size and checking a download uses.
pub(super) fn blocks(f: Facts) -> Result<Blocks, TransferError> {
    let Some(chunk) = f.chunk else {
        return match f.earlier {
            Some(b) if b > f.limit => Err(TransferError::BlockSizeOverLimit { block_size: b, limit: f.limit }),
            Some(b) => {
                Ok(Blocks { size: b, check: Checking::None, why: reason(b, f, "the interrupted run's block size") })
            }
            None => {
                let b = f.asked.min(f.limit);
                Ok(Blocks { size: b, check: Checking::None, why: reason(b, f, "the largest the mirrors serve") })
            }
        };
    };
    // Pieces larger than a block may be (a Metalink's 256 MiB pieces must
    // not make 256 MiB blocks): each is then checked once whole.
    let over = chunk > MAX_CHUNK;
    let fits = |b: u32| if over { chunk.is_multiple_of(b) } else { b.is_multiple_of(chunk) };
    let check = match (over, f.stdout) {
        (false, _) => Checking::EachBlock,
        (true, false) => Checking::WholePieces,
        (true, true) => Checking::Dropped("blocks are written out before a piece is whole"),
    };
    if let Some(b) = f.earlier {
        if !fits(b) {
            return Err(TransferError::BlockSizeMismatch { block_size: b, chunk_size: chunk });
        }
        if b > f.limit {
            return Err(TransferError::BlockSizeOverLimit { block_size: b, limit: f.limit });
        }
        return Ok(Blocks { size: b, check, why: reason(b, f, "the interrupted run's block size") });
    }
    if over {
        return Ok(match piece_divisor(chunk, f.asked.min(f.limit).min(MAX_CHUNK)) {
            Some(b) => Blocks { size: b, check, why: reason(b, f, "a whole number of blocks in each verified piece") },
            None => {
                let b = f.asked.min(f.limit);
                let why = "their length has no divisor usable as a block size";
                Blocks { size: b, check: Checking::Dropped(why), why: reason(b, f, "the largest the mirrors serve") }
            }
        });
    }
    // Each block is verified on its own: it must be whole chunks.
    let want = f.asked.div_ceil(chunk) * chunk;
    match want.min(f.limit) / chunk * chunk {
        0 => Err(TransferError::BlockSizeOverLimit { block_size: chunk, limit: f.limit }),
        b if b < f.asked => Ok(Blocks { size: b, check, why: reason(b, f, "the largest the mirrors serve") }),
        b => Ok(Blocks { size: b, check, why: reason(b, f, "a whole number of the mirrors' verification chunks") }),
    }
}

/// `why`, when `b` is not the size asked for.
fn reason(b: u32, f: Facts, why: &'static str) -> Option<&'static str> {
    (b != f.asked).then_some(why)
}

/// The largest block size at most `most` (and at least
/// [`SMALLEST_PIECE_BLOCK`]) that divides a piece of `piece` bytes.
fn piece_divisor(piece: u32, most: u32) -> Option<u32> {
    let mut best = None;
    let mut d = 1u32;
    while u64::from(d) * u64::from(d) <= u64::from(piece) {
        if piece.is_multiple_of(d) {
            for c in [d, piece / d] {
                if c <= most && best.is_none_or(|b| c > b) {
                    best = Some(c);
                }
            }
        }
        d += 1;
    }
    best.filter(|&b| b >= SMALLEST_PIECE_BLOCK)
}

/// What an HTTP mirror's copy must be to serve the download: the size in
/// use, the date the others agreed on (when they agreed on one), and the
/// SHA-256 the ddftpd mirrors report (when beside them, and its headers
/// give one). The one rule for mirrors at the start, late ones and those
/// asked again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HttpCopy {
    pub(super) size: u64,
    /// `Some(d)`: a strict majority of the mirrors of that size said `d`.
    pub(super) date: Option<Option<String>>,
    pub(super) sha256: Option<String>,
}

impl HttpCopy {
    /// Why `v` is not this copy, or `None` if it is.
    pub(super) fn differs(&self, v: &HttpVersion) -> Option<String> {
        match (&v.sha256, &self.sha256) {
            _ if v.size != self.size => Some(format!("{} bytes, the others' {}", v.size, self.size)),
            _ if self.date.as_ref().is_some_and(|d| *d != v.last_modified) => {
                Some(format!("Last-Modified {:?}, the others' {:?}", v.last_modified, self.date.clone().flatten()))
            }
            (Some(d), Some(t)) if d != t => Some(format!("Repr-Digest SHA-256 {d}, the ddftpd mirrors' {t}")),
            _ => None,
        }
    }
}

/// The copy HTTP mirrors alone agree on: the size `known` (a Metalink's)
/// or else the one a strict majority reports; among the mirrors of that
/// size, a date a strict majority shares. `None`: no majority.
pub(super) fn http_majority(versions: &[&HttpVersion], known: Option<u64>) -> Option<HttpCopy> {
    let n = versions.len();
    let majority =
        || versions.iter().map(|v| v.size).find(|s| versions.iter().filter(|v| v.size == *s).count() * 2 > n);
    let size = known.or_else(majority)?;
    let same: Vec<&Option<String>> = versions.iter().filter(|v| v.size == size).map(|v| &v.last_modified).collect();
    let date = same.iter().find(|d| d.is_some() && same.iter().filter(|e| e == d).count() * 2 > same.len());
    Some(HttpCopy { size, date: date.map(|d| (*d).clone()), sha256: None })
}

/// What an interrupted run's journal must match to be resumed into: the
/// whole file's SHA-256 the mirrors agreed on; for HTTP mirrors alone,
/// the expected SHA-256 if one is known, else the size and date they
/// agreed on (a file replaced by one of the same size is not resumed
/// into); for a sealed bundle nothing (its name says what it is).
pub(super) fn journal_identity(
    sealed: bool,
    ddftpd_sha256: Option<&str>,
    expected: Option<&str>,
    size: u64,
    http_date: Option<&str>,
) -> String {
    match (sealed, ddftpd_sha256, expected, http_date) {
        (true, ..) => String::new(),
        (_, Some(sha), ..) => sha.to_string(),
        (_, None, Some(e), _) => e.to_string(),
        (_, None, None, Some(d)) => format!("HTTP: {size} bytes, Last-Modified {d}"),
        (_, None, None, None) => format!("HTTP: {size} bytes"),
    }
}

/// Of routes named by their mirror (`keys`), the first of each mirror:
/// each mirror votes once, however many routes reach it.
pub(super) fn one_vote_each<K: PartialEq>(keys: &[K]) -> Vec<usize> {
    (0..keys.len()).filter(|&i| !keys[..i].contains(&keys[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u32 = 1024;
    const MIB: u32 = 1 << 20;

    fn facts(asked: u32, limit: u32, chunk: Option<u32>) -> Facts {
        Facts { asked, limit, chunk, earlier: None, stdout: false }
    }

    #[test]
    fn one_server_under_two_names_is_used_once_and_routes_of_one_name_all_are() {
        let routes = [(1, "a"), (2, "b"), (1, "a2"), (1, "a"), (3, "c"), (2, "b")];
        assert_eq!(one_name_per_server(&routes), vec![Ok(()), Ok(()), Err("a"), Ok(()), Ok(()), Ok(())]);
    }

    #[test]
    fn a_server_that_ignores_range_pairs_first_and_an_odd_last_gets_a_second_stream() {
        assert_eq!(pairing(&[false, false, false]), (vec![Ok(0), Ok(1), Ok(2)], true));
        assert_eq!(pairing(&[false, false]), (vec![Ok(0), Ok(1)], false));
        assert_eq!(pairing(&[false, true, false]), (vec![Ok(1), Ok(0), Ok(2)], true));
        assert_eq!(pairing(&[true, true, false]), (vec![Ok(0), Err(1), Ok(2)], false));
        // Alone, it sends the whole file: no second stream (it cannot).
        assert_eq!(pairing(&[true]), (vec![Ok(0)], false));
    }

    #[test]
    fn blocks_divide_large_pieces() {
        assert_eq!(piece_divisor(256 * MIB, 256 * KIB), Some(256 * KIB));
        assert_eq!(piece_divisor(300 * MIB, 16 * MIB), Some(15 * MIB));
        assert_eq!(piece_divisor(3 * 256 * MIB, 16 * MIB), Some(16 * MIB));
        // A prime length has no usable divisor.
        assert_eq!(piece_divisor(2_147_483_647, 16 * MIB), None);
    }

    #[test]
    fn the_block_size_follows_the_flag_the_mirrors_and_the_hashes() {
        let b = |f| blocks(f).unwrap();
        assert_eq!(b(facts(256 * KIB, u32::MAX, None)), Blocks { size: 256 * KIB, check: Checking::None, why: None });
        assert_eq!(b(facts(32 * MIB, 16 * MIB, None)).size, 16 * MIB);
        // Whole chunks: rounded up to them, down to the mirrors' limit.
        let r = b(facts(100 * KIB, u32::MAX, Some(64 * KIB)));
        assert_eq!((r.size, r.check), (128 * KIB, Checking::EachBlock));
        assert_eq!(b(facts(32 * MIB, 16 * MIB, Some(4 * MIB))).size, 16 * MIB);
        assert!(blocks(facts(256 * KIB, 64 * KIB, Some(MIB))).is_err(), "a chunk over the limit");
        // Metalink pieces of 256 MiB: blocks as asked, pieces checked whole.
        let r = b(facts(256 * KIB, u32::MAX, Some(256 * MIB)));
        assert_eq!((r.size, r.check), (256 * KIB, Checking::WholePieces));
        let r = b(Facts { stdout: true, ..facts(256 * KIB, u32::MAX, Some(256 * MIB)) });
        assert!(matches!(r.check, Checking::Dropped(_)), "{r:?}");
        assert!(matches!(b(facts(256 * KIB, u32::MAX, Some(2_147_483_647))).check, Checking::Dropped(_)));
    }

    #[test]
    fn a_resumed_download_keeps_its_block_size_or_says_why_not() {
        let earlier = |b, chunk| Facts { earlier: Some(b), ..facts(256 * KIB, 16 * MIB, chunk) };
        assert_eq!(blocks(earlier(MIB, None)).unwrap().size, MIB);
        assert_eq!(blocks(earlier(MIB, Some(256 * KIB))).unwrap().size, MIB);
        assert!(matches!(blocks(earlier(96 * KIB, Some(64 * KIB))), Err(TransferError::BlockSizeMismatch { .. })));
        assert!(matches!(blocks(earlier(32 * MIB, None)), Err(TransferError::BlockSizeOverLimit { .. })));
        // Under pieces larger than a block, the block must divide them.
        assert_eq!(blocks(earlier(MIB, Some(256 * MIB))).unwrap().check, Checking::WholePieces);
        assert!(blocks(earlier(3 * MIB, Some(256 * MIB))).is_err());
    }

    fn v(size: u64, date: Option<&str>, sha: Option<&str>) -> HttpVersion {
        HttpVersion {
            size,
            rtt: std::time::Duration::ZERO,
            etag: None,
            last_modified: date.map(str::to_string),
            sha256: sha.map(str::to_string),
            ranges: true,
        }
    }

    #[test]
    fn http_mirrors_agree_on_a_size_then_a_date_and_a_copy_is_checked_by_one_rule() {
        let (a, b, c) = (v(10, Some("Mon"), None), v(10, Some("Mon"), None), v(10, Some("Tue"), None));
        let copy = http_majority(&[&a, &b, &c], None).unwrap();
        assert_eq!(copy, HttpCopy { size: 10, date: Some(Some("Mon".into())), sha256: None });
        assert_eq!(copy.differs(&a), None);
        assert!(copy.differs(&c).unwrap().contains("Last-Modified"));
        assert!(copy.differs(&v(11, Some("Mon"), None)).unwrap().contains("11 bytes"));
        // No strict majority of sizes: none, unless a Metalink says it.
        let d = v(12, None, None);
        assert_eq!(http_majority(&[&a, &d], None), None);
        assert_eq!(http_majority(&[&a, &d], Some(12)).unwrap().size, 12);
        // Dates split evenly: no date rule.
        assert_eq!(http_majority(&[&a, &c], None).unwrap().date, None);
        // Beside ddftpd mirrors: their SHA-256 against a header's.
        let beside = HttpCopy { size: 10, date: None, sha256: Some("aa".into()) };
        assert!(beside.differs(&v(10, None, Some("bb"))).unwrap().contains("Repr-Digest"));
        assert_eq!(beside.differs(&v(10, None, Some("aa"))), None);
        assert_eq!(beside.differs(&v(10, Some("Wed"), None)), None);
    }

    #[test]
    fn a_journal_is_bound_to_what_the_mirrors_agreed_on() {
        assert_eq!(journal_identity(true, Some("ab"), None, 5, None), "");
        assert_eq!(journal_identity(false, Some("ab"), Some("cd"), 5, Some("Mon")), "ab");
        assert_eq!(journal_identity(false, None, Some("cd"), 5, Some("Mon")), "cd");
        assert_eq!(journal_identity(false, None, None, 5, Some("Mon")), "HTTP: 5 bytes, Last-Modified Mon");
        assert_eq!(journal_identity(false, None, None, 5, None), "HTTP: 5 bytes");
        assert_eq!(one_vote_each(&["a", "b", "a", "c", "b"]), [0, 1, 3]);
    }
}
