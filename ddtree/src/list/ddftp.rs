//! ddftp's list format: NUL-terminated text records.
//!
//! ```text
//! #ddftp-list 2\0
//! TYPE SIZE MODE MTIME ATTRS PATH\0      (one per entry)
//! ```
//! TYPE is `find -printf %y`'s letter (`f d l b c p s`), SIZE is `st_size`
//! in decimal, MODE the permission bits in octal (`%m`), MTIME
//! `SECONDS.NANOSECONDS` (nine digits), PATH the raw bytes of the path. NUL
//! is the one byte no path contains, so records need no quoting; the four
//! fields before PATH hold no space of their own, so PATH is everything after
//! the fourth space (spaces and newlines in names are kept as they are).

use std::io::{BufRead, Read, Write};
use std::path::Path;

use super::{Entry, Kind, ListError, Meta, Time};

/// The first record of every ddftp list.
pub const MAGIC: &[u8] = b"#ddftp-list 2\0";
/// The first record of a version 1 list (no ATTRS field).
const MAGIC_V1: &[u8] = b"#ddftp-list 1\0";

/// Appends one record to `out`.
pub fn push_record(out: &mut Vec<u8>, e: &Entry) {
    push_fields(out, &e.path, e.kind, e.perm, e.size, e.mtime, &e.meta);
}

/// Appends the record of an entry not held as an [`Entry`] (the walk's case).
pub fn push_fields(out: &mut Vec<u8>, path: &[u8], kind: Kind, perm: u32, size: u64, mtime: Time, meta: &Meta) {
    out.push(kind.letter());
    out.push(b' ');
    push_decimal(out, size);
    out.push(b' ');
    push_octal(out, perm);
    out.push(b' ');
    if mtime.sec < 0 {
        out.push(b'-');
    }
    push_decimal(out, mtime.sec.unsigned_abs());
    out.push(b'.');
    let ns = mtime.nsec;
    let digits = [
        ns / 100_000_000 % 10,
        ns / 10_000_000 % 10,
        ns / 1_000_000 % 10,
        ns / 100_000 % 10,
        ns / 10_000 % 10,
        ns / 1_000 % 10,
        ns / 100 % 10,
        ns / 10 % 10,
        ns % 10,
    ];
    out.extend(digits.iter().map(|d| b'0' + *d as u8));
    out.push(b' ');
    meta.push(out);
    out.push(b' ');
    out.extend_from_slice(path);
    out.push(0);
}

pub(super) fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_octal(out: &mut Vec<u8>, mut v: u32) {
    let mut buf = [0u8; 11];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v & 7) as u8;
        v >>= 3;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes a whole list (header and records).
pub fn write<'a>(mut w: impl Write, entries: impl IntoIterator<Item = &'a Entry>) -> std::io::Result<()> {
    let mut buf = MAGIC.to_vec();
    for e in entries {
        push_record(&mut buf, e);
        if buf.len() >= 1 << 20 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    w.flush()
}

/// What is wrong with one record of a list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("no {0} field")]
    MissingField(&'static str),
    #[error("bad type {0:?}")]
    BadType(String),
    #[error("a number field is not ASCII")]
    NotAscii,
    #[error("bad {0}")]
    BadNumber(&'static str),
    #[error("mode {0:o} has bits beyond 07777")]
    ModeBits(u32),
    #[error("mtime has no '.'")]
    MtimeNoDot,
    #[error("mtime needs nine digits of nanoseconds")]
    MtimeNanos,
    #[error("empty path")]
    EmptyPath,
    #[error("bad attributes: {0}")]
    BadAttrs(&'static str),
}

/// Parses one record (without its NUL) of a version 2 list.
pub fn parse_record(rec: &[u8]) -> Result<Entry, RecordError> {
    parse_versioned(rec, 2)
}

fn parse_versioned(rec: &[u8], version: u8) -> Result<Entry, RecordError> {
    use RecordError::*;
    let mut it = rec.splitn(if version == 1 { 5 } else { 6 }, |&b| b == b' ');
    let mut field = |name: &'static str| it.next().ok_or(MissingField(name));
    let kind = field("type")?;
    let size = field("size")?;
    let mode = field("mode")?;
    let mtime = field("mtime")?;
    let meta = match version {
        1 => Meta::default(),
        _ => Meta::parse(field("attributes")?).map_err(BadAttrs)?,
    };
    let path = field("path")?;
    let kind = match kind {
        [c] => Kind::from_letter(*c),
        _ => None,
    }
    .ok_or_else(|| BadType(String::from_utf8_lossy(kind).into_owned()))?;
    let text = |b: &[u8]| std::str::from_utf8(b).map_err(|_| NotAscii).map(str::to_owned);
    let size: u64 = text(size)?.parse().map_err(|_| BadNumber("size"))?;
    let perm = u32::from_str_radix(&text(mode)?, 8).map_err(|_| BadNumber("mode"))?;
    if perm > 0o7777 {
        return Err(ModeBits(perm));
    }
    let mtime = text(mtime)?;
    let (sec, nsec) = mtime.split_once('.').ok_or(MtimeNoDot)?;
    let sec: i64 = sec.parse().map_err(|_| BadNumber("mtime seconds"))?;
    if nsec.len() != 9 {
        return Err(MtimeNanos);
    }
    let nsec: u32 = nsec.parse().map_err(|_| BadNumber("mtime nanoseconds"))?;
    if path.is_empty() {
        return Err(EmptyPath);
    }
    Ok(Entry { path: path.to_vec(), kind, perm, size, mtime: Time { sec, nsec }, meta })
}

/// Reads a whole list; `name` only labels errors.
pub fn read(r: impl Read, name: &Path) -> Result<Vec<Entry>, ListError> {
    let mut entries = Vec::new();
    read_batches(r, name, usize::MAX, |mut batch| {
        entries.append(&mut batch);
        true
    })?;
    Ok(entries)
}

/// Reads a list as it comes (a walk still running, say), handing `take`
/// its entries `batch` at a time (the last batch may be shorter); stops
/// early, without error, once `take` returns false.
pub fn read_batches(
    r: impl Read,
    name: &Path,
    batch: usize,
    mut take: impl FnMut(Vec<Entry>) -> bool,
) -> Result<(), ListError> {
    let mut r = std::io::BufReader::with_capacity(1 << 20, r);
    let mut rec = Vec::new();
    let mut entries = Vec::new();
    let mut index = 0u64;
    let mut version = 2;
    loop {
        rec.clear();
        let n = r.read_until(0, &mut rec).map_err(|source| ListError::Io { path: name.to_owned(), source })?;
        if n == 0 {
            break;
        }
        if rec.last() != Some(&0) {
            return Err(ListError::Truncated {
                path: name.to_owned(),
                detail: format!("record {index} has no terminating NUL"),
            });
        }
        rec.pop();
        if index == 0 {
            if rec == MAGIC_V1[..MAGIC_V1.len() - 1] {
                version = 1;
            } else if rec != MAGIC[..MAGIC.len() - 1] {
                return Err(ListError::UnknownFormat { path: name.to_owned() });
            }
        } else {
            let e = parse_versioned(&rec, version).map_err(|detail| ListError::Malformed {
                path: name.to_owned(),
                record: index,
                detail: detail.to_string(),
            })?;
            entries.push(e);
            if entries.len() >= batch && !take(std::mem::take(&mut entries)) {
                return Ok(());
            }
        }
        index += 1;
    }
    if index == 0 {
        return Err(ListError::UnknownFormat { path: name.to_owned() });
    }
    if !entries.is_empty() {
        take(entries);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &[u8], kind: Kind) -> Entry {
        let meta = Meta { owner: Some((1, 2)), rare: None };
        Entry { path: path.to_vec(), kind, perm: 0o4755, size: 12345, mtime: Time { sec: -5, nsec: 7 }, meta }
    }

    #[test]
    fn records_round_trip_any_path_bytes() {
        let entries = vec![entry(b"a b/c\nd", Kind::File), entry(b"/x/\xff\xfe", Kind::Dir), entry(b"l  ", Kind::Link)];
        let mut out = Vec::new();
        write(&mut out, &entries).unwrap();
        assert!(out.starts_with(MAGIC));
        assert_eq!(read(&out[..], Path::new("t")).unwrap(), entries);
    }

    #[test]
    fn malformed_and_truncated_are_refused() {
        let mut out = Vec::new();
        write(&mut out, &[entry(b"f", Kind::File)]).unwrap();
        out.pop();
        assert!(matches!(read(&out[..], Path::new("t")), Err(ListError::Truncated { .. })));
        let v1 = [MAGIC_V1, b"f 1 644 1.000000000 a b\0"].concat();
        assert_eq!(read(&v1[..], Path::new("t")).unwrap()[0].path, b"a b", "version 1 is read");
        let bad = [MAGIC, b"f 1 644 1.000000000 -\0"].concat();
        assert!(matches!(read(&bad[..], Path::new("t")), Err(ListError::Malformed { record: 1, .. })));
        let bad = [MAGIC, b"f 1 999 1.000000000 - p\0"].concat();
        assert!(matches!(read(&bad[..], Path::new("t")), Err(ListError::Malformed { .. })));
        assert!(matches!(read(&b"hello\0"[..], Path::new("t")), Err(ListError::UnknownFormat { .. })));
    }
}
