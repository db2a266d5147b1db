//! `ddftp`: get files from several mirrors at once (Dual-Direction Operations).

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ddftp::cli::{archive, demo, get, list, ls, pipe, simulate, walk, Exit};

#[derive(Debug, Parser)]
#[command(version, about = "Fast, balanced downloads from several mirrors at once (Dual-Direction Operations)")]
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
    };
    exit.into()
}
