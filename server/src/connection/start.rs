//! Which `Start`s a server takes: a pure rule, fuzzed.

use ddftp_proto::Direction;

/// Whether `Start(first..last, dir)` names blocks of a `size`-byte file cut
/// into `block_size`-byte blocks, with at least one block to send.
pub fn check_start(size: u64, block_size: u32, first: u64, last: u64, dir: Direction) -> Result<(), BadStart> {
    if block_size == 0 {
        return Err(BadStart::ZeroBlockSize);
    }
    let blocks = size.div_ceil(u64::from(block_size));
    if first >= blocks || last >= blocks || dir.span(first, last) == 0 {
        return Err(BadStart::Range { first, last, blocks });
    }
    Ok(())
}

/// Why a `Start` names no blocks of its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadStart {
    #[error("block size 0")]
    ZeroBlockSize,
    #[error("blocks {first}..{last} are not a valid range of its {blocks} blocks")]
    Range { first: u64, last: u64, blocks: u64 },
}
