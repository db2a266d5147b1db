//! rsync's symlink options for `archive`: `--safe-links`,
//! `-L`/`--copy-links`, `--copy-unsafe-links` (the rules are
//! [`ddtree::safe_links`] and [`ddtree::follow`]).

use clap::Args;
use ddtree::follow::Follow;

#[derive(Debug, Args)]
pub struct Links {
    /// Leave out symlinks that point outside the tree (absolute, or
    /// climbing above DEST with ..), as rsync's --safe-links: not made,
    /// and what DEST has under their names is left as it is.
    #[arg(long)]
    pub safe_links: bool,
    /// Copy each symlink as what it points to (a file, or a directory
    /// with all it holds), as rsync's -L. A link is followed on the
    /// mirrors as listed there, never above their root: one whose target
    /// is absolute or climbs above it, leads back into a directory it is
    /// in, or points at nothing is named and not copied (exit 5).
    #[arg(long = "copy-links", short = 'L')]
    pub copy_links: bool,
    /// Copy the symlinks pointing outside the tree (absolute, or climbing
    /// above SRC) as what they point to, the others as symlinks (rsync's).
    #[arg(long)]
    pub copy_unsafe_links: bool,
}

impl Links {
    /// Which symlinks are copied as what they point to (`-L` takes them all).
    pub fn follow(&self) -> Follow {
        match (self.copy_links, self.copy_unsafe_links) {
            (true, _) => Follow::All,
            (false, true) => Follow::Unsafe,
            (false, false) => Follow::No,
        }
    }

    /// The flags given, as a push passes them to its remote end.
    pub fn flags(&self) -> impl Iterator<Item = &'static str> {
        [(self.safe_links, "--safe-links"), (self.copy_links, "-L"), (self.copy_unsafe_links, "--copy-unsafe-links")]
            .into_iter()
            .filter_map(|(on, flag)| on.then_some(flag))
    }
}
