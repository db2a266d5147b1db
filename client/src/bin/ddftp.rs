//! `ddftp`: get files from several mirrors at once (Dual-Direction Operations).

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ddftp::cli::{archive, demo, get, list, ls, pipe, simulate, walk, Exit};

const EXAMPLES: &str = "\
Examples:
  ddftp get big.iso -m mirror1,mirror2,https://cdn.example.org/pub/
  ddftp archive data/run3 -m mirror1,mirror2 --dest /scratch/run3
  ddftp ls -l mirror1:data
  ddftp completions bash > /etc/bash_completion.d/ddftp

Exit codes: 0 done, 1 transfer failed (resumable), 2 bad usage, 3 mirrors
disagree or a checksum failed, 4 local write error, 5 some entries failed,
6 TLS, 130 interrupted.
Docs: man ddftp, man ddftp-get, ...; /usr/share/doc/ddftp/ (README.md and docs/ in the source).";

#[derive(Debug, Parser)]
#[command(name = "ddftp", version, after_help = EXAMPLES)]
#[command(about = "Fast, balanced downloads from several mirrors at once (Dual-Direction Operations)")]
struct Cli {
    /// More log on stderr: -v for what happens, -vv for every scheduler
    /// decision (DDFTP_LOG, e.g. `debug`, overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    Get(get::GetOpt),
    Send(pipe::SendOpt),
    Recv(pipe::RecvOpt),
    Simulate(simulate::SimulateOpt),
    Walk(walk::WalkOpt),
    List(list::ListOpt),
    Ls(ls::LsOpt),
    Archive(archive::ArchiveOpt),
    Demo(demo::DemoOpt),
    /// Print a shell completion script: ddftp completions bash > /etc/bash_completion.d/ddftp
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (ddftp.1, ddftp-get.1, ...) into DIR.
    #[command(hide = true)]
    Man {
        dir: std::path::PathBuf,
    },
}

/// `ddftp man DIR`: one page for ddftp and one per subcommand.
fn man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cmd = Cli::command();
    let page = |c: clap::Command, name: &str| {
        let mut buf = vec![];
        clap_mangen::Man::new(c).title(name.to_uppercase()).render(&mut buf)?;
        std::fs::write(dir.join(format!("{name}.1")), buf)
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("ddftp-{}", sub.get_name());
        page(sub.clone().name(name.clone()).bin_name(format!("ddftp {}", sub.get_name())), &name)?;
    }
    page(cmd, "ddftp")
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    ddftp::cli::init_logging(cli.verbose);
    let exit: Exit = match cli.cmd {
        Cmd::Get(o) => get::run(o),
        Cmd::Send(o) => pipe::run_send(o),
        Cmd::Recv(o) => pipe::run_recv(o),
        Cmd::Simulate(o) => simulate::run(o),
        Cmd::Walk(o) => walk::run(o),
        Cmd::List(o) => list::run(o),
        Cmd::Ls(o) => ls::run(o),
        // The filter rules' order across --exclude and --include is theirs
        // on the command line.
        Cmd::Archive(o) => archive::run(o, matches.subcommand_matches("archive")),
        Cmd::Demo(o) => demo::run(o),
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "ddftp", &mut std::io::stdout());
            Exit::Ok
        }
        Cmd::Man { dir } => match man_pages(&dir) {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("ddftp: error: writing man pages into {}: {e}", dir.display());
                Exit::Local
            }
        },
    };
    exit.into()
}
