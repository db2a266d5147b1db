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

use super::producer::fetch_weak_sums;
use super::{GetSpec, MirrorInfo, Progress};
use crate::session::Session;
use std::sync::Arc;

/// An older copy, and where the new version's chunks lie in it.
pub(super) struct Seed {
    file: File,
    found: Found,
    manifest: Arc<Manifest>,
}

impl Seed {
    /// The block size to move the rest in: a block is whole in the older
    /// copy only if each of its chunks is, so blocks of one chunk.
    pub(super) fn block_size(&self) -> u32 {
        self.manifest.chunk_size
    }
}

/// The output, if it is an older copy that holds some of the new
/// version's chunks; the weak checksums asked of the first mirror that
/// has them.
pub(super) async fn find(
    spec: &GetSpec,
    manifest: Option<&Arc<Manifest>>,
    size: u64,
    resuming: bool,
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Option<Seed> {
    let weak = match worth_looking(spec, manifest.map(|m| &**m), size, resuming) {
        true => fetch_weak_sums(&spec.path, manifest.map_or(0, |m| m.hashes.len()), usable, progress).await,
        false => None,
    };
    look(spec, manifest, weak.as_deref(), size, resuming, progress, warnings)
}

/// The output, if delta applies (a part file of a whole file, no
/// interrupted run to resume) and it is a regular file with something in
/// it: opened never through a symlink, never waiting on a FIFO.
fn older_copy(spec: &GetSpec, resuming: bool) -> Option<(File, u64)> {
    let whole_file =
        spec.stdout.is_some() || spec.store.is_some() || spec.range.is_some() || spec.sealed_size.is_some();
    if !spec.delta || whole_file || resuming {
        return None;
    }
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&spec.output);
    let file = file.ok()?;
    let len = file.metadata().ok().filter(|m| m.is_file() && m.len() > 0)?.len();
    Some((file, len))
}

/// Whether the output is worth looking into with this manifest: the
/// mirror's weak checksums are then asked for.
fn worth_looking(spec: &GetSpec, manifest: Option<&Manifest>, size: u64, resuming: bool) -> bool {
    manifest.is_some_and(|m| delta::usable(m, size)) && older_copy(spec, resuming).is_some()
}

/// The output, if it is an older copy that holds some of the new
/// version's chunks (found at any offset with the mirror's `weak`
/// checksums, else at whole-chunk offsets).
fn look(
    spec: &GetSpec,
    manifest: Option<&Arc<Manifest>>,
    weak: Option<&[u32]>,
    size: u64,
    resuming: bool,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Option<Seed> {
    let (file, len) = older_copy(spec, resuming)?;
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
    match delta::find(&file, len, m, size, weak) {
        Ok(found) if found.count() > 0 => Some(Seed { file, found, manifest: m.clone() }),
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
/// the blocks now whole, and the bytes copied (none without a seed).
pub(super) fn place(
    seed: Option<Seed>,
    size: u64,
    block_size: u32,
    store: &dyn Store,
) -> std::io::Result<(Vec<(u64, u64)>, u64)> {
    let Some(seed) = seed else { return Ok((vec![], 0)) };
    let m = &seed.manifest;
    let placed = delta::place(&seed.file, &seed.found, m, size, store)?;
    let blocks = delta::whole_blocks(&placed, m.chunk_size, block_size);
    let bs = u64::from(block_size);
    let bytes = blocks.iter().map(|&(a, b)| ((b + 1) * bs).min(size) - a * bs).sum();
    Ok((blocks, bytes))
}
