//! mpifileutils' list format, version 4 (`dwalk --output FILE`).
//!
//! All integers are big-endian u64: a version word (4); user_count,
//! user_chars, group_count, group_chars, file_count, file_chars; user_count
//! records of (name NUL-padded to user_chars, id), the same for groups; then
//! file_count records of (path NUL-padded to file_chars; mode, uid, gid,
//! atime, atime_nsec, mtime, mtime_nsec, ctime, ctime_nsec, size). Like
//! dwalk we pad names to a multiple of 8 bytes.
//!
//! The header counts the records before any of them, so [`Spool`] lets
//! walk workers append variable-length records to a scratch file as they go
//! and [`Spool::finish`] writes the padded list in one pass over it: memory
//! stays bounded whatever the tree.

use std::collections::BTreeSet;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{Entry, Kind, ListError, Time};

pub const VERSION: u64 = 4;
/// Header words after the version.
const HEADER_WORDS: usize = 7;
/// Integers after each path.
const FIELDS: usize = 10;
/// Longest name or path field we accept when reading (bounds a bad header).
const MAX_CHARS: u64 = 1 << 20;

fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The `lstat` fields a v4 record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub size: u64,
}

impl Stat {
    pub fn from_metadata(md: &std::fs::Metadata) -> Stat {
        let t = |sec: i64, nsec: i64| Time { sec, nsec: nsec as u32 };
        Stat {
            mode: md.mode(),
            uid: md.uid(),
            gid: md.gid(),
            atime: t(md.atime(), md.atime_nsec()),
            mtime: t(md.mtime(), md.mtime_nsec()),
            ctime: t(md.ctime(), md.ctime_nsec()),
            size: md.size(),
        }
    }

    /// From what `fstatat` filled.
    pub fn from_lstat(st: &libc::stat) -> Stat {
        let t = |sec: i64, nsec: i64| Time { sec, nsec: nsec as u32 };
        Stat {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            atime: t(st.st_atime, st.st_atime_nsec),
            mtime: t(st.st_mtime, st.st_mtime_nsec),
            ctime: t(st.st_ctime, st.st_ctime_nsec),
            size: st.st_size as u64,
        }
    }

    fn words(&self) -> [u64; FIELDS] {
        [
            self.mode as u64,
            self.uid as u64,
            self.gid as u64,
            self.atime.sec as u64,
            self.atime.nsec as u64,
            self.mtime.sec as u64,
            self.mtime.nsec as u64,
            self.ctime.sec as u64,
            self.ctime.nsec as u64,
            self.size,
        ]
    }
}

/// Records appended as a walk finds them, before the header can be known.
pub struct Spool {
    file: BufWriter<std::fs::File>,
    count: u64,
    longest: usize,
    uids: BTreeSet<u32>,
    gids: BTreeSet<u32>,
}

impl Spool {
    /// A spool in an unnamed scratch file in `dir` (gone when dropped).
    pub fn new(dir: &Path) -> std::io::Result<Spool> {
        Ok(Spool {
            file: BufWriter::with_capacity(1 << 20, tempfile_in(dir)?),
            count: 0,
            longest: 0,
            uids: BTreeSet::new(),
            gids: BTreeSet::new(),
        })
    }

    /// Appends records encoded by [`spool_record`] (`count` of them).
    pub fn append(&mut self, records: &[u8], count: u64, longest: usize, ids: &Ids) -> std::io::Result<()> {
        self.file.write_all(records)?;
        self.count += count;
        self.longest = self.longest.max(longest);
        self.uids.extend(&ids.uids);
        self.gids.extend(&ids.gids);
        Ok(())
    }

    /// Writes the v4 list: header, user and group tables, padded records.
    pub fn finish(self, out: impl Write) -> std::io::Result<()> {
        let mut spool = self.file.into_inner().map_err(|e| e.into_error())?;
        spool.rewind()?;
        let mut spool = BufReader::with_capacity(1 << 20, spool);
        let mut out = BufWriter::with_capacity(1 << 20, out);
        let users: Vec<(Vec<u8>, u32)> = self.uids.iter().map(|&id| (user_name(id), id)).collect();
        let groups: Vec<(Vec<u8>, u32)> = self.gids.iter().map(|&id| (group_name(id), id)).collect();
        let chars = |names: &[(Vec<u8>, u32)]| round8(names.iter().map(|n| n.0.len()).max().unwrap_or(0) + 1);
        let (user_chars, group_chars) = (chars(&users), chars(&groups));
        let file_chars = round8(self.longest + 1);
        for w in [
            VERSION,
            users.len() as u64,
            user_chars as u64,
            groups.len() as u64,
            group_chars as u64,
            self.count,
            file_chars as u64,
        ] {
            out.write_all(&w.to_be_bytes())?;
        }
        for (table, width) in [(&users, user_chars), (&groups, group_chars)] {
            for (name, id) in table {
                out.write_all(name)?;
                out.write_all(&vec![0; width - name.len()])?;
                out.write_all(&(*id as u64).to_be_bytes())?;
            }
        }
        let mut path = Vec::new();
        let mut fields = [0u8; FIELDS * 8];
        for _ in 0..self.count {
            let mut len = [0u8; 4];
            spool.read_exact(&mut len)?;
            path.resize(u32::from_be_bytes(len) as usize, 0);
            spool.read_exact(&mut path)?;
            spool.read_exact(&mut fields)?;
            path.resize(file_chars, 0);
            out.write_all(&path)?;
            out.write_all(&fields)?;
        }
        out.flush()
    }
}

/// The uids and gids a batch of records names (for the name tables).
#[derive(Debug, Default)]
pub struct Ids {
    uids: BTreeSet<u32>,
    gids: BTreeSet<u32>,
}

/// Appends one spool record (`len: u32 | path | ten words`) to `out`.
pub fn spool_record(out: &mut Vec<u8>, ids: &mut Ids, path: &[u8], st: &Stat) {
    out.extend_from_slice(&(path.len() as u32).to_be_bytes());
    out.extend_from_slice(path);
    for w in st.words() {
        out.extend_from_slice(&w.to_be_bytes());
    }
    ids.uids.insert(st.uid);
    ids.gids.insert(st.gid);
}

fn tempfile_in(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).mode(0o600).open(dir)
}

fn user_name(uid: u32) -> Vec<u8> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: buf outlives the call and the name is copied out before it is dropped.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc == 0 && !res.is_null() {
        unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_bytes().to_vec()
    } else {
        uid.to_string().into_bytes()
    }
}

fn group_name(gid: u32) -> Vec<u8> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in user_name.
    let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc == 0 && !res.is_null() {
        unsafe { std::ffi::CStr::from_ptr(gr.gr_name) }.to_bytes().to_vec()
    } else {
        gid.to_string().into_bytes()
    }
}

/// One record as read back, every field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub path: Vec<u8>,
    pub stat: Stat,
}

impl Record {
    /// The list entry (`None` if the mode names no known file type).
    pub fn entry(&self) -> Option<Entry> {
        Some(Entry {
            path: self.path.clone(),
            kind: Kind::from_mode(self.stat.mode)?,
            perm: self.stat.mode & 0o7777,
            size: self.stat.size,
            mtime: self.stat.mtime,
            meta: super::Meta { owner: Some((self.stat.uid, self.stat.gid)), rare: None },
        })
    }
}

/// Reads every record of a v4 list; `name` only labels errors.
pub fn read_records(r: impl Read, name: &Path) -> Result<Vec<Record>, ListError> {
    let mut r = BufReader::with_capacity(1 << 20, r);
    let truncated = |detail: String| ListError::Truncated { path: name.to_owned(), detail };
    let mut word = [0u8; 8];
    r.read_exact(&mut word).map_err(|_| truncated("no version word".into()))?;
    let version = u64::from_be_bytes(word);
    if version != VERSION {
        return Err(ListError::MfuVersion { path: name.to_owned(), version });
    }
    let mut header = [0u64; HEADER_WORDS - 1];
    for h in header.iter_mut() {
        r.read_exact(&mut word).map_err(|_| truncated("the header ends early".into()))?;
        *h = u64::from_be_bytes(word);
    }
    let [user_count, user_chars, group_count, group_chars, file_count, file_chars] = header;
    let malformed = |detail: String| ListError::Malformed { path: name.to_owned(), record: 0, detail };
    for (what, chars) in [("user_chars", user_chars), ("group_chars", group_chars), ("file_chars", file_chars)] {
        if chars > MAX_CHARS {
            return Err(malformed(format!("header {what} = {chars} is implausible")));
        }
    }
    if file_chars == 0 && file_count > 0 {
        return Err(malformed("header file_chars is 0".into()));
    }
    let mut skip = vec![0u8; user_chars.max(group_chars) as usize + 8];
    for (what, count, chars) in [("user", user_count, user_chars), ("group", group_count, group_chars)] {
        for i in 0..count {
            r.read_exact(&mut skip[..chars as usize + 8])
                .map_err(|_| truncated(format!("the {what} table ends at entry {i} of {count}")))?;
        }
    }
    let mut entries = Vec::new();
    let mut path = vec![0u8; file_chars as usize];
    let mut fields = [0u8; FIELDS * 8];
    for i in 0..file_count {
        r.read_exact(&mut path)
            .and_then(|_| r.read_exact(&mut fields))
            .map_err(|_| truncated(format!("the header promises {file_count} records; the file ends in record {i}")))?;
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        if end == 0 {
            return Err(ListError::Malformed { path: name.to_owned(), record: i, detail: "empty path".into() });
        }
        let w = |k: usize| u64::from_be_bytes(fields[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
        let t = |k: usize| Time { sec: w(k) as i64, nsec: w(k + 1) as u32 };
        entries.push(Record {
            path: path[..end].to_vec(),
            stat: Stat {
                mode: w(0) as u32,
                uid: w(1) as u32,
                gid: w(2) as u32,
                atime: t(3),
                mtime: t(5),
                ctime: t(7),
                size: w(9),
            },
        });
    }
    Ok(entries)
}

/// Reads a v4 list as entries; a record with an unknown file type is an error.
pub fn read(r: impl Read, name: &Path) -> Result<Vec<Entry>, ListError> {
    read_records(r, name)?
        .into_iter()
        .enumerate()
        .map(|(i, rec)| {
            rec.entry().ok_or_else(|| ListError::Malformed {
                path: name.to_owned(),
                record: i as u64,
                detail: format!("mode {:o} names no file type", rec.stat.mode),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mode: u32, size: u64) -> Stat {
        let t = Time { sec: 1_700_000_000, nsec: 123 };
        Stat { mode, uid: 0, gid: 0, atime: t, mtime: Time { sec: -3, nsec: 9 }, ctime: t, size }
    }

    fn written(records: &[(&[u8], Stat)]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::new(dir.path()).unwrap();
        let (mut buf, mut ids) = (Vec::new(), Ids::default());
        for (p, s) in records {
            spool_record(&mut buf, &mut ids, p, s);
        }
        let longest = records.iter().map(|r| r.0.len()).max().unwrap_or(0);
        spool.append(&buf, records.len() as u64, longest, &ids).unwrap();
        let mut out = Vec::new();
        spool.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn writer_output_reads_back() {
        let recs: Vec<(&[u8], Stat)> =
            vec![(b"/a", stat(0o40755, 4096)), (b"/a/x y\n\xff", stat(0o100600, 7)), (b"/a/l", stat(0o120777, 2))];
        let out = written(&recs);
        assert_eq!(&out[..8], &4u64.to_be_bytes());
        let back = read_records(&out[..], Path::new("t")).unwrap();
        let want: Vec<Record> = recs.iter().map(|(p, s)| Record { path: p.to_vec(), stat: *s }).collect();
        assert_eq!(back, want);
    }

    #[test]
    fn truncation_and_other_versions_are_refused() {
        let out = written(&[(b"/a", stat(0o40755, 1)), (b"/a/b", stat(0o100644, 1))]);
        for cut in [0, 5, 30, 60, out.len() - 1] {
            let err = read(&out[..cut], Path::new("t")).unwrap_err();
            assert!(matches!(err, ListError::Truncated { .. }), "cut at {cut}: {err}");
        }
        let mut v3 = out.clone();
        v3[7] = 3;
        let err = read(&v3[..], Path::new("t")).unwrap_err();
        assert!(matches!(err, ListError::MfuVersion { version: 3, .. }), "{err}");
        assert!(err.to_string().contains("version 3"));
    }
}
