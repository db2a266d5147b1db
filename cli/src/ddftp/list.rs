//! `ddftp list LIST`: any list (ours or mpifileutils' v4) for people on a
//! terminal (one entry a line, as `ddftp ls -l` prints them), or as a ddftp
//! list (NUL-terminated records) when piped or with `-0`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{report_error, Exit};
use ddtree::list::{self, ddftp};

/// Print a file list (ddftp or mpifileutils v4) as a ddftp list.
#[derive(Debug, Args)]
#[command(after_help = "Example:
  ddftp list tree.mfu | tr '\\0' '\\n'
Docs: man ddftp-list; docs/walk.md")]
pub struct ListOpt {
    /// The list file.
    pub list: PathBuf,
    /// Write the ddftp list format (NUL-terminated records) even to a
    /// terminal (it is what a pipe or a file gets anyway).
    #[arg(short = '0', long = "null")]
    pub null: bool,
}

/// One entry a line: mode, size, mtime (UTC), path (escaped).
fn lines(mut out: impl Write, entries: &[list::Entry]) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(256);
    for e in entries {
        line.clear();
        super::ls::render(&mut line, &e.path, e, super::ls::Style::Long);
        out.write_all(&line)?;
    }
    out.flush()
}

pub fn run(o: ListOpt) -> Exit {
    let entries = match list::read(&o.list) {
        Ok(e) => e,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let out = std::io::stdout().lock();
    let written = match o.null || !std::io::IsTerminal::is_terminal(&out) {
        true => ddftp::write(std::io::BufWriter::new(out), &entries),
        false => lines(std::io::BufWriter::new(out), &entries),
    };
    match written {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            report_error(&format_args!("writing stdout: {e}"));
            let _ = std::io::stderr().flush();
            Exit::Local
        }
    }
}
