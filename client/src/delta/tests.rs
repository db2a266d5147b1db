use super::*;
use crate::manifest::ChunkHash;
use proptest::prelude::*;

const CHUNK: u32 = 4096;

fn manifest(data: &[u8]) -> Manifest {
    let hashes = data.chunks(CHUNK as usize).map(|c| ChunkHash::Blake3.of(c)).collect();
    Manifest { chunk_size: CHUNK, hashes, kind: ChunkHash::Blake3 }
}

pub(super) fn file(data: &[u8]) -> (tempfile::TempDir, File) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, data).unwrap();
    let f = File::open(&p).unwrap();
    (dir, f)
}

pub(super) fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn weak_sums(data: &[u8]) -> Vec<u32> {
    data.chunks(CHUNK as usize).map(ddftp_proto::rolling::weak).collect()
}

/// Builds the new version from the old through `found` and `place`, the
/// rest from `new` itself (what the mirrors would send), with the whole
/// chunk search.
fn rebuild(old: &[u8], new: &[u8]) -> (Vec<u8>, u64) {
    rebuild_with(old, new, None)
}

/// The same with the mirror's weak checksums: chunks found at any offset.
fn rebuild_rolling(old: &[u8], new: &[u8]) -> (Vec<u8>, u64) {
    rebuild_with(old, new, Some(weak_sums(new)))
}

fn rebuild_with(old: &[u8], new: &[u8], weak: Option<Vec<u32>>) -> (Vec<u8>, u64) {
    let m = manifest(new);
    let (_d, local) = file(old);
    let found = find(&local, old.len() as u64, &m, new.len() as u64, weak.as_deref()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("o"))
        .unwrap();
    out.set_len(new.len() as u64).unwrap();
    let mut placed = vec![false; m.hashes.len()];
    place(&local, &found, &m, new.len() as u64, &out, &mut placed, |_| ()).unwrap();
    for (j, p) in placed.iter().enumerate() {
        if !p {
            let a = j * CHUNK as usize;
            let b = (a + CHUNK as usize).min(new.len());
            FileExt::write_all_at(&out, &new[a..b], a as u64).unwrap();
        }
    }
    let got = std::fs::read(dir.path().join("o")).unwrap();
    (got, placed.iter().filter(|&&p| p).count() as u64)
}

#[test]
fn scattered_edits_cost_the_chunks_they_touch() {
    let old = random(64 * CHUNK as usize + 100, 1);
    let mut new = old.clone();
    for k in [3usize, 20, 41] {
        new[k * CHUNK as usize + 10] ^= 0xff;
    }
    let (got, placed) = rebuild(&old, &new);
    assert_eq!(got, new);
    assert_eq!(placed, 65 - 3);
}

#[test]
fn whole_chunks_inserted_removed_or_reordered_are_found_where_they_went() {
    let c = CHUNK as usize;
    let old = random(32 * c, 2);
    let inserted = [random(4 * c, 3), old.clone()].concat();
    assert_eq!(rebuild(&old, &inserted).1, 32);
    let removed = [&old[..8 * c], &old[12 * c..]].concat();
    assert_eq!(rebuild(&old, &removed).1, 28);
    let mut pieces: Vec<&[u8]> = old.chunks(4 * c).collect();
    pieces.reverse();
    let shuffled = pieces.concat();
    let (got, placed) = rebuild(&old, &shuffled);
    assert_eq!((got, placed), (shuffled.clone(), 32));
}

#[test]
fn a_short_last_chunk_is_found_in_place_or_at_the_old_end() {
    let old = random(10 * CHUNK as usize + 123, 4);
    let truncated = old[..5 * CHUNK as usize + 123].to_vec();
    let (got, _) = rebuild(&old, &truncated);
    assert_eq!(got, truncated);
    let extended = [old.clone(), random(3 * CHUNK as usize, 5)].concat();
    let (got, placed) = rebuild(&old, &extended);
    assert_eq!((got, placed), (extended.clone(), 10));
}

#[test]
fn a_local_file_that_changes_after_the_scan_lands_no_wrong_byte() {
    let old = random(16 * CHUNK as usize, 6);
    let m = manifest(&old);
    let (d, local) = file(&old);
    let found = find(&local, old.len() as u64, &m, old.len() as u64, None).unwrap();
    assert_eq!(found.count(), 16);
    // The seed changes under us: two of its chunks no longer hold what
    // was found there.
    let mut changed = old.clone();
    changed[5 * CHUNK as usize] ^= 1;
    changed[9 * CHUNK as usize + 7] ^= 1;
    std::fs::write(d.path().join("f"), &changed).unwrap();
    let out = tempfile::tempfile().unwrap();
    let mut placed = vec![false; 16];
    place(&local, &found, &m, old.len() as u64, &out, &mut placed, |_| ()).unwrap();
    assert_eq!(placed.iter().filter(|&&p| !p).count(), 2);
    assert!(!placed[5] && !placed[9]);
}

#[test]
fn blocks_are_whole_only_when_each_of_their_chunks_was_placed() {
    let placed = [true, true, true, false, true, true, true, true, true];
    assert_eq!(whole_blocks(&placed, 4096, 4096), vec![(0, 2), (4, 8)]);
    assert_eq!(whole_blocks(&placed, 4096, 8192), vec![(0, 0), (2, 4)]);
}

#[test]
fn a_manifest_that_does_not_fit_the_size_finds_nothing() {
    let old = random(8 * CHUNK as usize, 7);
    let mut m = manifest(&old);
    m.hashes.pop();
    let (_d, local) = file(&old);
    assert_eq!(find(&local, old.len() as u64, &m, old.len() as u64, None).unwrap().count(), 0);
}

#[test]
fn with_weak_sums_chunks_are_found_whatever_the_shift() {
    let c = CHUNK as usize;
    let old = random(32 * c, 11);
    // 100 bytes in front, 1,000 taken out in the middle, 7 bytes changed.
    let mut new = [random(100, 12), old[..10 * c].to_vec(), old[10 * c + 1000..].to_vec()].concat();
    new[20 * c + 5..20 * c + 12].copy_from_slice(b"changed");
    let (got, placed) = rebuild_rolling(&old, &new);
    assert_eq!(got, new);
    let chunks = new.len().div_ceil(c) as u64;
    // Each change costs the chunks it touches: the first (100 new bytes),
    // one across the removal, one for the 7 bytes (and the short last).
    assert!(placed + 4 >= chunks, "placed {placed} of {chunks}");
    // Without them, nothing is in place.
    assert!(rebuild(&old, &new).1 <= 1);
}

#[test]
fn weak_sums_that_match_everywhere_cost_bounded_time_and_no_wrong_chunk() {
    let old = random(64 * CHUNK as usize, 13);
    let new = random(64 * CHUNK as usize, 14);
    let m = manifest(&new);
    let (_d, local) = file(&old);
    // A lying mirror: every weak checksum is that of a chunk of zeros, so
    // in a file of zeros every window is a candidate.
    let all_zero = vec![ddftp_proto::rolling::weak(&vec![0u8; CHUNK as usize]); m.hashes.len()];
    let t = std::time::Instant::now();
    let found = find(&local, old.len() as u64, &m, new.len() as u64, Some(&all_zero)).unwrap();
    assert_eq!(found.count(), 0);
    assert!(t.elapsed() < std::time::Duration::from_secs(20));
    let zeros = vec![0u8; 64 * CHUNK as usize];
    let (_z, zl) = file(&zeros);
    let t = std::time::Instant::now();
    let found = find(&zl, zeros.len() as u64, &m, new.len() as u64, Some(&all_zero)).unwrap();
    assert_eq!(found.count(), 0);
    assert!(t.elapsed() < std::time::Duration::from_secs(20));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever bytes were inserted, removed or changed, the rolling search
    /// rebuilds the new version exactly.
    #[test]
    fn rolling_always_gives_the_new_version(
        seed in any::<u64>(),
        old_len in 0usize..(12 * 4096),
        ops in proptest::collection::vec((0usize..3, 0usize..(12 * 4096), 0usize..5000), 0..6),
    ) {
        let old = random(old_len, seed);
        let mut new = old.clone();
        for (op, at, n) in ops {
            let at = at.min(new.len());
            match op {
                0 => { let ins = random(n, seed ^ at as u64); new.splice(at..at, ins); }
                1 => { let end = (at + n).min(new.len()); new.drain(at..end); }
                _ => if at < new.len() { new[at] ^= 0x5a; },
            }
        }
        let (got, _) = rebuild_rolling(&old, &new);
        prop_assert_eq!(got, new);
    }

    /// Whatever the old file and the new version, the rebuilt file is the
    /// new version, and every chunk the old file holds at a whole-chunk
    /// offset is taken from it.
    #[test]
    fn the_result_is_always_the_new_version(
        seed in any::<u64>(),
        old_chunks in 0usize..12,
        tail in 0usize..4096,
        ops in proptest::collection::vec((0usize..3, 0usize..12, 0usize..4), 0..6),
    ) {
        let c = CHUNK as usize;
        let old = random(old_chunks * c + tail, seed);
        let mut new = old.clone();
        for (op, at, n) in ops {
            let at = (at * c).min(new.len() / c * c);
            match op {
                0 => { let ins = random(n * c, seed ^ at as u64); new.splice(at..at, ins); }
                1 => { let end = (at + n * c).min(new.len()); new.drain(at..end); }
                _ => if at < new.len() { new[at] ^= 0x5a; },
            }
        }
        let (got, _) = rebuild(&old, &new);
        prop_assert_eq!(got, new);
    }
}

/// A store that is not one file (as an archive's tree or standard
/// output): chunks are read, checked and written, not copied by the kernel.
#[derive(Debug)]
struct NotAFile(File);

impl Store for NotAFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(&self.0, buf, offset)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.0, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn into_a_store_that_is_not_a_file_chunks_are_read_checked_and_written() {
    let old = random(16 * CHUNK as usize, 8);
    let m = manifest(&old);
    let (d, local) = file(&old);
    let found = find(&local, old.len() as u64, &m, old.len() as u64, None).unwrap();
    let mut changed = old.clone();
    changed[3 * CHUNK as usize + 1] ^= 1;
    std::fs::write(d.path().join("f"), &changed).unwrap();
    let out = NotAFile(tempfile::tempfile().unwrap());
    let mut placed = vec![false; 16];
    place(&local, &found, &m, old.len() as u64, &out, &mut placed, |_| ()).unwrap();
    assert_eq!(placed.iter().filter(|&&p| !p).count(), 1);
    let mut got = vec![0u8; old.len()];
    out.read_exact_at(&mut got, 0).unwrap();
    for (j, p) in placed.iter().enumerate() {
        let r = j * CHUNK as usize..(j + 1) * CHUNK as usize;
        assert!(!p || got[r.clone()] == old[r], "chunk {j}");
    }
}
