//! `ddftp walk PATH`: the parallel tree walk, its totals and its list.

use ddtree::scratch::Landing;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::{report_error, Exit};
use ddtree::list::mfu::Spool;
use ddtree::walk::{self, Output, Report};

/// Walk a tree in parallel (DRQS), lstat every entry, and list it.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp walk /data -o data.list
  mpirun -n 8 ddftp walk /lustre/project --output-format mfu -o project.mfu
Docs: man ddftp-walk; docs/walk.md")]
pub struct WalkOpt {
    /// The directory to walk (symlinks are listed, never followed).
    pub path: PathBuf,
    /// Worker threads (default: one per CPU).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
    /// Write the list here (`-` for stdout).
    #[arg(long, short = 'o', value_name = "LIST")]
    pub output: Option<PathBuf>,
    /// The list's format: ddftp's (see docs/walk.md) or mpifileutils' v4.
    #[arg(long, value_enum, default_value_t = ListFormat::Ddftp)]
    pub output_format: ListFormat,
    /// Print one JSON object with the totals on stdout.
    #[arg(long)]
    pub json: bool,
    /// No human summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Ddftp,
    Mfu,
}

pub fn run(o: WalkOpt) -> Exit {
    let threads = o.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if threads == 0 {
        report_error(&"--threads must be at least 1");
        return Exit::Usage;
    }
    let to_stdout = o.output.as_deref() == Some(Path::new("-"));
    if to_stdout && o.json {
        report_error(&"--json and --output - both want stdout; write the list to a file");
        return Exit::Usage;
    }
    #[cfg(feature = "mpi")]
    if ddtree::walk::mpi::launched_by_mpi() {
        return run_mpi(&o, threads, to_stdout);
    }
    let (output, landing) = match open_output(o.output_format, o.output.as_deref(), to_stdout) {
        Ok(x) => x,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let opts = walk::Options { threads, on_error: Some(tell_user()), ..walk::Options::default() };
    let (report, output) = match walk::walk_with(&o.path, &opts, output) {
        Ok(x) => x,
        Err(e) => return failed(&e),
    };
    if let Err(e) = finish(output, landing) {
        report_error(&format_args!("writing the list: {e}"));
        return Exit::Local;
    }
    let exit = exit_for(&report);
    print_report(&o, &report, exit);
    exit
}

/// Reports a failed walk: a bad root is the caller's mistake (2), a list
/// that could not be written a local failure (4).
/// What the walk could not read, told on stderr as it goes (it goes on).
fn tell_user() -> walk::OnError {
    walk::OnError(std::sync::Arc::new(|path: &[u8], why: &str| {
        eprintln!("ddftp: walk: {}: {why}", String::from_utf8_lossy(path))
    }))
}

fn failed(e: &walk::WalkError) -> Exit {
    report_error(e);
    match e {
        walk::WalkError::Root { .. } => Exit::Usage,
        walk::WalkError::Output(_) => Exit::Local,
    }
}

/// Writes an mfu list from its spool (a ddftp list is written already)
/// and puts the list file in place.
fn finish(output: Output, landing: Option<Landing>) -> std::io::Result<()> {
    if let Output::Mfu(spool) = output {
        match &landing {
            Some(l) => l.create().and_then(|f| spool.finish(f))?,
            None => spool.finish(std::io::stdout().lock())?,
        }
    }
    landing.map_or(Ok(()), Landing::land)
}

/// `mpirun -n N ddftp walk`: H-DRQS across the ranks; rank r writes its
/// part of the list to `LIST.r` (with one rank, to LIST), rank 0 prints.
#[cfg(feature = "mpi")]
fn run_mpi(o: &WalkOpt, threads: usize, to_stdout: bool) -> Exit {
    use ddtree::walk::mpi::{self, Session};
    let Some(session) = Session::init() else {
        report_error(&"MPI could not be initialised");
        return Exit::Local;
    };
    let (rank, size) = (session.rank(), session.size());
    if to_stdout && size > 1 {
        if rank == 0 {
            report_error(&"under mpirun each rank writes its own list: give --output LIST (rank r writes LIST.r)");
        }
        return Exit::Usage;
    }
    let path = o.output.as_ref().map(|p| {
        if size > 1 {
            let mut name = p.as_os_str().to_os_string();
            name.push(format!(".{rank}"));
            PathBuf::from(name)
        } else {
            p.clone()
        }
    });
    let (output, landing) = match open_output(o.output_format, path.as_deref(), to_stdout) {
        Ok(x) => x,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let opts = walk::Options { threads, on_error: Some(tell_user()), ..walk::Options::default() };
    let (report, output) = match mpi::walk(&session, &o.path, &opts, output) {
        Ok(x) => x,
        Err(e) => return failed(&e),
    };
    if let Err(e) = finish(output, landing) {
        report_error(&format_args!("rank {rank}: writing the list: {e}"));
        return Exit::Local;
    }
    let all = session.combine(&report);
    let exit = exit_for(&all);
    if rank == 0 {
        print_report(o, &all, exit);
    }
    exit
}

fn exit_for(report: &Report) -> Exit {
    if report.totals.errors > 0 {
        eprintln!(
            "ddftp: walk: {} director{} or entr{} could not be read (listed above); everything else is listed",
            report.totals.errors,
            if report.totals.errors == 1 { "y" } else { "ies" },
            if report.totals.errors == 1 { "y" } else { "ies" },
        );
        return Exit::Transfer;
    }
    Exit::Ok
}

/// The output for the walk, and where its list file lands (None: stdout,
/// or no list).
fn open_output(format: ListFormat, path: Option<&Path>, to_stdout: bool) -> std::io::Result<(Output, Option<Landing>)> {
    let Some(path) = path else { return Ok((Output::None, None)) };
    if !to_stdout && path.is_dir() {
        let why = format!("{}: is a directory (LIST names the list file)", path.display());
        return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, why));
    }
    let landing = (!to_stdout).then(|| Landing::new(path));
    Ok(match (format, landing) {
        (ListFormat::Ddftp, None) => (Output::List(Box::new(std::io::stdout())), None),
        (ListFormat::Ddftp, Some(landing)) => {
            let f = landing.create()?;
            (Output::List(Box::new(f)), Some(landing))
        }
        (ListFormat::Mfu, landing) => {
            let dir = match landing.as_ref().and_then(|l| l.path().parent()) {
                Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
                Some(_) => PathBuf::from("."),
                None => std::env::temp_dir(),
            };
            let spool = Spool::new(&dir)
                .map_err(|e| std::io::Error::new(e.kind(), format!("scratch file in {}: {e}", dir.display())))?;
            (Output::Mfu(spool), landing)
        }
    })
}

fn print_report(o: &WalkOpt, r: &Report, exit: Exit) {
    let to_stdout = o.output.as_deref() == Some(Path::new("-"));
    if o.json {
        let mut v = serde_json::to_value(r).expect("report serializes");
        v["entries_per_second"] = serde_json::json!(r.totals.entries() as f64 / r.seconds.max(1e-9));
        v["threads"] = serde_json::json!(r.per_worker.len());
        v["exit_code"] = serde_json::json!(exit as i32);
        super::outcome::print_json(&v);
        return;
    }
    if o.quiet {
        return;
    }
    let t = &r.totals;
    let text = format!(
        "{} entries: {} dirs, {} files, {} links, {} other; {} bytes in files; {:.3} s, {:.0} entries/s\n\
         per worker: entries {:?}, dirs {:?}; {} work requests\n",
        t.entries(),
        t.dirs,
        t.files,
        t.links,
        t.others,
        t.bytes,
        r.seconds,
        t.entries() as f64 / r.seconds.max(1e-9),
        r.per_worker,
        r.per_worker_dirs,
        r.requests,
    );
    let _ = if to_stdout {
        std::io::stderr().write_all(text.as_bytes())
    } else {
        std::io::stdout().write_all(text.as_bytes())
    };
}
