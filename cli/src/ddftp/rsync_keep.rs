//! rsync's -a and its parts (-r -l -p -t -g -o -D) on `ddftp archive`:
//! archive keeps what `rsync -a` keeps (directories recursed, symlinks,
//! modes, mtimes, owners and groups when run as root, device and special
//! files), so `-a`, or all of its parts, asks for what it does anyway.
//! Keeping less (a part on its own) is refused with the reason, never
//! taken to mean more than the user asked for.

use clap::Args;

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
    /// Refuses a part of -a given without the rest: archive would keep
    /// more than it asks for.
    pub fn check(&self) -> Result<(), String> {
        let d = self.devices_specials || (self.devices && self.specials);
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
        let whole = parts.iter().all(|&(c, on)| on && (c != 'D' || d));
        if self.archive || given.is_empty() || whole {
            return Ok(());
        }
        Err(format!(
            "-{given} without -a: ddftp archive keeps everything rsync -a keeps (-rlptgoD), and keeping only part of it is not supported yet; give -a (or leave these out: the same)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_or_all_its_parts_or_none_ask_for_what_archive_keeps() {
        assert!(Keep::default().check().is_ok());
        assert!(Keep { archive: true, times: true, ..Keep::default() }.check().is_ok());
        let all = Keep {
            recursive: true,
            links: true,
            perms: true,
            times: true,
            group: true,
            owner: true,
            devices: true,
            specials: true,
            ..Keep::default()
        };
        assert!(all.check().is_ok());
    }

    #[test]
    fn a_part_alone_is_refused_with_what_to_give() {
        let e = Keep { recursive: true, times: true, ..Keep::default() }.check().unwrap_err();
        assert!(e.starts_with("-rt without -a") && e.contains("give -a"), "{e}");
        let e = Keep { devices: true, ..Keep { archive: false, ..Keep::default() } }.check().unwrap_err();
        assert!(e.starts_with("-D without -a"), "{e}");
    }
}
