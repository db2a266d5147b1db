//! `ddftp archive`'s flags: rsync's words where ddftp has the same
//! concept (docs/habits.md), and what the parsed flags say.

use std::path::{Path, PathBuf};

use clap::Args;
use ddftp_proto::units::parse_size;

use super::flags::MoveOpt;

/// Copy a tree from several mirrors at once: the files as one range, moved
/// from both ends by pairs of mirrors; directories, symlinks, modes, mtimes.
///
/// Under mpirun (ddftp built with --features mpi) every rank is a mover on
/// its own node, all writing into one DEST they share: see docs/archive.md.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp archive data/run3 -m mirror1,mirror2 --dest /scratch/run3
  ddftp archive alice@site-a:/data/run3 /scratch     (over ssh, rsync's form: /scratch/run3)
  ddftp archive data -m m1,m2 --dest /backup/data --delete -n    (what a sync would change)
  ddftp archive data -m m1,m2 --dest /backup/data --delete -i --backup-dir .replaced
  ddftp archive data -m m1,m2 --dest /scratch/sel --files-from wanted.txt
  mpirun -n 4 ddftp archive data -m m1,m2,m3 --dest /lustre/data  (built with --features mpi)
Docs: man ddftp-archive; docs/archive.md")]
#[command(group(clap::ArgGroup::new("deleting").multiple(true)))]
pub struct ArchiveOpt {
    /// The directory on the mirrors, relative to their --root (`.` for
    /// all), or a file. Several: merged into DEST in order, as
    /// `rsync -a A/ B/ DEST/` (a name the first has, it gives).
    #[arg(required = true, num_args = 1..)]
    pub src: Vec<String>,
    /// The remote end of a push: the serving end's line comes on
    /// standard input (`ddftp archive SRC HOST:DIR` runs this over ssh).
    #[arg(long, hide = true)]
    pub session_stdin: bool,
    /// rsync's `HOST:DIR/NAME DEST` added NAME to DEST (see `rsync_form`).
    #[arg(skip)]
    pub dest_named: bool,
    /// DEST came last, rsync's way: a file SRC may be copied to it as a
    /// new name (see `rsync_form`).
    #[arg(skip)]
    pub dest_may_be_file: bool,
    /// Where the tree is recreated (SRC's content goes directly inside).
    /// Without it, the last argument is DEST (rsync's form: `ddftp archive
    /// [USER@]HOST:DIR DEST` copies DIR from HOST over ssh into DEST/DIR).
    #[arg(long, short = 'd')]
    pub dest: Option<PathBuf>,
    /// Move the entries of this list (ddftp's, or mpifileutils' v4 as
    /// `dwalk --output` writes) instead of asking a mirror to walk SRC.
    #[arg(long, value_name = "LIST")]
    pub list: Option<PathBuf>,
    /// Remove this prefix from the listed paths so they name paths under
    /// the mirrors' root (dwalk lists hold absolute paths).
    #[arg(long, value_name = "PREFIX", requires = "list")]
    pub strip: Option<String>,
    #[command(flatten)]
    pub moving: MoveOpt,
    #[command(flatten)]
    pub sharing: super::share::ShareOpt,
    /// fsync every file before modes and mtimes are set.
    #[arg(long)]
    pub sync: bool,
    /// Change nothing: print what would be done, one line per entry
    /// (rsync's --itemize-changes letters), and the totals (--json).
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print each change made, one line each in rsync's --itemize-changes
    /// letters, the lines a dry run prints (the list is taken whole before
    /// anything moves, as for a rerun). -v prints them too.
    #[arg(long = "itemize-changes", short = 'i')]
    pub itemize: bool,
    /// Remove what DEST has below SRC's directories that SRC no longer
    /// has (never what --exclude protects; nothing if SRC could not be
    /// read whole).
    #[arg(long, group = "deleting")]
    pub delete: bool,
    /// --delete, and what the rules exclude goes from DEST too (rules
    /// then speak to SRC only; `-f 'P PATTERN'` still protects).
    #[arg(long, group = "deleting")]
    pub delete_excluded: bool,
    /// Leave out entries matching this pattern (repeatable; the first
    /// matching rule wins), as rsync reads it: a leading `/` anchors it at
    /// SRC, any other matches at any depth; `**` matches across
    /// directories; a trailing `/` matches directories only.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Keep entries matching this pattern even if a later --exclude would
    /// leave them out (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Rules from a file: `- PATTERN` (or a bare pattern) excludes,
    /// `+ PATTERN` includes; `#` comments.
    #[arg(long, value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,
    /// Rules from a file, a bare pattern including (rsync's).
    #[arg(long, value_name = "FILE")]
    pub include_from: Vec<PathBuf>,
    /// One rule as rsync writes it (repeatable, in order with the others):
    /// `- PATTERN`, `+ PATTERN`, `H`/`S` (hide, show: what is copied),
    /// `P`/`R` (protect, risk: what --delete leaves), modifiers `!` `s` `r`
    /// `p`, `!` alone, `merge FILE`, `dir-merge NAME` (modifiers `-` `+`
    /// `n` `e` `w` `C`), `-C`.
    #[arg(long, short = 'f', value_name = "RULE", allow_hyphen_values = true)]
    pub filter: Vec<String>,
    /// rsync's -F: each directory's .rsync-filter file adds its rules
    /// (`- PATTERN`, `+ PATTERN`, `!`) for what is below it, where -F
    /// stands among the other rules (`-f 'dir-merge /.rsync-filter'`);
    /// twice (-FF), the .rsync-filter files are not copied.
    #[arg(short = 'F', action = clap::ArgAction::Count)]
    pub merge_filter: u8,
    /// rsync's -C: leave out what CVS ignores (RCS, CVS, .git/, *.o,
    /// core, *~ and the rest of CVS's list, the words of ~/.cvsignore and
    /// $CVSIGNORE, and in each directory what its .cvsignore names), after
    /// every other rule, as rsync: `-f ':C' -f '-C'` at the end.
    #[arg(long, short = 'C')]
    pub cvs_exclude: bool,
    /// Copy only the entries this file names (paths below SRC, one a
    /// line; `#` and `;` start comments), and the directories on their
    /// way: rsync's --files-from (a directory named is made, not entered).
    #[arg(long, value_name = "FILE", conflicts_with = "deleting")]
    pub files_from: Option<PathBuf>,
    /// Keep each SRC's path under DEST (rsync's -R): `a/b/c` lands in
    /// DEST/a/b/c, its directories made with the mirror's modes; a `/./`
    /// marks where the kept path starts (`a/./b/c`: DEST/b/c).
    #[arg(long, short = 'R')]
    pub relative: bool,
    /// The --files-from list is NUL-separated (`find -print0`).
    #[arg(long, short = '0', requires = "files_from")]
    pub from0: bool,
    /// Leave alone any entry (not a directory) DEST already has under its
    /// name, whatever it holds: only what is missing is copied.
    #[arg(long)]
    pub ignore_existing: bool,
    #[command(flatten)]
    pub links: super::rsync_links::Links,
    /// Update only what DEST already has under its name; make nothing new
    /// (no new file or directory), as rsync's --existing.
    #[arg(long, visible_alias = "ignore-non-existing")]
    pub existing: bool,
    /// Leave a file DEST holds with a later mtime than SRC's as it is
    /// (rsync's -u; directories, symlinks and a change of kind are not
    /// affected).
    #[arg(long, short = 'u')]
    pub update: bool,
    /// Take a file DEST holds at SRC's size as complete, whatever its
    /// time (then set), as rsync's --size-only (after another tool that
    /// did not keep times). Each file DEST has under its name is whole:
    /// ddftp puts one there only once it is.
    #[arg(long)]
    pub size_only: bool,
    #[command(flatten)]
    pub sizes: super::rsync_sizes::SizeFlags,
    /// Do not cross file systems (rsync's -x): a directory on another
    /// file system than SRC's (a mount point) is made, empty, and not
    /// entered; twice (-xx), mount points are left out too, as rsync's.
    #[arg(long, short = 'x', action = clap::ArgAction::Count)]
    pub one_file_system: u8,
    /// Take two mtimes up to N seconds apart as the same (rsync's; a FAT
    /// disk keeps times to 2 s: 1). 0, the default, compares whole
    /// seconds; -1 the nanoseconds too.
    #[arg(long, short = '@', value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
    pub modify_window: i64,
    /// Change each entry's permissions as chmod(1) would, as though SRC
    /// had them (rsync's): comma-separated items such as `u+rwx,go-w`,
    /// `Dg+s` (directories only), `F644` (files only), `o=u`; may be
    /// given again. Without -p (parts of -a alone) only what the run makes
    /// shows them.
    #[arg(long, value_name = "CHMOD")]
    pub chmod: Vec<String>,
    /// Move a changed file whole (rsync's -W). By default a file DEST
    /// holds an older version of is updated: the chunks it holds are
    /// copied from it, only the rest moves (its own transfer, after the
    /// tree's).
    #[arg(long, short = 'W')]
    pub whole_file: bool,
    /// With --delete, delete at most N entries (those rsync would); the
    /// others SRC no longer has stay, are counted, and the exit code is 25.
    #[arg(long, value_name = "N", requires = "deleting")]
    pub max_delete: Option<u64>,
    /// Move what a run replaces or deletes into DIR (relative: below
    /// DEST, and never deleted; absolute: on DEST's filesystem), under
    /// its path, instead of losing it.
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// A directory holding an earlier copy (rsync's; relative: to DEST;
    /// up to 20, tried in order): a file DEST lacks that is there as
    /// listed is hard-linked from it, not moved; one of the same content
    /// but other mode or owner is copied from it. Snapshots share what did
    /// not change.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["compare_dest", "copy_dest"])]
    pub link_dest: Vec<PathBuf>,
    /// As --link-dest, but what is there as listed stays out of DEST (a
    /// tree of what changed since DIR).
    #[arg(long, value_name = "DIR", conflicts_with = "copy_dest")]
    pub compare_dest: Vec<PathBuf>,
    /// As --link-dest, but what is there as listed is copied from it (a
    /// local copy, no network).
    #[arg(long, value_name = "DIR")]
    pub copy_dest: Vec<PathBuf>,
    /// Keep what a run replaces or deletes, renamed NAME~ beside it
    /// (rsync's -b; with --backup-dir, moved there). `--delete` leaves
    /// such backups, as rsync's.
    #[arg(short = 'b', long = "backup")]
    pub backup: bool,
    /// The suffix of -b's backups (default `~`; none in --backup-dir).
    #[arg(long, value_name = "SUFFIX", value_parser = parse_suffix)]
    pub suffix: Option<String>,
    /// Hard links: the names of a file hard-linked on the mirror are
    /// linked here too (rsync's -H); without it each is a copy of its own.
    #[arg(long = "hard-links", short = 'H')]
    pub hard_links: bool,
    #[command(flatten)]
    pub keep: super::rsync_keep::Keep,
    /// Extended attributes and ACLs too (as `rsync -AX`): the mirror
    /// lists them, they are set on every entry, and ones DEST has beyond
    /// them are removed.
    #[arg(long, short = 'X')]
    pub xattrs: bool,
    /// Compare contents, not size and mtime: a file of the listed size is
    /// moved again if its SHA-256 differs from the mirrors' (each such
    /// file read here whole, and by a mirror).
    #[arg(long, short = 'c')]
    pub checksum: bool,
    /// After the summary, rsync's --stats block (files, sizes, literal and
    /// matched data, bytes received, speedup).
    #[arg(long)]
    pub stats: bool,
    /// rsync's --info flags: progress2 (what ddftp shows anyway), stats.
    #[arg(long, value_name = "FLAGS", value_parser = super::rsync_stats::parse_info)]
    pub info: Option<super::rsync_stats::Info>,
    /// rsync's --progress (-P: with --partial): taken; ddftp shows the
    /// whole run's progress on a terminal anyway (rsync's progress2).
    #[arg(long, short = 'P')]
    pub progress: bool,
    /// rsync's --partial: taken; what a run cut short moved is always
    /// kept, and the next run takes it up (nothing of it moves again).
    #[arg(long)]
    pub partial: bool,
    /// rsync's -z: taken, and nothing compressed: the data goes over
    /// direct connections at the links' speed, where compressing costs
    /// more CPU per byte than it saves (docs/habits.md).
    #[arg(long, short = 'z')]
    pub compress: bool,
    /// Leave owners and groups alone (kept by default when run as root,
    /// by number, as `rsync --numeric-ids`).
    #[arg(long)]
    pub no_owner: bool,
    /// Owners and groups by name, as rsync without --numeric-ids: a name
    /// this machine knows takes its id here, others keep their number.
    #[arg(long, conflicts_with = "numeric_ids")]
    pub by_name: bool,
    /// Owners and groups by number (the default; accepted for rsync users).
    #[arg(long)]
    pub numeric_ids: bool,
    /// Bytes of files a part waits for while the mirror still walks (the
    /// tests set it low to get many parts).
    #[arg(long, hide = true, value_parser = parse_size, default_value_t = ddftp::archive::PART_BYTES)]
    pub part_bytes: u64,
}

/// `--suffix`: a name's ending, so no `/` (a backup stays beside its
/// entry), and not empty without `--backup-dir` (the backup would be the
/// entry itself).
fn parse_suffix(s: &str) -> Result<String, String> {
    match s {
        _ if s.contains('/') || s.contains('\0') => Err(format!("{s:?}: a suffix cannot hold / or NUL")),
        _ => Ok(s.to_string()),
    }
}

impl ArchiveOpt {
    /// rsync's stats block, by `--stats` or `--info=stats`.
    pub(super) fn stats_asked(&self) -> bool {
        self.stats || self.info.is_some_and(|i| i.stats)
    }

    /// DEST (set by the time the archive starts: `--dest`, or the last
    /// argument).
    pub(super) fn dest(&self) -> &Path {
        self.dest.as_deref().unwrap_or(Path::new(""))
    }
}
