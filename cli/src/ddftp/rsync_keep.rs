//! rsync's -a and its parts (-r -l -p -t -g -o -D) on `ddftp archive`:
//! archive keeps what `rsync -a` keeps (directories recursed, symlinks,
//! modes, mtimes, owners and groups when run as root, device and special
//! files), so `-a`, or all of its parts, asks for what it does anyway.
//! Parts given without `-a` keep what they name and nothing more, as rsync
//! ([`ddftp::archive::kept`]); without `-r` among them they are refused
//! (rsync would copy no directory).

use clap::Args;
use ddftp::archive::kept::{Chown, IdFrom, IdMap, Kept};

#[derive(Debug, Default, Args)]
pub struct Keep {
    /// rsync's archive mode (-rlptgoD): what archive keeps anyway.
    #[arg(short = 'a', long = "archive")]
    pub archive: bool,
    /// rsync's -r (recurse; part of -a).
    #[arg(short = 'r', long, hide = true)]
    pub recursive: bool,
    /// rsync's -l (symlinks as symlinks; part of -a).
    #[arg(short = 'l', long, hide = true)]
    pub links: bool,
    /// rsync's -p (modes; part of -a).
    #[arg(short = 'p', long, hide = true)]
    pub perms: bool,
    /// rsync's -t (mtimes; part of -a).
    #[arg(short = 't', long, hide = true)]
    pub times: bool,
    /// rsync's -g (groups; part of -a).
    #[arg(short = 'g', long, hide = true)]
    pub group: bool,
    /// rsync's -o (owners; part of -a).
    #[arg(short = 'o', long, hide = true)]
    pub owner: bool,
    /// rsync's -D (--devices --specials; part of -a).
    #[arg(short = 'D', hide = true)]
    pub devices_specials: bool,
    #[arg(long, hide = true)]
    pub devices: bool,
    #[arg(long, hide = true)]
    pub specials: bool,
    /// Every entry's owner USER and group GROUP (rsync's; `USER`, `USER:`
    /// or `:GROUP` for one of them; names or numbers). As -o (-g) with
    /// SRC's owners mapped to it: set only when run as root.
    #[arg(long, value_name = "USER:GROUP")]
    pub chown: Option<String>,
    /// Map SRC's owners (rsync's): `FROM:TO,...`, the first pair that
    /// matches deciding; FROM an id, a range LOW-HIGH, or a name pattern
    /// (`*`, `?`; `*` matches every id), TO a name or id here. Implies -o;
    /// set only when run as root.
    #[arg(long, value_name = "FROM:TO,...")]
    pub usermap: Option<String>,
    /// The same for groups (implies -g).
    #[arg(long, value_name = "FROM:TO,...")]
    pub groupmap: Option<String>,
    /// What is not kept, though `-a` (or a part) says it: rsync's `--no-p`,
    /// `--no-l`, `--no-g`, `--no-D`, `--no-devices`, `--no-specials`,
    /// `--no-t`.
    #[command(flatten)]
    pub not: Not,
}

/// rsync's negations of `-a`'s parts.
#[derive(Debug, Default, Args)]
pub struct Not {
    /// Leave modes alone (rsync's --no-perms): what DEST has keeps its
    /// mode; what is new gets SRC's under the umask.
    #[arg(long = "no-perms", id = "no_perms", visible_alias = "no-p")]
    pub perms: bool,
    /// Leave symlinks out (rsync's --no-links): `skipping non-regular file`.
    #[arg(long = "no-links", id = "no_links", visible_alias = "no-l")]
    pub links: bool,
    /// Groups are the running user's (rsync's --no-group).
    #[arg(long = "no-group", id = "no_group", visible_alias = "no-g")]
    pub group: bool,
    /// Leave device nodes and FIFOs and sockets out (rsync's --no-D).
    #[arg(long = "no-D", id = "no_D")]
    pub devices_specials: bool,
    #[arg(long = "no-devices", id = "no_devices", hide = true)]
    pub devices: bool,
    #[arg(long = "no-specials", id = "no_specials", hide = true)]
    pub specials: bool,
    /// Leave mtimes (rsync's --no-times): what is made gets the time it
    /// is made, and a file DEST has is moved again each run.
    #[arg(long = "no-times", id = "no_times", visible_alias = "no-t")]
    pub times: bool,
}

impl Keep {
    /// What the parts given keep: all of `-a` when `-a` (or no part) is
    /// given; else only the parts named, as rsync (`-r` among them: without
    /// it rsync skips every directory, so it is refused).
    pub fn kept(&self) -> Result<Kept, String> {
        let d = self.devices_specials;
        let parts = [
            ('r', self.recursive),
            ('l', self.links),
            ('p', self.perms),
            ('t', self.times),
            ('g', self.group),
            ('o', self.owner),
            ('D', d || self.devices || self.specials),
        ];
        let given: String = parts.iter().filter(|(_, on)| *on).map(|(c, _)| *c).collect();
        if self.archive || given.is_empty() {
            return self.not.applied(Kept::default());
        }
        if !self.recursive {
            return Err(format!(
                "-{given} without -r: rsync would skip every directory (\"skipping directory .\"); give -r too (or -a)"
            ));
        }
        self.not.applied(Kept {
            times: self.times,
            links: self.links,
            perms: self.perms,
            // rsync 3.2.4's: a map implies what it maps.
            owner: self.owner || self.usermap.is_some(),
            group: self.group || self.groupmap.is_some(),
            devices: d || self.devices,
            specials: d || self.specials,
        })
    }

    /// `--chown`'s owner and group, looked up here (a number is one).
    pub fn chown(&self) -> Result<Chown, String> {
        let Some(given) = &self.chown else { return Ok(Chown::default()) };
        let (user, group) = given.split_once(':').unwrap_or((given, ""));
        let mut names = ddtree::names::Names::default();
        let id = |name: &str, what: &str, look: &mut dyn FnMut(&[u8]) -> Option<u32>| match name {
            "" => Ok(None),
            n => n.parse().ok().or_else(|| look(n.as_bytes())).map(Some).ok_or_else(|| {
                format!("--chown {given:?}: no {what} {n:?} on this machine (give a name it knows, or a number)")
            }),
        };
        let uid = id(user, "user", &mut |n| names.uid(n))?;
        let gid = id(group, "group", &mut |n| names.gid(n))?;
        Ok(Chown { uid, gid, ..Chown::default() })
    }

    /// `--chown`, `--usermap` and `--groupmap` (a map and `--chown`'s
    /// part of the same kind conflict, as in rsync).
    pub fn owners(&self) -> Result<Chown, String> {
        let mut c = self.chown()?;
        let mut names = ddtree::names::Names::default();
        if let Some(m) = &self.usermap {
            if c.uid.is_some() {
                return Err("--usermap conflicts with --chown's user: give one of them".into());
            }
            c.users = id_map("--usermap", m, &mut |n| names.uid(n))?;
        }
        if let Some(m) = &self.groupmap {
            if c.gid.is_some() {
                return Err("--groupmap conflicts with --chown's group: give one of them".into());
            }
            c.groups = id_map("--groupmap", m, &mut |n| names.gid(n))?;
        }
        Ok(c)
    }

    /// The parts as one rsync flag (`-rlt`) for a remote end, if only
    /// some are kept.
    pub fn flag(k: &Kept) -> Option<String> {
        let parts = [('l', k.links), ('p', k.perms), ('t', k.times), ('g', k.group), ('o', k.owner)];
        let mut f: String = std::iter::once('r').chain(parts.iter().filter(|(_, on)| *on).map(|(c, _)| *c)).collect();
        if k.devices && k.specials {
            f.push('D');
        }
        let mut v = vec![format!("-{f}")];
        match (k.devices, k.specials) {
            (true, false) => v.push("--devices".into()),
            (false, true) => v.push("--specials".into()),
            _ => {}
        }
        (!k.all()).then(|| v.join(" "))
    }
}

impl Not {
    /// `k` without what these say to leave.
    fn applied(&self, k: Kept) -> Result<Kept, String> {
        let d = self.devices_specials;
        Ok(Kept {
            times: k.times && !self.times,
            links: k.links && !self.links,
            perms: k.perms && !self.perms,
            group: k.group && !self.group,
            devices: k.devices && !(d || self.devices),
            specials: k.specials && !(d || self.specials),
            ..k
        })
    }
}

/// A `--usermap`/`--groupmap` value: `FROM:TO` pairs, comma-separated;
/// TO looked up here (`look`) unless a number.
fn id_map(flag: &str, given: &str, look: &mut dyn FnMut(&[u8]) -> Option<u32>) -> Result<IdMap, String> {
    let mut pairs = vec![];
    for pair in given.split(',') {
        let bad = |why: &str| format!("{flag} {given:?}: {pair:?}: {why}");
        let (from, to) = pair.split_once(':').ok_or_else(|| bad("not FROM:TO"))?;
        let to = to.parse().ok().or_else(|| look(to.as_bytes())).ok_or_else(|| bad("TO is no name on this machine"))?;
        let number = |s: &str| s.parse::<u32>().ok().filter(|_| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        let from = match (number(from), from.split_once('-').map(|(a, b)| (number(a), number(b)))) {
            (Some(n), _) => IdFrom::Id(n),
            (None, Some((Some(lo), Some(hi)))) if lo <= hi => IdFrom::Range(lo, hi),
            (None, Some((Some(_), Some(_)))) => return Err(bad("a range LOW-HIGH with LOW above HIGH")),
            _ => {
                ddftp::archive::wild::check(from.as_bytes()).map_err(|why| bad(&why))?;
                IdFrom::Name(from.to_string())
            }
        };
        pairs.push((from, to));
    }
    Ok(IdMap(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_is_from_to_pairs_as_rsync_writes_them() {
        let mut look = |n: &[u8]| (n == b"wheel").then_some(10);
        let m = id_map("--usermap", "0-99:1,wheel:2,:3,ab*:wheel,*:4", &mut look).unwrap();
        let from: Vec<&IdFrom> = m.0.iter().map(|(f, _)| f).collect();
        assert_eq!(from[0], &IdFrom::Range(0, 99));
        assert_eq!(from[2], &IdFrom::Name(String::new()));
        assert_eq!(m.0[3].1, 10, "TO looked up here");
        assert!(id_map("--usermap", "[ab]*:1,[!0-9]x:2", &mut look).is_ok(), "rsync's classes");
        for bad in ["x", "1:nosuch", "9-1:1", "[ab:1", "[[:nosuch:]]:1", ""] {
            assert!(id_map("--usermap", bad, &mut look).is_err(), "{bad:?}");
        }
        let k = Keep { chown: Some("0".into()), usermap: Some("1:2".into()), ..Keep::default() };
        assert!(k.owners().unwrap_err().contains("conflicts"));
    }

    #[test]
    fn a_or_all_its_parts_or_none_keep_everything() {
        assert!(Keep::default().kept().unwrap().all());
        assert!(Keep { archive: true, times: true, ..Keep::default() }.kept().unwrap().all());
        let all = Keep {
            recursive: true,
            links: true,
            perms: true,
            times: true,
            group: true,
            owner: true,
            devices_specials: true,
            ..Keep::default()
        };
        assert!(all.kept().unwrap().all());
    }

    #[test]
    fn parts_keep_what_they_name_and_need_r() {
        let k = Keep { recursive: true, links: true, times: true, ..Keep::default() }.kept().unwrap();
        assert!(k.links && !k.perms && !k.owner && !k.group && !k.devices && !k.specials);
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rlt"));
        let e = Keep { times: true, ..Keep::default() }.kept().unwrap_err();
        assert!(e.starts_with("-t without -r") && e.contains("give -r"), "{e}");
        let k = Keep { recursive: true, perms: true, ..Keep::default() }.kept().unwrap();
        assert!(k.perms && !k.times && !k.links);
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rp"));
        let k = Keep { recursive: true, times: true, specials: true, ..Keep::default() }.kept().unwrap();
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rt --specials"));
        let not = Not { perms: true, group: true, devices_specials: true, ..Not::default() };
        let k = Keep { archive: true, not, ..Keep::default() }.kept().unwrap();
        assert!(k.links && k.owner && !k.perms && !k.group && !k.devices && !k.specials);
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rlto"));
        let k = Keep { not: Not { times: true, ..Not::default() }, ..Keep::default() }.kept().unwrap();
        assert!(!k.times && k.links && k.perms);
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rlpgoD"));
    }
}
