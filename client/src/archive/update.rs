//! A changed file that DEST holds an older version of is updated, not
//! moved again: its own `get` onto the old file (delta: the chunks the old
//! version holds are copied, only the rest moves), written and renamed
//! through its directory opened beneath DEST, then given the listed mode,
//! owner and mtime like any file the run moves. What cannot be updated
//! this way goes in the bundle as before.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use ddtree::list::Kind;

use super::archiving::Archiving;
use super::listing::Chosen;
use super::tree::{chown_to, finish_entry};
use super::{deep, Item};
use crate::pool::Pool;
use crate::transfer::{self, GetSpec, Progress};

/// Files smaller than this move whole in the bundle: matching costs a
/// connection and a manifest, more than such a file.
const SMALLEST: u64 = 64 * 1024;
/// Updates run at once.
const SIDE_BY_SIDE: usize = 4;

/// What the updates did.
#[derive(Debug, Default)]
pub(super) struct Updated {
    /// Files updated.
    pub(super) files: u64,
    /// Bytes the older versions held (matched), and bytes moved.
    pub(super) matched: u64,
    pub(super) moved: u64,
}

impl Archiving<'_> {
    /// Takes out of `chosen` the files to update by delta (DEST held
    /// something, the list is a mirror's walk, nothing is backed up, and no
    /// interrupted run's range is resumed: that range, the same list, is
    /// taken up whole): regular files of at least [`SMALLEST`] bytes,
    /// neither sparse nor hard-linked, whose name in DEST is a regular file.
    /// Under `mpirun` the lead rank updates them once the ranks have moved
    /// the range.
    pub(super) fn updates<'i>(&self, chosen: &mut Chosen<'i>) -> Vec<&'i Item> {
        let spec = self.spec;
        let off = !spec.get.delta
            || self.fresh
            || spec.list.is_some()
            || spec.strip.is_some()
            || spec.backs_up()
            || spec.get.share.is_some()
            || std::fs::symlink_metadata(self.saved()).is_ok()
            || std::fs::symlink_metadata(super::journal_path(&self.output())).is_ok();
        if off {
            return vec![];
        }
        let (mut updates, mut bytes) = (vec![], 0);
        chosen.todo.retain(|it| {
            let e = &it.entry;
            let plain = e.kind == Kind::File
                && e.size >= SMALLEST
                && e.meta.moved_len(e.size) == e.size
                && e.meta.link().is_none()
                && std::str::from_utf8(&e.path).is_ok();
            let older =
                plain && deep::symlink_metadata(&self.dest.join(&it.rel)).is_ok_and(|m| m.is_file() && m.len() > 0);
            if older {
                updates.push(*it);
                bytes += e.size;
            }
            !older
        });
        chosen.bytes -= bytes;
        updates
    }

    /// Updates each file of `updates` from the mirrors, [`SIDE_BY_SIDE`]
    /// at a time (each is a few round trips and a read of its older
    /// version: alone, they would wait on each other); one that fails is
    /// named and keeps its older version (exit 5 as for any entry not
    /// copied).
    pub(super) async fn update(&self, updates: &[&Item], progress: &mut dyn Progress) -> Updated {
        use futures_util::stream::{self, StreamExt};
        let mut done = Updated::default();
        // The updates go over the same greeted connections, one file after
        // another, as `get` of a list does (not a connect, a greeting and a
        // handshake per file and mirror).
        let pool = self.spec.get.pool.clone().unwrap_or_else(|| Arc::new(Pool::new(2 * SIDE_BY_SIDE)));
        let mut running = stream::iter(updates.iter().copied())
            .map(|it| {
                let pool = pool.clone();
                async move {
                    let mut said = Said::default();
                    let r = self.update_one(it, pool, &mut said).await;
                    (it, r, said)
                }
            })
            .buffer_unordered(SIDE_BY_SIDE);
        while let Some((it, r, said)) = running.next().await {
            said.0.iter().for_each(|w| progress.warn(w));
            progress.status(&format!("updated {}", std::path::Path::new(self.src).join(&it.rel).display()));
            match r {
                Ok(r) => {
                    done.files += 1;
                    done.matched += r.matched_bytes;
                    done.moved += r.literal_bytes();
                }
                Err(why) => {
                    let shown = std::path::Path::new(self.src).join(&it.rel);
                    progress.warn(&format!("not updating {}: {why}", shown.display()));
                    self.failed(&it.rel, why);
                }
            }
        }
        done
    }

    async fn update_one(
        &self,
        it: &Item,
        pool: Arc<Pool>,
        progress: &mut dyn Progress,
    ) -> Result<transfer::TransferReport, String> {
        let e = &it.entry;
        let path = self.dest.join(&it.rel);
        let dir = path.parent().unwrap_or_else(|| self.dest.join(""));
        let name = path.file_name().ok_or("no name")?.to_os_string();
        // Written and renamed through the directory held open: a directory
        // on the way swapped for a symlink meanwhile sends nothing elsewhere.
        let held = deep::open(&dir, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(|e| e.to_string())?;
        let mut output = PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()));
        output.push(&name);
        let spec = GetSpec {
            path: String::from_utf8(e.path.clone()).map_err(|_| "not UTF-8")?,
            output,
            delta: true,
            keep_mtime: false,
            no_clobber: false,
            restart: false,
            seeds: vec![],
            pool: Some(pool),
            ..self.spec.get.clone()
        };
        let report = transfer::get(&spec, progress).await.map_err(|e| e.to_string())?;
        // (A file already whole there, an interrupted run's, moved nothing.)
        let size = if report.already_complete { report.reused_bytes } else { report.bytes };
        if size != e.size {
            return Err(format!("the mirrors serve {size} bytes, the list says {}", e.size));
        }
        let owner = chown_to(e.meta.owner, self.spec.owners, true);
        finish_entry(&path, e, false, self.umask, owner).map_err(|e| e.to_string())?;
        Ok(report)
    }
}

/// What one update says: only its warnings, told when it ends (the bar
/// keeps counting the tree; updates side by side would interleave).
#[derive(Default)]
struct Said(Vec<String>);

impl Progress for Said {
    fn start(&mut self, _total: u64, _mirrors: &[String]) {}
    fn update(&mut self, _done: u64, _per_mirror: &[u64]) {}
    fn warn(&mut self, msg: &str) {
        self.0.push(msg.to_string());
    }
    fn joined(&mut self, _mirror: &str) {}
    fn finish(&mut self) {}
}
