//! rsync's `dir-merge` (`-F`'s `.rsync-filter`): what a run copies is
//! judged by the command line's rules with those of the merge files the
//! mirror's walk listed ([`ddtree::filter::merge`]); what `--delete`
//! leaves, as rsync's receiver judges it, by those of the merge files
//! DEST holds (as they are before the run changes them: with `-FF` DEST
//! has none). A merge file that cannot be taken is named: what its
//! directory holds is then not copied, or not deleted.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ddtree::filter::merge::MAX_FILE;
use ddtree::list::{Entry, Kind};

use super::archiving::Archiving;
use super::deep;
use super::filter::Filter;
use crate::transfer::Progress;

impl Archiving<'_> {
    /// Takes the rules of the merge files among `listed` (`(name below
    /// DEST, entry)`), and with `--delete` those DEST holds in the listed
    /// directories, if a dir-merge rule was given.
    pub(super) fn take_merge_files<'e>(
        &self,
        listed: impl Iterator<Item = (&'e [u8], &'e Entry)>,
        progress: &mut dyn Progress,
    ) {
        let names = self.spec.filter.merge_names();
        if names.is_empty() {
            return;
        }
        let (mut files, mut dirs) = (vec![], vec![]);
        for (rel, e) in listed {
            let rel = Path::new(OsStr::from_bytes(rel));
            match e.kind {
                Kind::Dir => dirs.push(rel.to_path_buf()),
                Kind::File if rel.file_name().is_some_and(|n| names.iter().any(|m| n == OsStr::new(m))) => {
                    let why = "the list gives no rules for it (a --list, or an older mirror's walk)";
                    let text = e.meta.rules().map(<[u8]>::to_vec).ok_or_else(|| why.to_string());
                    files.push((rel.to_path_buf(), text));
                }
                _ => {}
            }
        }
        let (filter, bad) = self.spec.filter.with_merge_files(files);
        for (file, why) in &bad {
            let shown = crate::progress::escaped(file.as_os_str().as_bytes());
            progress.warn(&format!("not copying what {shown}'s directory holds: {why}"));
            self.failed(file, why.clone());
        }
        if !bad.is_empty() {
            self.tally.lock().expect("tally lock").incomplete = true;
        }
        let _ = self.merged.set(filter);
        if self.spec.delete {
            let mut there = vec![];
            for d in &dirs {
                for file in names.iter().map(|n| d.join(n)) {
                    if let Some(text) = self.dest_merge_file(&file) {
                        there.push((file, text));
                    }
                }
            }
            let (filter, bad) = self.spec.filter.with_merge_files(there);
            for (file, why) in &bad {
                let shown = crate::progress::escaped(file.as_os_str().as_bytes());
                progress.warn(&format!("DEST's {shown}: {why}: nothing below it is deleted"));
            }
            let _ = self.merged_dest.set(filter.receiving(self.spec.delete_excluded));
        }
    }

    /// DEST's merge file at `rel`, if it has one: read beneath DEST,
    /// through no symlink, at most [`MAX_FILE`] bytes.
    fn dest_merge_file(&self, rel: &Path) -> Option<Result<Vec<u8>, String>> {
        let read = |f: std::fs::File| -> std::io::Result<Vec<u8>> {
            let mut text = vec![];
            f.take(MAX_FILE as u64 + 1).read_to_end(&mut text)?;
            Ok(text)
        };
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        match deep::open(&self.dest.join(rel), flags, 0).and_then(read) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            r => Some(r.map_err(|e| e.to_string())),
        }
    }

    /// The filter this run copies by: the command line's, with the rules
    /// of the mirror's merge files once the list is read.
    pub(super) fn filter(&self) -> &Filter {
        self.merged.get().unwrap_or(&self.spec.filter)
    }

    /// The filter `--delete` leaves entries by, as the receiver heeds it
    /// (`P` protects, `H` does not): with DEST's merge files.
    pub(super) fn delete_filter(&self) -> &Filter {
        self.merged_dest.get_or_init(|| self.spec.filter.receiving(self.spec.delete_excluded))
    }
}
