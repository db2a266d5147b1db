//! A download whose output is already the file: nothing moves (a rerun of
//! a completed `get`), and the rules for an output that holds something
//! else (`--no-clobber`) and for the output's mtime (the mirror's, as
//! `curl -R` and wget keep it).

use std::io;
use std::path::Path;
use std::time::Duration;

use super::report::{Sha256Checked, TransferReport};

/// What the output holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Nothing there (or not a regular file: the usual checks apply).
    Missing,
    /// The file, byte for byte: its size and SHA-256 are the expected ones.
    Same,
    /// Something else, or something that cannot be confirmed the same.
    Differs,
}

/// Compares the regular file at `output` with a file of `size` bytes whose
/// SHA-256 is `sha256` (hex; `None`: not known, so nothing is confirmed).
/// Reads the output only when its size already matches.
pub fn compare(output: &Path, size: u64, sha256: Option<&str>) -> io::Result<Output> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a symlink, never waiting on a FIFO: what is read is
    // the regular file under that name.
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(output);
    let mut f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Output::Missing),
        // A symlink where the output goes: the usual checks say so.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Output::Missing),
        Err(e) => return Err(e),
    };
    let m = f.metadata()?;
    if !m.is_file() {
        return Ok(Output::Missing);
    }
    let (Some(want), true) = (sha256, m.len() == size) else { return Ok(Output::Differs) };
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let got: [u8; 32] = h.finalize().into();
    let got = ddftp_proto::manifest::hex(&got);
    Ok(if got.eq_ignore_ascii_case(want) { Output::Same } else { Output::Differs })
}

/// A download's output that holds the file already (`want`: its SHA-256)
/// ends it here: the report, OUT given the mirror's `mtime` only if it
/// differs, an interrupted run's leftovers removed. An output that holds
/// another file is an error with `--no-clobber`; otherwise the download
/// goes on (`None`).
pub(super) async fn done_before(
    spec: &super::GetSpec,
    size: u64,
    want: Option<String>,
    checked: Sha256Checked,
    mtime: Option<(i64, u32)>,
    started: std::time::Instant,
) -> Result<Option<TransferReport>, super::TransferError> {
    use super::{Resume, TransferError};
    let (out, w) = (spec.output.clone(), want.clone());
    let found = tokio::task::spawn_blocking(move || compare(&out, size, w.as_deref()))
        .await
        .map_err(io::Error::other)
        .and_then(|r| r)
        .map_err(|source| TransferError::Output { path: spec.output.clone(), source, resume: Resume::Nothing })?;
    match (found, want) {
        (Output::Same, Some(sha)) => {
            let mut r = done(spec, size, sha, checked, mtime, started);
            r.sha256_computed = true;
            Ok(Some(r))
        }
        (Output::Differs, _) if spec.no_clobber => Err(TransferError::Clobber { path: spec.output.clone() }),
        _ => Ok(None),
    }
}

/// The output is the file (`sha256`, hex), found so by its SHA-256 or by
/// every chunk of the mirrors' manifest: OUT given the mirror's `mtime`
/// only if it differs, an interrupted run's leftovers removed.
pub(super) fn done(
    spec: &super::GetSpec,
    size: u64,
    sha256: String,
    checked: Sha256Checked,
    mtime: Option<(i64, u32)>,
    started: std::time::Instant,
) -> TransferReport {
    if let Some(t) = mtime.filter(|&t| mtime_of(&spec.output) != Some(t)) {
        let _ = set_mtime(&spec.output, t);
    }
    let _ = std::fs::remove_file(super::part_path(&spec.output));
    let _ = crate::journal::Journal::remove(&crate::journal::journal_path(&spec.output));
    report(&spec.path, &spec.output, size, sha256, checked, started.elapsed())
}

/// The report of a download that found its output complete.
pub fn report(
    path: &str,
    output: &Path,
    size: u64,
    sha256: String,
    checked: Sha256Checked,
    took: Duration,
) -> TransferReport {
    TransferReport {
        path: path.to_string(),
        output: output.display().to_string(),
        bytes: 0,
        reused_bytes: size,
        matched_bytes: 0,
        piece_bytes: 0,
        seconds: took.as_secs_f64(),
        block_size: 0,
        starts: 0,
        extends: 0,
        ends: 0,
        duplicate_bytes: 0,
        sha256: Some(sha256),
        verified: true,
        sha256_checked: checked,
        // Set where the output's SHA-256 was computed to find it complete.
        sha256_computed: false,
        producers: vec![],
        from_peers: 0,
        links: vec![],
        warnings: vec![],
        already_complete: true,
    }
}

/// The modification time of what is at `path` (not through a symlink).
pub fn mtime_of(path: &Path) -> Option<(i64, u32)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.mtime(), m.mtime_nsec() as u32))
}

/// Sets the modification time of the file at `path` (not through a
/// symlink: a name swapped for one keeps its target untouched).
pub fn set_mtime(path: &Path, (secs, nanos): (i64, u32)) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let now = libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT };
    let mtime = libc::timespec { tv_sec: secs as libc::time_t, tv_nsec: i64::from(nanos.min(999_999_999)) as _ };
    let times = [now, mtime];
    // SAFETY: a NUL-terminated path and two timespecs.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An HTTP date (`Last-Modified`: IMF-fixdate, `Sun, 06 Nov 1994 08:49:37
/// GMT`) as seconds since the epoch; `None` for anything else.
pub fn http_date(s: &str) -> Option<i64> {
    let mut w = s.split_whitespace();
    let (_day, d, mon, y, hms, gmt) = (w.next()?, w.next()?, w.next()?, w.next()?, w.next()?, w.next()?);
    if gmt != "GMT" || w.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let m = MONTHS.iter().position(|x| *x == mon)? as i64 + 1;
    let (d, y): (i64, i64) = (d.parse().ok()?, y.parse().ok()?);
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=31).contains(&d) || !(1970..=9999).contains(&y) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Howard Hinnant's days-from-civil.
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    /// `t` as (seconds, nanoseconds) since the epoch.
    fn since_epoch(t: SystemTime) -> Option<(i64, u32)> {
        let d = t.duration_since(UNIX_EPOCH).ok()?;
        Some((d.as_secs() as i64, d.subsec_nanos()))
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 PST"), None);
        assert_eq!(http_date(""), None);
    }

    proptest! {
        #[test]
        fn any_header_value_parses_or_not_without_panicking(s in "\\PC{0,40}") {
            let _ = http_date(&s);
        }
    }

    #[test]
    fn an_output_is_the_file_only_with_its_size_and_digest() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        assert_eq!(compare(&p, 5, None).unwrap(), Output::Missing);
        std::fs::write(&p, b"hello").unwrap();
        let sha = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        assert_eq!(compare(&p, 5, Some(sha)).unwrap(), Output::Same);
        assert_eq!(compare(&p, 5, None).unwrap(), Output::Differs, "unconfirmed is not the same");
        assert_eq!(compare(&p, 6, Some(sha)).unwrap(), Output::Differs);
        std::fs::write(&p, b"hellp").unwrap();
        assert_eq!(compare(&p, 5, Some(sha)).unwrap(), Output::Differs);
        set_mtime(&p, (1_000_000_000, 5)).unwrap();
        let m = std::fs::metadata(&p).unwrap().modified().unwrap();
        assert_eq!(since_epoch(m), Some((1_000_000_000, 5)));
    }
}
