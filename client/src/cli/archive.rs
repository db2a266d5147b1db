//! `ddftp archive SRC --mirrors A,B,... --dest DIR`: a tree from k mirrors.

use std::path::PathBuf;

use clap::Args;
use ddftp_proto::units::HumanBytes;
use ddftp_proto::Endpoint;

use super::get::{exit_for, parse_block_size, parse_mirror, parse_seconds, read_token};
use super::{report_error, runtime, Exit};
use crate::archive::{self, ArchiveError, ArchiveReport, ArchiveSpec};
use crate::progress::Bar;
use crate::scheduler::Config;
use crate::transfer::GetSpec;

/// Copy a tree from several mirrors at once: the files as one range, moved
/// from both ends by pairs of mirrors; directories, symlinks, modes, mtimes.
#[derive(Debug, Args)]
pub struct ArchiveOpt {
    /// The directory on the mirrors, relative to their --root (`.` for all).
    pub src: String,
    #[arg(long, short = 'm', value_delimiter = ',', required = true, value_parser = parse_mirror)]
    pub mirrors: Vec<Endpoint>,
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
    #[arg(long, value_parser = parse_block_size, default_value = "256KiB")]
    pub block_size: u32,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no human summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub stall_timeout: f64,
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Skip per-block verification (the range's SHA-256 is still checked).
    #[arg(long)]
    pub no_verify: bool,
    /// fsync every file before modes and mtimes are set.
    #[arg(long)]
    pub sync: bool,
}

fn exit_for_archive(e: &ArchiveError) -> Exit {
    match e {
        ArchiveError::List(_) | ArchiveError::BadEntry { .. } => Exit::Usage,
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
    if let Some(t) = &r.transfer {
        writeln!(to, "  {:<28} {:>12} {:>7}", "mirror", "bytes", "share")?;
        for p in &t.producers {
            writeln!(to, "  {:<28} {:>12} {:>6.1}%", p.mirror, HumanBytes(p.bytes).to_string(), 100.0 * p.share)?;
        }
        writeln!(to, "  every byte verified against the mirrors' chunk manifest and SHA-256 {}", t.sha256)?;
    }
    Ok(())
}

pub fn run(o: ArchiveOpt) -> Exit {
    let token = match o.token_file.as_deref().map(read_token).transpose() {
        Ok(t) => t,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&o.dest) {
        report_error(&format_args!("{}: {e}", o.dest.display()));
        return Exit::Local;
    }
    let spec = ArchiveSpec {
        src: o.src.clone(),
        dest: o.dest.clone(),
        list: o.list.clone(),
        strip: o.strip.clone(),
        get: GetSpec {
            path: String::new(),
            mirrors: o.mirrors.clone(),
            output: o.dest.clone(),
            block_size: o.block_size,
            sync: o.sync,
            stall_timeout: std::time::Duration::from_secs_f64(o.stall_timeout),
            restart: false,
            checksum: None,
            token,
            binds: vec![],
            verify: !o.no_verify,
            scheduler: Config::default(),
            store: None,
        },
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let mut bar = Bar::new(!o.quiet);
    match rt.block_on(archive::archive(&spec, &mut bar)) {
        Ok(r) => {
            if o.json {
                println!("{}", serde_json::to_string(&r).expect("report serialises"));
            } else if !o.quiet {
                let _ = print_summary(&r, &mut std::io::stdout());
            }
            Exit::Ok
        }
        Err(e) => {
            report_error(&e);
            exit_for_archive(&e)
        }
    }
}
