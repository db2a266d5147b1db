//! File digests (whole-file SHA-256 and the BLAKE3 chunk manifest), computed once
//! per version of a file.
//!
//! A version is keyed by (device, inode, size, mtime): the same key means
//! the same bytes, as far as the file system tells (rsync makes the same
//! bet). Digests live in memory, and in an index directory (by default
//! `ROOT/.ddftpd-index`, never served) as one small file per inode, so they
//! survive restarts and `ddftpd index DIR` can compute them ahead of time.
//! A first `Stat` of an unindexed file reads it once; concurrent requests
//! for the same version share that one computation; later ones cost a map
//! lookup. If the index directory is not writable, digests stay in memory.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ddftp_proto::manifest::{self, chunk_count, chunk_size, FileDigest, Hash, HASH_LEN};
use ddftp_proto::rolling::WeakSum;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// Name of the default index directory under the root.
pub const INDEX_DIR_NAME: &str = ".ddftpd-index";

/// Most chunk hashes kept in memory (32 B each: 128 MiB); past it the memory
/// cache starts over (the index directory still has them).
const MEMORY_CAP_HASHES: usize = 4 << 20;

/// Version 3: BLAKE3 chunk hashes, then each chunk's weak checksum and the
/// BLAKE3 of those (the manifest root vouches for the hashes only); version
/// 2 had no weak checksums, version 1 SHA-256 chunk hashes.
const MAGIC: &[u8; 8] = b"DDIDX\x03\0\0";
const HEADER_LEN: usize = 8 + 8 + 8 + 8 + 8 + 4 + 4 + 2 * HASH_LEN;

/// One version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_secs: i64,
    pub mtime_nanos: u32,
}

impl Key {
    pub fn of(m: &std::fs::Metadata) -> Key {
        Key {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime_secs: m.mtime(),
            mtime_nanos: m.mtime_nsec().clamp(0, 999_999_999) as u32,
        }
    }

    fn file_name(&self) -> String {
        format!("{:016x}-{:016x}", self.dev, self.ino)
    }
}

/// The digests of one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    pub key: Key,
    pub digest: FileDigest,
    /// One BLAKE3 hash per chunk.
    pub hashes: Vec<Hash>,
    /// One weak (rolling) checksum per chunk ([`ddftp_proto::rolling`]).
    pub weak: Vec<u32>,
}

impl Digests {
    /// Reads `file` once, hashing it whole and chunk by chunk.
    pub fn compute(file: &File) -> io::Result<Digests> {
        let key = Key::of(&file.metadata()?);
        let d = Digests::compute_with(key, |buf, at| file.read_exact_at(buf, at))?;
        if Key::of(&file.metadata()?) != key {
            return Err(io::Error::other("the file changed while it was being hashed"));
        }
        Ok(d)
    }

    /// Hashes `key.size` bytes read by `read_exact_at` (a file, or a bundle's range).
    pub fn compute_with(key: Key, read_exact_at: impl Fn(&mut [u8], u64) -> io::Result<()>) -> io::Result<Digests> {
        let chunk = chunk_size(key.size);
        let piece = chunk.min(4 << 20) as usize;
        let mut buf = vec![0u8; piece];
        let mut whole = Sha256::new();
        let mut hashes = Vec::with_capacity(chunk_count(key.size, chunk) as usize);
        let mut at = 0u64;
        let mut weak = Vec::with_capacity(hashes.capacity());
        let mut part = blake3::Hasher::new();
        let mut sum = WeakSum::default();
        while at < key.size {
            let want = ((key.size - at) as usize).min(piece);
            read_exact_at(&mut buf[..want], at)?;
            whole.update(&buf[..want]);
            part.update(&buf[..want]);
            sum.update(&buf[..want]);
            at += want as u64;
            let into_chunk = at % u64::from(chunk);
            if into_chunk == 0 || at == key.size {
                hashes.push(part.finalize().into());
                part.reset();
                weak.push(sum.finish());
                sum = WeakSum::default();
            }
        }
        let digest =
            FileDigest { chunk_size: chunk, sha256: whole.finalize().into(), manifest: manifest::root(&hashes) };
        Ok(Digests { key, digest, hashes, weak })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + (HASH_LEN + 4) * self.hashes.len());
        out.extend_from_slice(MAGIC);
        for v in [self.key.dev, self.key.ino, self.key.size] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.key.mtime_secs.to_be_bytes());
        out.extend_from_slice(&self.key.mtime_nanos.to_be_bytes());
        out.extend_from_slice(&self.digest.chunk_size.to_be_bytes());
        out.extend_from_slice(&self.digest.sha256);
        out.extend_from_slice(&self.digest.manifest);
        for h in &self.hashes {
            out.extend_from_slice(h);
        }
        let weak_at = out.len();
        for w in &self.weak {
            out.extend_from_slice(&w.to_be_bytes());
        }
        let check = blake3::hash(&out[weak_at..]);
        out.extend_from_slice(check.as_bytes());
        out
    }

    /// An index file's digests, if it is intact and describes `key`.
    fn decode(b: &[u8], key: &Key) -> Option<Digests> {
        if b.len() < HEADER_LEN || &b[..8] != MAGIC {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let found = Key {
            dev: u64_at(8),
            ino: u64_at(16),
            size: u64_at(24),
            mtime_secs: u64_at(32) as i64,
            mtime_nanos: u32_at(40),
        };
        let chunk = u32_at(44);
        if found != *key || chunk != chunk_size(key.size) {
            return None;
        }
        let body = &b[HEADER_LEN..];
        let n = chunk_count(key.size, chunk);
        if body.len() as u64 != n * (HASH_LEN as u64 + 4) + HASH_LEN as u64 {
            return None;
        }
        let (body, weak) = body.split_at(n as usize * HASH_LEN);
        let (weak, check) = weak.split_at(weak.len() - HASH_LEN);
        if blake3::hash(weak).as_bytes() != check {
            return None;
        }
        let hashes: Vec<Hash> = body.chunks_exact(HASH_LEN).map(|c| c.try_into().expect("HASH_LEN bytes")).collect();
        let weak = weak.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes"))).collect();
        let manifest: Hash = b[48 + HASH_LEN..HEADER_LEN].try_into().expect("HASH_LEN bytes");
        if manifest::root(&hashes) != manifest {
            return None;
        }
        let sha256 = b[48..48 + HASH_LEN].try_into().expect("HASH_LEN bytes");
        Some(Digests { key: found, digest: FileDigest { chunk_size: chunk, sha256, manifest }, hashes, weak })
    }
}

/// What [`Index::digests`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Memory,
    IndexFile,
    Computed,
}

/// Digests by version: memory in front of the index directory.
#[derive(Debug)]
pub struct Index {
    dir: PathBuf,
    mem: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    cells: HashMap<Key, Arc<OnceCell<Arc<Digests>>>>,
    hashes: usize,
}

impl Index {
    pub fn new(dir: PathBuf) -> Index {
        Index { dir, mem: Mutex::new(Memory::default()) }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The digests of the version `file` is now.
    pub async fn digests(&self, file: Arc<File>) -> io::Result<(Arc<Digests>, Source)> {
        let key = Key::of(&file.metadata()?);
        let cell = {
            let mut mem = self.mem.lock().expect("index lock");
            if mem.hashes > MEMORY_CAP_HASHES {
                *mem = Memory::default();
            }
            mem.cells.entry(key).or_default().clone()
        };
        if let Some(d) = cell.get() {
            return Ok((d.clone(), Source::Memory));
        }
        let mut source = Source::Memory;
        let d = cell
            .get_or_try_init(|| async {
                let dir = self.dir.clone();
                let (d, s) = tokio::task::spawn_blocking(move || load_or_compute(&dir, &file, &key))
                    .await
                    .map_err(io::Error::other)??;
                source = s;
                Ok::<_, io::Error>(Arc::new(d))
            })
            .await?
            .clone();
        if source != Source::Memory {
            self.mem.lock().expect("index lock").hashes += d.hashes.len();
        }
        Ok((d, source))
    }
}

/// Reads the index file for `key`, or computes the digests and writes one.
pub fn load_or_compute(dir: &Path, file: &File, key: &Key) -> io::Result<(Digests, Source)> {
    let path = dir.join(key.file_name());
    if let Ok(b) = ddtree::scratch::read(&path) {
        if let Some(d) = Digests::decode(&b, key) {
            return Ok((d, Source::IndexFile));
        }
    }
    let d = Digests::compute(file)?;
    // Best effort: a read-only root still serves, from memory.
    let _ = write_atomically(dir, &path, &d.encode());
    Ok((d, Source::Computed))
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let landing = ddtree::scratch::Landing::new(path);
    landing.create()?.write_all(bytes)?;
    landing.land()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ddftpd-digests-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn digests_match_a_plain_sha256_and_chunk_hashes() {
        let d = temp("plain");
        let data: Vec<u8> = (0..(600 * 1024u32)).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(d.join("f"), &data).unwrap();
        let g = Digests::compute(&File::open(d.join("f")).unwrap()).unwrap();
        assert_eq!(g.digest.sha256, manifest::sha256(&data));
        let expect: Vec<Hash> = data.chunks(chunk_size(data.len() as u64) as usize).map(manifest::chunk_hash).collect();
        assert_eq!(expect.len(), 150);
        assert_eq!(g.hashes, expect);
        let weak: Vec<u32> =
            data.chunks(chunk_size(data.len() as u64) as usize).map(ddftp_proto::rolling::weak).collect();
        assert_eq!(g.weak, weak);
        assert_eq!(g.digest.manifest, manifest::root(&expect));
        std::fs::write(d.join("empty"), b"").unwrap();
        let e = Digests::compute(&File::open(d.join("empty")).unwrap()).unwrap();
        assert!(e.hashes.is_empty());
        assert_eq!(e.digest.sha256, manifest::sha256(b""));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn second_request_costs_nothing_and_index_files_are_checked() {
        let d = temp("cache");
        std::fs::write(d.join("f"), vec![5u8; 300_000]).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let file = Arc::new(File::open(d.join("f")).unwrap());
        let index = Index::new(d.join("idx"));
        let (a, s1) = rt.block_on(index.digests(file.clone())).unwrap();
        let (b, s2) = rt.block_on(index.digests(file.clone())).unwrap();
        assert_eq!((s1, s2), (Source::Computed, Source::Memory));
        assert!(Arc::ptr_eq(&a, &b));
        // A new server finds the index file.
        let (c, s3) = rt.block_on(Index::new(d.join("idx")).digests(file.clone())).unwrap();
        assert_eq!((s3, &*c), (Source::IndexFile, &*a));
        // A damaged index file is not trusted: recomputed.
        let idx_file = d.join("idx").join(a.key.file_name());
        let good = std::fs::read(&idx_file).unwrap();
        // A chunk hash, a weak checksum, the check after them.
        let n = a.hashes.len();
        for at in [HEADER_LEN + 5, HEADER_LEN + n * HASH_LEN + 2, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 1;
            std::fs::write(&idx_file, &bytes).unwrap();
            let (e, s4) = rt.block_on(Index::new(d.join("idx")).digests(file.clone())).unwrap();
            assert_eq!((s4, &*e), (Source::Computed, &*a), "byte {at} damaged");
        }
        // A new version (other size) is a new key.
        std::fs::write(d.join("f"), vec![5u8; 300_001]).unwrap();
        let (f, s5) = rt.block_on(index.digests(Arc::new(File::open(d.join("f")).unwrap()))).unwrap();
        assert_eq!(s5, Source::Computed);
        assert_ne!(f.digest.sha256, a.digest.sha256);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
