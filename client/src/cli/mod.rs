//! The `ddftp` command line: one module per subcommand, each with its
//! options struct and a `run` that returns an exit code.

pub mod archive;
pub mod demo;
pub mod get;
pub mod list;
pub mod ls;
pub mod metrics_file;
pub mod pipe;
pub mod simulate;
pub mod walk;

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
    /// Interrupted (Ctrl-C); resumable.
    Interrupted = 130,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// Prints `ddftp: error: ...` with the full cause chain.
pub fn report_error(e: &dyn std::fmt::Display) {
    eprintln!("ddftp: error: {e:#}");
}

/// Logs to stderr through `tracing`: `DDFTP_LOG` if set (e.g. `debug`,
/// `ddftp=trace`), else warnings, and more with each `-v`. What a user
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
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).without_time().try_init();
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}
