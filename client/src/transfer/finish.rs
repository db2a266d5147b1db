//! The end of a download: the whole file's SHA-256 checked against what
//! was expected, then the part file put in place under its name (or, for
//! `-o -`, the verdict on bytes already written out). A file that fails is
//! never put in place.

use super::expected::Expected;
use super::*;

/// What a finished transfer left.
pub(super) struct Done {
    pub(super) report: TransferReport,
    pub(super) file: Arc<dyn Store>,
    pub(super) part: PathBuf,
    pub(super) jpath: PathBuf,
    /// What the mirrors said the SHA-256 is (or the journal identity).
    pub(super) sha256: String,
    pub(super) http_only: bool,
    pub(super) to_stdout: bool,
    /// The mirror's modification time, given to the output (`None`:
    /// unknown, or `--no-mtime`).
    pub(super) mtime: Option<(i64, u32)>,
}

/// Checks the download against `expected` and the mirrors' SHA-256 and
/// puts it in place.
pub(super) fn check_and_place(
    spec: &GetSpec,
    done: Done,
    expected: Option<&Expected>,
) -> Result<TransferReport, TransferError> {
    let Done { report, file, part, jpath, sha256, http_only, to_stdout, mtime } = done;
    let out_err = |source| TransferError::Output { path: part.clone(), source, resume: Resume::Nothing };
    if to_stdout {
        let want = expected.map(|e| e.sha256.clone()).or_else(|| (!http_only).then(|| sha256.clone()));
        if let (Some(want), Some(got)) = (want, report.sha256.clone()) {
            if want != got {
                return Err(TransferError::WrittenOut { path: spec.path.clone(), expected: want, got });
            }
        }
        return Ok(report);
    }
    if let Some(got) = report.sha256.clone().filter(|g| *g != sha256 && !http_only) {
        // Some block is wrong and nothing says which: nothing is worth keeping.
        drop(file);
        let _ = std::fs::remove_file(&part);
        let _ = Journal::remove(&jpath);
        return Err(TransferError::DigestMismatch { path: spec.path.clone(), expected: sha256, got });
    }
    if let Some(e) = expected.filter(|e| report.sha256.as_ref() != Some(&e.sha256)) {
        let got = report.sha256.clone().unwrap_or_default();
        if let Some(senders) = &e.unconfirmed {
            // One side is wrong, and nothing says which: the header, or
            // some mirror's bytes. The bytes stay, under a name no one
            // mistakes for the file.
            drop(file);
            let kept = ddtree::scratch::beside(&spec.output, "", ".ddftp-unverified");
            let kept = std::fs::rename(&part, &kept).map(|()| kept).map_err(|e| e.to_string());
            let _ = Journal::remove(&jpath);
            let (path, expected, senders) = (spec.path.clone(), e.sha256.clone(), senders.join(", "));
            return Err(TransferError::UnconfirmedDigest(Box::new(Unconfirmed { path, expected, got, senders, kept })));
        }
        // Some block is wrong and nothing says which: nothing is worth keeping.
        drop(file);
        let _ = std::fs::remove_file(&part);
        let _ = Journal::remove(&jpath);
        return Err(TransferError::ChecksumMismatch {
            path: spec.path.clone(),
            expected: e.sha256.clone(),
            got: report.sha256.unwrap_or_else(|| "not computed (a bundle)".into()),
            from: e.from.source().to_string(),
        });
    }
    if spec.sync {
        file.sync_data().map_err(out_err)?;
    }
    drop(file);
    if spec.store.is_some() {
        let _ = Journal::remove(&jpath);
        return Ok(report);
    }
    let put = |source| TransferError::Output { path: spec.output.clone(), source, resume: Resume::KeptOnceFixed };
    // Never put the file in place of a device, FIFO or socket (one may have
    // appeared since the start): a rename would destroy it.
    if let Ok(m) = std::fs::symlink_metadata(&spec.output) {
        if !m.is_file() && !m.is_symlink() && !m.is_dir() {
            return Err(put(io::Error::other(format!("it is now a {}, not replaced", file_kind(&m)))));
        }
    }
    if let Some(t) = mtime {
        // Best effort: a file system without nanoseconds, or one that
        // refuses, keeps the time of the download.
        let _ = super::already::set_mtime(&part, t);
    }
    std::fs::rename(&part, &spec.output).map_err(put)?;
    let _ = Journal::remove(&jpath);
    Ok(report)
}
