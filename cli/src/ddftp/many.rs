//! `ddftp get` of several files: `PATH...` with `--mirrors`, `-i LIST`
//! (aria2c's input file), or a Metalink that lists several. Each file is
//! a download of its own (the same rules, resume, verification, output
//! checks) over connections the files share (`ddftp::pool`); `-j` of
//! them run at once. One file that fails does not stop
//! the others: each is named with why, and the exit code says so (5: some
//! failed, all the others are complete; otherwise the failure's own).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ddftp::progress::{terminal_safe, Bar};
use ddftp::transfer::GetSpec;
use ddftp_proto::units::HumanBytes;

use super::get::{fetch, GetOpt, GetResult};
use super::outcome::{exit_for, json_failure};
use super::{report_error, runtime, Exit};

/// Whether the command asks for several files.
/// `ddftp get`: several files here, one in [`super::get::run`].
pub fn get(opt: GetOpt) -> Exit {
    match is_many(&opt) {
        Ok(true) => run(opt),
        Ok(false) => super::get::run(opt),
        Err(e) => {
            report_error(&e);
            if opt.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, serde_json::json!({})));
            }
            Exit::Usage
        }
    }
}

fn is_many(o: &GetOpt) -> Result<bool, String> {
    let many = o.input_file.is_some()
        || (!o.moving.mirrors.is_empty() && o.path.len() > 1)
        || (o.metalink.is_some() && o.path.is_empty() && metalink_names(o)?.len() > 1);
    match &o.output {
        // curl pairs each -o with a URL; one -o for several files would
        // put them all under one name (or none of them where asked).
        Some(out) if many => Err(format!(
            "-o {} names one output, and this command gets several files: use -d DIR (each file under its own name there){}",
            out.display(),
            if o.input_file.is_some() { ", or out=NAME below a list's entry" } else { "" }
        )),
        _ => Ok(many),
    }
}

fn metalink_names(o: &GetOpt) -> Result<Vec<String>, String> {
    let Some(f) = &o.metalink else { return Ok(vec![]) };
    let shown = f.display();
    let xml = std::fs::read_to_string(f).map_err(|e| format!("--metalink {shown}: {e}"))?;
    let files = ddftp::metalink::parse(&xml).map_err(|e| format!("--metalink {shown}: {e}"))?;
    Ok(files.into_iter().map(|m| m.name).collect())
}

/// One file to get: how it is named in messages, and its own options (or
/// why it cannot be fetched).
struct Job {
    label: String,
    opt: Result<GetOpt, String>,
    /// A list's `dir=` (and `out=`'s directories) below its base, made as
    /// the file starts, beneath the base (a symlink there is refused, not
    /// followed).
    below: Option<(PathBuf, String)>,
}

/// Where a list's entry goes below `-d` (or `.`): its `dir=` and the
/// directories of its `out=`, if any.
fn below_of(e: &ddftp::input_list::Entry) -> Option<String> {
    let out_dirs = e.out.as_deref().and_then(|o| o.rsplit_once('/')).map(|(d, _)| d);
    match (e.dir.as_deref(), out_dirs) {
        (Some(d), Some(o)) => Some(format!("{d}/{o}")),
        (Some(d), None) => Some(d.to_string()),
        (None, Some(o)) => Some(o.to_string()),
        (None, None) => None,
    }
}

/// A list's directory for one file (`dir=`, `out=`'s directories),
/// made beneath `-d` and held open while the file moves: the part file is
/// made, timed and renamed through the descriptor (`/proc/self/fd/N/NAME`),
/// so a directory on the way swapped for a symlink meanwhile (by a local
/// user who can write below `-d`) sends nothing elsewhere.
struct Held {
    _dir: std::os::fd::OwnedFd,
    /// The directory as the engine is given it, and as the user is shown it.
    via: String,
    shown: String,
}

impl Held {
    /// `base/sub` (relative without `..`), its missing directories made
    /// beneath `base` following no symlink.
    fn make(base: &Path, sub: &str) -> Result<Held, String> {
        use std::os::fd::AsRawFd;
        let shown = base.join(sub).display().to_string();
        let at = std::fs::File::open(base).map_err(|e| format!("{}: {e}", base.display()))?;
        let dir =
            ddtree::beneath::make_dirs(at.as_raw_fd(), sub.as_bytes(), 0o777).map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    format!("{shown}: a symlink or a file on the way (not followed)")
                }
                _ => format!("{shown}: {e}"),
            })?;
        let via = format!("/proc/self/fd/{}", dir.as_raw_fd());
        // Without /proc the directory is reached by its path again (it was
        // still made beneath `base`).
        let via = if Path::new(&via).is_dir() { via } else { shown.clone() };
        Ok(Held { _dir: dir, via, shown })
    }

    /// `name` in the held directory.
    fn output(&self, name: &std::ffi::OsStr) -> PathBuf {
        Path::new(&self.via).join(name)
    }

    /// `text` (a report's output, a message) with the directory as the user named it.
    fn show(&self, text: &str) -> String {
        text.replace(&format!("{}/", self.via), &format!("{}/", self.shown))
    }
}

/// The last name of a path or URL.
fn base_name(s: &str) -> &str {
    s.split(['?', '#']).next().unwrap_or(s).trim_end_matches('/').rsplit('/').next().unwrap_or(s)
}

/// `o` for one file: these sources, this output.
fn one(o: &GetOpt, sources: Vec<String>, out: Option<PathBuf>) -> GetOpt {
    let mut one = o.clone();
    one.path = sources;
    one.input_file = None;
    one.output = out;
    one.dir = None;
    one
}

/// Where a job's file lands, spelled one way (`.` and repeated `/` out).
fn landing(opt: &GetOpt) -> Option<PathBuf> {
    let out = match &opt.output {
        Some(o) => o.clone(),
        None => PathBuf::from(base_name(opt.path.first()?)),
    };
    Some(out.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect())
}

/// Two files of one command never share a final name: each would rename
/// its part file over the other's (the final name holding one file's bytes
/// under the other's report). The second and later are refused before
/// anything moves, naming the first (as aria2c refuses a second download
/// of the same file); the first goes ahead.
fn refuse_shared_outputs(jobs: &mut [Job]) {
    let mut taken: std::collections::HashMap<PathBuf, String> = Default::default();
    for job in jobs {
        let Some(out) = job.opt.as_ref().ok().and_then(landing) else { continue };
        match taken.get(&out) {
            Some(first) => {
                job.opt = Err(format!(
                    "its output {} is also {first}'s: not fetched (give it another out= or -d)",
                    out.display()
                ))
            }
            None => {
                taken.insert(out, job.label.clone());
            }
        }
    }
}

fn jobs(o: &GetOpt) -> Result<(Vec<Job>, Vec<String>), String> {
    let (mut jobs, warnings) = listed(o)?;
    refuse_shared_outputs(&mut jobs);
    Ok((jobs, warnings))
}

/// The files the command names, each with its options.
fn listed(o: &GetOpt) -> Result<(Vec<Job>, Vec<String>), String> {
    let under = |name: &str, dir: Option<&Path>| dir.map(|d| d.join(name));
    // DIR is the user's own path (followed as given, made as `mkdir -p`);
    // what a list puts below it is made beneath it.
    if let Some(d) = &o.dir {
        std::fs::create_dir_all(d).map_err(|e| format!("-d {}: {e}", d.display()))?;
    }
    if let Some(list) = &o.input_file {
        let text = std::fs::read_to_string(list).map_err(|e| format!("-i {}: {e}", list.display()))?;
        let (entries, warnings) = ddftp::input_list::parse(&text);
        let warnings = warnings.into_iter().map(|w| format!("-i {}: {w}", list.display())).collect();
        let jobs = entries
            .into_iter()
            .map(|e| {
                let label = e.sources.first().cloned().unwrap_or_default();
                let opt = (|| {
                    if let Some(why) = &e.bad {
                        return Err(why.clone());
                    }
                    let urls = e.sources.iter().filter(|s| super::flags::is_file_url(s)).count();
                    let mut one = match (urls, e.sources.len()) {
                        (0, 1) if o.moving.mirrors.is_empty() => {
                            return Err(format!("line {}: a path needs --mirrors to get it from", e.line))
                        }
                        (0, 1) => one(o, e.sources.clone(), None),
                        (n, m) if n == m => {
                            let mut one = one(o, e.sources.clone(), None);
                            one.moving.mirrors.clear();
                            one
                        }
                        _ => return Err(format!("line {}: one path on the mirrors, or URLs of one file", e.line)),
                    };
                    // Its directories are made as it starts (`Job::below`).
                    let dir = match (&o.dir, below_of(&e)) {
                        (d, Some(sub)) => Some(d.clone().unwrap_or_else(|| PathBuf::from(".")).join(sub)),
                        (Some(d), None) => Some(d.clone()),
                        (None, None) => None,
                    };
                    let name = match &e.out {
                        Some(out) => out.rsplit('/').next().unwrap_or(out).to_string(),
                        None => base_name(&e.sources[0]).to_string(),
                    };
                    one.output = Some(dir.map_or_else(|| PathBuf::from(&name), |d| d.join(&name)));
                    if let Some(c) = &e.checksum {
                        one.checksum =
                            Some(super::flags::parse_checksum(c).map_err(|w| format!("line {}: {w}", e.line))?);
                        one.checksum_listed = true;
                    }
                    Ok(one)
                })();
                let below = below_of(&e).map(|sub| (o.dir.clone().unwrap_or_else(|| PathBuf::from(".")), sub));
                Job { label, opt, below }
            })
            .collect();
        return Ok((jobs, warnings));
    }
    if o.metalink.is_some() && o.path.is_empty() {
        // A name with directories (RFC 5854 allows a relative path, checked
        // by the parser) lands in them, made beneath -d (or .), as aria2c
        // puts it.
        let base = o.dir.clone().unwrap_or_else(|| PathBuf::from("."));
        let jobs = metalink_names(o)?
            .into_iter()
            .map(|name| {
                let below = name.rsplit_once('/').map(|(d, _)| (base.clone(), d.to_string()));
                let out = match &below {
                    Some((b, d)) => Some(b.join(d).join(base_name(&name))),
                    None => under(base_name(&name), o.dir.as_deref()),
                };
                Job { label: name.clone(), opt: Ok(one(o, vec![name], out)), below }
            })
            .collect();
        return Ok((jobs, vec![]));
    }
    let jobs = o
        .path
        .iter()
        .map(|p| Job {
            label: p.clone(),
            opt: Ok(one(o, vec![p.clone()], under(base_name(p), o.dir.as_deref()))),
            below: None,
        })
        .collect();
    Ok((jobs, vec![]))
}

/// What one file's download came to: done, or why not, its exit code and
/// what its `--json` object says besides ([`super::outcome::get_failure`]).
enum Outcome {
    Done(Box<GetResult>),
    Failed(String, Exit, serde_json::Value),
}

pub fn run(o: GetOpt) -> Exit {
    let (jobs, warnings) = match jobs(&o) {
        Ok(j) => j,
        Err(e) => {
            report_error(&e);
            if o.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, serde_json::json!({ "files": [] })));
            }
            return Exit::Usage;
        }
    };
    for w in &warnings {
        eprintln!("ddftp: warning: {}", terminal_safe(w));
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let n = jobs.len();
    let every = std::time::Duration::from_secs_f64(o.moving.progress_interval);
    // One set of connections per mirror for the whole list: each file
    // running at once may hold two to a route (a virtual pair's second).
    let pool = Arc::new(ddftp::pool::Pool::new(2 * o.jobs.max(1)));
    let outcomes: Vec<(String, Outcome)> = rt.block_on(async {
        let turns = Arc::new(tokio::sync::Semaphore::new(o.jobs.max(1)));
        let mut running = vec![];
        for job in jobs {
            // Files start in the list's order (a turn is taken before the
            // file's task is made).
            let turn = turns.clone().acquire_owned().await.expect("the semaphore is never closed");
            let pool = pool.clone();
            running.push(tokio::spawn(async move {
                let _turn = turn;
                let out = job.opt.as_ref().ok().and_then(|o| o.output.clone());
                let known = |e: Option<&ddftp::transfer::TransferError>, warnings: &[String]| {
                    super::outcome::get_failure(&job.label, out.as_deref(), warnings, e)
                };
                let (mut opt, held) = match (job.opt.clone(), &job.below) {
                    (Ok(opt), Some((base, sub))) => match Held::make(base, sub) {
                        Ok(h) => (Ok(opt), Some(h)),
                        Err(e) => return (job.label.clone(), Outcome::Failed(e, Exit::Local, known(None, &[]))),
                    },
                    (opt, _) => (opt, None),
                };
                if let (Ok(o), Some(h)) = (&mut opt, &held) {
                    o.output = o.output.as_deref().and_then(Path::file_name).map(|n| h.output(n));
                }
                let show = |t: String| match &held {
                    Some(h) => h.show(&t),
                    None => t,
                };
                let spec = match opt.and_then(|opt| opt.spec()) {
                    Ok(s) => GetSpec { pool: Some(pool), ..s },
                    Err(e) => {
                        let exit = super::ssh::setup_exit(&e);
                        return (job.label.clone(), Outcome::Failed(show(e), exit, known(None, &[])));
                    }
                };
                // Each file's warnings go to stderr; no bar for many files.
                let mut bar = Bar::new(false, every);
                let got = fetch(&spec, &mut bar).await;
                let outcome = match got {
                    Ok(mut r) => {
                        r.transfer.output = show(std::mem::take(&mut r.transfer.output));
                        Outcome::Done(Box::new(r))
                    }
                    Err(e) => Outcome::Failed(show(e.to_string()), exit_for(&e), known(Some(&e), bar.warnings())),
                };
                (job.label.clone(), outcome)
            }));
        }
        let mut out = vec![];
        for r in running {
            out.push(r.await.expect("a download task"));
        }
        out
    });
    let failed: Vec<(&str, &String, Exit)> = outcomes
        .iter()
        .filter_map(|(l, o)| match o {
            Outcome::Failed(e, x, _) => Some((l.as_str(), e, *x)),
            Outcome::Done(_) => None,
        })
        .collect();
    let exit = match failed.first() {
        None => Exit::Ok,
        Some(_) if failed.len() < n => Exit::Partial,
        Some((_, _, x)) => *x,
    };
    for (label, why, _) in &failed {
        // A mirror's words and a list's names are escaped, passwords hidden.
        report_error(&format_args!("{label}: {why}"));
    }
    let done = n - failed.len();
    let bytes: u64 = outcomes
        .iter()
        .map(|(_, o)| match o {
            Outcome::Done(r) => r.transfer.bytes.saturating_sub(r.transfer.reused_bytes),
            Outcome::Failed(..) => 0,
        })
        .sum();
    // Files put in place with nothing to check them against (HTTP mirrors
    // without a digest): counted where the totals are, not only per file.
    let unverified = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Done(r) if r.transfer.sha256_checked == ddftp::transfer::Sha256Checked::Nothing))
        .count();
    let totals = Totals { n, done, failed: failed.len(), bytes, unverified, exit };
    if o.moving.json {
        print_json(&outcomes, &totals, &warnings);
    } else if !o.moving.quiet {
        print_summary(&outcomes, &totals);
    }
    if let Some(f) = &o.moving.metrics_file {
        let what = match &o.input_file {
            Some(list) => format!("-i {}", list.display()),
            None => o.path.join(" "),
        };
        super::metrics_file::write_or_warn(f, &super::metrics_file::many_page(&what, exit, done, failed.len(), bytes));
    }
    if !failed.is_empty() && failed.len() < n {
        report_error(&format!(
            "{} of {n} files could not be fetched (named above); the others are complete",
            failed.len()
        ));
    }
    exit
}

/// What several files came to, in numbers.
struct Totals {
    n: usize,
    done: usize,
    failed: usize,
    bytes: u64,
    /// Files put in place with nothing to check them against.
    unverified: usize,
    exit: Exit,
}

/// `--json`: one object with every file's (docs/json.md's "get several").
fn print_json(outcomes: &[(String, Outcome)], t: &Totals, warnings: &[String]) {
    let files: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|(_, o)| match o {
            Outcome::Done(r) => serde_json::to_value(r).expect("report serialises"),
            Outcome::Failed(e, x, known) => serde_json::from_str(&json_failure(e, *x, known.clone())).expect("json"),
        })
        .collect();
    let mut v = serde_json::json!({
        "files": files, "complete": t.done, "failed": t.failed, "bytes": t.bytes, "exit_code": t.exit as i32,
        "not_verified": t.unverified, "warnings": warnings,
    });
    super::outcome::hide_user_info(&mut v);
    println!("{v}");
}

/// The human summary: a line per file done, then the totals.
fn print_summary(outcomes: &[(String, Outcome)], t: &Totals) {
    for (_, outcome) in outcomes {
        if let Outcome::Done(r) = outcome {
            let f = &r.transfer;
            let what = if f.already_complete { "already complete".to_string() } else { format!("{:.2} s", f.seconds) };
            // Names from a Metalink or a list may hold terminal escapes.
            let (path, output) = (terminal_safe(&f.path), terminal_safe(&f.output));
            let not_verified = f.sha256_checked == ddftp::transfer::Sha256Checked::Nothing;
            let flag = if not_verified { ", NOT VERIFIED: no digest to check it against" } else { "" };
            println!("{path} -> {output}: {} ({what}){flag}", HumanBytes(f.bytes));
        }
    }
    let flag = match t.unverified {
        0 => String::new(),
        k => format!(
            "; {k} NOT VERIFIED (HTTP mirrors gave no digest: give checksum=sha-256=HEX in the list, or --checksum-url)"
        ),
    };
    println!("{} files: {} complete, {} failed; {} moved{flag}", t.n, t.done, t.failed, HumanBytes(t.bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names_of_paths_and_urls() {
        assert_eq!(base_name("data/x.iso"), "x.iso");
        assert_eq!(base_name("http://h/p/y.bin?sig=1#f"), "y.bin");
        assert_eq!(base_name("z"), "z");
    }
}
