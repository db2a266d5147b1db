//! What a run does to one listed entry where the disk holds an entry
//! under its name (DEST's, or a basis directory's): the comparison beyond
//! type, size, mode and mtime (owners, xattrs) and the action with its
//! itemize letters.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use ddtree::list::Kind;

use super::current::{self, Held};
use super::{decide, deep, Item};

/// What a run would do to the listed `it` where the disk holds `m` at
/// `path` (DEST's entry, or a basis's), and the owner, group and xattr
/// letters that differ.
pub(super) fn judge(
    keep: &Keep,
    path: &deep::Beneath,
    m: &std::fs::Metadata,
    it: &Item,
) -> (decide::Action, Option<String>) {
    let e = &it.entry;
    // Owner, group, xattrs: `o g . a x` (or dots), the code's last five.
    let attrs = keep.differs(path, m, e);
    let held = decide::Held {
        differs: Some(current::compare(&Held::from(m), e, keep.window)),
        size_only: keep.size_only,
        content: e.kind == Kind::File && keep.differ.contains(&it.rel),
        attrs: attrs.is_some(),
        same_target: e.meta.target().filter(|_| e.kind == Kind::Link).map(|_| current::same_target(path, e)),
    };
    let action = decide::decide(e.kind, held);
    decide::seen_after_chown(e.kind, m.mode(), e.perm, action, attrs)
}

fn flag(set: bool, c: char) -> char {
    if set {
        c
    } else {
        '.'
    }
}

/// What a run compares beyond type, size, mode and mtime.
#[derive(Debug, Clone, Copy)]
pub(super) struct Keep<'a> {
    pub owners: bool,
    pub xattrs: bool,
    /// `-t`: without it a file moved gets the time it is moved (rsync's
    /// `T` in the code).
    pub times: bool,
    /// `--size-only`.
    pub size_only: bool,
    /// `--modify-window`.
    pub window: current::Window,
    /// Files whose content differs from the mirrors' (`--checksum`).
    pub differ: &'a HashSet<PathBuf>,
    /// The rules, for their `x` rules (which xattrs are compared).
    pub names: &'a super::filter::Filter,
}

impl Keep<'_> {
    /// The code's last five letters (`og.ax`) if `path`'s (its lstat `m`)
    /// owner, group, ACLs (`a`) or other xattrs (`x`) differ from `e`'s
    /// (those compared), else `None`.
    fn differs(&self, path: &deep::Beneath, m: &std::fs::Metadata, e: &ddtree::list::Entry) -> Option<String> {
        let (mut o, mut g) = (false, false);
        if let Some((uid, gid)) = e.meta.owner.filter(|_| self.owners) {
            (o, g) = (m.uid() != uid, m.gid() != gid);
        }
        let (mut a, mut x) = (false, false);
        if let Some(want) = e.meta.xattrs().filter(|_| self.xattrs) {
            let have = deep::with_short_path(path, ddtree::attrs::read_xattrs).unwrap_or_default();
            // What `x` rules leave alone is not compared.
            let copied: Vec<_> = want.iter().filter(|(k, _)| self.names.copies_xattr(k)).cloned().collect();
            let (want, touched) = (&copied[..], |k: &[u8]| self.names.touches_xattr(k));
            let split = |xs: &[(Vec<u8>, Vec<u8>)], acl: bool| {
                let mut part: Vec<_> = xs.iter().filter(|(k, _)| is_acl(k) == acl && touched(k)).cloned().collect();
                part.sort();
                part
            };
            a = split(want, true) != split(&have, true);
            x = split(want, false) != split(&have, false);
        }
        (o || g || a || x).then(|| format!("{}{}.{}{}", flag(o, 'o'), flag(g, 'g'), flag(a, 'a'), flag(x, 'x')))
    }
}

/// Whether the xattr `name` holds a POSIX ACL (rsync's `a`, not `x`).
fn is_acl(name: &[u8]) -> bool {
    name.starts_with(b"system.posix_acl_")
}
