use super::*;
use crate::delta::chunk_len;
use crate::delta::tests::{file, random};
use crate::manifest::Manifest;

const CHUNK: u32 = 4096;

/// Claims `new`'s chunks in `old`, fills the rest from `new` (what the
/// mirror would send), and checks the result against `new`'s manifest:
/// the claims, whether the root agrees, and whether every claim is where
/// its chunk lies (a claim rests on weak checksums, which can collide:
/// the root is what catches a wrong one).
fn claimed_all(old: &[u8], new: &[u8]) -> (Claims, bool, bool) {
    claimed_into(old, new, false)
}

fn claimed_into(old: &[u8], new: &[u8], from_start: bool) -> (Claims, bool, bool) {
    let weak: Vec<u32> = new.chunks(CHUNK as usize).map(weak_of).collect();
    let (_d, local) = file(old);
    let (dir, _) = file(&[]);
    let into = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("f")).unwrap();
    let c = claim(
        &local,
        old.len() as u64,
        (CHUNK, new.len() as u64),
        &weak,
        ChunkHash::Blake3,
        Some(Into { file: &into, from_start }),
    )
    .unwrap();
    // What landed is the bytes claimed, at the chunk's place: they hash
    // to the claim (whether or not the claim is true).
    let landed = std::fs::read(dir.path().join("f")).unwrap();
    for (j, _) in c.landed.iter().enumerate().filter(|(_, &l)| l) {
        let len = chunk_len(new.len() as u64, u64::from(CHUNK), j as u64);
        let at = c.found.at[j].unwrap() as usize;
        let put = &landed[j * CHUNK as usize..][..len];
        assert_eq!(put, &old[at..at + len]);
        assert_eq!(Some(ChunkHash::Blake3.of(put)), c.hashes[j]);
    }
    let truth: Vec<Hash> = new.chunks(CHUNK as usize).map(|b| ChunkHash::Blake3.of(b)).collect();
    let hashes: Vec<Hash> = c.hashes.iter().zip(&truth).map(|(h, t)| h.unwrap_or(*t)).collect();
    let root = ddftp_proto::manifest::root(&truth);
    let ok = ddftp_proto::manifest::root(&hashes) == root;
    let true_at = |(j, at): (usize, &Option<u64>)| {
        at.is_none_or(|a| {
            let len = chunk_len(new.len() as u64, u64::from(CHUNK), j as u64);
            old[a as usize..a as usize + len] == new[j * CHUNK as usize..][..len]
        })
    };
    let all_true = c.found.at.iter().enumerate().all(true_at);
    let _ = Manifest { chunk_size: CHUNK, hashes: truth, kind: ChunkHash::Blake3 };
    (c, ok, all_true)
}

/// [`claimed_all`] where every claim must be true (files whose weak
/// checksums do not collide).
fn claimed(old: &[u8], new: &[u8]) -> (Claims, bool) {
    let (c, ok, all_true) = claimed_all(old, new);
    assert!(all_true, "a claim where its chunk does not lie");
    (c, ok)
}

#[test]
fn an_edit_an_insertion_and_a_truncation_leave_only_their_chunks_unclaimed() {
    let old = random(64 * CHUNK as usize + 100, 1);
    let mut edited = old.clone();
    edited[10 * CHUNK as usize + 5] ^= 1;
    let (c, ok) = claimed(&old, &edited);
    assert!(ok);
    assert_eq!(c.missing(), vec![(10, 1)]);
    let inserted = [b"12345".to_vec(), old.clone()].concat();
    let (c, ok) = claimed(&old, &inserted);
    assert!(ok);
    assert_eq!(c.missing(), vec![(0, 1)]);
    let (c, ok) = claimed(&old, &old[..20 * CHUNK as usize + 7]);
    assert!(ok);
    assert!(c.missing().len() <= 1, "{:?}", c.missing());
}

#[test]
fn an_output_that_is_the_new_version_lands_nothing() {
    let data = random(40 * CHUNK as usize + 100, 9);
    let (c, ok) = claimed(&data, &data);
    assert!(ok && c.found.count() == c.found.at.len() as u64);
    assert!(c.landed.iter().all(|&l| !l), "a twin of the new version costs no write");
    let mut edited = data.clone();
    edited[30 * CHUNK as usize + 5] ^= 1;
    let (c, ok) = claimed(&data, &edited);
    assert!(ok && c.landed.iter().any(|&l| l), "past a difference, chunks land as found");
    let (c, ok, _) = claimed_into(&data, &edited, true);
    let found: Vec<bool> = c.found.at.iter().map(Option::is_some).collect();
    assert!(ok && c.landed[..40] == found[..40], "from the start, every full chunk lands");
}

#[test]
fn nothing_shared_claims_nothing() {
    let (c, ok) = claimed(&random(40 * CHUNK as usize, 2), &random(40 * CHUNK as usize, 3));
    assert!(ok);
    assert_eq!(c.missing(), vec![(0, 40)]);
}

proptest::proptest! {
    /// Whatever the two files, the root of claims plus the rest is the
    /// new one's exactly when every claim is where its chunk lies: a
    /// claim on colliding weak checksums (three byte values make them
    /// likely) never passes (the download then fetches the whole
    /// manifest, `transfer/claimed.rs`).
    #[test]
    fn the_root_agrees_exactly_when_claims_are_true(old in proptest::collection::vec(0u8..3, 0..40_000),
                       new in proptest::collection::vec(0u8..3, 1..40_000)) {
        let (_, ok, all_true) = claimed_all(&old, &new);
        proptest::prop_assert_eq!(ok, all_true);
    }
}

/// Weak checksums that lie (every other chunk's matches the old copy's
/// windows everywhere, the next one's never): the scan gives up within
/// its budget, claiming nothing wrong.
#[test]
fn lying_weak_checksums_cost_a_bounded_scan() {
    let old = vec![0u8; 256 * CHUNK as usize];
    let zero = weak_of(&old[..CHUNK as usize]);
    let weak: Vec<u32> = (0..256).map(|j| if j % 2 == 0 { zero } else { 1 }).collect();
    let (_d, local) = file(&old);
    let began = std::time::Instant::now();
    let c = claim(&local, old.len() as u64, (CHUNK, old.len() as u64), &weak, ChunkHash::Blake3, None).unwrap();
    assert!(began.elapsed() < std::time::Duration::from_secs(5), "took {:?}", began.elapsed());
    // No chunk whose checksum lied about the zeros is claimed.
    for (j, h) in c.hashes.iter().enumerate() {
        if h.is_some() {
            assert_eq!(weak[j], zero, "chunk {j}");
        }
    }
}
