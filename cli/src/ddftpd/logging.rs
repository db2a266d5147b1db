//! The log: timestamped lines through `tracing`, as text or JSON, to
//! stderr or to `--log-file` (which SIGHUP reopens, so logrotate can move
//! it away). The level is `-v`/`-q`'s unless `DDFTP_LOG` says otherwise.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

use crate::flags::LogFormat;

/// The filter for `-v` (more) and `-q` (less) counts.
pub fn level(verbose: u8, quiet: u8) -> &'static str {
    match (verbose, quiet) {
        (0, 0) => "info",
        (1, _) => "debug",
        (v, _) if v > 1 => "trace",
        (_, 1) => "warn",
        _ => "error",
    }
}

/// Where lines go: stderr, or a file that can be reopened.
#[derive(Clone)]
pub enum Sink {
    Stderr,
    File(Arc<LogFile>),
}

pub struct LogFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl LogFile {
    fn open(path: &Path) -> io::Result<File> {
        OpenOptions::new().create(true).append(true).open(path)
    }

    /// Opens the file at its path again (after logrotate moved it).
    pub fn reopen(&self) -> io::Result<()> {
        let f = LogFile::open(&self.path)?;
        *self.file.lock().expect("log lock") = f;
        Ok(())
    }
}

/// Installs the subscriber; the sink is kept to reopen it on SIGHUP.
pub fn init(format: LogFormat, level: &str, file: Option<&Path>) -> io::Result<Sink> {
    let sink = match file {
        Some(p) => Sink::File(Arc::new(LogFile {
            path: p.to_path_buf(),
            file: Mutex::new(
                LogFile::open(p).map_err(|e| io::Error::new(e.kind(), format!("--log-file {}: {e}", p.display())))?,
            ),
        })),
        None => Sink::Stderr,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DDFTP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(sink.clone()).with_ansi(false);
    let _ = match format {
        LogFormat::Text => b.try_init(),
        LogFormat::Json => b.json().flatten_event(true).try_init(),
    };
    Ok(sink)
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = SinkWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match self {
            Sink::Stderr => SinkWriter::Stderr(io::stderr()),
            Sink::File(f) => SinkWriter::File(f),
        }
    }
}

/// One line's writer.
pub enum SinkWriter<'a> {
    Stderr(io::Stderr),
    File(&'a LogFile),
}

impl Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            SinkWriter::Stderr(e) => e.write(buf),
            // One event is one `write_all` of a whole line: lines of
            // concurrent tasks do not interleave.
            SinkWriter::File(f) => f.file.lock().expect("log lock").write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            SinkWriter::Stderr(e) => e.flush(),
            SinkWriter::File(f) => f.file.lock().expect("log lock").flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_count_of_v_and_q_changes_the_level() {
        let levels = [level(0, 2), level(0, 1), level(0, 0), level(1, 0), level(2, 0)];
        assert_eq!(levels, ["error", "warn", "info", "debug", "trace"]);
    }
}
