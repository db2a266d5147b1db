//! Where a root's digest index lives when no `--index` is given: never in
//! the root (it may be read-only, or someone else's, or be mirrored by
//! rsync, which would copy the index too), but in the service's state
//! directory (systemd's `StateDirectory=`, `$STATE_DIRECTORY`), else in the
//! user's cache directory (`$XDG_CACHE_HOME` or `~/.cache`), one directory
//! per root, made private. Inside the root only when `--index` says so.

use std::io;
use std::path::{Path, PathBuf};

/// For serving: [`default_for`], or where that cannot be made (an account
/// without a writable home, as `nobody`), a place that never exists, so
/// the digests stay in memory (as with an index directory that is not
/// writable), with a warning.
pub fn default_or_memory(root: &Path) -> PathBuf {
    default_for(root).unwrap_or_else(|e| {
        tracing::warn!("{e}: digests are kept in memory only (give --index DIR to keep them)");
        PathBuf::from("/dev/null/ddftpd-index")
    })
}

/// The index directory for `root` (an absolute, canonical path), made if
/// missing (mode 0700).
pub fn default_for(root: &Path) -> io::Result<PathBuf> {
    let state = std::env::var_os("STATE_DIRECTORY")
        .and_then(|s| s.to_str().and_then(|s| s.split(':').next()).map(PathBuf::from))
        .filter(|p| p.is_absolute());
    let base = match (state, std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(s), _, _) => s.join("index"),
        (None, Some(c), _) if Path::new(&c).is_absolute() => Path::new(&c).join("ddftpd"),
        (None, _, Some(h)) => Path::new(&h).join(".cache").join("ddftpd"),
        _ => {
            return Err(io::Error::other(
                "no place for the digest index: give --index DIR (no HOME, XDG_CACHE_HOME or STATE_DIRECTORY)",
            ))
        }
    };
    let dir = base.join(root_name(root));
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot make the digest index {}: {e}", dir.display())))?;
    Ok(dir)
}

/// A short stable name for a root: its path hashed.
fn root_name(root: &Path) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
    h[..16].iter().map(|b| format!("{b:02x}")).collect()
}
