//! The log: timestamped lines through `tracing`, as text or JSON, to
//! stderr or to `--log-file` (which SIGHUP reopens, so logrotate can move
//! it away). The level is `-v`/`-q`'s unless `DDFTP_LOG` says otherwise.
//! On systemd's journal (stderr is the stream `JOURNAL_STREAM` names), a
//! text line carries no timestamp (the journal adds its own) and begins
//! with its priority, `<3>` to `<7>`, as sd-daemon(3) reads it.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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

/// `--log-file`: its directory held open from the start (as root, before
/// `--user` drops privileges), the file opened beneath it following no
/// symlink. An account that can write the directory cannot make root (at
/// the next start) or the server (at SIGHUP) append to another file by
/// planting a symlink or a hard link under the log's name; and SIGHUP
/// reopens through the held directory, so a root-owned directory works
/// (with logrotate's `create MODE USER GROUP` making the new file).
pub struct LogFile {
    path: PathBuf,
    dir: OwnedFd,
    name: CString,
    file: Mutex<File>,
}

impl LogFile {
    fn new(path: &Path) -> io::Result<LogFile> {
        let name = path
            .file_name()
            .filter(|n| *n != ".." && *n != ".")
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
        let name = CString::new(name.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "holds a NUL byte"))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir: OwnedFd = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("its directory {}: {e}", dir.display())))?
            .into();
        let file = open_beneath(&dir, &name)?;
        Ok(LogFile { path: path.to_path_buf(), dir, name, file: Mutex::new(file) })
    }

    /// Opens the file again beneath its directory (after logrotate moved it).
    pub fn reopen(&self) -> io::Result<()> {
        let f = open_beneath(&self.dir, &self.name).map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => io::Error::new(
                e.kind(),
                format!(
                    "{}: {e} (the server no longer runs as root: have logrotate make the new file, \
                     `create 0640 USER GROUP`, or use `copytruncate`)",
                    self.path.display()
                ),
            ),
            _ => io::Error::new(e.kind(), format!("{}: {e}", self.path.display())),
        })?;
        *self.file.lock().expect("log lock") = f;
        Ok(())
    }
}

/// `name` in `dir` for appending, made 0640 if missing: never through a
/// symlink (`O_NOFOLLOW`), never a FIFO or device, never a file with
/// another name too (a hard link planted to a file the server may write).
fn open_beneath(dir: &OwnedFd, name: &CString) -> io::Result<File> {
    let flags = libc::O_WRONLY
        | libc::O_APPEND
        | libc::O_CREAT
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | libc::O_NOCTTY
        | libc::O_CLOEXEC;
    // SAFETY: openat(2) with a live directory descriptor and a C string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o640 as libc::c_uint) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(e.kind(), "a symlink: not followed (a log file is a plain file)"),
            _ => e,
        });
    }
    // SAFETY: a descriptor openat just returned, owned from here on.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if m.nlink() > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it has {} names (hard links): another file may be behind it", m.nlink()),
        ));
    }
    Ok(file)
}

/// Installs the subscriber; the sink is kept to reopen it on SIGHUP.
pub fn init(format: LogFormat, level: &str, file: Option<&Path>) -> io::Result<Sink> {
    let sink = match file {
        Some(p) => Sink::File(Arc::new(
            LogFile::new(p).map_err(|e| io::Error::new(e.kind(), format!("--log-file {}: {e}", p.display())))?,
        )),
        None => Sink::Stderr,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("DDFTP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(sink.clone()).with_ansi(false);
    let _ = match format {
        LogFormat::Text if matches!(sink, Sink::Stderr) && stderr_is_journal() => {
            b.event_format(Journal(tracing_subscriber::fmt::format().without_time())).try_init()
        }
        LogFormat::Text => b.try_init(),
        LogFormat::Json => b.json().flatten_event(true).try_init(),
    };
    Ok(sink)
}

/// Whether stderr is the journal's stream: `JOURNAL_STREAM` is its
/// `DEVICE:INODE` (systemd.exec(5)), not inherited by something else.
fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = v.to_str().and_then(|v| v.split_once(':')) else { return false };
    // SAFETY: fstat of fd 2 into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(2, &mut st) } != 0 {
        return false;
    }
    dev.parse() == Ok(st.st_dev as u64) && ino.parse() == Ok(st.st_ino as u64)
}

/// A text line for the journal: its priority first (`<4>` for a warning).
struct Journal<F>(F);

impl<S, N, F> tracing_subscriber::fmt::FormatEvent<S, N> for Journal<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
    F: tracing_subscriber::fmt::FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            _ => 7,
        };
        write!(w, "<{priority}>")?;
        self.0.format_event(ctx, w, event)
    }
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
