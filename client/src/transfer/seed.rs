//! `get` onto an older copy (and from `--seed` files): the chunks of the
//! new version they hold are copied into the part file before a byte
//! moves, and count as done; the mirrors send only the rest. An older
//! output is only read, and the part file replaces it at the end, so an
//! interrupted run leaves it as it was (and resumes from its journal like
//! any other).

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::delta::{self, Found};
use crate::manifest::Manifest;
use crate::session::Session;
use crate::store::Store;

use super::cut::{self, Cut};
use super::early_part::EarlyPart;
use super::producer::fetch_weak_sums;
use super::{GetSpec, MirrorInfo, Progress};

/// Local files holding some of the new version, and where its chunks lie
/// in each (the output first, then `--seed` files in order).
pub(super) struct Seed {
    sources: Vec<(File, Found)>,
    manifest: Arc<Manifest>,
    /// Chunks no file holds whole, assembled from their pieces.
    cut: Cut,
    /// The output holds every chunk at its place and nothing more.
    output_whole: bool,
    /// The part file, some of the output's chunks found written in it
    /// already (until the transfer takes it).
    landed: Option<EarlyPart>,
    /// Per chunk: in the part file already, checked.
    landed_chunks: Vec<bool>,
}

impl Seed {
    /// The block size to move the rest in: a block is whole in the older
    /// copy only if each of its chunks is, so blocks of one chunk.
    pub(super) fn block_size(&self) -> u32 {
        self.manifest.chunk_size
    }

    /// Whether the output is the new version already, byte for byte (its
    /// every chunk matched the manifest, at its place, and it is no longer).
    pub(super) fn is_the_output(&self) -> bool {
        self.output_whole
    }

    /// The part file the output's chunks were written into as found.
    pub(super) fn take_landed(&mut self) -> Option<EarlyPart> {
        self.landed.take()
    }
}

/// Whether the output is likely the new version already: its size and
/// modification time (to the second) the mirrors' (rsync's quick check).
pub(super) fn likely_the_file(spec: &GetSpec, size: u64, mirrors_time: Option<(i64, u32)>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(meta) = open_output(spec).and_then(|out| out.file.metadata().ok()) else { return false };
    meta.len() == size && mirrors_time.is_some_and(|(secs, _)| meta.mtime() == secs)
}

/// Whether delta reads the output (and may so find it is the file): on,
/// with verification, no `--no-clobber` (which wants the answer before
/// anything else), no interrupted run to resume, and a regular file there.
pub(super) fn reads_output(spec: &GetSpec) -> bool {
    let journal = crate::journal::journal_path(&spec.output);
    spec.delta
        && spec.verify
        && !spec.no_clobber
        && std::fs::symlink_metadata(journal).is_err()
        && open_output(spec).is_some()
}

/// The output, opened never through a symlink, never waiting on a FIFO,
/// if it is a regular file with something in it.
pub(super) fn open_output(spec: &GetSpec) -> Option<Local> {
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(&spec.output).ok()?;
    regular(f, &spec.output)
}

fn regular(f: File, name: &Path) -> Option<Local> {
    let len = f.metadata().ok().filter(|m| m.is_file() && m.len() > 0)?.len();
    Some(Local { file: f, len, name: name.to_path_buf() })
}

/// The output, looked into already while the manifest was made from its
/// chunks ([`super::claimed`]): where it holds each, and the weak
/// checksums, not asked again.
pub(super) struct Looked {
    pub(super) found: Found,
    pub(super) weak: Vec<u32>,
    /// The part file the chunks found were written into, if they were.
    pub(super) landed: Option<EarlyPart>,
}

/// A local file to look into.
pub(super) struct Local {
    pub(super) file: File,
    pub(super) len: u64,
    pub(super) name: PathBuf,
}

/// The local files that may hold some of the new version, if delta
/// applies (a part file of a whole file, no interrupted run to resume):
/// the output, opened never through a symlink, never waiting on a FIFO,
/// if it is a regular file with something in it; then each `--seed`
/// (a file the user named: followed if a symlink; one that cannot be read
/// is said and left out).
fn locals(spec: &GetSpec, resuming: bool, mut tell: impl FnMut(String)) -> Vec<Local> {
    let whole_file =
        spec.stdout.is_some() || spec.store.is_some() || spec.range.is_some() || spec.sealed_size.is_some();
    if !spec.delta || whole_file || resuming {
        return vec![];
    }
    let mut out: Vec<Local> = open_output(spec).into_iter().collect();
    for s in &spec.seeds {
        match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(s) {
            Ok(f) => match regular(f, s) {
                Some(l) => out.push(l),
                None => tell(format!("--seed {}: not a regular file with data; left out", s.display())),
            },
            Err(e) => tell(format!("--seed {}: {e}; left out", s.display())),
        }
    }
    out
}

/// The local files holding some of the new version's chunks; the weak
/// checksums are asked of the first mirror that has them when there is
/// anything to look into.
pub(super) async fn find(
    spec: &GetSpec,
    manifest: Option<&Arc<Manifest>>,
    size: u64,
    (resuming, output): (bool, Option<Looked>),
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Option<Seed> {
    let locals = locals(spec, resuming, |w| super::tell(progress, warnings, w));
    if locals.is_empty() {
        return None;
    }
    let Some(m) = manifest.filter(|m| delta::usable(m, size)) else {
        let why = match manifest {
            None => "no mirror gives a chunk manifest (a ddftpd mirror does)",
            Some(_) => "the mirrors' pieces are too large to match",
        };
        let what = locals.iter().map(|l| l.name.display().to_string()).collect::<Vec<_>>().join(", ");
        let say = format!("not reusing {what}: {why}; fetching the whole file");
        // A --seed named is a wish not met: a warning. An older output is
        // the usual case of a download done again: said, not warned.
        match spec.seeds.is_empty() {
            true => {
                tracing::info!("{say}");
                progress.status(&say);
            }
            false => super::tell(progress, warnings, say),
        }
        return None;
    };
    let (weak, mut output, mut landed) = match output {
        Some(l) => (Some(l.weak), Some(l.found), l.landed),
        None => (fetch_weak_sums(&spec.path, m.hashes.len(), usable, progress).await, None, None),
    };
    let mut sources = vec![];
    let mut output_whole = false;
    for l in locals {
        let name = l.name.display();
        progress.status(&format!("looking for the new version's chunks in {name}"));
        let looked = match output.take().filter(|_| l.name == spec.output) {
            Some(found) => Ok(found),
            None => delta::find(&l.file, l.len, m, size, weak.as_deref()),
        };
        match looked {
            Ok(found) if found.count() > 0 => {
                output_whole |= l.name == spec.output && l.len == size && found.all_in_place(m.chunk_size);
                sources.push((l.file, found))
            }
            Ok(_) => tracing::info!(local = %name, "shares no chunk with the new version"),
            Err(e) => {
                let w = format!("could not read {name} to reuse its chunks ({e}); it is left out");
                super::tell(progress, warnings, w);
            }
        }
    }
    if sources.is_empty() {
        return None;
    }
    let landed_chunks = landed.as_mut().map(|l| std::mem::take(&mut l.chunks)).unwrap_or_default();
    if output_whole {
        let cut = Cut::default();
        return Some(Seed { sources, manifest: m.clone(), cut, output_whole, landed, landed_chunks });
    }
    let looked: Vec<cut::Local> =
        sources.iter().map(|(f, found)| (f, f.metadata().map_or(0, |m| m.len()), found)).collect();
    let cut = cut::cut(&spec.path, m, size, &looked, usable, progress).await;
    Some(Seed { sources, manifest: m.clone(), cut, output_whole, landed, landed_chunks })
}

/// What placing a seed did.
#[derive(Debug, Default)]
pub(super) struct Placed {
    /// The blocks now whole.
    pub(super) blocks: Vec<(u64, u64)>,
    /// Bytes copied from local files.
    pub(super) matched: u64,
    /// Bytes of changed chunks' pieces fetched before the transfer.
    pub(super) pieces: u64,
}

/// Copies the chunks found into `store` (each hashed again as copied; a
/// chunk comes from the first file that holds it), then the chunks
/// assembled from pieces (none without a seed). `whole_to` is told how far
/// from the start the file is whole, as it grows.
pub(super) fn place(
    seed: Option<Seed>,
    size: u64,
    block_size: u32,
    store: &dyn Store,
    mut whole_to: impl FnMut(u64),
) -> std::io::Result<Placed> {
    let Some(seed) = seed else { return Ok(Placed::default()) };
    let m = &seed.manifest;
    let mut placed = vec![false; m.hashes.len()];
    let chunk = u64::from(m.chunk_size);
    // Told every few MiB, not every chunk.
    let every = ((8 << 20) / chunk).max(1) as usize;
    // Chunks assembled from pieces first (no local file holds them whole):
    // then the whole file's hash follows the local files' chunks as they land.
    let mut pieces = 0;
    for (j, bytes, fetched) in &seed.cut.chunks {
        if !std::mem::replace(&mut placed[*j as usize], true) {
            store.write_all_at(bytes, j * chunk)?;
            pieces += fetched;
        }
    }
    let mut prefix = 0usize;
    let mut follow = |placed: &[bool]| {
        let was = prefix;
        while prefix < placed.len() && placed[prefix] {
            prefix += 1;
        }
        if prefix / every != was / every || prefix == placed.len() {
            whole_to((prefix as u64 * chunk).min(size));
        }
    };
    // Written as found, the very bytes hashed (and the root agreed).
    for (p, &landed) in placed.iter_mut().zip(&seed.landed_chunks) {
        *p |= landed;
    }
    follow(&placed);
    for (file, found) in &seed.sources {
        delta::place(file, found, m, size, store, &mut placed, &mut follow)?;
    }
    follow(&placed);
    let blocks = delta::whole_blocks(&placed, m.chunk_size, block_size);
    let bs = u64::from(block_size);
    let bytes: u64 = blocks.iter().map(|&(a, b)| ((b + 1) * bs).min(size) - a * bs).sum();
    Ok(Placed { blocks, matched: bytes - pieces, pieces })
}
