//! One rank's share of a bundle the ranks move together: a part of its
//! range moved from every mirror (the rank's own pairs of producers), and
//! the files wholly inside it finished.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ddtree::list::Kind;

use super::super::deep;
use super::super::tree::TreeStore;
use super::super::{ArchiveError, ArchiveSpec, Item, RANK_JOURNALS};
use crate::store::Store;
use crate::transfer::{self, Progress};

/// What a rank did with one part, told to the lead.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Done {
    pub part: (u64, u64),
    /// Bytes moved (the part's blocks), and the files wholly inside it.
    pub bytes: u64,
    pub files: u64,
    pub secs: f64,
    /// Entries a mirror could not read (index, why, the mirrors that said so).
    pub unread: Vec<(u64, String, Vec<String>)>,
    /// Bytes each mirror sent.
    pub mirrors: Vec<(String, u64)>,
}

/// The bundle the ranks share, as the lead told it.
pub(super) struct Bundle {
    pub name: String,
    pub def: Arc<[u8]>,
    pub block: u32,
    /// DEST was empty when the lead planned.
    pub fresh: bool,
}

/// A rank's mover: the bundle's files (the lead's list), written through
/// one store into DEST.
pub(super) struct Mover {
    spec: ArchiveSpec,
    pub(super) todo: Vec<Item>,
    pub(super) store: Arc<TreeStore>,
    name: String,
    def: Arc<[u8]>,
    /// The block size every rank moves with: parts are cut on its
    /// multiples, so no two ranks ever write the same block.
    pub(super) block: u32,
    /// Where this rank's part is journaled (`DEST/.ddftp-archive.rankR`).
    output: PathBuf,
    /// Bytes of the part moving now, for the lead's progress.
    pub(super) live: Arc<AtomicU64>,
    /// Who says a warning (`rank R (HOST)`).
    who: String,
    /// DEST was empty when the lead planned (no earlier run's part files).
    fresh: bool,
}

impl Mover {
    pub(super) fn new(
        spec: &ArchiveSpec,
        (todo, store): (Vec<Item>, Arc<TreeStore>),
        bundle: Bundle,
        (rank, who): (usize, String),
    ) -> Mover {
        let output = spec.dest.join(format!("{RANK_JOURNALS}{rank}"));
        let Bundle { name, def, block, fresh } = bundle;
        Mover { spec: spec.clone(), todo, store, name, def, block, output, live: Arc::default(), who, fresh }
    }

    /// Where a cut wanted at `x` may fall: on a block boundary at or
    /// before it, and never inside a symlink's target (its bytes must
    /// all come to one rank, which makes the link).
    pub(super) fn cut_at(&self, x: u64) -> u64 {
        let (layout, block) = (&self.store.layout, u64::from(self.block));
        let mut x = x / block * block;
        loop {
            let i = layout.entries_within(x);
            match self.todo.get(i) {
                Some(it) if it.entry.kind == Kind::Link && layout.start_of(i) < x => {
                    x = layout.start_of(i) / block * block
                }
                _ => return x,
            }
        }
    }

    /// Moves `part` of the bundle and finishes the files wholly inside it.
    pub(super) async fn run(&self, part: Range<u64>) -> Result<Done, ArchiveError> {
        let started = Instant::now();
        if part.start >= part.end || part.end > self.store.layout.size() {
            let why = format!("rank 0 dealt {part:?}, not a part of the bundle's 0..{}", self.store.layout.size());
            return Err(ArchiveError::BadEntry { path: self.spec.dest.display().to_string(), why });
        }
        let mut get = self.spec.get.clone();
        get.path = self.name.clone();
        get.output = self.output.clone();
        get.store = Some(self.store.clone() as Arc<dyn Store>);
        get.sealed_size = Some(self.store.layout.size());
        get.bundle = Some(self.def.clone());
        get.block_size = self.block;
        get.range = Some(part.clone());
        // A journal left by a killed job was for another part.
        get.restart = true;
        self.live.store(0, Ordering::Relaxed);
        let mut quiet = Quiet { live: &self.live, base: None, who: &self.who };
        let report = transfer::get(&get, &mut quiet).await?;
        if report.block_size != self.block {
            return Err(ArchiveError::BadEntry {
                path: self.spec.dest.display().to_string(),
                why: format!(
                    "a mirror moves blocks of at most {} bytes, under --block-size {}: the ranks would write the same blocks; give --block-size {}",
                    report.block_size, self.block, report.block_size
                ),
            });
        }
        let mut done = Done {
            part: (part.start, part.end),
            bytes: part.end - part.start,
            secs: started.elapsed().as_secs_f64(),
            mirrors: report.producers.iter().map(|p| (p.mirror.clone(), p.bytes)).collect(),
            ..Done::default()
        };
        let store = &self.store;
        for (i, u) in store.unread() {
            done.unread.push((i as u64, u.why, u.mirrors));
        }
        for i in self.within(&part) {
            let it = &self.todo[i];
            if it.entry.kind != Kind::File {
                continue;
            }
            done.files += 1;
            let path = self.spec.dest.join(&it.rel);
            let local = |source| ArchiveError::Local { path: path.clone(), source };
            if store.layout.len_of(i) > 0 && !store.is_finished(i) {
                store.put_in_place(i, &it.entry).map_err(local)?;
            } else if !self.fresh {
                // A killed job may have left a part file of a file this
                // part wrote whole.
                match deep::remove_file(&store.part_path(i)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(local(e)),
                    _ => {}
                }
            }
        }
        done.secs = started.elapsed().as_secs_f64();
        Ok(done)
    }

    /// The entries wholly inside `part` (none of their bytes outside it).
    pub(super) fn within(&self, part: &Range<u64>) -> impl Iterator<Item = usize> + '_ {
        let layout = &self.store.layout;
        let (a, b) = (layout.entries_within(part.start), layout.entries_within(part.end));
        let start = part.start;
        (a..b).filter(move |&i| layout.start_of(i) >= start)
    }
}

/// A part's progress: its bytes for the lead, its warnings said by rank.
struct Quiet<'a> {
    live: &'a AtomicU64,
    /// The first count told: the rest of the bundle, counted as there.
    base: Option<u64>,
    who: &'a str,
}

impl Progress for Quiet<'_> {
    fn start(&mut self, _total: u64, _mirrors: &[String]) {}
    fn update(&mut self, done: u64, _per_mirror: &[u64]) {
        let base = *self.base.get_or_insert(done);
        self.live.store(done.saturating_sub(base), Ordering::Relaxed);
    }
    fn warn(&mut self, msg: &str) {
        eprintln!("ddftp: {}: {msg}", self.who);
    }
    fn joined(&mut self, _mirror: &str) {}
    fn finish(&mut self) {}
}
