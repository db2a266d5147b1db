//! Seals (BLAKE3 of each block, as a `SealedBlock` carries it) of a run of
//! blocks: of a bundle's range (receivers that take blocks from each other
//! check them against a mirror's) and of a file (a client updating an older
//! copy finds which pieces of a changed chunk it already holds).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// Bytes read at once while sealing a file's blocks.
const READ: u64 = 4 << 20;

/// The blocks `first..first + count` of a range of `size` bytes cut into
/// `block_size`-byte blocks, if they all exist (an `InvalidInput` error
/// naming `what` otherwise).
pub fn run(size: u64, block_size: u32, first: u64, count: u32, what: &str) -> io::Result<Range<u64>> {
    let bs = u64::from(block_size);
    let blocks = if bs == 0 { 0 } else { size.div_ceil(bs) };
    match first.checked_add(u64::from(count)).filter(|&e| e <= blocks && count > 0 && bs > 0) {
        Some(end) => Ok(first..end),
        None => {
            let why = format!("seals {first}+{count} are past the {what}'s {blocks} blocks of {block_size} bytes");
            Err(io::Error::new(io::ErrorKind::InvalidInput, why))
        }
    }
}

/// The seals of blocks `first..first + count` of `file` as it is now.
pub fn of_file(file: &File, block_size: u32, first: u64, count: u32) -> io::Result<Vec<[u8; 32]>> {
    let size = file.metadata()?.len();
    let blocks = run(size, block_size, first, count, "file")?;
    let bs = u64::from(block_size);
    let per_read = (READ / bs).max(1);
    let mut out = Vec::with_capacity(count as usize);
    let mut buf = vec![];
    let mut block = blocks.start;
    while block < blocks.end {
        let at = block * bs;
        let upto = (block + per_read).min(blocks.end);
        buf.resize(((upto * bs).min(size) - at) as usize, 0);
        file.read_exact_at(&mut buf, at)?;
        out.extend(buf.chunks(bs as usize).map(ddftp_proto::frame::seal));
        block = upto;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A file's seals are its blocks' seals; a run past its end is refused.
        #[test]
        fn a_files_seals_are_its_blocks_seals(n in 0usize..20_000, bs in 1u32..5000, first in 0u64..30, count in 0u32..30) {
            let dir = tempfile::tempdir().unwrap();
            let data: Vec<u8> = (0..n).map(|b| (b * 31 % 251) as u8).collect();
            std::fs::write(dir.path().join("f"), &data).unwrap();
            let f = File::open(dir.path().join("f")).unwrap();
            let blocks = (n as u64).div_ceil(u64::from(bs));
            match of_file(&f, bs, first, count) {
                Ok(got) => {
                    proptest::prop_assert!(count > 0 && first + u64::from(count) <= blocks);
                    let want: Vec<[u8; 32]> = data.chunks(bs as usize).skip(first as usize).take(count as usize)
                        .map(ddftp_proto::frame::seal).collect();
                    proptest::prop_assert_eq!(got, want);
                }
                Err(e) => {
                    proptest::prop_assert!(count == 0 || first + u64::from(count) > blocks);
                    proptest::prop_assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
                }
            }
        }
    }
}
