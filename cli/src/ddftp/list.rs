//! `ddftp list LIST`: any list (ours or mpifileutils' v4) as a ddftp list on
//! stdout, e.g. to read a dwalk list with `tr '\0' '\n'`.

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
    match ddftp::write(std::io::BufWriter::new(out), &entries) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            report_error(&format_args!("writing stdout: {e}"));
            let _ = std::io::stderr().flush();
            Exit::Local
        }
    }
}
