//! `ddftp archive SRC --mirrors A,B,... --dest DIR`: a tree from k mirrors.

use std::path::PathBuf;

use clap::Args;
use ddftp_proto::units::{parse_size, HumanBytes};

use super::get::{exit_for, json_failure, MoveOpt};
use super::{report_error, runtime, Exit};
use crate::archive::{self, ArchiveError, ArchiveReport, ArchiveSpec};
use crate::progress::Bar;

/// Copy a tree from several mirrors at once: the files as one range, moved
/// from both ends by pairs of mirrors; directories, symlinks, modes, mtimes.
#[derive(Debug, Args)]
pub struct ArchiveOpt {
    /// The directory on the mirrors, relative to their --root (`.` for all).
    pub src: String,
    /// Where the tree is recreated (SRC's content goes directly inside).
    #[arg(long, short = 'd')]
    pub dest: PathBuf,
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
    /// fsync every file before modes and mtimes are set.
    #[arg(long)]
    pub sync: bool,
    /// Bytes of files a part waits for while the mirror still walks (the
    /// tests set it low to get many parts).
    #[arg(long, hide = true, value_parser = parse_size, default_value_t = archive::PART_BYTES)]
    pub part_bytes: u64,
}

fn exit_for_archive(e: &ArchiveError) -> Exit {
    match e {
        ArchiveError::List(_) | ArchiveError::BadEntry { .. } => Exit::Usage,
        ArchiveError::Walk { untrusted: true, .. } => Exit::Tls,
        ArchiveError::Walk { .. } | ArchiveError::NoBundle { .. } => Exit::Transfer,
        ArchiveError::Local { .. } => Exit::Local,
        ArchiveError::Transfer(t) => exit_for(t),
    }
}

fn print_summary(r: &ArchiveReport, to: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        to,
        "{} -> {}: {} files ({} moved, {} already complete), {} dirs, {} symlinks; {} moved in {:.2} s: {:.0} files/s, {:.1} MB/s",
        r.src,
        r.dest,
        r.files,
        r.files - r.skipped_files,
        r.skipped_files,
        r.dirs,
        r.links,
        HumanBytes(r.bytes),
        r.seconds,
        r.files_per_second,
        r.mb_per_second
    )?;
    let p = &r.phases;
    writeln!(
        to,
        "  list {:.2} s, prepare {:.2} s, mirrors ready {:.2} s, move {:.2} s, finish {:.2} s",
        p.list, p.prepare, p.check, p.moving, p.finish
    )?;
    if !r.failed.is_empty() {
        writeln!(to, "  NOT COPIED: {} entries (everything else was):", r.failed.len())?;
        for f in &r.failed {
            writeln!(to, "    {}: {}", f.path, f.why)?;
        }
    }
    if r.setid_cleared > 0 {
        writeln!(
            to,
            "  note: {} files copied without their setuid/setgid bits (owners are not kept)",
            r.setid_cleared
        )?;
    }
    if let Some(t) = &r.transfer {
        writeln!(to, "  {:<28} {:>12} {:>7}", "mirror", "bytes", "share")?;
        for p in &t.producers {
            writeln!(to, "  {:<28} {:>12} {:>6.1}%", p.mirror, HumanBytes(p.bytes).to_string(), 100.0 * p.share)?;
        }
        writeln!(
            to,
            "  every block checked against the seal its mirror sent it with, every file on the mirror against its listed size and mtime"
        )?;
    }
    Ok(())
}

pub fn run(o: ArchiveOpt) -> Exit {
    let spec = o.moving.spec(String::new(), o.dest.clone(), o.sync).and_then(|g| match g.http.first() {
        Some(url) => {
            Err(format!("{url}: archive takes ddftpd mirrors only (an HTTP mirror serves single files: ddftp get)"))
        }
        None if g.mirrors.is_empty() => Err("no mirrors: give --mirrors A,B,...".into()),
        None => Ok(g),
    });
    let get = match spec {
        Ok(g) => g,
        Err(e) => {
            report_error(&e);
            if o.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, serde_json::json!({ "src": o.src })));
            }
            return Exit::Usage;
        }
    };
    let spec = ArchiveSpec {
        src: o.src.clone(),
        dest: o.dest.clone(),
        list: o.list.clone(),
        strip: o.strip.clone(),
        part_bytes: o.part_bytes,
        get,
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let mut bar = Bar::new(!o.moving.quiet);
    match rt.block_on(archive::archive(&spec, &mut bar)) {
        Ok(r) => {
            if o.moving.json {
                println!("{}", serde_json::to_string(&r).expect("report serialises"));
            } else if !o.moving.quiet {
                let _ = print_summary(&r, &mut std::io::stdout());
            }
            if r.failed.is_empty() {
                return Exit::Ok;
            }
            // Named on stderr too, whatever was asked for on stdout.
            for f in &r.failed {
                eprintln!("ddftp: error: not copied: {}: {}", f.path, f.why);
            }
            report_error(&format!("{} entries could not be copied; everything else was", r.failed.len()));
            Exit::Partial
        }
        Err(e) => {
            report_error(&e);
            let exit = exit_for_archive(&e);
            if o.moving.json {
                let known = serde_json::json!({
                    "src": o.src,
                    "dest": o.dest.display().to_string(),
                    "warnings": bar.warnings(),
                });
                println!("{}", json_failure(&e, exit, known));
            }
            exit
        }
    }
}
