//! What a run does with one listed entry, given what DEST holds under its
//! name: the one rule the dry run prints (rsync's itemize code), `-i`
//! prints, and the real run carries out. Pure: the caller has compared
//! DEST's entry with the listed one ([`super::current::compare`]) and
//! looked at what only the disk can say (a symlink's target, owners and
//! xattrs, `--checksum`'s content).

use ddtree::list::Kind;

use super::current::Differs;

/// The action for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Made (a directory, symlink or special file) or moved whole (a
    /// file): DEST has nothing under its name, or another kind.
    Make,
    /// A file moved again: its size, mtime (to the second) or content
    /// (`--checksum`) differ; `perm` too, for the itemize code.
    Move { size: bool, time: bool, content: bool, perm: bool },
    /// A symlink made again: it points elsewhere.
    Remake { time: bool },
    /// Only its metadata set (mtime, mode, owner or xattrs): nothing moves.
    Meta { time: bool, perm: bool },
    /// DEST holds it as listed.
    Current,
}

/// What DEST holds under an entry's name, as the disk says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Held {
    /// How it differs from the listed entry; `None`: nothing there.
    pub(super) differs: Option<Differs>,
    /// `--checksum` found a file's content different.
    pub(super) content: bool,
    /// Owner, group or xattrs differ (where they are kept).
    pub(super) attrs: bool,
    /// A symlink's target: whether DEST's points where the listed one does
    /// (`None`: the list gives no target, and the link is made again).
    pub(super) same_target: Option<bool>,
    /// `--size-only`: a file of the listed size is complete whatever its
    /// mtime (which is then set), as rsync's quick check with it.
    pub(super) size_only: bool,
}

/// The action for a listed entry of `kind` where DEST holds `held`.
pub(super) fn decide(kind: Kind, held: Held) -> Action {
    let Some(d) = held.differs.filter(|d| !d.kind) else { return Action::Make };
    match kind {
        Kind::File if d.size || (d.time && !held.size_only) || held.content => {
            Action::Move { size: d.size, time: d.time, content: held.content, perm: d.perm }
        }
        // A file here only with `--size-only`: its time is set.
        Kind::File | Kind::Dir if d.perm || held.attrs || d.time => Action::Meta { time: d.time, perm: d.perm },
        Kind::Link => match held.same_target.unwrap_or(false) {
            false => Action::Remake { time: d.time },
            true if d.time || held.attrs => Action::Meta { time: d.time, perm: false },
            true => Action::Current,
        },
        // A FIFO, socket or device node of another type or device number
        // is made again (above); of another mode or mtime it is set, as
        // rsync's `.S...p.....`.
        Kind::Block | Kind::Char | Kind::Fifo | Kind::Socket if d.perm || d.time || held.attrs => {
            Action::Meta { time: d.time, perm: d.perm }
        }
        _ => Action::Current,
    }
}

/// rsync's 11-letter itemize code for `action` on an entry of `kind`
/// (`attrs`: the last five letters, owner, group and xattrs, when they
/// differ); `None` when nothing changes.
pub(super) fn code(kind: Kind, action: Action, attrs: Option<&str>) -> Option<String> {
    let f = |set: bool, c: char| if set { c } else { '.' };
    let a = attrs.unwrap_or(".....");
    let y = match kind {
        Kind::Dir => 'd',
        Kind::File => 'f',
        Kind::Link => 'L',
        Kind::Block | Kind::Char => 'D',
        _ => 'S',
    };
    Some(match (kind, action) {
        (_, Action::Current) => return None,
        (Kind::File, Action::Make) => ">f+++++++++".to_string(),
        (_, Action::Make) => format!("c{y}+++++++++"),
        (_, Action::Move { size, time, content, perm }) => {
            format!(">f{}{}{}{}{a}", f(content, 'c'), f(size, 's'), f(time, 't'), f(perm, 'p'))
        }
        (_, Action::Remake { time }) => format!("cLc.{}......", f(time, 't')),
        (Kind::File, Action::Meta { time, perm }) => format!(".f..{}{}{a}", f(time, 't'), f(perm, 'p')),
        (Kind::Link, Action::Meta { time, .. }) => format!(".L..{}.{a}", f(time, 't')),
        (_, Action::Meta { time, perm }) => format!(".{y}..{}{}{a}", f(time, 't'), f(perm, 'p')),
    })
}

/// What rsync itemizes for an entry whose owner or group it changes
/// (`attrs` says `o` or `g`) while DEST's (`mode`) has setuid or setgid:
/// it looks again after the chown, which on a non-directory clears setuid
/// (and setgid where group execute is set), so its line shows `p` where
/// the mode it finds then differs from the listed `perm`, and no `o` or
/// `g`. Only for an entry set in place (`Meta`), not one moved or made.
pub(super) fn seen_after_chown(
    kind: Kind,
    mode: u32,
    perm: u32,
    action: Action,
    attrs: Option<String>,
) -> (Action, Option<String>) {
    let owners = attrs.as_deref().is_some_and(|a| a.starts_with('o') || a[1..].starts_with('g'));
    let Action::Meta { time, .. } = action else { return (action, attrs) };
    if mode & 0o6000 == 0 || !owners || kind == Kind::Link {
        return (action, attrs);
    }
    let cleared = match kind {
        Kind::Dir => 0,
        _ if mode & 0o010 != 0 => 0o6000,
        _ => 0o4000,
    };
    let perm_now = (mode & 0o7777 & !cleared) != perm;
    let rest = attrs.map(|a| format!("..{}", &a[2..])).filter(|a| a != ".....");
    match (time || perm_now, &rest) {
        (false, None) => (Action::Current, None),
        _ => (Action::Meta { time, perm: perm_now }, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setid_entry_whose_owner_changes_is_itemized_as_rsync_sees_it_after_the_chown() {
        let meta = Action::Meta { time: false, perm: false };
        let og = Some("og...".to_string());
        // A setuid file: the chown clears setuid, rsync finds `p`.
        assert_eq!(
            seen_after_chown(Kind::File, 0o104750, 0o4750, meta, og.clone()),
            (Action::Meta { time: false, perm: true }, None)
        );
        // No setid bit: as it is.
        assert_eq!(seen_after_chown(Kind::File, 0o100750, 0o750, meta, og.clone()), (meta, og.clone()));
        // A setgid directory keeps its bits: nothing left to show.
        assert_eq!(seen_after_chown(Kind::Dir, 0o42775, 0o2775, meta, og.clone()), (Action::Current, None));
        // Xattrs still differ: they stay on the line.
        let ogx = Some("og..x".to_string());
        assert_eq!(seen_after_chown(Kind::Dir, 0o42775, 0o2775, meta, ogx), (meta, Some("....x".to_string())));
        // Moved or made: not looked at again.
        let moved = Action::Move { size: true, time: false, content: false, perm: false };
        assert_eq!(seen_after_chown(Kind::File, 0o104750, 0o4750, moved, og.clone()), (moved, og));
    }
    use proptest::prelude::*;

    fn held(kind: bool, size: bool, time: bool, perm: bool) -> Held {
        Held { differs: Some(Differs { kind, size, time, perm }), ..Held::default() }
    }

    #[test]
    fn size_only_sets_the_time_of_a_file_of_the_listed_size() {
        let only = |h: Held| Held { size_only: true, ..h };
        assert_eq!(decide(Kind::File, only(held(false, false, true, false))), Action::Meta { time: true, perm: false });
        assert!(matches!(decide(Kind::File, only(held(false, true, true, false))), Action::Move { .. }));
        assert!(matches!(decide(Kind::File, held(false, false, true, false)), Action::Move { .. }));
        assert_eq!(code(Kind::File, Action::Meta { time: true, perm: false }, None).unwrap(), ".f..t......");
    }

    #[test]
    fn nothing_or_another_kind_is_made() {
        for k in [Kind::File, Kind::Dir, Kind::Link, Kind::Fifo] {
            assert_eq!(decide(k, Held::default()), Action::Make);
            assert_eq!(decide(k, held(true, false, false, false)), Action::Make);
        }
        assert_eq!(code(Kind::File, Action::Make, None).unwrap(), ">f+++++++++");
        assert_eq!(code(Kind::Dir, Action::Make, None).unwrap(), "cd+++++++++");
        assert_eq!(code(Kind::Link, Action::Make, None).unwrap(), "cL+++++++++");
        assert_eq!(code(Kind::Char, Action::Make, None).unwrap(), "cD+++++++++");
        assert_eq!(code(Kind::Fifo, Action::Make, None).unwrap(), "cS+++++++++");
    }

    #[test]
    fn a_file_moves_again_when_size_time_or_content_differ_else_its_mode_is_set() {
        let m = decide(Kind::File, held(false, true, true, true));
        assert_eq!(m, Action::Move { size: true, time: true, content: false, perm: true });
        assert_eq!(code(Kind::File, m, None).unwrap(), ">f.stp.....");
        let c = decide(Kind::File, Held { content: true, ..held(false, false, false, false) });
        assert_eq!(code(Kind::File, c, None).unwrap(), ">fc........");
        let p = decide(Kind::File, held(false, false, false, true));
        assert_eq!(
            (p, code(Kind::File, p, None).unwrap().as_str()),
            (Action::Meta { time: false, perm: true }, ".f...p.....")
        );
        let o = decide(Kind::File, Held { attrs: true, ..held(false, false, false, false) });
        assert_eq!(code(Kind::File, o, Some("og...")).unwrap(), ".f....og...");
        assert_eq!(decide(Kind::File, held(false, false, false, false)), Action::Current);
    }

    #[test]
    fn a_directory_gets_its_mtime_mode_and_owner() {
        let d = decide(Kind::Dir, held(false, true, true, false));
        assert_eq!(
            (d, code(Kind::Dir, d, None).unwrap().as_str()),
            (Action::Meta { time: true, perm: false }, ".d..t......")
        );
        assert_eq!(
            decide(Kind::Dir, held(false, true, false, false)),
            Action::Current,
            "a directory's size does not count"
        );
    }

    #[test]
    fn a_symlink_is_made_again_where_it_points_elsewhere() {
        let r = decide(Kind::Link, Held { same_target: Some(false), ..held(false, false, true, false) });
        assert_eq!(code(Kind::Link, r, None).unwrap(), "cLc.t......");
        let t = decide(Kind::Link, Held { same_target: Some(true), ..held(false, false, true, false) });
        assert_eq!(code(Kind::Link, t, None).unwrap(), ".L..t......");
        // A list without targets: made again, whatever its mtime.
        assert_eq!(decide(Kind::Link, held(false, false, false, false)), Action::Remake { time: false });
        assert_eq!(decide(Kind::Link, held(false, false, true, false)), Action::Remake { time: true });
        let same = Held { same_target: Some(true), ..held(false, false, false, false) };
        assert_eq!(decide(Kind::Link, same), Action::Current);
    }

    proptest! {
        /// A code exactly when something changes, always 11 letters.
        #[test]
        fn a_line_exactly_for_a_change(kind in 0usize..4, k in any::<bool>(), s in any::<bool>(), t in any::<bool>(),
                                       p in any::<bool>(), there in any::<bool>(), content in any::<bool>(),
                                       attrs in any::<bool>(), target in proptest::option::of(any::<bool>()),
                                       size_only in any::<bool>()) {
            let kind = [Kind::File, Kind::Dir, Kind::Link, Kind::Fifo][kind];
            let differs = there.then_some(Differs { kind: k, size: s, time: t, perm: p });
            let h = Held { differs, content: content && kind == Kind::File, attrs, same_target: target, size_only };
            let a = decide(kind, h);
            let c = code(kind, a, attrs.then_some("og..."));
            prop_assert_eq!(c.is_none(), a == Action::Current);
            if let Some(c) = c {
                prop_assert_eq!(c.chars().count(), 11);
            }
            if a == Action::Current {
                prop_assert!(there && !k);
            }
        }
    }
}
