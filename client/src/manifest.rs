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
    pub fn of(self, data: &[u8]) -> Hash {
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

/// A chunk hash computed a buffer at a time (a piece larger than a block
/// is read back from the file in bounded pieces).
enum Running {
    Blake3(Box<blake3::Hasher>),
    Sha256(sha2::Sha256),
    Sha1(sha1::Sha1),
}

impl Running {
    fn new(kind: ChunkHash) -> Running {
        use sha2::Digest;
        match kind {
            ChunkHash::Blake3 => Running::Blake3(Box::default()),
            ChunkHash::Sha256 => Running::Sha256(sha2::Sha256::new()),
            ChunkHash::Sha1 => Running::Sha1(sha1::Sha1::new()),
        }
    }

    fn update(&mut self, data: &[u8]) {
        use sha2::Digest;
        match self {
            Running::Blake3(h) => {
                h.update(data);
            }
            Running::Sha256(h) => h.update(data),
            Running::Sha1(h) => h.update(data),
        }
    }

    fn finish(self) -> Hash {
        use sha2::Digest;
        match self {
            Running::Blake3(h) => h.finalize().into(),
            Running::Sha256(h) => h.finalize().into(),
            Running::Sha1(h) => {
                let mut out = [0u8; 32];
                out[..20].copy_from_slice(&h.finalize());
                out
            }
        }
    }
}

/// Bytes read at a time when a whole chunk is checked from the file.
const READ_BACK: usize = 1 << 20;

impl Manifest {
    /// Whether chunk `index` of a `size`-byte file, read through `read`
    /// (`read(buf, offset)` fills `buf` from the file at `offset`), has the
    /// content the manifest says; memory is [`READ_BACK`] bytes whatever
    /// the chunk size.
    pub fn verify_chunk(
        &self,
        index: u64,
        size: u64,
        read: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        self.verify_chunk_by(index, size, None, read)
    }

    /// [`verify_chunk`](Self::verify_chunk); with `blocks` (a block size
    /// dividing the chunk's), also each block's BLAKE3 pushed there: which
    /// blocks differ between a bad copy and a good one.
    pub fn verify_chunk_by(
        &self,
        index: u64,
        size: u64,
        mut blocks: Option<(u32, &mut Vec<Hash>)>,
        mut read: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        let Some(want) = usize::try_from(index).ok().and_then(|i| self.hashes.get(i)) else { return Ok(false) };
        let start = index * u64::from(self.chunk_size);
        let end = (start + u64::from(self.chunk_size)).min(size);
        let mut h = Running::new(self.kind);
        let step = match &blocks {
            Some((bs, _)) => (*bs as usize).min(READ_BACK),
            None => READ_BACK,
        };
        let mut buf = vec![0u8; step.min(self.chunk_size as usize)];
        let mut block = blake3::Hasher::new();
        let mut at = start;
        while at < end {
            let n = (end - at).min(buf.len() as u64) as usize;
            read(&mut buf[..n], at)?;
            h.update(&buf[..n]);
            at += n as u64;
            if let Some((bs, out)) = &mut blocks {
                block.update(&buf[..n]);
                if (at - start).is_multiple_of(u64::from(*bs)) || at == end {
                    out.push(block.finalize().into());
                    block.reset();
                }
            }
        }
        Ok(h.finish() == *want)
    }

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

    #[test]
    fn a_chunk_read_back_in_pieces_hashes_as_one() {
        let data: Vec<u8> = (0..(3 << 20) + 77u32).map(|i| (i % 251) as u8).collect();
        for kind in [ChunkHash::Blake3, ChunkHash::Sha256, ChunkHash::Sha1] {
            let cs = 2u32 << 20;
            let m = Manifest { chunk_size: cs, hashes: data.chunks(cs as usize).map(|c| kind.of(c)).collect(), kind };
            let size = data.len() as u64;
            let read = |buf: &mut [u8], at: u64| {
                buf.copy_from_slice(&data[at as usize..at as usize + buf.len()]);
                Ok(())
            };
            assert!(m.verify_chunk(0, size, read).unwrap() && m.verify_chunk(1, size, read).unwrap());
            assert!(!m.verify_chunk(2, size, read).unwrap(), "no such chunk");
            let mut bad = data.clone();
            bad[(2 << 20) + 5] ^= 1;
            let read_bad = |buf: &mut [u8], at: u64| {
                buf.copy_from_slice(&bad[at as usize..at as usize + buf.len()]);
                Ok(())
            };
            assert!(m.verify_chunk(0, size, read_bad).unwrap() && !m.verify_chunk(1, size, read_bad).unwrap());
        }
    }
}
