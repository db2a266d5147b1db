//! `ddftp archive SRC --mirrors A,B,... --dest DIR`: a tree from k mirrors.

use std::path::{Path, PathBuf};

use clap::Args;
use ddftp_proto::units::parse_size;

use super::flags::MoveOpt;
use super::outcome::{exit_for, json_failure};
use super::{report_error, runtime, Exit};
use ddftp::archive::filter::{Filter, RuleSpec};
use ddftp::archive::{self, ArchiveError, ArchiveSpec};
use ddftp::progress::terminal_safe;

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
    #[arg(long)]
    pub delete: bool,
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
    /// One rule as rsync writes it: `- PATTERN`, `+ PATTERN`, `exclude
    /// PATTERN`, `include PATTERN` (repeatable, in order with the others).
    #[arg(long, short = 'f', value_name = "RULE", allow_hyphen_values = true)]
    pub filter: Vec<String>,
    /// rsync's -F: each directory's .rsync-filter file adds its rules
    /// (`- PATTERN`, `+ PATTERN`, `!`) for what is below it, where -F
    /// stands among the other rules (`-f 'dir-merge /.rsync-filter'`);
    /// twice (-FF), the .rsync-filter files are not copied.
    #[arg(short = 'F', action = clap::ArgAction::Count)]
    pub merge_filter: u8,
    /// Copy only the entries this file names (paths below SRC, one a
    /// line; `#` and `;` start comments), and the directories on their
    /// way: rsync's --files-from (a directory named is made, not entered).
    #[arg(long, value_name = "FILE", conflicts_with = "delete")]
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
    /// Move a changed file whole (rsync's -W). By default a file DEST
    /// holds an older version of is updated: the chunks it holds are
    /// copied from it, only the rest moves (its own transfer, after the
    /// tree's).
    #[arg(long, short = 'W')]
    pub whole_file: bool,
    /// With --delete, delete at most N entries (those rsync would); the
    /// others SRC no longer has stay, are counted, and the exit code is 25.
    #[arg(long, value_name = "N", requires = "delete")]
    pub max_delete: Option<u64>,
    /// Move what a run replaces or deletes into DIR (relative: below
    /// DEST, and never deleted; absolute: on DEST's filesystem), under
    /// its path, instead of losing it.
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
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
    #[arg(long, hide = true, value_parser = parse_size, default_value_t = archive::PART_BYTES)]
    pub part_bytes: u64,
}

fn exit_for_archive(e: &ArchiveError) -> Exit {
    match e {
        ArchiveError::List(_) | ArchiveError::BadEntry { .. } => Exit::Usage,
        ArchiveError::Walk { untrusted: true, .. } => Exit::Tls,
        ArchiveError::Walk { .. } | ArchiveError::NoBundle { .. } | ArchiveError::Rank { .. } => Exit::Transfer,
        ArchiveError::Local { .. } => Exit::Local,
        ArchiveError::Transfer(t) => exit_for(t),
    }
}

/// The filter rules in command-line order (clap keeps each flag's values
/// apart; their indices say how they interleave).
fn rules(o: &ArchiveOpt, m: Option<&clap::ArgMatches>) -> Vec<RuleSpec> {
    let mut tagged: Vec<(usize, RuleSpec)> = vec![];
    let at = |id: &str, n: usize| -> Vec<usize> {
        m.and_then(|m| m.indices_of(id)).map_or_else(|| (0..n).collect(), |i| i.collect())
    };
    for (i, p) in at("exclude", o.exclude.len()).into_iter().zip(&o.exclude) {
        tagged.push((i, RuleSpec::Exclude(p.clone())));
    }
    for (i, p) in at("include", o.include.len()).into_iter().zip(&o.include) {
        tagged.push((i, RuleSpec::Include(p.clone())));
    }
    for (i, p) in at("exclude_from", o.exclude_from.len()).into_iter().zip(&o.exclude_from) {
        tagged.push((i, RuleSpec::From(p.clone())));
    }
    for (i, p) in at("include_from", o.include_from.len()).into_iter().zip(&o.include_from) {
        tagged.push((i, RuleSpec::IncludeFrom(p.clone())));
    }
    for (i, r) in at("filter", o.filter.len()).into_iter().zip(&o.filter) {
        tagged.push((i, RuleSpec::Rule(r.clone())));
    }
    // -F, then -FF: rsync's two rules (`-FF` in one word is one index).
    let merge = [RuleSpec::Rule("dir-merge /.rsync-filter".into()), RuleSpec::Exclude(".rsync-filter".into())];
    let places = at("merge_filter", usize::from(o.merge_filter));
    for (k, r) in merge.into_iter().take(usize::from(o.merge_filter)).enumerate() {
        tagged.push((places.get(k).or(places.last()).copied().unwrap_or_default(), r));
    }
    tagged.sort_by_key(|(i, _)| *i);
    tagged.into_iter().map(|(_, r)| r).collect()
}

/// rsync's form of the command line ([`super::rsync_form`]) applied to
/// the flags: DEST last, a `HOST:DIR` SRC as its ssh mirror.
fn rsync_form(o: &mut ArchiveOpt) -> Result<Option<ddftp::ssh::SshMirror>, String> {
    if o.session_stdin {
        o.moving.mirrors = vec![super::flags::Mirror::Pinned(pushed_from()?)];
        return Ok(None);
    }
    let e = super::rsync_form::ends_as(
        std::mem::take(&mut o.src),
        o.dest.as_deref(),
        !o.moving.mirrors.is_empty(),
        o.relative,
    )?;
    o.src = e.src;
    o.dest = Some(e.dest);
    o.dest_named = e.named;
    o.dest_may_be_file = e.may_be_file;
    if let Some(m) = e.mirror {
        o.moving.mirrors = vec![super::flags::Mirror::Ssh(m)];
    }
    Ok(e.push)
}

/// The suffix of backups, if any are made. As rsync: `~` in place,
/// nothing added in --backup-dir, unless --suffix says; --suffix alone
/// (no -b) makes no backups; an empty one in place is refused (the backup
/// would be the entry itself, replaced).
fn backup_suffix(o: &ArchiveOpt) -> Result<Option<String>, String> {
    Ok(match (o.backup || o.backup_dir.is_some(), &o.suffix, &o.backup_dir) {
        (false, ..) => None,
        (true, Some(s), None) if s.is_empty() => return Err("-b: --suffix cannot be empty without --backup-dir".into()),
        (true, Some(s), _) => Some(s.clone()),
        (true, None, None) => Some("~".into()),
        (true, None, Some(_)) => Some(String::new()),
    })
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

/// The flags the remote archive is given: those a push passes on, the
/// filter rules (`filter`, from every rule flag in its order) as `-f`
/// rules.
fn passed_on(o: &ArchiveOpt, filter: &Filter) -> Result<Vec<String>, String> {
    if o.list.is_some() {
        return Err("pushing takes no --list yet (its file is on this host)".into());
    }
    if o.relative {
        return Err("pushing takes no -R yet: push the directory the paths start from, with --files-from".into());
    }
    if o.files_from.is_some() && o.src.len() > 1 {
        return Err("--files-from takes one SRC, the directory its names start from (as rsync)".into());
    }
    if o.delete && o.src.len() > 1 {
        // Each SRC goes in a push of its own: each would delete what the
        // others put in DIR.
        return Err(
            "--delete with several SRCs pushed is not supported: push one SRC (a directory holding them)".into()
        );
    }
    let mut v: Vec<String> = vec![];
    for (on, flag) in [
        (o.dry_run, "-n"),
        (o.itemize, "-i"),
        (o.delete, "--delete"),
        (o.xattrs, "-X"),
        (o.hard_links, "-H"),
        (o.checksum, "-c"),
        (o.ignore_existing, "--ignore-existing"),
        (o.existing, "--existing"),
        (o.whole_file, "--whole-file"),
        (o.no_owner, "--no-owner"),
        (o.by_name, "--by-name"),
        (o.backup, "-b"),
        (o.moving.quiet, "-q"),
        (o.moving.json, "--json"),
        (o.stats_asked(), "--stats"),
    ] {
        if on {
            v.push(flag.into());
        }
    }
    v.extend(o.links.flags().map(String::from));
    if let Some(n) = o.max_delete {
        v.extend(["--max-delete".into(), n.to_string()]);
    }
    // -a's parts, if only some: as one flag (and --devices/--specials).
    if let Some(f) = o.keep.kept().ok().as_ref().and_then(super::rsync_keep::Keep::flag) {
        v.extend(f.split(' ').map(String::from));
    }
    // `--suffix=` may be empty: one word either way.
    if let Some(s) = &o.suffix {
        v.push(format!("--suffix={s}"));
    }
    if let Some(d) = &o.backup_dir {
        v.push(format!("--backup-dir={}", d.display()));
    }
    for rule in filter.words() {
        v.extend(["-f".into(), rule]);
    }
    // The list itself follows the serving end's line on standard input.
    if o.files_from.is_some() {
        v.extend(["--files-from".into(), "-".into()]);
        if o.from0 {
            v.push("-0".into());
        }
    }
    Ok(v)
}

/// The serving end of a push, from the line on standard input: at the
/// address the ssh client came from (`SSH_CONNECTION`).
fn pushed_from() -> Result<ddftp::session::Peer, String> {
    let from = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().next().map(String::from))
        .ok_or("--session-stdin is for a push over ssh (SSH_CONNECTION is not set)")?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::Read::take(std::io::stdin().lock(), 1024), &mut line)
        .map_err(|e| format!("reading the pushing end's line: {e}"))?;
    let line = line.replacen(&format!("{} - ", ddftp::ssh::GREETING), &format!("{} {from} ", ddftp::ssh::GREETING), 1);
    let a = ddftp::ssh::parse_announce(&line).map_err(|e| format!("the pushing end: {e}"))?;
    Ok(ddftp::ssh::peer(a, format!("ssh push from {from}")))
}

impl ArchiveOpt {
    /// rsync's stats block, by `--stats` or `--info=stats`.
    fn stats_asked(&self) -> bool {
        self.stats || self.info.is_some_and(|i| i.stats)
    }

    /// DEST (set by the time the archive starts: `--dest`, or the last
    /// argument).
    fn dest(&self) -> &Path {
        self.dest.as_deref().unwrap_or(Path::new(""))
    }
}

/// `verbose`: the global `-v` count; as with rsync, `-v` lists what a run
/// changes too (here in the `-i` lines).
pub fn run(mut o: ArchiveOpt, matches: Option<&clap::ArgMatches>, verbose: u8) -> Exit {
    let kept = match o.keep.kept() {
        Ok(k) => k,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    match rsync_form(&mut o) {
        Ok(Some(to)) => {
            // The rules in their order, read here (the files are this
            // host's): the remote end is given each as one -f rule.
            let flags =
                match Filter::new(&rules(&o, matches)).map_err(|e| e.to_string()).and_then(|f| passed_on(&o, &f)) {
                    Ok(f) => f,
                    Err(e) => {
                        report_error(&e);
                        return Exit::Usage;
                    }
                };
            let list = match o.files_from.as_ref().map(|p| super::rsync_names::read_list(p)).transpose() {
                Ok(l) => l,
                Err(e) => {
                    report_error(&e);
                    return Exit::Usage;
                }
            };
            let how = super::push::How {
                flags,
                list,
                rsh: &o.moving.rsh,
                remote_ddftp: &o.moving.remote_ddftp,
                via_ssh: o.moving.via_ssh,
            };
            return super::push::run_each(&o.src, &to, &how);
        }
        Ok(None) => {}
        Err(e) => {
            report_error(&e);
            if o.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, serde_json::json!({ "src": o.src.join(" ") })));
            }
            return Exit::Usage;
        }
    }
    let spec = o.moving.spec(String::new(), o.dest().to_path_buf(), o.sync).and_then(|g| match g.http.first() {
        Some(url) => {
            Err(format!("{url}: archive takes ddftpd mirrors only (an HTTP mirror serves single files: ddftp get)"))
        }
        None if g.mirrors.is_empty() => Err("no mirrors: give --mirrors A,B,...".into()),
        None => Ok(ddftp::transfer::GetSpec { share: o.sharing.peers(false)?, delta: !o.whole_file, ..g }),
    });
    let get = match spec {
        Ok(g) => g,
        Err(e) => {
            report_error(&e);
            let exit = super::ssh::setup_exit(&e);
            if o.moving.json {
                println!("{}", json_failure(&e, exit, serde_json::json!({ "src": o.src.join(" ") })));
            }
            return exit;
        }
    };
    let filter = match Filter::new(&rules(&o, matches)) {
        Ok(f) => f,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let backup_suffix = match backup_suffix(&o) {
        Ok(s) => s,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let naming = super::rsync_names::Naming {
        files_from: o.files_from.as_ref(),
        from0: o.from0,
        session_stdin: o.session_stdin,
        relative: o.relative,
        recursive: o.keep.recursive,
    };
    let mut src = std::mem::take(&mut o.src);
    let named = super::rsync_names::files_from(&naming, &mut src);
    o.src = src;
    let files_from = match named {
        Ok(f) => f,
        Err(e) => {
            report_error(&e);
            if o.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, serde_json::json!({ "src": o.src.join(" ") })));
            }
            return Exit::Usage;
        }
    };
    let spec = archive_spec(&o, Parsed { get, filter, backup_suffix, files_from, kept }, verbose);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let mode = match o.sharing.mode() {
        Ok(m) => m,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    if !matches!(mode, super::share::Mode::Alone) {
        return match o.sharing.tls(&o.moving.tls) {
            Ok(tls) => sharing(&o, spec, (&mode, &tls), &rt),
            Err(e) => {
                report_error(&e);
                Exit::Usage
            }
        };
    }
    // Under mpirun every rank is a mover; rank 0 leads (and reports).
    #[cfg(feature = "mpi")]
    let job = match ddtree::walk::mpi::launched_by_mpi().then(archive::ranks::Job::init) {
        Some(None) => {
            report_error(&"MPI could not be initialised (is this mpirun's OpenMPI?)");
            return Exit::Local;
        }
        Some(Some(job)) if job.rank() != 0 => return follow(&spec, &job, &rt),
        job => job.flatten(),
    };
    #[cfg(feature = "mpi")]
    let movers = job.as_ref().map_or(archive::Movers::One, archive::Movers::Ranks);
    #[cfg(not(feature = "mpi"))]
    let movers = archive::Movers::One;
    #[cfg(not(feature = "mpi"))]
    if ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"].iter().any(|v| std::env::var(v).is_ok_and(|n| n != "1")) {
        // Each rank would copy the whole tree into DEST beside the others.
        report_error(&"this ddftp was built without MPI, and under mpirun every rank would copy the whole tree: build it with `cargo build --release -p ddftp-cli --features mpi`, or run it without mpirun");
        return Exit::Usage;
    }
    let mut bar = o.moving.bar();
    let result = rt.block_on(archive::archive_by(&spec, movers, &mut bar));
    #[cfg(feature = "mpi")]
    if let Some(job) = &job {
        job.release();
    }
    finished(&o, result, bar, true)
}

/// What `run` read and checked of the options, beside them.
struct Parsed {
    get: ddftp::transfer::GetSpec,
    filter: Filter,
    backup_suffix: Option<String>,
    files_from: Option<ddtree::files_from::FilesFrom>,
    kept: archive::kept::Kept,
}

/// The options as the engine's spec.
fn archive_spec(o: &ArchiveOpt, parsed: Parsed, verbose: u8) -> ArchiveSpec {
    let Parsed { get, filter, backup_suffix, files_from, kept } = parsed;
    ArchiveSpec {
        files_from,
        kept,
        ignore_existing: o.ignore_existing,
        safe_links: o.links.safe_links,
        follow: o.links.follow(),
        existing: o.existing,
        file_to_parent: o.dest_named,
        file_to_name: o.dest_may_be_file,
        max_delete: o.max_delete,
        backup_dir: o.backup_dir.clone(),
        backup_suffix,
        file_src: false,
        filter,
        dry_run: o.dry_run,
        itemize: o.itemize || verbose > 0,
        delete: o.delete,
        // SAFETY: geteuid cannot fail.
        owners: !o.no_owner && unsafe { libc::geteuid() } == 0,
        by_name: o.by_name,
        xattrs: o.xattrs,
        hard_links: o.hard_links,
        checksum: o.checksum,
        src: o.src[0].clone(),
        more_src: o.src[1..].to_vec(),
        dest: o.dest().to_path_buf(),
        list: o.list.clone(),
        strip: o.strip.clone(),
        part_bytes: o.part_bytes,
        get,
    }
}

/// `--peers`, `--share`: the tree onto every receiver, each serving what
/// it has verified to the others (the whole list one range on each).
fn sharing(
    o: &ArchiveOpt,
    mut spec: ArchiveSpec,
    (mode, tls): (&super::share::Mode, &super::share::PeerTls),
    rt: &tokio::runtime::Runtime,
) -> Exit {
    let mut bar = o.moving.bar();
    let (result, server) = rt.block_on(async {
        let server = match super::share::start(&mut spec.get, mode, tls).await {
            Ok(s) => s,
            Err(e) => return (Err(ArchiveError::Transfer(ddftp::transfer::TransferError::Share(e))), None),
        };
        let r = archive::archive_by(&spec, archive::Movers::One, &mut bar).await;
        (r, super::share::serve_on(mode, server))
    });
    // Under mpirun rank 0 reports for every rank.
    let ranks = mode.is_ranks();
    let transfer = result.as_ref().ok().and_then(|r| r.transfer.clone());
    let exit = finished(o, result, bar, !ranks);
    mode.report(exit, transfer.as_ref(), &o.moving);
    if let Some(s) = server {
        rt.block_on(s.linger());
    }
    exit
}

/// Reports a run's end (its summary if `summary`) and its exit code.
fn finished(
    o: &ArchiveOpt,
    result: Result<archive::ArchiveReport, ArchiveError>,
    mut bar: ddftp::progress::Bar,
    summary: bool,
) -> Exit {
    // The bar (a dry run's, a failed run's) is gone before anything is printed.
    ddftp::transfer::Progress::finish(&mut bar);
    let exit = match &result {
        Ok(r) => archived(o, r, summary, bar.warnings()),
        Err(e) => {
            report_error(e);
            let exit = exit_for_archive(e);
            if o.moving.json {
                let known = serde_json::json!({
                    "src": o.src.join(" "),
                    "dest": o.dest().display().to_string(),
                    "warnings": bar.warnings(),
                });
                println!("{}", json_failure(e, exit, known));
            }
            exit
        }
    };
    if let Some(f) = &o.moving.metrics_file {
        super::metrics_file::write_or_warn(
            f,
            &super::metrics_file::archive_page(&o.src.join(" "), exit, result.as_ref().ok()),
        );
    }
    exit
}

/// What a finished archive says (stdout, stderr) and its exit code.
fn archived(o: &ArchiveOpt, r: &archive::ArchiveReport, summary: bool, warnings: &[String]) -> Exit {
    let held = r.dry_run.as_ref().map_or(r.deletions_skipped, |p| p.deletions_skipped);
    let exit = match (r.failed.is_empty(), held) {
        (true, 0) => Exit::Ok,
        // As rsync: deletions held back are exit 25, failed entries 5 (23 in rsync).
        (true, _) => Exit::MaxDelete,
        (false, _) => Exit::Partial,
    };
    if !summary {
    } else if o.moving.json {
        let mut v = serde_json::to_value(r).expect("report serialises");
        v["exit_code"] = serde_json::json!(exit as i32);
        v["warnings"] = serde_json::json!(warnings);
        println!("{v}");
    } else if !o.moving.quiet || r.dry_run.is_some() {
        // A dry run's lines are its output, --quiet or not.
        let _ = super::archive_summary::print(r, &mut std::io::stdout());
        if o.stats_asked() && !o.moving.quiet {
            let _ = super::rsync_stats::print(r, &mut std::io::stdout());
        }
    } else {
        // So are the changes asked for with -i.
        for l in &r.changes {
            println!("{l}");
        }
    }
    if held > 0 {
        report_error(&format!(
            "--max-delete {}: {held} entries SRC no longer has were not deleted (raise it, or delete them yourself)",
            o.max_delete.unwrap_or_default()
        ));
    }
    if !r.failed.is_empty() {
        // Named on stderr too, whatever was asked for on stdout.
        for f in &r.failed {
            eprintln!("ddftp: error: not copied: {}", terminal_safe(&format!("{}: {}", f.path, f.why)));
        }
        report_error(&format!("{} entries could not be copied; everything else was", r.failed.len()));
    }
    exit
}

/// A rank of an MPI job but the lead: it moves what the lead deals it and
/// says only what went wrong (the lead reports).
#[cfg(feature = "mpi")]
fn follow(spec: &ArchiveSpec, job: &archive::ranks::Job, rt: &tokio::runtime::Runtime) -> Exit {
    match rt.block_on(archive::ranks::follow(spec, job)) {
        Ok(()) => Exit::Ok,
        Err(archive::ranks::Stopped::Part(e)) => {
            report_error(&format_args!("{}: {e}", job.name()));
            exit_for_archive(&e)
        }
        Err(archive::ranks::Stopped::Setup(e)) => {
            report_error(&format_args!("{}: {e}", job.name()));
            job.abort(exit_for_archive(&e) as i32)
        }
    }
}
