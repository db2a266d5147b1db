//! What an entry carries beyond type, size, mode and mtime: owner, hard-link
//! identity, device numbers, where a sparse file's data lies, extended
//! attributes, a symlink's target. One field of a ddftp list record (`ATTRS`), `-` when empty:
//!
//! ```text
//! u=UID:GID  h=DEV:INO  r=RDEV  d=OFF+LEN/OFF+LEN...  x=NAME:VALUE/...  l=TARGET  f=RULES
//! ```
//! comma-separated, numbers in decimal, xattr names and values in hex (any
//! byte may appear in either). `h` is given only for a non-directory with
//! more than one link (the entries sharing it are one file), `r` only for
//! a device node, `d` only for a file with holes (the runs not listed are
//! holes and never move), `x` only when the walk was asked for extended
//! attributes (`x=` then says "none"), `l` for a symlink a walk listed
//! (its target, hex: only to compare and show; the link itself moves with
//! the data), `f` for a merge file a walk was asked for (its content, hex:
//! its directory's filter rules).

/// The rarer attributes, boxed: most entries carry none of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Rare {
    /// `(st_dev, st_ino)` of a file with several names.
    pub link: Option<(u64, u64)>,
    /// `st_rdev` of a device node.
    pub rdev: Option<u64>,
    /// A sparse file's data runs `(offset, length)`, in order.
    pub data: Option<Vec<(u64, u64)>>,
    /// Extended attributes (ACLs among them, as `system.posix_acl_*`),
    /// `Some` when they were read (possibly none).
    pub xattrs: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The owner's and group's names where the walk was asked for them
    /// (empty: the id has no name there).
    pub names: Option<(Vec<u8>, Vec<u8>)>,
    /// A symlink's target, as the walk read it.
    pub target: Option<Vec<u8>>,
    /// A merge file's content (rsync's `dir-merge`: its directory's
    /// filter rules), where the walk was asked for them.
    pub rules: Option<Vec<u8>>,
}

/// An entry's attributes beyond the record's fixed fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Meta {
    /// `(uid, gid)`, when the list carries them.
    pub owner: Option<(u32, u32)>,
    pub rare: Option<Box<Rare>>,
}

/// Most data runs one record may list: a file fragmented past this is
/// listed whole (its holes then move as zeros, and stay holes only if the
/// receiving side makes them so).
pub const MAX_RUNS: usize = 4096;

impl Meta {
    /// What `lstat` tells of an entry: owner, and a hard-link id or device
    /// numbers where they apply (data runs and xattrs take more calls).
    pub fn of(mode: u32, uid: u32, gid: u32, nlink: u64, id: (u64, u64), rdev: u64) -> Meta {
        let mut m = Meta { owner: Some((uid, gid)), rare: None };
        let kind = mode & libc::S_IFMT;
        if nlink > 1 && kind != libc::S_IFDIR {
            m.rare_mut().link = Some(id);
        }
        if kind == libc::S_IFBLK || kind == libc::S_IFCHR {
            m.rare_mut().rdev = Some(rdev);
        }
        m
    }

    pub fn link(&self) -> Option<(u64, u64)> {
        self.rare.as_ref().and_then(|r| r.link)
    }

    pub fn rdev(&self) -> Option<u64> {
        self.rare.as_ref().and_then(|r| r.rdev)
    }

    pub fn data(&self) -> Option<&[(u64, u64)]> {
        self.rare.as_ref().and_then(|r| r.data.as_deref())
    }

    pub fn names(&self) -> Option<&(Vec<u8>, Vec<u8>)> {
        self.rare.as_ref().and_then(|r| r.names.as_ref())
    }

    pub fn target(&self) -> Option<&[u8]> {
        self.rare.as_ref().and_then(|r| r.target.as_deref())
    }

    pub fn rules(&self) -> Option<&[u8]> {
        self.rare.as_ref().and_then(|r| r.rules.as_deref())
    }

    pub fn xattrs(&self) -> Option<&[(Vec<u8>, Vec<u8>)]> {
        self.rare.as_ref().and_then(|r| r.xattrs.as_deref())
    }

    /// What a bundle definition needs of this: a sparse file's data runs.
    pub fn for_bundle(&self) -> Meta {
        let data = self.data().map(<[_]>::to_vec);
        Meta { owner: None, rare: data.map(|d| Box::new(Rare { data: Some(d), ..Rare::default() })) }
    }

    /// The rare attributes, made on first use.
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Default::default)
    }

    /// Bytes a bundle moves for an entry of `size`: its data runs, or all.
    pub fn moved_len(&self, size: u64) -> u64 {
        self.data().map_or(size, |d| d.iter().map(|r| r.1).sum())
    }

    /// Appends the `ATTRS` field.
    pub fn push(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let start = out.len();
        let sep = |out: &mut Vec<u8>| {
            if out.len() > start {
                out.push(b',');
            }
        };
        if let Some((u, g)) = self.owner {
            // Every entry has one: digits by hand, not through `fmt`.
            sep(out);
            out.extend_from_slice(b"u=");
            super::ddftp::push_decimal(out, u64::from(u));
            out.push(b':');
            super::ddftp::push_decimal(out, u64::from(g));
        }
        if let Some(r) = &self.rare {
            if let Some((d, i)) = r.link {
                sep(out);
                let _ = write!(out, "h={d}:{i}");
            }
            if let Some(d) = r.rdev {
                sep(out);
                let _ = write!(out, "r={d}");
            }
            if let Some(runs) = &r.data {
                sep(out);
                out.extend_from_slice(b"d=");
                for (n, (o, l)) in runs.iter().enumerate() {
                    if n > 0 {
                        out.push(b'/');
                    }
                    let _ = write!(out, "{o}+{l}");
                }
            }
            if let Some((u, g)) = &r.names {
                sep(out);
                out.extend_from_slice(b"n=");
                push_hex(out, u);
                out.push(b':');
                push_hex(out, g);
            }
            if let Some(xs) = &r.xattrs {
                sep(out);
                out.extend_from_slice(b"x=");
                for (n, (k, v)) in xs.iter().enumerate() {
                    if n > 0 {
                        out.push(b'/');
                    }
                    push_hex(out, k);
                    out.push(b':');
                    push_hex(out, v);
                }
            }
            if let Some(t) = &r.target {
                sep(out);
                out.extend_from_slice(b"l=");
                push_hex(out, t);
            }
            if let Some(t) = &r.rules {
                sep(out);
                out.extend_from_slice(b"f=");
                push_hex(out, t);
            }
        }
        if out.len() == start {
            out.push(b'-');
        }
    }

    /// Parses an `ATTRS` field.
    pub fn parse(field: &[u8]) -> Result<Meta, &'static str> {
        let mut m = Meta::default();
        if field == b"-" {
            return Ok(m);
        }
        // Most entries carry an owner alone: parsed without `str` splits.
        if let Some(rest) = field.strip_prefix(b"u=") {
            if let Some(c) = rest.iter().position(|&b| b == b':') {
                if let (Some(u), Some(g)) = (decimal(&rest[..c]), decimal(&rest[c + 1..])) {
                    m.owner = Some((u, g));
                    return Ok(m);
                }
            }
        }
        let text = std::str::from_utf8(field).map_err(|_| "attributes are not ASCII")?;
        for kv in text.split(',') {
            let (k, v) = kv.split_once('=').ok_or("an attribute without '='")?;
            match k {
                "u" => m.owner = Some(pair(v, ':').ok_or("bad owner")?),
                "h" => m.rare_mut().link = Some(pair(v, ':').ok_or("bad hard-link id")?),
                "r" => m.rare_mut().rdev = Some(v.parse().map_err(|_| "bad device number")?),
                "d" => {
                    let mut runs: Vec<(u64, u64)> = vec![];
                    for r in v.split('/').filter(|r| !r.is_empty()) {
                        runs.push(pair(r, '+').ok_or("bad data run")?);
                    }
                    if runs.len() > MAX_RUNS || runs.windows(2).any(|w| w[0].0.saturating_add(w[0].1) > w[1].0) {
                        return Err("data runs out of order or too many");
                    }
                    m.rare_mut().data = Some(runs);
                }
                "n" => {
                    let (u, g) = v.split_once(':').ok_or("bad names")?;
                    m.rare_mut().names = Some((unhex(u).ok_or("bad user name")?, unhex(g).ok_or("bad group name")?));
                }
                "x" => {
                    let mut xs = vec![];
                    for x in v.split('/').filter(|x| !x.is_empty()) {
                        let (k, v) = x.split_once(':').ok_or("bad xattr")?;
                        xs.push((unhex(k).ok_or("bad xattr name")?, unhex(v).ok_or("bad xattr value")?));
                    }
                    m.rare_mut().xattrs = Some(xs);
                }
                "l" => m.rare_mut().target = Some(unhex(v).ok_or("bad symlink target")?),
                "f" => m.rare_mut().rules = Some(unhex(v).ok_or("bad filter rules")?),
                // Attributes a later version adds are skipped.
                _ => {}
            }
        }
        Ok(m)
    }
}

fn pair<A: std::str::FromStr, B: std::str::FromStr>(v: &str, sep: char) -> Option<(A, B)> {
    let (a, b) = v.split_once(sep)?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A `u32` in plain decimal digits (nothing else), if it is one.
fn decimal(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    u32::try_from(v).ok()
}

fn push_hex(out: &mut Vec<u8>, b: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &c in b {
        out.push(HEX[usize::from(c >> 4)]);
        out.push(HEX[usize::from(c & 15)]);
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any owner, names, xattrs and symlink target (any bytes) write
        /// an ATTRS field with no space or NUL that parses back to them;
        /// any bytes as a field parse or are refused, never panic.
        #[test]
        fn any_attributes_round_trip(
            owner in proptest::option::of((any::<u32>(), any::<u32>())),
            target in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            xattrs in proptest::option::of(proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..16), proptest::collection::vec(any::<u8>(), 0..16)), 0..4)),
            junk in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut m = Meta { owner, rare: None };
            if let Some(t) = target {
                m.rare_mut().target = Some(t);
            }
            if let Some(x) = xattrs {
                m.rare_mut().xattrs = Some(x);
            }
            let mut out = vec![];
            m.push(&mut out);
            prop_assert!(!out.contains(&b' ') && !out.contains(&0) && !out.contains(&b'\n'));
            prop_assert_eq!(Meta::parse(&out).unwrap(), m);
            let _ = Meta::parse(&junk);
        }
    }

    #[test]
    fn attributes_round_trip() {
        let mut m = Meta { owner: Some((0, 65534)), rare: None };
        let r = m.rare_mut();
        r.link = Some((2049, 77));
        r.rdev = Some(259);
        r.data = Some(vec![(0, 4096), (1 << 20, 8192)]);
        r.xattrs = Some(vec![(b"user.a,b".to_vec(), vec![0, 0xff, b'/']), (b"user.empty".to_vec(), vec![])]);
        r.names = Some((b"root".to_vec(), vec![]));
        r.target = Some(b"../a b,c=d\xff".to_vec());
        let mut out = vec![];
        m.push(&mut out);
        assert!(!out.contains(&b' ') && !out.contains(&0));
        assert_eq!(Meta::parse(&out).unwrap(), m);
        assert_eq!(m.moved_len(5 << 20), 4096 + 8192);
        let mut out = vec![];
        Meta::default().push(&mut out);
        assert_eq!(out, b"-");
        assert_eq!(Meta::parse(b"-").unwrap(), Meta::default());
        let mut none = Meta::default();
        none.rare_mut().xattrs = Some(vec![]);
        let mut out = vec![];
        none.push(&mut out);
        assert_eq!(Meta::parse(&out).unwrap(), none);
        assert!(Meta::parse(b"d=10+5/12+1").is_err(), "overlapping runs");
        assert!(Meta::parse(b"u=1").is_err());
        assert_eq!(Meta::parse(b"u=4294967295:0").unwrap().owner, Some((u32::MAX, 0)));
        assert!(Meta::parse(b"u=4294967296:0").is_err());
    }
}
