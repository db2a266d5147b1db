//! rsync's -a and its parts (-r -l -p -t -g -o -D) on `ddftp archive`:
//! archive keeps what `rsync -a` keeps (directories recursed, symlinks,
//! modes, mtimes, owners and groups when run as root, device and special
//! files), so `-a`, or all of its parts, asks for what it does anyway.
//! Parts given without `-a` keep what they name and nothing more, as rsync
//! ([`ddftp::archive::kept`]); without `-r` among them they are refused
//! (rsync would copy no directory).

use clap::Args;
use ddftp::archive::kept::Kept;

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
            return Ok(Kept::default());
        }
        if !self.recursive {
            return Err(format!(
                "-{given} without -r: rsync would skip every directory (\"skipping directory .\"); give -r too (or -a)"
            ));
        }
        if !self.times {
            return Err(format!(
                "-{given} without -t: archive keeps files' times (they tell a rerun a file is complete); leaving them is not supported yet: give -t too (or -a)"
            ));
        }
        Ok(Kept {
            links: self.links,
            perms: self.perms,
            owner: self.owner,
            group: self.group,
            devices: d || self.devices,
            specials: d || self.specials,
        })
    }

    /// The parts as one rsync flag (`-rlt`) for a remote end, if only
    /// some are kept.
    pub fn flag(k: &Kept) -> Option<String> {
        let parts = [('l', k.links), ('p', k.perms), ('t', true), ('g', k.group), ('o', k.owner)];
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = Keep { recursive: true, perms: true, ..Keep::default() }.kept().unwrap_err();
        assert!(e.starts_with("-rp without -t") && e.contains("give -t"), "{e}");
        let k = Keep { recursive: true, times: true, specials: true, ..Keep::default() }.kept().unwrap();
        assert_eq!(Keep::flag(&k).as_deref(), Some("-rt --specials"));
    }
}
