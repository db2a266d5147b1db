//! Pieces of a changed chunk. A chunk of the new version that no local
//! file holds whole mostly still holds most of it: an edit of a few bytes
//! changes one chunk of 256 KiB, an insertion or removal cuts the chunk at
//! its edge. For such a chunk (one next to a chunk found) the mirror's
//! seals of its pieces (BLAKE3 of each) are compared with the local bytes
//! where the chunk's neighbours put it, and at its own offset; only the
//! pieces not found move. The chunk is taken only once it matches its
//! manifest hash whole, so a lying seal or a changing local file costs a
//! download, never a wrong byte.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ddftp_proto::manifest::Hash;

use super::Found;

/// Pieces are never smaller than this (a seal costs 32 bytes; smaller
/// pieces would cost more in seals than they save).
const SMALLEST_PIECE: u32 = 4 << 10;
/// A chunk is cut into at most this many pieces.
const PIECES_PER_CHUNK: u32 = 64;

/// The piece size for chunks of `chunk` bytes, if they are large enough to
/// cut (at least two pieces).
pub fn piece_size(chunk: u32) -> Option<u32> {
    let p = (chunk / PIECES_PER_CHUNK).max(SMALLEST_PIECE);
    (chunk / p >= 2 && chunk.is_multiple_of(p)).then_some(p)
}

/// A changed chunk is cut if a chunk found lies within this many chunks
/// of it (an edit may change two chunks side by side).
const NEAR: u64 = 2;

/// The chunks worth cutting into pieces, at most `most`: found in no local
/// file, near one found in some (an edit inside, or the edge of an
/// insertion, a removal, a move). A chunk far from any found one is new
/// data: it moves whole, in the transfer.
pub fn worth_cutting(found: &[&Found], chunks: u64, most: usize) -> Vec<u64> {
    let is_found = |j: u64| j < chunks && found.iter().any(|f| f.at.get(j as usize).is_some_and(|a| a.is_some()));
    let near = |j: u64| (1..=NEAR).any(|d| j.checked_sub(d).is_some_and(is_found) || is_found(j + d));
    (0..chunks).filter(|&j| !is_found(j) && near(j)).take(most).collect()
}

/// Chunks found in no local file that lie before the last one found, at
/// most `most`: the whole file's hash, which reads it in order, waits for
/// them; fetched before the found chunks are placed, they let it follow
/// the placing.
pub fn holes(found: &[&Found], chunks: u64, most: usize) -> Vec<u64> {
    let is_found = |j: u64| found.iter().any(|f| f.at.get(j as usize).is_some_and(|a| a.is_some()));
    let Some(last) = (0..chunks).rev().find(|&j| is_found(j)) else { return vec![] };
    (0..last).filter(|&j| !is_found(j)).take(most).collect()
}

/// Where chunk `j` (of `chunk` bytes) may lie in a local file of `len`
/// bytes: where the nearest chunk found before it puts it, where the
/// nearest found after it does, and at its own offset; each once.
pub fn bases(found: &Found, j: u64, chunk: u64, len: u64) -> Vec<u64> {
    let at = |k: u64| found.at.get(k as usize).copied().flatten();
    let after = (1..=NEAR.min(j)).find_map(|d| at(j - d).map(|a| a + d * chunk));
    let before = (1..=NEAR).find_map(|d| at(j + d).map(|a| a.checked_sub(d * chunk))).flatten();
    let mut out: Vec<u64> = vec![];
    for b in [after, before, Some(j * chunk)].into_iter().flatten() {
        if b < len && !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

/// Fills the pieces of a chunk (`buf`, its bytes; `piece` bytes each, the
/// last maybe shorter) that `local` (`len` bytes) holds at one of `bases`,
/// by their `seals`, and marks them in `have`. Returns the bytes found.
pub fn find_pieces(
    local: &File,
    len: u64,
    bases: &[u64],
    seals: &[Hash],
    piece: u32,
    buf: &mut [u8],
    have: &mut [bool],
) -> io::Result<u64> {
    let p = piece as usize;
    let mut found = 0u64;
    let mut window = vec![0u8; buf.len()];
    for &base in bases {
        if have.iter().all(|&h| h) {
            break;
        }
        let n = (len.saturating_sub(base)).min(buf.len() as u64) as usize;
        let w = &mut window[..n];
        local.read_exact_at(w, base)?;
        for (k, seal) in seals.iter().enumerate().take(have.len()) {
            let (a, b) = (k * p, ((k + 1) * p).min(buf.len()));
            if have[k] || b > n {
                continue;
            }
            if ddftp_proto::frame::seal(&w[a..b]) == *seal {
                buf[a..b].copy_from_slice(&w[a..b]);
                have[k] = true;
                found += (b - a) as u64;
            }
        }
    }
    Ok(found)
}

/// The runs of pieces not had, as inclusive (first, last) indices.
pub fn missing(have: &[bool]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = vec![];
    for (k, _) in have.iter().enumerate().filter(|(_, h)| !**h) {
        let k = k as u64;
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == k => *hi = k,
            _ => out.push((k, k)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn found(at: &[Option<u64>]) -> Found {
        Found { at: at.to_vec() }
    }

    #[test]
    fn pieces_are_a_64th_of_a_chunk_and_at_least_4_kib() {
        assert_eq!(piece_size(4 << 10), None);
        assert_eq!(piece_size(8 << 10), Some(4 << 10));
        assert_eq!(piece_size(256 << 10), Some(4 << 10));
        assert_eq!(piece_size(1 << 20), Some(16 << 10));
        assert_eq!(piece_size(16 << 20), Some(256 << 10));
        assert_eq!(piece_size(0), None);
    }

    #[test]
    fn only_missing_chunks_near_found_ones_are_cut() {
        let f = found(&[Some(0), None, None, None, None, None, Some(6), None]);
        assert_eq!(worth_cutting(&[&f], 8, 10), vec![1, 2, 4, 5, 7]);
        assert_eq!(worth_cutting(&[&f], 8, 2), vec![1, 2]);
        let g = found(&[None, None, None, Some(3), None, None, None, None]);
        assert_eq!(worth_cutting(&[&f, &g], 8, 10), vec![1, 2, 4, 5, 7]);
        assert_eq!(worth_cutting(&[&g], 8, 10), vec![1, 2, 4, 5]);
    }

    #[test]
    fn holes_are_the_missing_chunks_before_the_last_found() {
        let f = found(&[None, None, Some(0), None, Some(9), None, None]);
        assert_eq!(holes(&[&f], 7, 10), vec![0, 1, 3]);
        assert_eq!(holes(&[&f], 7, 2), vec![0, 1]);
        assert!(holes(&[&found(&[None, None])], 2, 10).is_empty());
    }

    #[test]
    fn a_chunk_is_looked_for_where_its_neighbours_put_it() {
        let f = found(&[Some(100), None, Some(5000)]);
        assert_eq!(bases(&f, 1, 1000, 10_000), vec![1100, 4000, 1000]);
        assert_eq!(bases(&f, 1, 1000, 1050), vec![1000]);
        let g = found(&[Some(0), None, Some(2000)]);
        assert_eq!(bases(&g, 1, 1000, 10_000), vec![1000]);
        // Two changed chunks side by side: each looks past the other.
        let h = found(&[None, None, Some(7000), None]);
        assert_eq!(bases(&h, 0, 1000, 10_000), vec![5000, 0]);
        assert_eq!(bases(&h, 1, 1000, 10_000), vec![6000, 1000]);
    }

    #[test]
    fn runs_of_missing_pieces() {
        assert_eq!(missing(&[true, false, false, true, false]), vec![(1, 2), (4, 4)]);
        assert!(missing(&[true, true]).is_empty());
    }

    proptest! {
        /// Pieces found are the new chunk's own bytes; the rest are
        /// exactly the runs left missing.
        #[test]
        fn found_pieces_are_the_chunks_bytes(old in proptest::collection::vec(0u8..4, 0..3000),
                                             new in proptest::collection::vec(0u8..4, 1..1200),
                                             piece in 1u32..300, base in 0u64..3000) {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("o"), &old).unwrap();
            let local = File::open(dir.path().join("o")).unwrap();
            let seals: Vec<Hash> = new.chunks(piece as usize).map(ddftp_proto::frame::seal).collect();
            let mut buf = vec![0u8; new.len()];
            let mut have = vec![false; seals.len()];
            let got = find_pieces(&local, old.len() as u64, &[base, 0], &seals, piece, &mut buf, &mut have).unwrap();
            let mut sum = 0;
            for (k, h) in have.iter().enumerate() {
                let (a, b) = (k * piece as usize, ((k + 1) * piece as usize).min(new.len()));
                if *h {
                    prop_assert_eq!(&buf[a..b], &new[a..b]);
                    sum += (b - a) as u64;
                }
            }
            prop_assert_eq!(got, sum);
            let runs = missing(&have);
            prop_assert_eq!(runs.iter().map(|(a, b)| b - a + 1).sum::<u64>(), have.iter().filter(|h| !**h).count() as u64);
        }
    }
}
