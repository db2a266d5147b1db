//! Whether what DEST holds under a listed entry's name is that entry, and
//! if not, how it differs: the one rule the plan, the dry run, the store
//! (a file finished by an earlier run), `--checksum`, special files and
//! directories all ask. Pure: the caller has done the `lstat`.

use std::os::unix::fs::MetadataExt;

use ddtree::list::{Entry, Kind, Time};

use super::deep;

/// What DEST holds under a name, as `lstat` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    /// `st_mode`: type and permission bits.
    pub mode: u32,
    pub size: u64,
    pub mtime: Time,
    /// A device's numbers.
    pub rdev: u64,
}

impl From<&std::fs::Metadata> for Held {
    fn from(m: &std::fs::Metadata) -> Held {
        Held {
            mode: m.mode(),
            size: m.size(),
            mtime: Time { sec: m.mtime(), nsec: m.mtime_nsec() as u32 },
            rdev: m.rdev(),
        }
    }
}

impl From<&deep::Stat> for Held {
    fn from(m: &deep::Stat) -> Held {
        Held { mode: m.mode, size: m.size, mtime: Time { sec: m.mtime, nsec: m.mtime_nsec }, rdev: m.rdev }
    }
}

/// What a listed entry must be (an [`Entry`]'s, or a store's piece's).
#[derive(Debug, Clone, Copy)]
pub(super) struct Listed {
    pub kind: Kind,
    pub size: u64,
    pub perm: u32,
    pub mtime: Time,
    pub rdev: Option<u64>,
}

impl From<&Entry> for Listed {
    fn from(e: &Entry) -> Listed {
        Listed { kind: e.kind, size: e.size, perm: e.perm, mtime: e.mtime, rdev: e.meta.rdev() }
    }
}

/// How a held entry differs from the listed one (rsync's itemize letters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Differs {
    /// Another type, or a device of other numbers: it is replaced.
    pub kind: bool,
    /// A regular file's size (`s`).
    pub size: bool,
    /// The mtime, to the second (`t`): rsync's quick check compares whole
    /// seconds (its `--modify-window` 0), so a tree another tool copied
    /// with whole-second times (tar, cp, a filesystem that keeps no more)
    /// is current, not moved again. Moved entries get the nanoseconds.
    pub time: bool,
    /// The permission bits, setuid/setgid/sticky included (`p`).
    pub perm: bool,
}

impl Differs {
    /// Nothing differs: the entry is current.
    pub fn none(self) -> bool {
        self.same_bytes() && !self.perm
    }

    /// Type, size and mtime are the listed ones (rsync's quick check): a
    /// file's bytes are current (a file gets its mtime only once its bytes
    /// are verified), whatever its mode.
    pub fn same_bytes(self) -> bool {
        !(self.kind || self.size || self.time)
    }
}

/// Whether the symlink DEST holds at `p` points where the listed symlink
/// `e` does; `false` when the list gives no target (a `--list`): such a
/// link is made again.
pub(super) fn same_target(p: &deep::Beneath, e: &Entry) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Some(want) = e.meta.target() else { return false };
    deep::read_link(p).is_ok_and(|t| t.as_os_str().as_bytes() == want)
}

/// rsync's `--modify-window`: how far apart two mtimes may be and still
/// be the same. 0 (the default) compares whole seconds; N, whole seconds
/// up to N apart (a FAT disk keeps times to 2 s); a negative one, the
/// nanoseconds too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window(pub i64);

impl Window {
    /// Whether `a` and `b` are the same time within the window.
    pub fn same(self, a: Time, b: Time) -> bool {
        match u64::try_from(self.0) {
            Ok(w) => a.sec.abs_diff(b.sec) <= w,
            Err(_) => a == b,
        }
    }

    /// Whether `a` is later than `b`, beyond the window (`-u`).
    pub fn later(self, a: Time, b: Time) -> bool {
        !self.same(a, b) && a > b
    }
}

/// How rsync's quick check is asked: `--size-only`, `--modify-window`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quick {
    pub size_only: bool,
    pub window: Window,
}

/// `held` against the listed entry, mtimes within `window`.
pub(super) fn compare(held: &Held, listed: impl Into<Listed>, window: Window) -> Differs {
    let l = listed.into();
    let device = matches!(l.kind, Kind::Block | Kind::Char);
    Differs {
        kind: Kind::from_mode(held.mode) != Some(l.kind) || (device && l.rdev != Some(held.rdev)),
        size: l.kind == Kind::File && held.size != l.size,
        time: !window.same(held.mtime, l.mtime),
        perm: held.mode & 0o7777 != l.perm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_window_takes_mtimes_that_far_apart_as_the_same() {
        let t = |sec, nsec| Time { sec, nsec };
        let (exact, whole, fat) = (Window(-1), Window::default(), Window(1));
        assert!(whole.same(t(10, 5), t(10, 900)) && !exact.same(t(10, 5), t(10, 900)));
        assert!(
            fat.same(t(10, 0), t(11, 999_999_999)) && fat.same(t(11, 0), t(10, 0)) && !fat.same(t(12, 0), t(10, 0))
        );
        assert!(!fat.later(t(11, 0), t(10, 0)) && fat.later(t(12, 0), t(10, 0)) && !fat.later(t(8, 0), t(10, 0)));
        assert!(whole.later(t(11, 0), t(10, 999)) && !whole.later(t(10, 999), t(10, 0)));
        assert!(exact.later(t(10, 999), t(10, 0)));
        let h = held(libc::S_IFREG | 0o644, 10, 101, 0);
        assert!(!compare(&h, file(10, 0o644, 100, 0), fat).time && compare(&h, file(10, 0o644, 100, 0), whole).time);
    }

    fn held(mode: u32, size: u64, sec: i64, nsec: u32) -> Held {
        Held { mode, size, mtime: Time { sec, nsec }, rdev: 0 }
    }

    fn file(size: u64, perm: u32, sec: i64, nsec: u32) -> Listed {
        Listed { kind: Kind::File, size, perm, mtime: Time { sec, nsec }, rdev: None }
    }

    #[test]
    fn a_file_is_current_only_with_its_size_mode_and_mtime_to_the_second() {
        let h = held(libc::S_IFREG | 0o644, 10, 100, 5);
        assert!(compare(&h, file(10, 0o644, 100, 5), Window::default()).none());
        assert_eq!(
            compare(&h, file(10, 0o600, 100, 5), Window::default()),
            Differs { perm: true, ..Differs::default() }
        );
        assert!(compare(&h, file(10, 0o600, 100, 5), Window::default()).same_bytes());
        assert!(!compare(&h, file(10, 0o644, 100, 6), Window::default()).time, "whole seconds, as rsync");
        assert!(compare(&h, file(10, 0o644, 101, 5), Window::default()).time);
        assert!(compare(&h, file(10, 0o644, 99, 999_999_999), Window::default()).time);
        assert!(compare(&h, file(11, 0o644, 100, 5), Window::default()).size);
        // A directory or symlink under a file's name is another type.
        assert!(compare(&held(libc::S_IFDIR | 0o644, 10, 100, 5), file(10, 0o644, 100, 5), Window::default()).kind);
        assert!(compare(&held(libc::S_IFLNK | 0o644, 10, 100, 5), file(10, 0o644, 100, 5), Window::default()).kind);
    }

    #[test]
    fn a_directory_s_size_does_not_count_and_a_device_s_numbers_do() {
        let dir = Listed { kind: Kind::Dir, size: 0, perm: 0o755, mtime: Time { sec: 1, nsec: 0 }, rdev: None };
        assert!(compare(&held(libc::S_IFDIR | 0o755, 4096, 1, 0), dir, Window::default()).none());
        let dev = Listed { kind: Kind::Char, size: 0, perm: 0o640, mtime: Time::default(), rdev: Some(7) };
        let mut h = held(libc::S_IFCHR | 0o640, 0, 0, 0);
        assert!(compare(&h, dev, Window::default()).kind);
        h.rdev = 7;
        assert!(compare(&h, dev, Window::default()).none());
    }

    proptest! {
        /// An entry held exactly as listed is current; change any one of
        /// type, size (of a file), mtime or mode and it is not.
        #[test]
        fn current_exactly_when_all_agree(size in 0u64..1 << 40, perm in 0u32..0o7777, sec in -1i64 << 40..1 << 40,
                                          nsec in 0u32..1_000_000_000, which in 0usize..4) {
            let l = file(size, perm, sec, nsec);
            let mut h = held(libc::S_IFREG | perm, size, sec, nsec);
            prop_assert!(compare(&h, l, Window::default()).none());
            match which {
                0 => h.mode = libc::S_IFLNK | perm,
                1 => h.size ^= 1,
                2 => h.mtime.sec ^= 1,
                _ => h.mode = libc::S_IFREG | (perm ^ 0o100),
            }
            prop_assert!(!compare(&h, l, Window::default()).none());
        }
    }
}
