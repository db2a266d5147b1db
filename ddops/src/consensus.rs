//! Which mirrors serve the same file: a majority vote before any data moves.
//!
//! Every mirror reports the file's size and digests in `Stat`. Blocks are
//! only ever taken from mirrors of one version, the one a strict majority of
//! the mirrors that answered report; the others are stale (or wrong) and are
//! dropped with a warning. With no strict majority (two mirrors that
//! disagree, or three with three versions) nothing says which copy is right:
//! the download stops with an error naming what each mirror has.

use ddftp_proto::manifest::hex;
use ddftp_proto::FileDigest;

/// A version of a file as one mirror reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub size: u64,
    pub digest: FileDigest,
}

impl Version {
    /// A sealed bundle's: its size, and no digests (a bundle has none;
    /// every mirror that registered its name serves the same list).
    pub fn sealed(size: u64) -> Version {
        Version { size, digest: FileDigest { chunk_size: 0, sha256: [0; 32], manifest: [0; 32] } }
    }

    /// For people: size and the start of the SHA-256.
    pub fn describe(&self) -> String {
        format!("{} bytes, sha256 {}…", self.size, &hex(&self.digest.sha256)[..16])
    }
}

/// The version a strict majority of `versions` agree on, and the indices of
/// the mirrors that disagree; `None` without a strict majority.
pub fn majority(versions: &[Version]) -> Option<(Version, Vec<usize>)> {
    let winner = versions.iter().find(|v| versions.iter().filter(|w| w == v).count() * 2 > versions.len())?;
    let stale = versions.iter().enumerate().filter(|(_, v)| *v != winner).map(|(i, _)| i).collect();
    Some((*winner, stale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(size: u64, tag: u8) -> Version {
        Version { size, digest: FileDigest { chunk_size: 1 << 18, sha256: [tag; 32], manifest: [tag; 32] } }
    }

    #[test]
    fn strict_majority_wins() {
        assert_eq!(majority(&[v(10, 1)]), Some((v(10, 1), vec![])));
        assert_eq!(majority(&[v(10, 1), v(10, 1), v(10, 2)]), Some((v(10, 1), vec![2])));
        assert_eq!(majority(&[v(10, 2), v(10, 1), v(10, 1), v(11, 1)]), None, "2 of 4 is no majority");
        assert_eq!(majority(&[v(10, 2), v(10, 1), v(10, 1), v(10, 1)]), Some((v(10, 1), vec![0])));
        assert_eq!(majority(&[v(10, 1), v(10, 2)]), None);
        assert_eq!(majority(&[v(10, 1), v(11, 1), v(10, 1)]), Some((v(10, 1), vec![1])), "size alone differs");
        assert_eq!(majority(&[]), None);
    }
}
