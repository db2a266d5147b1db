//! rsync's transfer rules that leave entries of the list alone, each
//! before anything is decided: `--ignore-existing`, `-u`, `--safe-links`,
//! `--existing`, `--max-size`/`--min-size`. What one leaves that DEST
//! holds is kept from `--delete`.

use ddtree::list::Kind;

use super::{deep, Archiving, Item};

/// `--max-size`, `--min-size`: the sizes of files that move (any without).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    /// A larger file is not moved.
    pub max: Option<u64>,
    /// A smaller file is not moved.
    pub min: Option<u64>,
}

impl Sizes {
    /// Whether a file of `size` bytes moves.
    pub fn admit(&self, size: u64) -> bool {
        self.max.is_none_or(|m| size <= m) && self.min.is_none_or(|m| size >= m)
    }

    /// Whether every file moves.
    pub fn all(&self) -> bool {
        *self == Sizes::default()
    }
}

impl Archiving<'_> {
    /// `--ignore-existing`: entries other than directories that DEST
    /// holds under their names already are left as they are (and kept
    /// from `--delete`).
    pub(super) fn leave_existing(&self, items: &mut Vec<Item>) {
        let exists = |it: &Item| it.entry.kind != Kind::Dir && deep::symlink_metadata(&self.dest.join(&it.rel)).is_ok();
        let mut listing = self.listing.lock().expect("listing lock");
        let super::archiving::Listing { kept, specials, linked, .. } = &mut *listing;
        let mut leave = |it: &Item| {
            let e = exists(it);
            if e {
                kept.insert(it.rel.clone());
            }
            !e
        };
        items.retain(&mut leave);
        specials.retain(&mut leave);
        linked.retain(|l| leave(&l.item));
    }

    /// `--max-size`, `--min-size`: leaves out each file of another size
    /// (a hard link's too), as rsync's, and keeps what DEST has under its
    /// name (`--delete` too). Other kinds are not affected.
    pub(super) fn leave_sized(&self, items: &mut Vec<Item>) {
        let sizes = self.spec.sizes;
        let mut listing = self.listing.lock().expect("listing lock");
        let super::archiving::Listing { kept, linked, .. } = &mut *listing;
        let mut leave = |it: &Item| {
            let out = it.entry.kind == Kind::File && !sizes.admit(it.entry.size);
            if out {
                kept.insert(it.rel.clone());
            }
            !out
        };
        items.retain(&mut leave);
        linked.retain(|l| leave(&l.item));
    }

    /// `-u`/`--update`: leaves out each file DEST holds as a file with a
    /// later mtime than the listed one (beyond `--modify-window`, as
    /// rsync compares),
    /// and keeps it there (`--delete` too). Directories, symlinks,
    /// specials and a file where DEST has another kind are not affected.
    pub(super) fn leave_newer(&self, items: &mut Vec<Item>) {
        use std::os::unix::fs::MetadataExt;
        let window = self.spec.modify_window;
        let newer = |it: &Item| {
            it.entry.kind == Kind::File
                && deep::symlink_metadata(&self.dest.join(&it.rel)).is_ok_and(|m| {
                    let held = ddtree::list::Time { sec: m.mtime(), nsec: m.mtime_nsec() as u32 };
                    m.is_file() && window.later(held, it.entry.mtime)
                })
        };
        let kept = &mut self.listing.lock().expect("listing lock").kept;
        items.retain(|it| {
            let n = newer(it);
            if n {
                kept.insert(it.rel.clone());
            }
            !n
        });
    }

    /// `--safe-links`: leaves out the symlinks whose listed target points
    /// outside the tree ([`ddtree::safe_links::is_unsafe`]), and keeps what
    /// DEST has under their names, as rsync's; one listed without a
    /// target cannot be judged and is left out too, said.
    pub(super) fn leave_unsafe_links(&self, items: &mut Vec<Item>, progress: &mut dyn crate::transfer::Progress) {
        use std::os::unix::ffi::OsStrExt;
        let mut listing = self.listing.lock().expect("listing lock");
        items.retain(|it| {
            if it.entry.kind != Kind::Link {
                return true;
            }
            let rel = it.rel.as_os_str().as_bytes();
            let shown = String::from_utf8_lossy(rel);
            match it.entry.meta.target() {
                Some(t) if !ddtree::safe_links::is_unsafe(t, rel) => return true,
                Some(t) => tracing::info!("ignoring unsafe symlink \"{shown}\" -> \"{}\"", String::from_utf8_lossy(t)),
                None => progress.warn(&format!("--safe-links: {shown}: the list gives no target to judge; not made")),
            }
            listing.kept.insert(it.rel.clone());
            false
        });
    }

    /// `--existing`: leaves out every entry DEST does not have under its
    /// name (a new directory with all it holds), DEST itself aside.
    pub(super) fn leave_missing(&self, items: &mut Vec<Item>) {
        let there =
            |it: &Item| it.rel.as_os_str().is_empty() || deep::symlink_metadata(&self.dest.join(&it.rel)).is_ok();
        let mut listing = self.listing.lock().expect("listing lock");
        let super::archiving::Listing { specials, linked, .. } = &mut *listing;
        items.retain(there);
        specials.retain(there);
        linked.retain(|l| there(&l.item));
    }
}
