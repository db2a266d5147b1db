//! `get` onto an older copy: the output's chunks that the new version
//! holds are copied into the part file before a byte moves, and count as
//! done; the mirrors send only the rest. The old output is only read, and
//! the part file replaces it at the end, so an interrupted run leaves it
//! as it was (and resumes from its journal like any other).

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;

use crate::delta::{self, Found};
use crate::manifest::Manifest;
use crate::store::Store;

use super::{GetSpec, Progress};

/// An older copy, and where the new version's chunks lie in it.
pub(super) struct Seed {
    file: File,
    found: Found,
}

/// The output, if it is an older copy that holds some of the new
/// version's chunks (and delta applies: a part file of a whole file, no
/// interrupted run to resume, a chunk manifest to match against).
pub(super) fn look(
    spec: &GetSpec,
    manifest: Option<&Manifest>,
    size: u64,
    resuming: bool,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Option<Seed> {
    let whole_file =
        spec.stdout.is_some() || spec.store.is_some() || spec.range.is_some() || spec.sealed_size.is_some();
    if !spec.delta || whole_file || resuming {
        return None;
    }
    // Never through a symlink, never waiting on a FIFO: only the regular
    // file under that name is read.
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&spec.output);
    let file = file.ok()?;
    let len = file.metadata().ok().filter(|m| m.is_file() && m.len() > 0)?.len();
    let out = spec.output.display();
    let Some(m) = manifest.filter(|m| delta::usable(m, size)) else {
        let why = match manifest {
            None => "no mirror gives a chunk manifest (a ddftpd mirror does)",
            Some(_) => "the mirrors' pieces are too large to match",
        };
        super::tell(progress, warnings, format!("{out} holds another version, but {why}; fetching the whole file"));
        return None;
    };
    progress.status(&format!("looking for the new version's chunks in {out}"));
    match delta::find(&file, len, m, size) {
        Ok(found) if found.count() > 0 => Some(Seed { file, found }),
        Ok(_) => {
            tracing::info!(output = %out, "the older copy shares no chunk with the new version");
            None
        }
        Err(e) => {
            super::tell(
                progress,
                warnings,
                format!("could not read {out} to reuse its chunks ({e}); fetching the whole file"),
            );
            None
        }
    }
}

/// Copies the seed's chunks into `store` (each hashed again as copied):
/// the blocks now whole, and the bytes copied.
pub(super) fn place(
    seed: Seed,
    m: &Manifest,
    size: u64,
    block_size: u32,
    store: &dyn Store,
) -> std::io::Result<(Vec<(u64, u64)>, u64)> {
    let placed = delta::place(&seed.file, &seed.found, m, size, store)?;
    let blocks = delta::whole_blocks(&placed, m.chunk_size, block_size);
    let bs = u64::from(block_size);
    let bytes = blocks.iter().map(|&(a, b)| ((b + 1) * bs).min(size) - a * bs).sum();
    Ok((blocks, bytes))
}
