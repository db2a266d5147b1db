//! The chunk manifest on the client: fetched once from a mirror of the
//! agreed version, checked against the root every mirror reported, then
//! used to verify each block before it is written.
//!
//! Blocks are whole multiples of the chunk size, so a block is verified on
//! its own, in the slot that received it, with the data still in the receive
//! buffer: a bad block never reaches the file, and the mirror that sent it
//! is known exactly.

use bytes::BytesMut;
use ddftp_proto::manifest::{self, chunk_count, Hash, MAX_MANIFEST_HASHES};
use ddftp_proto::{FileDigest, Reply, Request};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::transfer::{read_reply, unexpected};

/// The chunk hashes of one version of a file.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub chunk_size: u32,
    pub hashes: Vec<Hash>,
}

impl Manifest {
    /// Whether `payload`, the block at byte `offset`, has the content the
    /// manifest says. `offset` is a multiple of the chunk size.
    pub fn verify(&self, offset: u64, payload: &[u8]) -> bool {
        let first = offset / u64::from(self.chunk_size);
        payload.chunks(self.chunk_size as usize).enumerate().all(|(i, c)| {
            usize::try_from(first + i as u64).ok().and_then(|k| self.hashes.get(k)) == Some(&manifest::chunk_hash(c))
        })
    }
}

/// Asks for the whole manifest of `path` on a greeted connection (every
/// range request at once: one round trip) and checks it against `digest`.
pub async fn fetch(sock: &mut TcpStream, path: &str, size: u64, digest: &FileDigest) -> Result<Manifest, String> {
    let n = chunk_count(size, digest.chunk_size);
    let mut out = BytesMut::new();
    let mut first = 0;
    while first < n {
        let count = (n - first).min(u64::from(MAX_MANIFEST_HASHES)) as u32;
        Request::Manifest { path: path.to_string(), first, count }.encode(&mut out);
        first += u64::from(count);
    }
    sock.write_all(&out).await.map_err(|e| format!("send: {e}"))?;
    read(sock, &mut BytesMut::with_capacity(64 * 1024), size, digest).await
}

/// Reads the `Manifest` replies of a whole manifest (asked for by `fetch`,
/// or by a `Stat` with `manifest`) and checks them against `digest`.
pub async fn read(
    sock: &mut TcpStream,
    buf: &mut BytesMut,
    size: u64,
    digest: &FileDigest,
) -> Result<Manifest, String> {
    let n = chunk_count(size, digest.chunk_size);
    let mut hashes = Vec::with_capacity(n as usize);
    while (hashes.len() as u64) < n {
        match read_reply(sock, buf).await? {
            Reply::Manifest { first, hashes: part } if first == hashes.len() as u64 && !part.is_empty() => {
                hashes.extend_from_slice(&part)
            }
            Reply::Manifest { first, .. } => return Err(format!("manifest reply for chunk {first} out of order")),
            other => return Err(unexpected(other)),
        }
    }
    if hashes.len() as u64 != n || manifest::root(&hashes) != digest.manifest {
        return Err("its chunk manifest does not match the digest it reported".into());
    }
    Ok(Manifest { chunk_size: digest.chunk_size, hashes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_every_chunk_of_a_block() {
        let cs = 1024u32;
        let data: Vec<u8> = (0..5000u32).map(|i| (i / 1024 + i * 7) as u8).collect();
        let m = Manifest { chunk_size: cs, hashes: data.chunks(cs as usize).map(manifest::chunk_hash).collect() };
        assert!(m.verify(0, &data[..2048]));
        assert!(m.verify(4096, &data[4096..]));
        assert!(!m.verify(1024, &data[..1024]), "right bytes at the wrong place");
        let mut bad = data[2048..4096].to_vec();
        bad[1500] ^= 1;
        assert!(!m.verify(2048, &bad), "a flipped bit in the second chunk of a block");
        assert!(!m.verify(8192, &data[..10]), "past the end");
    }
}
