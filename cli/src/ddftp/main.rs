//! `ddftp`: get files from several mirrors at once (Dual-Direction
//! Operations). The command line: one module per subcommand, each with its
//! options struct and a `run` that returns an exit code; the work is the
//! `ddftp` library's.

mod archive;
mod archive_opt;
mod archive_summary;
mod demo;
mod flags;
mod get;
mod list;
mod ls;
mod many;
mod mapped_input;
mod metrics_file;
mod outcome;
mod pipe;
mod push;
mod push_flags;
mod rsync_form;
mod rsync_keep;
mod rsync_links;
mod rsync_names;
mod rsync_sizes;
mod rsync_stats;
mod share;
mod simulate;
mod ssh;
mod walk;

use std::process::ExitCode;

/// Exit codes scripts can rely on (also in the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The output is complete and correct.
    Ok = 0,
    /// The transfer did not complete (mirrors failed or unreachable); the
    /// data received is kept and the same command resumes.
    Transfer = 1,
    /// Bad flags or arguments.
    Usage = 2,
    /// Mirrors disagree about the file, or a checksum failed.
    Integrity = 3,
    /// The output could not be written (permissions, full disk); resumable.
    Local = 4,
    /// Some entries could not be copied (each named, with why); all the
    /// others were.
    Partial = 5,
    /// No mirror could be used and some failed their TLS handshake (a
    /// certificate that does not verify, a plaintext peer, ours refused).
    Tls = 6,
    /// Every mirror says the file is not there (a ddftpd's "not found",
    /// HTTP 404 or 410): its own code, as aria2c's 3 and wget's 8, so a
    /// script tells a wrong name from a network failure.
    NotFound = 7,
    /// `archive --max-delete`: the limit stopped deletions (rsync's 25);
    /// everything else was done.
    MaxDelete = 25,
    /// Interrupted (Ctrl-C); resumable.
    Interrupted = 130,
}

impl Exit {
    /// The exit code another ddftp ended with (a push's remote end); one
    /// this ddftp does not give is a failed transfer.
    pub fn from_code(c: i32) -> Exit {
        [
            Exit::Ok,
            Exit::Transfer,
            Exit::Usage,
            Exit::Integrity,
            Exit::Local,
            Exit::Partial,
            Exit::Tls,
            Exit::NotFound,
            Exit::MaxDelete,
            Exit::Interrupted,
        ]
        .into_iter()
        .find(|e| *e as i32 == c)
        .unwrap_or(Exit::Transfer)
    }
}

/// ddftp(1)'s EXIT STATUS (the README's table, shorter).
const EXIT_STATUS: &[(i32, &str)] = &[
    (0, "Done: every output complete and verified."),
    (
        1,
        "The transfer failed (no usable mirror, every mirror lost); what arrived is kept and the same command resumes.",
    ),
    (2, "Usage: a bad flag, address, size, URL or output."),
    (3, "Integrity: mirrors disagree, or a checksum failed; nothing wrong is kept."),
    (4, "Local: the output cannot be written (permissions, full disk); resumable once fixed."),
    (5, "Some files or entries could not be copied (each named); all the others were."),
    (6, "TLS: no mirror could be used and TLS is why."),
    (7, "Not found: every mirror says the file is not there."),
    (25, "archive --max-delete: the limit stopped deletions (as rsync's 25); everything else was done."),
    (130, "Interrupted (Ctrl-C); resumable."),
];

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// Prints `ddftp: error: ...` with the full cause chain.
pub fn report_error(e: &dyn std::fmt::Display) {
    let text = format!("{e:#}");
    let text = ddftp::http::auth::hide_user_info(&text);
    outcome::note_error(&text);
    eprintln!("ddftp: error: {}", ddftp::progress::terminal_safe(&text));
}

/// Logs to stderr through `tracing`: `DDFTP_LOG` if set (e.g. `debug`,
/// `ddftp=trace`), else warnings, and more with each `-v`; each line
/// with the seconds since the start (what waited on what). What a user
/// must see (progress, warnings, errors) is printed by the commands
/// themselves, whatever the level.
pub fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DDFTP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .try_init();
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  ddftp get big.iso -m mirror1,mirror2,https://cdn.example.org/pub/
  ddftp archive data/run3 -m mirror1,mirror2 --dest /scratch/run3
  ddftp ls -l mirror1:data
  ddftp completions bash > /etc/bash_completion.d/ddftp

Exit codes: 0 done, 1 transfer failed (resumable), 2 bad usage, 3 mirrors
disagree or a checksum failed, 4 local write error, 5 some entries failed,
6 TLS, 7 not found on any mirror, 25 --max-delete stopped deletions,
130 interrupted.
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
    // Boxed, as Archive: the two take most flags by far.
    Get(Box<get::GetOpt>),
    Send(pipe::SendOpt),
    Recv(pipe::RecvOpt),
    Simulate(simulate::SimulateOpt),
    Walk(walk::WalkOpt),
    List(list::ListOpt),
    Ls(ls::LsOpt),
    Archive(Box<archive::ArchiveOpt>),
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

/// `ddftp man DIR`: one page for ddftp and one per subcommand. clap's
/// sections, but the help text's examples under EXAMPLES (not clap's
/// EXTRA), no `help` subcommand (there is no page for it), and ddftp(1)
/// with the exit codes.
fn man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cmd = command().disable_help_subcommand(true);
    let page = |c: clap::Command, name: &str| {
        let after = c.get_after_help().map(|a| a.to_string());
        let top = name == "ddftp";
        let man = clap_mangen::Man::new(c).title(name.to_uppercase());
        let mut buf = vec![];
        man.render_title(&mut buf)?;
        man.render_name_section(&mut buf)?;
        man.render_synopsis_section(&mut buf)?;
        man.render_description_section(&mut buf)?;
        man.render_options_section(&mut buf)?;
        man.render_subcommands_section(&mut buf)?;
        if top {
            buf.extend_from_slice(b".SH EXIT STATUS\n");
            for (code, what) in EXIT_STATUS {
                buf.extend_from_slice(format!(".TP\n\\fB{code}\\fR\n{}\n", what.replace('-', "\\-")).as_bytes());
            }
        }
        if let Some(text) = after {
            // Lines as written, in no-fill mode.
            buf.extend_from_slice(b".SH EXAMPLES\n.nf\n");
            for l in text.lines().filter(|l| !l.starts_with("Examples:")) {
                let l = l.replace('\\', "\\e").replace('-', "\\-");
                let l = if l.starts_with(['.', '\'']) { format!("\\&{l}") } else { l };
                buf.extend_from_slice(format!("{l}\n").as_bytes());
            }
            buf.extend_from_slice(b".fi\n");
        }
        buf.extend_from_slice(format!(".SH VERSION\n{}\n", env!("CARGO_PKG_VERSION")).as_bytes());
        std::fs::write(dir.join(format!("{name}.1")), buf)
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("ddftp-{}", sub.get_name());
        page(sub.clone().name(name.clone()).bin_name(format!("ddftp {}", sub.get_name())), &name)?;
    }
    page(cmd, "ddftp")
}

/// A command line clap refuses: its message on stderr as usual, and with
/// `--json` also the one JSON object scripts read (exit code 2).
fn refused(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let shown = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || matches!(e.kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand);
    if !shown && std::env::args_os().any(|a| a == "--json") {
        let why = e.kind().as_str().unwrap_or("bad command line");
        let detail = e.render().to_string();
        // The message's first paragraph (clap lists missing arguments on
        // the lines after its first).
        let para: Vec<&str> = detail.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
        let first = if para.is_empty() { why.to_string() } else { para.join(" ") };
        let first = first.trim_start_matches("error: ").to_string();
        println!("{}", outcome::json_failure(&first, Exit::Usage, serde_json::json!({})));
        // stderr as every --json failure has it: one error line.
        eprintln!("ddftp: error: {first} (see --help)");
        std::process::exit(Exit::Usage as i32);
    }
    if e.kind() == ErrorKind::UnknownArgument {
        // clap's "to pass '-x' as a value, use '-- -x'" sends a user who
        // mistyped a flag to make it a file name.
        eprint!("{}", without_value_tip(&e.render().to_string()));
        std::process::exit(Exit::Usage as i32);
    }
    e.exit()
}

/// clap's message without its "tip: to pass '-x' as a value" line.
fn without_value_tip(text: &str) -> String {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("tip: to pass")).collect();
    let mut out = kept.join("\n").replace("\n\n\n", "\n\n");
    out.push('\n');
    out
}

/// The command line: the derived one, with `-H` in `archive` meaning
/// rsync's hard links (`--header`, curl's `-H`, is for web mirrors, which
/// archive does not take; it keeps its long name there).
fn command() -> clap::Command {
    // archive, as rsync: a flag given twice (`-av -a`) is taken once, an
    // option's later value wins.
    Cli::command().mut_subcommand("archive", |c| c.mut_arg("headers", |a| a.short(None)).args_override_self(true))
}

fn main() -> ExitCode {
    let matches = command().try_get_matches().unwrap_or_else(|e| refused(e));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| refused(e));
    init_logging(cli.verbose);
    let exit: Exit = match cli.cmd {
        Cmd::Get(o) => many::get(*o),
        Cmd::Send(o) => pipe::run_send(o),
        Cmd::Recv(o) => pipe::run_recv(o),
        Cmd::Simulate(o) => outcome::json_on_failure(o.json, || simulate::run(o)),
        Cmd::Walk(o) => outcome::json_on_failure(o.json, || walk::run(o)),
        Cmd::List(o) => list::run(o),
        Cmd::Ls(o) => outcome::json_on_failure(o.json, || ls::run(o)),
        // The filter rules' order across --exclude and --include is theirs
        // on the command line.
        Cmd::Archive(o) => archive::run(*o, matches.subcommand_matches("archive"), cli.verbose),
        Cmd::Demo(o) => demo::run(o),
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "ddftp", &mut std::io::stdout());
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
    ssh::end_all();
    exit.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn archive_takes_a_flag_twice_as_rsync_and_keeps_every_rule() {
        let words =
            ["ddftp", "archive", "-av", "-a", "-FF", "--exclude", "x", "--exclude", "y", "-d", "a", "-d", "b", "s"];
        let m = command().try_get_matches_from(words).expect("parsed");
        let cli = Cli::from_arg_matches(&m).unwrap();
        let Cmd::Archive(o) = cli.cmd else { panic!("archive") };
        assert!(o.keep.archive);
        assert_eq!(o.exclude, ["x", "y"]);
        assert_eq!(o.merge_filter, 2);
        assert_eq!(o.dest.as_deref(), Some(std::path::Path::new("b")), "the later value");
        assert_eq!(cli.verbose, 1);
    }
}
