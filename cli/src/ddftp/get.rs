//! `ddftp get PATH --mirrors A,B,... [-o OUT]`, `ddftp get URL URL...`,
//! `ddftp get --metalink F.meta4`: one file from k mirrors.

use std::path::{Path, PathBuf};

use clap::Args;
use ddftp_proto::units::HumanBytes;

use super::flags::{is_file_url, parse_checksum, parse_mirror, parse_window, Mirror, MoveOpt};
use super::outcome::{exit_for, json_failure};
use super::{report_error, runtime, Exit};
use ddftp::http::auth::decode as percent_decode;
use ddftp::metalink::{self, MetalinkFile};
use ddftp::transfer::{self, GetSpec, Sha256Checked, TransferError, TransferReport};

/// Default block size: large enough that per-block costs vanish at GB/s,
/// small enough that the last pair meets within milliseconds on slow links.
pub const DEFAULT_BLOCK_SIZE: u32 = 256 * 1024;

/// Download files from several mirrors at once (Dual-Direction Operations).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp get big.iso -m mirror1,mirror2 -o /data/big.iso
  ddftp get a.iso b.iso c.iso -m mirror1,mirror2 -d /data
  ddftp get -i files.txt -m mirror1,mirror2 -d /data        (aria2c's -i form)
  ddftp get https://a.example.org/big.iso https://b.example.org/pub/big.iso
  ddftp get --metalink big.iso.meta4
  ddftp get big.iso -m ddftps://mirror1 --ca-file ca.pem -o - | tar x
Docs: man ddftp-get; docs/get.md")]
#[derive(Clone)]
pub struct GetOpt {
    /// Path of the file on the mirrors (relative to their --root, or to a
    /// directory URL; with --mirrors, several PATHs are several files); or,
    /// without --mirrors, the file's URLs on several HTTP(S) servers
    /// (aria2 style).
    #[arg(value_name = "PATH... | URL...")]
    pub path: Vec<String>,
    /// Read the files to get from LIST (aria2c's input file: a file per
    /// line, its URLs separated by tabs or its path on --mirrors; options
    /// on the indented lines below: out=NAME, dir=DIR, checksum=sha-256=HEX).
    #[arg(short = 'i', long = "input-file", value_name = "LIST")]
    pub input_file: Option<PathBuf>,
    /// Put each output in DIR, under its own name.
    #[arg(short = 'd', long = "dir", value_name = "DIR", conflicts_with = "output")]
    pub dir: Option<PathBuf>,
    /// With several files: how many move at once.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A Metalink 4 file (.meta4, RFC 5854): the mirrors, size, SHA-256 and
    /// piece hashes come from it; every piece is verified as it arrives
    /// (aria2c's -M).
    #[arg(long, short = 'M', value_name = "FILE")]
    pub metalink: Option<PathBuf>,
    /// Accepted for wget's and curl's habit: an interrupted download always
    /// continues where it stopped (same command); --restart starts over.
    #[arg(short = 'c', long = "continue", conflicts_with = "restart")]
    pub continue_: bool,
    /// Accepted for curl's habit: the file is saved under its own name by
    /// default (in -d DIR if given).
    #[arg(short = 'O', long = "remote-name", conflicts_with = "output")]
    pub remote_name: bool,
    /// A SHA256SUMS-style listing (`HEX  NAME` lines) that gives the file's
    /// SHA-256; a mismatch discards the download and exits with 3.
    #[arg(long, value_name = "URL")]
    pub checksum_url: Option<String>,
    /// Where to write the file (default: its name, in the current
    /// directory); `-` writes it in order to standard output (nothing on
    /// disk, no resume; the report and progress go to stderr).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// With `-o -`: the most bytes held to put blocks back in order
    /// (the mirrors work inside a window this large that slides forward).
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_window)]
    pub window: u64,
    #[command(flatten)]
    pub moving: MoveOpt,
    /// fsync the file before it is put in place.
    #[arg(long)]
    pub sync: bool,
    /// Write OUT with O_DIRECT, past the page cache (as dcp --direct):
    /// no copy into the cache and no dirty pages left to write back, for
    /// data the host will not read again soon. Whole blocks only; where
    /// the file system refuses it, ddftp says so and writes as usual.
    #[arg(long)]
    pub direct: bool,
    /// Start over: discard the part file and resume journal of an earlier,
    /// interrupted run of the same download.
    #[arg(long)]
    pub restart: bool,
    /// Keep an OUT that holds another file: fail (exit 4) instead of
    /// replacing it. (An OUT that already holds this file, by size and
    /// SHA-256, is kept either way and nothing moves.)
    #[arg(long)]
    pub no_clobber: bool,
    /// Fetch the whole file even when OUT holds an older version (rsync's
    /// -W): by default the chunks OUT shares with the new version are
    /// copied from it and only the rest moves.
    #[arg(long, visible_alias = "whole-file", short = 'W')]
    pub no_delta: bool,
    /// A local file that may hold some of the new version (an older copy
    /// elsewhere, a similar image, as zsync's -i): its chunks the new
    /// version has are copied from it, after OUT's. May be given several
    /// times.
    #[arg(long, value_name = "FILE")]
    pub seed: Vec<PathBuf>,
    /// Move nothing: ask every mirror about the file and vote, then print
    /// each one's size, digest, round trip and whether it agrees (exit 0:
    /// all answer and agree; 3: some serve another version; 1: some did not
    /// answer).
    #[arg(long)]
    pub check: bool,
    /// Do not give OUT the mirror's modification time (it gets it by
    /// default, as with `curl -R` and wget).
    #[arg(long)]
    pub no_mtime: bool,
    /// The published digest the file must have: sha-256=HEX. A mismatch
    /// discards the download and exits with 3.
    #[arg(long, value_name = "sha-256=HEX", value_parser = parse_checksum)]
    pub checksum: Option<String>,
    /// `checksum` is a `-i` list entry's `checksum=` (set by the list).
    #[arg(skip)]
    pub checksum_listed: bool,
    /// Connect from these local addresses (e.g. one per NIC): every
    /// (mirror, address) pair is a producer of its own, so one mirror
    /// reached over two NICs works as a pair across them.
    #[arg(long, value_delimiter = ',', value_name = "ADDR,...")]
    pub bind: Vec<std::net::IpAddr>,
    /// Like --bind, naming interfaces (their first address, IPv4 first).
    #[arg(long, value_delimiter = ',', value_name = "IFACE,...")]
    pub nic: Vec<String>,
    #[command(flatten)]
    pub sharing: super::share::ShareOpt,
}

/// The result of a finished `get`, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
pub struct GetResult {
    #[serde(flatten)]
    pub transfer: TransferReport,
    pub mb_per_s: f64,
    /// 0: a result is a success (a failure's object has its own code).
    pub exit_code: i32,
}

impl GetOpt {
    /// `--bind` addresses, then those of `--nic` interfaces.
    fn binds(&self) -> Result<Vec<std::net::IpAddr>, String> {
        let mut binds = self.bind.clone();
        for n in &self.nic {
            binds.push(ddftp::nic::addresses(n).map_err(|e| e.to_string())?[0]);
        }
        Ok(binds)
    }

    pub fn spec(&self) -> Result<GetSpec, String> {
        let (path, urls, metalink) = self.what()?;
        // A ddftpd file's URLs are mirrors asked for the path they name.
        let (ddftpd, urls): (Vec<String>, Vec<String>) = urls.into_iter().partition(|u| !ddftp::http::is_url(u));
        let mut moving = self.moving.clone();
        for (i, u) in ddftpd.iter().enumerate() {
            moving.mirrors.insert(i, parse_mirror(u)?);
        }
        let output = match &self.output {
            Some(o) => o.clone(),
            None => {
                // Its last name, which must be one a file can have here (a
                // URL's `%00` decodes to a NUL), in -d DIR if given.
                let name =
                    Path::new(&path).file_name().filter(|n| ddftp_proto::relpath::check(n.as_encoded_bytes()).is_ok());
                let name =
                    name.ok_or_else(|| format!("{path:?} names no file that can be written here; give -o OUT"))?;
                self.dir.as_deref().unwrap_or(Path::new("")).join(name)
            }
        };
        let to_stdout = output.as_os_str() == "-";
        if to_stdout && self.direct {
            return Err("--direct writes OUT past the page cache: -o - has no file to write so".into());
        }
        if to_stdout && self.restart {
            return Err("-o - keeps nothing to resume from: --restart has nothing to discard".into());
        }
        if !to_stdout {
            let name = Path::new(&path).file_name().and_then(|n| n.to_str());
            check_output(&output, name)?;
        }
        if let Some(u) = &self.checksum_url {
            ddftp::http::HttpMirror::parse(u, "").map_err(|e| format!("--checksum-url: {e}"))?;
        }
        let mut spec = GetSpec {
            restart: self.restart,
            checksum: self.checksum.clone(),
            checksum_listed: self.checksum_listed,
            binds: self.binds()?,
            checksum_url: self.checksum_url.clone(),
            metalink,
            stdout: to_stdout.then_some(self.window),
            no_clobber: self.no_clobber,
            delta: !self.no_delta,
            seeds: self.seed.clone(),
            keep_mtime: !self.no_mtime,
            direct: self.direct,
            ..moving.spec(path, output, self.sync)?
        };
        spec.http.splice(0..0, urls);
        spec.share = self.sharing.peers(spec.stdout.is_some())?;
        if spec.mirrors.is_empty() && spec.http.is_empty() {
            return Err("no mirrors: give --mirrors A,B,..., the file's URLs, or --metalink F.meta4".into());
        }
        Ok(spec)
    }

    /// The file asked for, URLs of it given as arguments (or in the
    /// Metalink), and the Metalink's description of it.
    fn what(&self) -> Result<(String, Vec<String>, Option<MetalinkFile>), String> {
        if let Some(f) = &self.metalink {
            let shown = f.display();
            let xml = std::fs::read_to_string(f).map_err(|e| format!("--metalink {shown}: {e}"))?;
            let files = metalink::parse(&xml).map_err(|e| format!("--metalink {shown}: {e}"))?;
            let file = match (&self.path[..], &files[..]) {
                ([], [one]) => one.clone(),
                ([name], _) => files
                    .iter()
                    .find(|m| m.name == *name)
                    .cloned()
                    .ok_or_else(|| format!("--metalink {shown} lists no file {name:?}"))?,
                ([], _) => {
                    let names: Vec<&str> = files.iter().map(|m| m.name.as_str()).collect();
                    return Err(format!(
                        "--metalink {shown} lists {} files; name one: {}",
                        files.len(),
                        names.join(", ")
                    ));
                }
                _ => return Err("with --metalink, name at most one file (of those it lists)".into()),
            };
            for u in &file.urls {
                parse_mirror(u).map_err(|e| format!("--metalink {shown}: {e}"))?;
            }
            return Ok((file.name.clone(), file.urls.clone(), Some(file)));
        }
        match &self.path[..] {
            [] => Err("name the file: ddftp get PATH --mirrors A,B,... (or its URLs, or --metalink F.meta4)".into()),
            [one] if !is_file_url(one) => Ok((one.clone(), vec![], None)),
            urls => {
                if let Some(m) = forgotten_mirrors(urls, &self.moving.mirrors) {
                    return Err(format!(
                        "{m:?} is not a URL: if it is a mirror, give it with --mirrors: ddftp get {} --mirrors {m}",
                        urls.iter().filter(|u| **u != m).cloned().collect::<Vec<_>>().join(" ")
                    ));
                }
                for u in urls {
                    match parse_mirror(u) {
                        Ok(Mirror::Http(_)) if !u.ends_with('/') => {}
                        Ok(Mirror::Ddftpd(_, _, Some(p))) if !p.ends_with('/') => {}
                        Ok(_) if urls.len() == 1 => {
                            return Err(format!(
                                "{u:?} is a directory URL, which names no file: give the file's own URL, \
                                 or the file's path with it as a mirror (ddftp get PATH --mirrors {u})"
                            ))
                        }
                        Ok(_) => return Err(format!("{u:?}: with several arguments, each is the file's own URL")),
                        Err(e) => return Err(e),
                    }
                }
                let name = urls[0].split(['?', '#']).next().unwrap_or("").rsplit('/').next().unwrap_or("");
                Ok((percent_decode(name), urls.to_vec(), None))
            }
        }
    }
}

/// An argument that reads as a ddftpd's HOST:PORT among a command's
/// arguments without --mirrors (`get big.bin 127.0.0.1:7400`): the user
/// forgot `-m`.
fn forgotten_mirrors<'a>(args: &'a [String], mirrors: &[Mirror]) -> Option<&'a str> {
    if !mirrors.is_empty() || args.iter().all(|a| is_file_url(a)) {
        return None;
    }
    let hostport = |a: &str| {
        a.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    args.iter().map(String::as_str).find(|a| !is_file_url(a) && hostport(a))
}

/// Refuses, before a byte moves, an output that cannot be a downloaded
/// file: a directory, a name in a directory that is not there, or a device,
/// FIFO or socket (the data lands in `OUT.ddftp-part`, which is renamed
/// over `OUT` at the end: that would destroy a device, and blocks come in
/// no order a stream could take).
pub fn check_output(output: &Path, name: Option<&str>) -> Result<(), String> {
    let shown = output.display();
    if output.as_os_str().as_encoded_bytes().ends_with(b"/") || output.is_dir() {
        let dir = shown.to_string();
        let into = Path::new(dir.trim_end_matches('/')).join(name.unwrap_or("NAME"));
        return Err(format!("{shown} is a directory name; give the file's name in it: -o {}", into.display()));
    }
    if let Ok(m) = std::fs::metadata(output) {
        if !m.is_file() {
            let kind = transfer::file_kind(&m);
            return Err(format!(
                "{shown} is a {kind}: ddftp writes blocks as they come, anywhere in the file, into a regular \
                 file it puts in place at the end; give a file name (e.g. on /dev/shm to measure speed)"
            ));
        }
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("{} is not a directory, so {shown} cannot be written", dir.display())),
        Err(e) => Err(format!("directory {} for {shown}: {e}", dir.display())),
    }
}

/// Prints the human summary: totals, then one line per mirror.
pub fn print_summary(r: &GetResult, to: &mut dyn std::io::Write) -> std::io::Result<()> {
    let t = &r.transfer;
    if t.already_complete {
        return writeln!(
            to,
            "{} -> {}: already complete ({}, sha256 {} matches {}): nothing moved",
            t.path,
            t.output,
            HumanBytes(t.reused_bytes),
            t.sha256.as_deref().unwrap_or("?"),
            t.sha256_checked.source()
        );
    }
    writeln!(
        to,
        "{} -> {}: {} in {:.2} s ({}/s)\nsha256 {} ({}{})",
        t.path,
        t.output,
        HumanBytes(t.literal_bytes()),
        t.seconds,
        HumanBytes((r.mb_per_s * 1e6) as u64),
        t.sha256.as_deref().unwrap_or("not computed"),
        match t.sha256_checked {
            Sha256Checked::Nothing => {
                "NOT VERIFIED: HTTP mirrors gave no digest; pass --checksum sha-256=HEX or --checksum-url URL".into()
            }
            Sha256Checked::Sealed => "sealed blocks".into(),
            Sha256Checked::Mirrors if !t.sha256_computed => {
                "the mirrors' digest: every block matched their chunk manifest as it arrived".into()
            }
            c => format!("matches {}", c.source()),
        },
        if t.verified && t.sha256_computed { "; every block verified as it arrived" } else { "" }
    )?;
    if t.matched_bytes > 0 {
        // rsync --stats' words: what the old copy held, what moved.
        let moved = t.literal_bytes();
        writeln!(
            to,
            "delta: matched data {} (in the older copy), literal data {} (from the mirrors), speed-up {:.1}x",
            HumanBytes(t.matched_bytes),
            HumanBytes(moved),
            t.bytes as f64 / moved.max(1) as f64
        )?;
    }
    let resumed = t.resumed_bytes();
    if resumed > 0 {
        writeln!(
            to,
            "resumed: {} were already there from the interrupted run ({} in all)",
            HumanBytes(resumed),
            HumanBytes(t.bytes)
        )?;
    }
    writeln!(to, "  {:<28} {:>8} {:>12} {:>7}", "mirror", "blocks", "bytes", "share")?;
    for p in &t.producers {
        writeln!(
            to,
            "  {:<28} {:>8} {:>12} {:>6.1}%",
            p.mirror,
            p.blocks,
            HumanBytes(p.bytes).to_string(),
            100.0 * p.share
        )?;
    }
    if t.links.len() > t.producers.len() {
        writeln!(to, "  {:<40} {:>8} {:>12}", "route", "blocks", "bytes")?;
        for l in &t.links {
            writeln!(to, "  {:<40} {:>8} {:>12}", l.route, l.blocks, HumanBytes(l.bytes).to_string())?;
        }
    }
    writeln!(
        to,
        "  control messages: {} Start, {} Extend, {} End; duplicate bytes: {}",
        t.starts, t.extends, t.ends, t.duplicate_bytes
    )
}

/// `get --check`: the mirrors' answers and the vote, no data.
fn check(opt: &GetOpt, spec: &GetSpec, rt: &tokio::runtime::Runtime) -> Exit {
    let r = match rt.block_on(transfer::check(spec)) {
        Ok(r) => r,
        Err(e) => {
            report_error(&e);
            return exit_for(&e);
        }
    };
    let exit = match (r.all_agree(), r.some_silent()) {
        (true, _) => Exit::Ok,
        (false, true) if r.mirrors.iter().all(|m| m.agrees != Some(false)) => Exit::Transfer,
        _ => Exit::Integrity,
    };
    if opt.moving.json {
        let mut v = serde_json::to_value(&r).expect("report serialises");
        v["exit_code"] = serde_json::json!(exit as i32);
        println!("{v}");
    } else {
        let version = match (r.size, &r.sha256) {
            (Some(s), Some(h)) => format!("{} bytes, sha256 {h}", s),
            (Some(s), None) => format!("{s} bytes (no digest)"),
            _ => "no majority".to_string(),
        };
        println!("{}: {version}", r.path);
        for m in &r.mirrors {
            let verdict = match m.agrees {
                Some(true) => "agrees".to_string(),
                Some(false) => format!(
                    "DIFFERS ({} bytes, sha256 {})",
                    m.size.unwrap_or(0),
                    m.sha256.as_deref().map_or("not given", |h| &h[..h.len().min(16)])
                ),
                None => format!("no answer: {}", m.error.as_deref().unwrap_or("?")),
            };
            let rtt = m.rtt_ms.map_or(String::new(), |t| format!("  rtt {t:.1} ms"));
            println!("  {:<40} {verdict}{rtt}", m.mirror);
        }
    }
    exit
}

/// Runs a transfer.
pub async fn fetch(spec: &GetSpec, bar: &mut dyn transfer::Progress) -> Result<GetResult, TransferError> {
    let report = transfer::get(spec, bar).await?;
    // This run's speed: what the mirrors sent (an interrupted run's bytes
    // and an older copy's are not counted; the pieces of changed chunks are).
    let moved = report.literal_bytes();
    let mb_per_s = if report.seconds > 0.0 { moved as f64 / report.seconds / 1e6 } else { 0.0 };
    Ok(GetResult { transfer: report, mb_per_s, exit_code: 0 })
}

/// [`fetch`], serving what is verified meanwhile and after, while other
/// receivers take it (`--peers`, `--share`).
async fn fetch_sharing(
    mut spec: GetSpec,
    (mode, tls): (&super::share::Mode, &super::share::PeerTls),
    bar: &mut dyn transfer::Progress,
) -> (Result<GetResult, TransferError>, Option<super::share::ShareServer>) {
    let server = match super::share::start(&mut spec, mode, tls).await {
        Ok(s) => s,
        Err(e) => return (Err(TransferError::Share(e)), None),
    };
    let r = fetch(&spec, bar).await;
    (r, super::share::serve_on(mode, server))
}

/// `ddftp get` of one file (several: [`super::many`]).
pub fn run(opt: GetOpt) -> Exit {
    if let Some(d) = &opt.dir {
        // One file into DIR, under its own name (spec() names it).
        if let Err(e) = std::fs::create_dir_all(d) {
            report_error(&format_args!("-d {}: {e}", d.display()));
            return Exit::Local;
        }
    }
    let known = |warnings: &[String], e: Option<&TransferError>| {
        let spec = opt.spec().ok();
        let output = opt.output.clone().or_else(|| spec.as_ref().map(|s| s.output.clone()));
        // A string, as on success: the file asked for (its URLs' first when
        // the command could not even say which path that is).
        let path = spec.map(|s| s.path).or_else(|| opt.path.first().cloned()).unwrap_or_default();
        super::outcome::get_failure(&path, output.as_deref(), warnings, e)
    };
    let spec = match opt.spec() {
        Ok(s) => s,
        Err(e) => {
            report_error(&e);
            let exit = super::ssh::setup_exit(&e);
            if opt.moving.json {
                println!("{}", json_failure(&e, exit, known(&[], None)));
            }
            return exit;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    if opt.check {
        return check(&opt, &spec, &rt);
    }
    let mut bar = opt.moving.bar();
    // With `-o -` standard output is the file's: the report goes to stderr.
    let report = |text: &str| match spec.stdout {
        Some(_) => eprintln!("{text}"),
        None => println!("{text}"),
    };
    let mode = match opt.sharing.mode() {
        Ok(m) => m,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let tls = match opt.sharing.tls(&opt.moving.tls) {
        Ok(t) => t,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let (fetched, server) = rt.block_on(fetch_sharing(spec.clone(), (&mode, &tls), &mut bar));
    let (exit, done) = match fetched {
        // Rank 0 reports for every rank, below.
        Ok(r) if mode.is_ranks() => (Exit::Ok, Some(r)),
        Ok(r) => {
            if opt.moving.json {
                // With --json, stderr has warnings and errors only.
                report(&serde_json::to_string(&r).expect("report serialises"));
            } else if !opt.moving.quiet {
                let _ = match spec.stdout {
                    Some(_) => print_summary(&r, &mut std::io::stderr()),
                    None => print_summary(&r, &mut std::io::stdout()),
                };
            }
            (Exit::Ok, Some(r))
        }
        Err(e) => {
            report_error(&e);
            let exit = exit_for(&e);
            if opt.moving.json {
                report(&json_failure(&e, exit, known(bar.warnings(), Some(&e))).to_string());
            }
            (exit, None)
        }
    };
    mode.report(exit, done.as_ref().map(|d| &d.transfer), &opt.moving);
    if let Some(f) = &opt.moving.metrics_file {
        let what = done.as_ref().map_or_else(|| opt.path.join(" "), |r| r.transfer.path.clone());
        super::metrics_file::write_or_warn(
            f,
            &super::metrics_file::get_page(&what, exit, done.as_ref().map(|r| &r.transfer)),
        );
    }
    if let Some(s) = server {
        rt.block_on(s.linger());
    }
    exit
}
