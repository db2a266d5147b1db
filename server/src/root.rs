//! Confinement to the served root.
//!
//! A client names files by relative paths. Anything that could reach outside
//! the root is refused before the file system is asked: absolute paths, `..`,
//! NUL bytes. Symlinks are refused by default; with `follow_symlinks` they are
//! followed only when the final target is still inside the root.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use std::sync::Arc;

use crate::digests::INDEX_DIR_NAME;
use crate::only::Only;

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path {0:?} is not allowed: {1}")]
    Forbidden(String, &'static str),
    #[error("{0:?}: no such file")]
    NotFound(String),
    #[error("{0:?} is not a regular file")]
    NotAFile(String),
    #[error("{path:?}: {source}")]
    Io { path: String, source: io::Error },
}

/// The directory being served.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
    follow_symlinks: bool,
    /// Only these paths of it are shown ([`Only`]), if set.
    only: Option<Arc<Only>>,
}

impl Root {
    /// `dir` must exist; it is canonicalised once so later checks compare
    /// real paths.
    pub fn new(dir: &Path, follow_symlinks: bool) -> io::Result<Root> {
        let dir = dir.canonicalize()?;
        if !dir.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is not a directory", dir.display())));
        }
        Ok(Root { dir, follow_symlinks, only: None })
    }

    /// The same root, showing only what `only` allows of it.
    pub fn showing(self, only: Arc<Only>) -> Root {
        Root { only: Some(only), ..self }
    }

    /// What it shows, if not all of it.
    pub fn only(&self) -> Option<&Arc<Only>> {
        self.only.as_ref()
    }

    /// Whether `rel` (below the root) may be shown.
    pub fn allows(&self, rel: &Path) -> bool {
        self.only.as_ref().is_none_or(|o| o.allows(rel))
    }

    /// The root's real path.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Resolves a client's relative path to a real path inside the root.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, PathError> {
        let forbid = |why| PathError::Forbidden(rel.to_string(), why);
        if rel.is_empty() {
            return Err(forbid("empty path"));
        }
        if rel.contains('\0') {
            return Err(forbid("NUL byte"));
        }
        let p = Path::new(rel);
        if p.is_absolute() {
            return Err(forbid("absolute paths are refused; name files relative to the root"));
        }
        if !self.allows(p) {
            return Err(forbid("not among what this server shows"));
        }
        let mut full = self.dir.clone();
        for c in p.components() {
            match c {
                Component::Normal(part) if full == self.dir && part == INDEX_DIR_NAME => {
                    return Err(forbid("the digest index is not served"))
                }
                Component::Normal(part) => full.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(forbid("'..' is refused")),
                Component::RootDir | Component::Prefix(_) => return Err(forbid("absolute paths are refused")),
            }
            match full.symlink_metadata() {
                Ok(m) if m.file_type().is_symlink() && !self.follow_symlinks => {
                    return Err(forbid("symlinks are refused (ddftpd --follow-symlinks allows those inside the root)"))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(PathError::NotFound(rel.to_string())),
                Err(e) => return Err(PathError::Io { path: rel.to_string(), source: e }),
            }
        }
        let real = full.canonicalize().map_err(|e| PathError::Io { path: rel.to_string(), source: e })?;
        if !real.starts_with(&self.dir) {
            return Err(forbid("a symlink leads outside the root"));
        }
        Ok(real)
    }

    /// Opens a regular file for reading.
    pub fn open_file(&self, rel: &str) -> Result<File, PathError> {
        let real = self.resolve(rel)?;
        // Non-blocking: opening a FIFO (or a device) must not wait for a
        // writer; it is refused once fstat says what it is.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&real)
            .map_err(|e| PathError::Io { path: rel.to_string(), source: e })?;
        let m = f.metadata().map_err(|e| PathError::Io { path: rel.to_string(), source: e })?;
        if !m.is_file() {
            return Err(PathError::NotAFile(rel.to_string()));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confines_paths() {
        let base = std::env::temp_dir().join(format!("ddftpd-root-test-{}", std::process::id()));
        let root_dir = base.join("root");
        std::fs::create_dir_all(root_dir.join("sub")).unwrap();
        std::fs::write(root_dir.join("sub/a"), b"x").unwrap();
        std::fs::write(base.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root_dir.join("out")).unwrap();
        std::os::unix::fs::symlink(root_dir.join("sub/a"), root_dir.join("in")).unwrap();
        let strict = Root::new(&root_dir, false).unwrap();
        let follow = Root::new(&root_dir, true).unwrap();
        assert!(strict.open_file("sub/a").is_ok());
        assert!(strict.open_file("./sub/a").is_ok());
        for bad in [
            ".ddftpd-index/x",
            "./.ddftpd-index",
            "../secret",
            "/etc/passwd",
            "sub/../../secret",
            "sub/a\0",
            "",
            "out",
            "in",
        ] {
            assert!(matches!(strict.resolve(bad), Err(PathError::Forbidden(..))), "{bad:?}");
        }
        assert!(follow.open_file("in").is_ok());
        assert!(matches!(follow.resolve("out"), Err(PathError::Forbidden(..))));
        assert!(matches!(strict.resolve("nope"), Err(PathError::NotFound(..))));
        assert!(matches!(strict.open_file("sub"), Err(PathError::NotAFile(..))));
        std::fs::write(root_dir.join("sub/b"), b"y").unwrap();
        let only = Root::new(&root_dir, false).unwrap().showing(Arc::new(Only::new([PathBuf::from("sub/a")])));
        assert!(only.open_file("sub/a").is_ok() && only.resolve("sub").is_ok() && only.resolve(".").is_ok());
        for bad in ["sub/b", "in", "sub/a/../b", "sub/./b"] {
            assert!(matches!(only.resolve(bad), Err(PathError::Forbidden(..))), "{bad:?}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
