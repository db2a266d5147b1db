//! `ddftpd index DIR`: computes the digests of every file under a root ahead
//! of time, so the first client of each file does not wait for it to be read.
//!
//! Files are hashed by a few threads at once (one per core by default); a
//! file whose index entry is already current costs one small read.
//! Symlinks are not followed and the index directory itself is skipped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::digests::{load_or_compute, Key, Source, INDEX_DIR_NAME};

/// What an indexing run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub files: u64,
    pub bytes: u64,
    /// Files whose index entry was already current.
    pub current: u64,
    /// One line per file that could not be indexed.
    pub errors: Vec<String>,
}

/// Indexes every regular file under `root` into `index_dir` with `jobs` threads.
pub fn index_tree(root: &Path, index_dir: &Path, jobs: usize) -> Summary {
    let mut files = vec![];
    let mut errors = vec![];
    walk(root, root, &mut files, &mut errors);
    let queue = Mutex::new(files);
    let total = Mutex::new(Summary { errors, ..Summary::default() });
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let Some(path) = queue.lock().expect("queue").pop() else { return };
                let r = std::fs::File::open(&path).and_then(|f| {
                    let key = Key::of(&f.metadata()?);
                    load_or_compute(index_dir, &f, &key).map(|(_, source)| (key.size, source))
                });
                let mut t = total.lock().expect("summary");
                match r {
                    Ok((size, source)) => {
                        t.files += 1;
                        t.bytes += size;
                        t.current += u64::from(source == Source::IndexFile);
                    }
                    Err(e) => t.errors.push(format!("{}: {e}", path.display())),
                }
            });
        }
    });
    total.into_inner().expect("summary")
}

fn walk(root: &Path, dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return errors.push(format!("{}: {e}", dir.display())),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                errors.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        if dir == root && entry.file_name() == INDEX_DIR_NAME {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(root, &entry.path(), files, errors),
            Ok(t) if t.is_file() => files.push(entry.path()),
            Ok(_) => {}
            Err(e) => errors.push(format!("{}: {e}", entry.path().display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_a_tree_once() {
        let d = std::env::temp_dir().join(format!("ddftpd-indexer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("x"), b"hello").unwrap();
        std::fs::write(d.join("a/b/y"), vec![1u8; 1 << 20]).unwrap();
        std::os::unix::fs::symlink(d.join("x"), d.join("a/link")).unwrap();
        let idx = d.join(INDEX_DIR_NAME);
        let first = index_tree(&d, &idx, 2);
        assert_eq!((first.files, first.bytes, first.current, first.errors.len()), (2, 5 + (1 << 20), 0, 0));
        let second = index_tree(&d, &idx, 2);
        assert_eq!((second.files, second.current), (2, 2), "the index directory itself is not indexed");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
