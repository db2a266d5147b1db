//! How a command's failure is told: the exit code of a transfer error,
//! the `--json` object, and no password of a URL in either. Every
//! `--json` command prints exactly one object on stdout (`ls`: one per
//! entry), on failure too: [`json_on_failure`] makes that object for the
//! commands that do not make their own (docs/json.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use ddftp::transfer::TransferError;

use super::Exit;

/// What `--json` prints when a command fails: one object, as on success.
pub fn json_failure(error: &dyn std::fmt::Display, exit: Exit, known: serde_json::Value) -> String {
    let mut v = serde_json::json!({ "error": error.to_string(), "exit_code": exit as i32 });
    if let (Some(o), serde_json::Value::Object(k)) = (v.as_object_mut(), known) {
        o.extend(k);
    }
    hide_user_info(&mut v);
    v.to_string()
}

/// Every string in `v` without the user info of the URLs in it: what a
/// failure echoes of the command line (the URLs as typed) shows no password.
pub fn hide_user_info(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let std::borrow::Cow::Owned(h) = ddftp::http::auth::hide_user_info(s) {
                *s = h;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(hide_user_info),
        serde_json::Value::Object(o) => o.values_mut().for_each(hide_user_info),
        _ => {}
    }
}

use ddftp::transfer::share::ShareError;

/// What a failed `get` of one file says besides its error (docs/json.md's
/// "get failure"): the file, where it was going, the warnings, and whether
/// the same command continues.
pub fn get_failure(
    path: &str,
    output: Option<&std::path::Path>,
    warnings: &[String],
    e: Option<&TransferError>,
) -> serde_json::Value {
    let (missing, total, resume) = match e {
        Some(TransferError::AllMirrorsFailed { missing, total, resume, .. }) => (Some(missing), Some(total), *resume),
        Some(TransferError::Interrupted { missing, total }) => {
            (Some(missing), Some(total), ddftp::transfer::Resume::Kept)
        }
        Some(TransferError::Output { resume, .. }) => (None, None, *resume),
        _ => (None, None, ddftp::transfer::Resume::Nothing),
    };
    serde_json::json!({
        "path": path,
        "output": output.map(|o| o.display().to_string()),
        "warnings": warnings,
        "missing_bytes": missing,
        "total_bytes": total,
        "resume": resume,
    })
}

/// Exit code for a failed transfer.
pub fn exit_for(e: &TransferError) -> Exit {
    match e {
        TransferError::NoMirrors | TransferError::CaFile(_) | TransferError::NotAFile { .. } => Exit::Usage,
        TransferError::Share(ShareError::Listen(_)) => Exit::Local,
        TransferError::Share(_) => Exit::Usage,
        TransferError::NoMajority { .. }
        | TransferError::Journal(_)
        | TransferError::BlockSizeMismatch { .. }
        | TransferError::BlockSizeOverLimit { .. }
        | TransferError::ChecksumMismatch { .. }
        | TransferError::NoChecksum { .. }
        | TransferError::DigestMismatch { .. }
        | TransferError::PieceKeepsFailing { .. }
        | TransferError::UnconfirmedDigest(_)
        | TransferError::WrittenOut { .. } => Exit::Integrity,
        TransferError::Interrupted { .. } => Exit::Interrupted,
        TransferError::Untrusted { .. } => Exit::Tls,
        TransferError::Output { .. } | TransferError::NoSpace { .. } | TransferError::Clobber { .. } => Exit::Local,
        TransferError::NoUsableMirror { .. } | TransferError::AllMirrorsFailed { .. } => Exit::Transfer,
        TransferError::NotFound { .. } => Exit::NotFound,
    }
}

/// Whether the running command wants its failure as JSON
/// ([`json_on_failure`]); the errors it told, and whether it printed its
/// own object.
static CAPTURE: AtomicBool = AtomicBool::new(false);
static PRINTED: AtomicBool = AtomicBool::new(false);
static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// An error told on stderr ([`super::report_error`]): kept for the JSON
/// object of a command that fails without printing its own.
pub fn note_error(text: &str) {
    if CAPTURE.load(Ordering::Relaxed) {
        ERRORS.lock().unwrap_or_else(|p| p.into_inner()).push(text.to_string());
    }
}

/// Prints a command's JSON object (its result, or a failure it describes
/// itself) on stdout.
pub fn print_json(v: &serde_json::Value) {
    PRINTED.store(true, Ordering::Relaxed);
    println!("{v}");
}

/// Runs a command; with `--json`, a failure that printed no object of its
/// own prints `{"error", "exit_code"}` with the errors it told.
pub fn json_on_failure(json: bool, run: impl FnOnce() -> Exit) -> Exit {
    CAPTURE.store(json, Ordering::Relaxed);
    let exit = run();
    if json && exit != Exit::Ok && !PRINTED.load(Ordering::Relaxed) {
        let errors = std::mem::take(&mut *ERRORS.lock().unwrap_or_else(|p| p.into_inner()));
        let error = if errors.is_empty() { format!("failed (exit {})", exit as i32) } else { errors.join("; ") };
        println!("{}", json_failure(&error, exit, serde_json::json!({})));
    }
    exit
}
