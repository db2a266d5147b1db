//! What a file's content is, as both ends compute it: its SHA-256 and a
//! manifest of per-chunk BLAKE3 hashes.
//!
//! The server cuts a file into chunks of [`chunk_size`] bytes and hashes
//! each; the manifest's *root* is the BLAKE3 of those hashes laid end to
//! end. Chunks use BLAKE3 (cryptographic, several times faster than SHA-256
//! on one core) because the client checks every block with it while it also
//! computes the file's SHA-256: with SHA-256 for both, verification halved
//! the loopback throughput. `Stat` carries the file's SHA-256 and the root, so a client compares
//! mirrors before any data moves; it then fetches the hashes (`Manifest`
//! requests, a range at a time), checks them against the root, and verifies
//! every block as it arrives. The whole-file SHA-256 is what users publish
//! and `sha256sum` prints; the manifest is what lets a bad block be caught
//! when it arrives rather than at the end.
//!
//! Blocks are whole chunks (so each block is verified on its own), hence
//! chunks are small for small files: 4 KiB up to 16 MiB files, growing so a
//! file has at most 4096 chunks until they reach 256 KiB (the default block,
//! at 1 GiB); then at most 2^18 (an 8 MiB manifest) until they reach 16 MiB
//! (the largest block a server sends, at 4 TiB). A manifest is at most
//! 1/128 of its file, and 1/8192 from 1 GiB on.

use sha2::{Digest, Sha256};

/// Bytes in a hash (SHA-256 and BLAKE3 alike).
pub const HASH_LEN: usize = 32;
/// A 32-byte hash.
pub type Hash = [u8; HASH_LEN];
/// Smallest chunk.
pub const MIN_CHUNK: u32 = 4 * 1024;
/// Chunks grow to this size before files may have more than [`SMALL_FILE_CHUNKS`].
const MID_CHUNK: u32 = 256 * 1024;
const SMALL_FILE_CHUNKS: u64 = 4096;
/// Largest chunk.
pub const MAX_CHUNK: u32 = 16 << 20;
/// Past [`MID_CHUNK`], chunks grow until a file has at most this many.
const TARGET_CHUNKS: u64 = 1 << 18;
/// Most hashes in one `Manifest` reply.
pub const MAX_MANIFEST_HASHES: u32 = 4096;

/// The chunk size of a `size`-byte file: a power of two.
pub fn chunk_size(size: u64) -> u32 {
    let mut c = MIN_CHUNK;
    while c < MID_CHUNK && chunk_count(size, c) > SMALL_FILE_CHUNKS {
        c *= 2;
    }
    while c < MAX_CHUNK && chunk_count(size, c) > TARGET_CHUNKS {
        c *= 2;
    }
    c
}

/// Chunks in a `size`-byte file.
pub fn chunk_count(size: u64, chunk_size: u32) -> u64 {
    size.div_ceil(u64::from(chunk_size))
}

/// SHA-256 of `data` (the whole-file digest).
pub fn sha256(data: &[u8]) -> Hash {
    Sha256::digest(data).into()
}

/// The hash of one chunk (BLAKE3).
pub fn chunk_hash(data: &[u8]) -> Hash {
    blake3::hash(data).into()
}

/// The manifest root: BLAKE3 of the chunk hashes in order.
pub fn root(hashes: &[Hash]) -> Hash {
    let mut h = blake3::Hasher::new();
    for c in hashes {
        h.update(c);
    }
    h.finalize().into()
}

/// Lowercase hex, as `sha256sum` prints.
pub fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file's identity as a mirror reports it in `Stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileDigest {
    pub chunk_size: u32,
    /// SHA-256 of the whole file.
    pub sha256: Hash,
    /// [`root`] of the per-chunk (BLAKE3) hashes.
    pub manifest: Hash,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_grows_with_the_file() {
        assert_eq!(chunk_size(0), MIN_CHUNK);
        assert_eq!(chunk_size(16 << 20), MIN_CHUNK);
        assert_eq!(chunk_size((16 << 20) + 1), 2 * MIN_CHUNK);
        assert_eq!(chunk_size(256 << 20), 64 * 1024);
        assert_eq!(chunk_size(1 << 30), MID_CHUNK);
        assert_eq!(chunk_size(64 << 30), MID_CHUNK);
        assert_eq!(chunk_size((64 << 30) + 1), 2 * MID_CHUNK);
        assert_eq!(chunk_size(1 << 40), 4 << 20);
        assert_eq!(chunk_size(40 << 40), MAX_CHUNK);
        assert_eq!(chunk_size(u64::MAX), MAX_CHUNK);
        for size in [1u64, 1 << 30, 1 << 42] {
            assert!(chunk_count(size, chunk_size(size)) <= TARGET_CHUNKS);
        }
        for size in [1u64, 5 << 20, 100 << 20, 1 << 30] {
            assert!(chunk_count(size, chunk_size(size)) <= SMALL_FILE_CHUNKS);
        }
    }

    #[test]
    fn known_hashes() {
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        // The BLAKE3 test vector for the empty input.
        assert_eq!(hex(&chunk_hash(b"")), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
        assert_eq!(root(&[]), chunk_hash(b""));
        let (a, b) = (chunk_hash(b"a"), chunk_hash(b"b"));
        assert_eq!(root(&[a, b]), chunk_hash(&[a, b].concat()));
    }
}
