//! Which listed entries an archive takes and how (filters, specials,
//! devices, setid bits), and what it keeps besides bytes, modes and
//! mtimes: hard links (the second and later names of a file made links to
//! its first), owners and groups (run as root, by number, as `rsync
//! --numeric-ids`), and with `--xattrs` extended attributes, ACLs among
//! them (as `system.posix_acl_*`).
//!
//! Links are made before directories get their times (a new name changes
//! its directory's); xattrs are set last, on every entry whose own differ
//! (that changes no mtime). Owners are set where each entry is made
//! (`tree`, `dirs`, `sync`) or found complete (`listing::choose`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use ddtree::list::{Entry, Kind};

use ddtree::list::shape::Refused;

use super::{deep, listing, Archiving, Failure, Item};

/// Entries the list's check admitted, before they become items: kept
/// by the caller from one entry to the next (no allocation each).
pub(super) type Admitted = Vec<(PathBuf, Entry)>;

/// A hard link to make: `item`'s name, for the file first named `to`.
#[derive(Clone)]
pub(super) struct Linked {
    pub item: Item,
    pub to: PathBuf,
}

impl Archiving<'_> {
    /// Takes a listed entry through the list's check ([`Shape`]): those it
    /// admits (this one, and any that waited for it as their directory)
    /// become items in `out` ([`Archiving::item`]); those it refuses are
    /// named and not copied, and nothing is deleted this run (a list that
    /// is no tree says nothing sure of what SRC lacks).
    pub(super) fn admit(&self, e: Entry, warn: &mut dyn FnMut(&str), out: &mut Vec<Item>, scratch: &mut Admitted) {
        let Some(rel) = self.spec.rel_of(&e) else { return };
        self.admit_as(rel.into(), e, warn, out, scratch);
    }

    /// [`Self::admit`], under a name below DEST of its own (a symlink
    /// followed: its referent's entry under the link's name).
    pub(super) fn admit_as(
        &self,
        key: Box<[u8]>,
        e: Entry,
        warn: &mut dyn FnMut(&str),
        out: &mut Vec<Item>,
        scratch: &mut Admitted,
    ) {
        let rel = PathBuf::from(OsStr::from_bytes(&key));
        let is_dir = e.kind == Kind::Dir;
        let mut refused = vec![];
        self.listing.lock().expect("listing lock").shape.admit(key, is_dir, (rel, e), scratch, &mut refused);
        self.refuse(refused, warn);
        out.extend(scratch.drain(..).filter_map(|(rel, e)| self.item(e, rel, warn)));
    }

    /// The list has ended: what still waits for a directory never listed
    /// is refused.
    pub(super) fn admit_end(&self, warn: &mut dyn FnMut(&str)) {
        let refused = self.listing.lock().expect("listing lock").shape.finish();
        self.refuse(refused, warn);
    }

    fn refuse(&self, refused: Vec<((PathBuf, Entry), Refused)>, warn: &mut dyn FnMut(&str)) {
        for ((_, e), why) in refused {
            let shown = String::from_utf8_lossy(&e.path).into_owned();
            warn(&format!("not copying {shown}: {why}"));
            self.tally.lock().expect("tally lock").incomplete = true;
            self.tally.lock().expect("tally lock").failures.push(Failure { path: shown, why: why.to_string() });
        }
    }

    /// An admitted entry as an item under DEST, if no rule excludes it.
    /// FIFOs, sockets and (run as root) device nodes are kept
    /// aside, to be made in place ([`Archiving::make_specials`]); a device
    /// node otherwise is not copied, and is counted and named (exit 5).
    fn item(&self, e: Entry, rel: PathBuf, warn: &mut dyn FnMut(&str)) -> Option<Item> {
        if self.spec.files_from.as_ref().is_some_and(|f| !f.wants(&rel)) {
            return None;
        }
        let filter = self.filter();
        if !filter.is_empty()
            && filter.excludes(&rel, e.kind == Kind::Dir, &mut self.listing.lock().expect("listing lock").excluded_dirs)
        {
            self.tally.lock().expect("tally lock").excluded += 1;
            return None;
        }
        let mut e = e;
        if e.kind != Kind::Link {
            e.perm = self.spec.chmod.tweak(e.perm, e.kind == Kind::Dir);
        }
        if !self.spec.kept.all() {
            if self.spec.kept.skips(e.kind) {
                let line =
                    format!("skipping non-regular file \"{}\"", crate::progress::escaped(rel.as_os_str().as_bytes()));
                let mut listing = self.listing.lock().expect("listing lock");
                match self.spec.itemize || self.spec.dry_run {
                    // Said with the changes, where rsync says it.
                    true => listing.skipping.push((rel.clone(), line)),
                    false => warn(&line),
                }
                listing.kept.insert(rel);
                return None;
            }
            // DEST made by this run is not one DEST had.
            let made = rel.as_os_str().is_empty() && self.tally.lock().expect("tally lock").dest_made;
            let there = deep::symlink_metadata(&self.dest.join(&rel)).ok().filter(|_| !made);
            self.spec.kept.apply(&mut e, there.as_ref(), &self.here);
        }
        // `--chown`, `--usermap`, `--groupmap`: of the listed owners (and
        // names), before they are looked up by name here.
        let (to_uid, to_gid) = self.spec.chown.mapped(&e);
        if let (true, Some((user, group)), Some((uid, gid))) = (self.spec.by_name, e.meta.names(), e.meta.owner) {
            let names = &mut self.listing.lock().expect("listing lock").names;
            e.meta.owner = Some((names.uid(user).unwrap_or(uid), names.gid(group).unwrap_or(gid)));
        }
        if let Some((uid, gid)) = e.meta.owner {
            e.meta.owner = Some((to_uid.unwrap_or(uid), to_gid.unwrap_or(gid)));
        }
        let device = matches!(e.kind, Kind::Block | Kind::Char);
        if matches!(e.kind, Kind::Fifo | Kind::Socket) || (device && self.spec.owners && e.meta.rdev().is_some()) {
            let mut listing = self.listing.lock().expect("listing lock");
            listing.kept.insert(rel.clone());
            listing.specials.push(Item { entry: e, rel });
            return None;
        }
        if device {
            let why = match e.meta.rdev() {
                None => format!("a {:?} device, listed without its numbers", e.kind),
                Some(_) => format!("a {:?} device is made only when run as root", e.kind),
            };
            warn(&format!("not copying {}: {why}", String::from_utf8_lossy(&e.path)));
            self.failed(&rel, why);
            self.listing.lock().expect("listing lock").kept.insert(rel);
            return None;
        }
        // Owners not kept: a setuid or setgid file would run as whoever
        // runs the archive, so the bits go, as `cp -p` drops them when it
        // cannot keep the owner.
        if !self.spec.owners && e.kind == Kind::File && e.perm & 0o6000 != 0 {
            e.perm &= !0o6000;
            self.tally.lock().expect("tally lock").setid_cleared += 1;
        }
        Some(Item { entry: e, rel })
    }

    /// With `-H`, takes the second and later names of each hard-linked
    /// file (entries sharing a link id, in path order) out of `items`
    /// (sorted): they are never moved, but linked to the first name once
    /// it is in place ([`Archiving::make_links`]).
    pub(super) fn split_links(&self, items: &mut Vec<Item>) {
        if !self.spec.hard_links {
            return;
        }
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
        self.listing.lock().expect("listing lock").kept.extend(linked.iter().map(|l| l.item.rel.clone()));
        self.listing.lock().expect("listing lock").linked.extend(linked);
    }

    /// Makes each hard link [`Archiving::split_links`] set aside, unless
    /// it is one already; a name whose first name was not copied is named.
    /// Before directories get their times.
    pub(super) fn make_links(&self) -> u64 {
        // A copy: making them backs up and names failures, which lock too.
        let linked = self.listing.lock().expect("listing lock").linked.clone();
        let dest = &self.dest;
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
            if let Err(e) = self.back_up_one(&to, &l.item.rel, |_| true) {
                self.failed(&l.item.rel, format!("cannot move the copy DEST has to --backup-dir, so it is kept: {e}"));
                continue;
            }
            match link_over(&from, &to, self.spec.delete) {
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
        let specials = self.listing.lock().expect("listing lock").specials.clone();
        let mut all: Vec<&Item> = items.collect();
        all.extend(specials.iter());
        let items = all;
        let (dest, filter) = (&self.dest, &self.spec.filter);
        let results = listing::par_chunks(&items, |run| {
            let mut dir = deep::InDir::default();
            run.iter()
                .map(|it| {
                    let path = dest.join(&it.rel);
                    if dir.lstat(dest, &it.rel).is_err() {
                        // Not there: not copied (named already).
                        return Ok(false);
                    }
                    keep_xattrs(&path, &it.entry, filter).map_err(|e| (it.rel.clone(), e.to_string()))
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
/// Sets the listed xattrs on `path`, those `filter`'s `x` rules copy, and
/// leaves DEST's that they protect.
fn keep_xattrs(path: &deep::Beneath, e: &Entry, filter: &super::filter::Filter) -> io::Result<bool> {
    let Some(want) = e.meta.xattrs() else { return Ok(false) };
    let want: Vec<(Vec<u8>, Vec<u8>)> = want.iter().filter(|(k, _)| filter.copies_xattr(k)).cloned().collect();
    let touch = |k: &[u8]| filter.touches_xattr(k);
    let set = || deep::with_short_path(path, |p| ddtree::attrs::write_xattrs(p, &want, &touch));
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
fn link_over(from: &deep::Beneath, to: &deep::Beneath, delete: bool) -> io::Result<()> {
    let name = to.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default();
    let tmp = to.with_file_name(OsStr::from_bytes(&ddtree::scratch::side_name(name, ".", ".ddftp-link")));
    let _ = deep::remove_file(&tmp);
    deep::clear_dir(to, delete)?;
    if let Some(parent) = to.parent() {
        deep::make_dir_all(&parent)?;
    }
    deep::hard_link(from, &tmp)?;
    deep::rename(&tmp, to).inspect_err(|_| {
        let _ = deep::remove_file(&tmp);
    })
}
