//! Arbitrary bytes as an older copy, a new version and the weak checksums
//! a mirror sends (which may lie): finding, claiming and placing chunks
//! never panics, and every chunk placed is the new version's, byte for
//! byte.
#![no_main]

use std::io::Write;
use std::os::unix::fs::FileExt;

use ddftp::manifest::{ChunkHash, Manifest};
use libfuzzer_sys::fuzz_target;

const CHUNK: u32 = 4096;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    // [old len: 2 bytes][weak mode: 1][rest: old, then new]
    let old_len = (usize::from(u16::from_be_bytes([data[0], data[1]])) * 4).min(data.len() - 3);
    let mode = data[2];
    let (old, new) = data[3..].split_at(old_len);
    let hashes: Vec<_> = new.chunks(CHUNK as usize).map(|c| ChunkHash::Blake3.of(c)).collect();
    let m = Manifest { chunk_size: CHUNK, hashes, kind: ChunkHash::Blake3 };
    let weak: Vec<u32> = match mode % 3 {
        0 => new.chunks(CHUNK as usize).map(ddftp_proto::rolling::weak).collect(),
        // Lies: the same checksum everywhere, or the bytes themselves.
        1 => vec![u32::from(mode); m.hashes.len()],
        _ => new.chunks(4).map(|c| c.iter().fold(0u32, |a, &b| a << 8 | u32::from(b))).take(m.hashes.len()).collect(),
    };
    let mut local = tempfile_in_memory(old);
    let found = ddftp::delta::find(&local, old.len() as u64, &m, new.len() as u64, Some(&weak)).expect("read");
    let out = tempfile_in_memory(&vec![0u8; new.len()]);
    let mut placed = vec![false; m.hashes.len()];
    ddftp::delta::place(&local, &found, &m, new.len() as u64, &out, &mut placed, |_| ()).expect("write");
    for (j, p) in placed.iter().enumerate().filter(|(_, p)| **p) {
        let a = j * CHUNK as usize;
        let b = (a + CHUNK as usize).min(new.len());
        let mut got = vec![0u8; b - a];
        out.read_exact_at(&mut got, a as u64).expect("read back");
        assert_eq!(got, new[a..b], "chunk {j} placed wrong ({p})");
    }
    // Claims (no manifest yet): each is the hash of the local bytes it
    // names; if they make the new version's root, each is its chunk.
    let c = ddftp::delta::claim::claim(&local, old.len() as u64, CHUNK, new.len() as u64, &weak, ChunkHash::Blake3)
        .expect("read");
    let mut whole = m.hashes.clone();
    for (j, (at, h)) in c.found.at.iter().zip(&c.hashes).enumerate() {
        let (Some(at), Some(h)) = (at, h) else { continue };
        let len = (new.len() - j * CHUNK as usize).min(CHUNK as usize);
        let mut got = vec![0u8; len];
        local.read_exact_at(&mut got, *at).expect("read back");
        assert_eq!(ChunkHash::Blake3.of(&got), *h, "claim {j}");
        whole[j] = *h;
    }
    if ddftp_proto::manifest::root(&whole) == ddftp_proto::manifest::root(&m.hashes) {
        assert_eq!(whole, m.hashes);
    }
    local.flush().ok();
});

/// An anonymous file holding `data` (memfd: nothing left on disk).
fn tempfile_in_memory(data: &[u8]) -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a static name; the fd is owned by the File.
    let fd = unsafe { libc::memfd_create(c"delta".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(data).expect("write");
    f
}
