//! What an archive keeps besides bytes, modes and mtimes: hard links (the
//! second and later names of a file made links to its first), owners and
//! groups (run as root, by number, as `rsync --numeric-ids`), and with
//! `--xattrs` extended attributes, ACLs among them (as `system.posix_acl_*`).
//!
//! Links are made before directories get their times (a new name changes
//! its directory's); xattrs are set last, on every entry whose own differ
//! (that changes no mtime). Owners are set where each entry is made
//! (`tree`, `dirs`, `sync`) or found complete (`listing::choose`).

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ddtree::list::{Entry, Kind};

use super::{deep, listing, Archiving, Item};

/// A hard link to make: `item`'s name, for the file first named `to`.
pub(super) struct Linked {
    pub item: Item,
    pub to: PathBuf,
}

impl Archiving<'_> {
    /// Takes the second and later names of each hard-linked file (entries
    /// sharing a link id, in path order) out of `items` (sorted): they are
    /// never moved, but linked to the first name once it is in place
    /// ([`Archiving::make_links`]).
    pub(super) fn split_links(&self, items: &mut Vec<Item>) {
        let is_linked = |it: &Item| it.entry.kind == Kind::File && it.entry.meta.link().is_some();
        if !items.iter().any(is_linked) {
            return;
        }
        let mut first: HashMap<(u64, u64), PathBuf> = HashMap::new();
        let mut linked = vec![];
        for it in std::mem::take(items) {
            match it.entry.meta.link().filter(|_| it.entry.kind == Kind::File) {
                Some(id) => match first.get(&id) {
                    Some(to) => linked.push(Linked { to: to.clone(), item: it }),
                    None => {
                        first.insert(id, it.rel.clone());
                        items.push(it);
                    }
                },
                None => items.push(it),
            }
        }
        self.kept.lock().expect("kept lock").extend(linked.iter().map(|l| l.item.rel.clone()));
        self.linked.lock().expect("linked lock").extend(linked);
    }

    /// Makes each hard link [`Archiving::split_links`] set aside, unless
    /// it is one already; a name whose first name was not copied is named.
    /// Before directories get their times.
    pub(super) fn make_links(&self) -> u64 {
        let linked = self.linked.lock().expect("linked lock");
        let dest = &self.spec.dest;
        let mut made = 0;
        for l in linked.iter() {
            let (to, from) = (dest.join(&l.item.rel), dest.join(&l.to));
            let Ok(first) = deep::symlink_metadata(&from) else {
                self.failed(&l.item.rel, format!("a hard link to {}, which was not copied", l.to.display()));
                continue;
            };
            match deep::symlink_metadata(&to) {
                Ok(m) if m.dev() == first.dev() && m.ino() == first.ino() => continue,
                _ => {}
            }
            match link_over(&from, &to) {
                Ok(()) => made += 1,
                Err(e) => self.failed(&l.item.rel, format!("cannot link it to {}: {e}", l.to.display())),
            }
        }
        made
    }

    /// Xattrs (with `--xattrs`) of `items` and the specials made, set
    /// where DEST's differ; over the cores. What cannot be set is named.
    /// Returns how many entries were changed. (Owners are set as each
    /// entry is made or found complete.)
    pub(super) fn keep_meta<'i>(&self, items: impl Iterator<Item = &'i Item>) -> u64 {
        if !self.spec.xattrs {
            return 0;
        }
        let specials = self.specials.lock().expect("specials lock");
        let mut all: Vec<&Item> = items.collect();
        all.extend(specials.iter());
        let items = all;
        let dest = &self.spec.dest;
        let results = listing::par_chunks(&items, |run| {
            let mut dir = deep::InDir::default();
            run.iter()
                .map(|it| {
                    let path = dest.join(&it.rel);
                    if dir.lstat(dest, &it.rel).is_err() {
                        // Not there: not copied (named already).
                        return Ok(false);
                    }
                    keep_xattrs(&path, &it.entry).map_err(|e| (it.rel.clone(), e.to_string()))
                })
                .collect::<Vec<_>>()
        });
        let mut changed = 0;
        for r in results {
            match r {
                Ok(c) => changed += u64::from(c),
                Err((rel, why)) => self.failed(&rel, format!("cannot set its extended attributes: {why}")),
            }
        }
        changed
    }
}

/// Sets `path`'s xattrs to `e`'s where they differ. Whether anything changed.
fn keep_xattrs(path: &Path, e: &Entry) -> io::Result<bool> {
    let Some(want) = e.meta.xattrs() else { return Ok(false) };
    let set = || deep::with_short_path(path, |p| ddtree::attrs::write_xattrs(p, want));
    match set() {
        // Not root, and the entry is not writable (0444, a 0555
        // directory): writable for the moment it takes.
        Err(err) if err.raw_os_error() == Some(libc::EACCES) && e.kind != Kind::Link => {
            deep::set_mode(path, e.perm | 0o200)?;
            let r = set();
            deep::set_mode(path, e.perm)?;
            r
        }
        r => r,
    }
}

/// Makes `to` a hard link to `from`, replacing whatever `to` is, in one
/// rename (no moment without `to`, unless it was a directory).
fn link_over(from: &Path, to: &Path) -> io::Result<()> {
    let name = to.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default();
    let mut tmp = b".".to_vec();
    tmp.extend_from_slice(&name[..name.len().min(200)]);
    tmp.extend_from_slice(b".ddftp-link");
    let tmp = to.with_file_name(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&tmp));
    let _ = deep::remove_file(&tmp);
    if deep::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
        deep::remove_any(to)?;
    }
    if let Some(parent) = to.parent() {
        deep::make_dir_all(parent)?;
    }
    deep::hard_link(from, &tmp)?;
    deep::rename(&tmp, to).inspect_err(|_| {
        let _ = deep::remove_file(&tmp);
    })
}
