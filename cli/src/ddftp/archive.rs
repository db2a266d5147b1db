//! `ddftp archive SRC --mirrors A,B,... --dest DIR`: a tree from k mirrors.

use super::outcome::{exit_for, json_failure};
use super::{report_error, runtime, Exit};
use ddftp::archive::filter::{Filter, RuleSpec};
use ddftp::archive::{self, ArchiveError, ArchiveSpec};
use ddftp::progress::terminal_safe;

pub use super::archive_opt::ArchiveOpt;

fn exit_for_archive(e: &ArchiveError) -> Exit {
    match e {
        ArchiveError::List(_) | ArchiveError::BadEntry { .. } => Exit::Usage,
        ArchiveError::Walk { untrusted: true, .. } => Exit::Tls,
        ArchiveError::Walk { .. } | ArchiveError::NoBundle { .. } | ArchiveError::Rank { .. } => Exit::Transfer,
        ArchiveError::Local { .. } => Exit::Local,
        ArchiveError::Transfer(t) => exit_for(t),
    }
}

/// `--link-dest`, `--compare-dest` or `--copy-dest` (clap keeps them
/// apart), as rsync takes them.
fn bases(o: &ArchiveOpt) -> Result<Option<archive::basis::Bases>, String> {
    use archive::basis::{Bases, BasisHow, MAX_BASES};
    let (how, dirs) = match (&o.link_dest, &o.compare_dest, &o.copy_dest) {
        (d, _, _) if !d.is_empty() => (BasisHow::Link, d),
        (_, d, _) if !d.is_empty() => (BasisHow::Compare, d),
        (_, _, d) if !d.is_empty() => (BasisHow::Copy, d),
        _ => return Ok(None),
    };
    if dirs.len() > MAX_BASES {
        return Err(format!("at most {MAX_BASES} {} args may be given (rsync's limit)", how.flag()));
    }
    if o.checksum {
        return Err(format!("{} with -c is not taken yet: give one of them", how.flag()));
    }
    Ok(Some(Bases { how, dirs: dirs.clone() }))
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
    let mut rules: Vec<RuleSpec> = tagged.into_iter().map(|(_, r)| r).collect();
    // rsync's -C: after every other rule, wherever it stands.
    if o.cvs_exclude {
        rules.extend([RuleSpec::Rule(":C".into()), RuleSpec::Rule("-C".into())]);
    }
    rules
}

/// rsync's form of the command line ([`super::rsync_form`]) applied to
/// the flags: DEST last, a `HOST:DIR` SRC as its ssh mirror.
fn rsync_form(o: &mut ArchiveOpt) -> Result<Option<ddftp::ssh::SshMirror>, String> {
    if o.session_stdin {
        o.moving.mirrors = vec![super::flags::Mirror::Pinned(super::push_flags::pushed_from()?)];
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

/// `archive SRC HOST:DIR`: pushed, the flags and rules passed on.
fn pushed(o: &ArchiveOpt, matches: Option<&clap::ArgMatches>, to: &ddftp::ssh::SshMirror) -> Exit {
    // The rules in their order, read here (the files are this
    // host's): the remote end is given each as one -f rule.
    let flags = match Filter::new(&rules(o, matches))
        .map_err(|e| e.to_string())
        .and_then(|f| super::push_flags::passed_on(o, &f))
    {
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
        relative: o.relative,
    };
    super::push::run_each(&o.src, to, &how)
}

/// `verbose`: the global `-v` count; as with rsync, `-v` lists what a run
/// changes too (here in the `-i` lines).
pub fn run(mut o: ArchiveOpt, matches: Option<&clap::ArgMatches>, verbose: u8) -> Exit {
    let mut chmod = archive::chmod::Chmod::default();
    if let Some(e) = o.chmod.iter().find_map(|c| chmod.add(c, archive::umask()).err()) {
        report_error(&e);
        return Exit::Usage;
    }
    let chown = match o.keep.owners() {
        Ok(c) => c,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let kept = match o.keep.kept().and_then(|k| match o.size_only && !k.times {
        true => Err("--size-only with parts of -a without -t is not supported: give -t too (or -a)".to_string()),
        false => Ok(k),
    }) {
        Ok(k) => k,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    match rsync_form(&mut o) {
        Ok(Some(to)) => return pushed(&o, matches, &to),
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
    let bases = match bases(&o) {
        Ok(b) => b,
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
    let spec = archive_spec(&o, Parsed { get, filter, backup_suffix, files_from, kept, chmod, chown, bases }, verbose);
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
    bases: Option<archive::basis::Bases>,
    filter: Filter,
    backup_suffix: Option<String>,
    files_from: Option<ddtree::files_from::FilesFrom>,
    kept: archive::kept::Kept,
    chmod: archive::chmod::Chmod,
    chown: archive::kept::Chown,
}

/// The options as the engine's spec.
fn archive_spec(o: &ArchiveOpt, parsed: Parsed, verbose: u8) -> ArchiveSpec {
    let Parsed { get, filter, backup_suffix, files_from, kept, chmod, chown, bases } = parsed;
    ArchiveSpec {
        bases,
        files_from,
        kept,
        chmod,
        chown,
        ignore_existing: o.ignore_existing,
        safe_links: o.links.safe_links,
        follow: o.links.follow(),
        existing: o.existing,
        update: o.update,
        size_only: o.size_only,
        sizes: o.sizes.sizes(),
        one_fs: o.one_file_system.min(2),
        modify_window: archive::Window(o.modify_window),
        file_to_parent: o.dest_named,
        file_to_name: o.dest_may_be_file,
        max_delete: o.max_delete,
        backup_dir: o.backup_dir.clone(),
        backup_suffix,
        file_src: false,
        filter,
        dry_run: o.dry_run,
        itemize: o.itemize || verbose > 0,
        delete: o.delete || o.delete_excluded,
        delete_excluded: o.delete_excluded,
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
