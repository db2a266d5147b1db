//! How a command's failure is told: the exit code of a transfer error,
//! the `--json` object, and no password of a URL in either.

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
