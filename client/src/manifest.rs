//! The chunk manifest on the client: fetched once from a mirror of the
//! agreed version, checked against the root every mirror reported, then
//! used to verify each block before it is written.
//!
//! Blocks are whole multiples of the chunk size, so a block is verified on
//! its own, in the slot that received it, with the data still in the receive
//! buffer: a bad block never reaches the file, and the mirror that sent it
//! is known exactly.

use ddftp_proto::manifest::{self, chunk_count, Hash};
use ddftp_proto::FileDigest;

/// The chunk hashes of one version of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub chunk_size: u32,
    pub hashes: Vec<Hash>,
    pub kind: ChunkHash,
}

/// What a chunk's hash is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkHash {
    /// ddftpd's manifest: BLAKE3.
    Blake3,
    /// A Metalink's pieces.
    Sha256,
    /// A Metalink's pieces (older ones); the hash is padded to 32 bytes.
    Sha1,
}

impl ChunkHash {
    fn of(self, data: &[u8]) -> Hash {
        use sha2::Digest;
        match self {
            ChunkHash::Blake3 => manifest::chunk_hash(data),
            ChunkHash::Sha256 => sha2::Sha256::digest(data).into(),
            ChunkHash::Sha1 => {
                let mut h = [0u8; 32];
                h[..20].copy_from_slice(&sha1::Sha1::digest(data));
                h
            }
        }
    }
}

impl Manifest {
    /// Whether `payload`, the block at byte `offset`, has the content the
    /// manifest says. `offset` is a multiple of the chunk size.
    pub fn verify(&self, offset: u64, payload: &[u8]) -> bool {
        let first = offset / u64::from(self.chunk_size);
        payload.chunks(self.chunk_size as usize).enumerate().all(|(i, c)| {
            usize::try_from(first + i as u64).ok().and_then(|k| self.hashes.get(k)) == Some(&self.kind.of(c))
        })
    }
}

/// A mirror's chunk manifest is not the one its digest names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("its chunk manifest does not match the digest it reported")]
pub struct ManifestMismatch;

impl Manifest {
    /// The manifest whose chunk hashes are `hashes`, if they are the whole
    /// manifest of a `size`-byte file whose root is the one reported.
    pub fn checked(hashes: Vec<Hash>, size: u64, digest: &FileDigest) -> Result<Manifest, ManifestMismatch> {
        if hashes.len() as u64 != chunk_count(size, digest.chunk_size) || manifest::root(&hashes) != digest.manifest {
            return Err(ManifestMismatch);
        }
        Ok(Manifest { chunk_size: digest.chunk_size, hashes, kind: ChunkHash::Blake3 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_every_chunk_of_a_block() {
        let cs = 1024u32;
        let data: Vec<u8> = (0..5000u32).map(|i| (i / 1024 + i * 7) as u8).collect();
        let m = Manifest {
            chunk_size: cs,
            hashes: data.chunks(cs as usize).map(manifest::chunk_hash).collect(),
            kind: ChunkHash::Blake3,
        };
        assert!(m.verify(0, &data[..2048]));
        assert!(m.verify(4096, &data[4096..]));
        assert!(!m.verify(1024, &data[..1024]), "right bytes at the wrong place");
        let mut bad = data[2048..4096].to_vec();
        bad[1500] ^= 1;
        assert!(!m.verify(2048, &bad), "a flipped bit in the second chunk of a block");
        assert!(!m.verify(8192, &data[..10]), "past the end");
    }
}
