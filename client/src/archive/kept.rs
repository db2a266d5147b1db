//! rsync's parts of `-a` (`-l -p -t -o -g -D`) given without the rest:
//! what is not asked for is not kept, as rsync means it. Each listed entry
//! is rewritten into what DEST is to have, before anything is decided: the
//! rest of the archive (what changes, what is complete, what is set) then
//! works from it unchanged, so this is the one place the rule lives.
//!
//! - without `-l` a symlink, without `-D` (`--devices`, `--specials`) a
//!   device node, FIFO or socket is not copied: rsync's `skipping
//!   non-regular file "NAME"`, not a failure;
//! - without `-p` an entry DEST has keeps its mode; a new one gets SRC's
//!   permission bits under the umask, without setuid, setgid or sticky;
//! - without `-o` (`-g`) owners (groups) are this process's.
//!
//! - without `-t` a directory, symlink or special DEST has keeps its
//!   time, a new one gets the time it is made; a file is moved with its
//!   listed time (what the mirror checks it serves, what tells a rerun of
//!   an interrupted run that it is complete) and given the time of the run
//!   once moved ([`stamp_now`]): so a later run finds its time differing
//!   and moves it again, as rsync does without `-t` (`>f..T......`).

use std::os::unix::fs::MetadataExt;

use ddtree::list::{Entry, Kind, Time};

use super::deep;

/// Which of `-a`'s parts are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub times: bool,
    pub links: bool,
    pub perms: bool,
    pub owner: bool,
    pub group: bool,
    pub devices: bool,
    pub specials: bool,
}

impl Default for Kept {
    /// All of `-a`: what `archive` keeps without being asked.
    fn default() -> Kept {
        Kept { times: true, links: true, perms: true, owner: true, group: true, devices: true, specials: true }
    }
}

/// rsync's `--chown USER:GROUP`: every entry's owner (group) this one, as
/// though `-o` (`-g`) were given and SRC's owners mapped to it; `None`:
/// the listed (or kept) one. And `--usermap`/`--groupmap`: SRC's owners
/// (groups) mapped by the first pair that matches. Set only where owners
/// are (as root).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chown {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub users: IdMap,
    pub groups: IdMap,
}

impl Chown {
    /// The owner and group `e` is to have in place of its listed ones,
    /// where a `--chown` or a map says (matched against the listed ids
    /// and, where listed, names: SRC's, as rsync matches the sender's).
    pub(super) fn mapped(&self, e: &Entry) -> (Option<u32>, Option<u32>) {
        let Some((uid, gid)) = e.meta.owner else { return (None, None) };
        let (user, group) = e.meta.names().map_or((&[][..], &[][..]), |(u, g)| (&u[..], &g[..]));
        (self.uid.or_else(|| self.users.map(uid, user)), self.gid.or_else(|| self.groups.map(gid, group)))
    }

    /// Whether a map matches names: the mirrors must list them.
    pub fn needs_names(&self) -> bool {
        self.users.needs_names() || self.groups.needs_names()
    }
}

/// rsync's `--usermap`/`--groupmap`: `FROM:TO` pairs, the first whose
/// FROM matches deciding. FROM is an id, a range `LOW-HIGH`, or a name
/// pattern (`*` and `?`; an id without a name has the empty name, and
/// `*` matches every id); TO an id of this machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdMap(pub Vec<(IdFrom, u32)>);

/// What a map's FROM matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdFrom {
    Id(u32),
    Range(u32, u32),
    Name(String),
}

impl IdMap {
    pub fn map(&self, id: u32, name: &[u8]) -> Option<u32> {
        let hit = |f: &IdFrom| match f {
            IdFrom::Id(n) => id == *n,
            IdFrom::Range(lo, hi) => (*lo..=*hi).contains(&id),
            IdFrom::Name(p) => super::wild::wild(p.as_bytes(), name),
        };
        self.0.iter().find(|(f, _)| hit(f)).map(|(_, to)| *to)
    }

    fn needs_names(&self) -> bool {
        self.0.iter().any(|(f, _)| matches!(f, IdFrom::Name(p) if p != "*"))
    }
}

/// What an entry becomes ([`Kept::apply`]) is measured against.
pub(super) struct Here {
    pub umask: u32,
    /// This process's user and group.
    pub me: (u32, u32),
    /// When the run started: the time of what it makes without `-t`.
    pub now: Time,
}

impl Here {
    pub(super) fn new(umask: u32) -> Here {
        // SAFETY: getuid and getgid cannot fail.
        let me = unsafe { (libc::getuid(), libc::getgid()) };
        Here { umask, me, now: now() }
    }
}

impl Kept {
    /// Everything kept: nothing to rewrite.
    pub fn all(&self) -> bool {
        *self == Kept::default()
    }

    /// Whether an entry of `kind` is left out (rsync's "skipping
    /// non-regular file").
    pub(super) fn skips(&self, kind: Kind) -> bool {
        match kind {
            Kind::Link => !self.links,
            Kind::Block | Kind::Char => !self.devices,
            Kind::Fifo | Kind::Socket => !self.specials,
            Kind::File | Kind::Dir => false,
        }
    }

    /// `e` as DEST is to have it; `there`: what DEST has under its name.
    pub(super) fn apply(&self, e: &mut Entry, there: Option<&std::fs::Metadata>, here: &Here) {
        let same = there.filter(|m| Kind::from_mode(m.mode()) == Some(e.kind));
        if !self.times && e.kind != Kind::File {
            e.mtime = match same {
                Some(m) => Time { sec: m.mtime(), nsec: m.mtime_nsec() as u32 },
                None => here.now,
            };
        }
        if !self.perms {
            e.perm = match same {
                Some(m) => m.mode() & 0o7777,
                None => e.perm & 0o777 & !here.umask,
            };
        }
        if let Some((uid, gid)) = e.meta.owner.filter(|_| !(self.owner && self.group)) {
            let uid = if self.owner { uid } else { here.me.0 };
            let gid = if self.group { gid } else { here.me.1 };
            e.meta.owner = Some((uid, gid));
        }
    }
}

fn now() -> Time {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Time { sec: t.as_secs() as i64, nsec: t.subsec_nanos() }
}

/// Without `-t`: the files a run moved (`moved`, below `dest`) get the
/// time they were moved, not SRC's. One that cannot be set is named.
pub(super) fn stamp_now<'a>(
    dest: &deep::Dest,
    moved: impl Iterator<Item = &'a std::path::Path>,
) -> Vec<(std::path::PathBuf, String)> {
    let now = now();
    moved
        .filter_map(|rel| match deep::set_mtime(&dest.join(rel), now) {
            // Not moved after all: named already.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Some((rel.to_path_buf(), e.to_string())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: Kind, perm: u32) -> Entry {
        Entry {
            path: b"x".to_vec(),
            kind,
            perm,
            size: 3,
            mtime: Time { sec: 1_000, nsec: 0 },
            meta: ddtree::list::Meta::of(0o100000 | perm, 5, 6, 1, (1, 2), 0),
        }
    }

    #[test]
    fn what_is_not_asked_for_is_not_kept() {
        let here = Here { umask: 0o022, me: (0, 0), now: Time { sec: 5_000, nsec: 0 } };
        let bare = Kept { perms: false, owner: false, group: false, ..Kept::default() };
        let mut e = entry(Kind::File, 0o4777);
        bare.apply(&mut e, None, &here);
        assert_eq!((e.perm, e.mtime.sec, e.meta.owner), (0o755, 1_000, Some((0, 0))), "new: umask, no setid");
        let no_g = Kept { group: false, ..Kept::default() };
        let mut e = entry(Kind::File, 0o640);
        no_g.apply(&mut e, None, &here);
        assert_eq!((e.perm, e.meta.owner), (0o640, Some((5, 0))));
        assert!(Kept::default().all() && !no_g.all());
        let no_l = Kept { links: false, specials: false, ..Kept::default() };
        assert!(no_l.skips(Kind::Link) && no_l.skips(Kind::Fifo) && !no_l.skips(Kind::Char) && !no_l.skips(Kind::File));
    }

    #[test]
    fn an_entry_dest_has_keeps_its_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        let here = Here { umask: 0o022, me: (0, 0), now: Time { sec: 5_000, nsec: 0 } };
        let mut e = entry(Kind::File, 0o644);
        Kept { perms: false, ..Kept::default() }.apply(&mut e, Some(&m), &here);
        assert_eq!(e.perm, 0o600);
        let mut dir = entry(Kind::Dir, 0o755);
        Kept { perms: false, ..Kept::default() }.apply(&mut dir, Some(&m), &here);
        assert_eq!(dir.perm, 0o755, "a file there is no directory's mode");
    }

    #[test]
    fn a_map_takes_the_first_pair_that_matches_as_rsync() {
        let map = IdMap(vec![
            (IdFrom::Range(0, 99), 1),
            (IdFrom::Name("way*".into()), 2),
            (IdFrom::Id(1000), 3),
            (IdFrom::Name("".into()), 4),
            (IdFrom::Name("*".into()), 5),
        ]);
        assert_eq!(map.map(42, b"daemon"), Some(1), "a range");
        assert_eq!(map.map(500, b"wayne"), Some(2), "a pattern");
        assert_eq!(map.map(1000, b"wayne"), Some(2), "the first match");
        assert_eq!(map.map(1000, b"joe"), Some(3));
        assert_eq!(map.map(2000, b""), Some(4), "no name: the empty one");
        assert_eq!(map.map(2000, b"joe"), Some(5), "`*`: every id");
        assert!(map.needs_names() && !IdMap(vec![(IdFrom::Name("*".into()), 1)]).needs_names());
    }
}
