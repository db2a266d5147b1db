//! The one rule for a relative path that names an entry below a directory:
//! what a mirror lists, what a client asks a server for, what a list file
//! gives. A path that passes names exactly one entry beneath the directory
//! whatever the file system holds (symlinks are the caller's business:
//! open it beneath the directory with `RESOLVE_NO_SYMLINKS`).

/// A name's limit on Linux (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Why a relative path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RelPathError {
    #[error("an empty path")]
    Empty,
    #[error("an absolute path (it must be relative)")]
    Absolute,
    #[error("a path ending in '/'")]
    TrailingSlash,
    #[error("an empty name ('//') in the path")]
    EmptyName,
    #[error("a '.' or '..' in the path")]
    Dots,
    #[error("a NUL byte in the path")]
    Nul,
    #[error("a name longer than {NAME_MAX} bytes")]
    TooLong,
}

/// Checks that `p` is a canonical relative path: names separated by single
/// slashes, none empty, `.` or `..`, no NUL, each at most [`NAME_MAX`]
/// bytes. Nothing is normalised: a walk never sends anything else, so a
/// path that needs normalising did not come from one.
pub fn check(p: &[u8]) -> Result<(), RelPathError> {
    match p {
        [] => return Err(RelPathError::Empty),
        [b'/', ..] => return Err(RelPathError::Absolute),
        [.., b'/'] => return Err(RelPathError::TrailingSlash),
        _ => {}
    }
    if p.contains(&0) {
        return Err(RelPathError::Nul);
    }
    for name in p.split(|&c| c == b'/') {
        match name {
            [] => return Err(RelPathError::EmptyName),
            b"." | b".." => return Err(RelPathError::Dots),
            n if n.len() > NAME_MAX => return Err(RelPathError::TooLong),
            _ => {}
        }
    }
    Ok(())
}

/// The directory part of a checked path (empty for a top-level name).
pub fn parent(p: &[u8]) -> &[u8] {
    p.iter().rposition(|&c| c == b'/').map_or(&[][..], |i| &p[..i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn canonical_paths_pass_and_others_are_named() {
        for ok in [&b"a"[..], b"a/b", b"a b/.c/..d/\xff\n", b"-x"] {
            assert_eq!(check(ok), Ok(()), "{ok:?}");
        }
        let long = [b'x'; 256];
        let cases: [(&[u8], RelPathError); 10] = [
            (b"", RelPathError::Empty),
            (b"/a", RelPathError::Absolute),
            (b"a/", RelPathError::TrailingSlash),
            (b"a//b", RelPathError::EmptyName),
            (b".", RelPathError::Dots),
            (b"a/..", RelPathError::Dots),
            (b"./a", RelPathError::Dots),
            (b"a/./b", RelPathError::Dots),
            (b"a\0b", RelPathError::Nul),
            (&long, RelPathError::TooLong),
        ];
        for (p, why) in cases {
            assert_eq!(check(p), Err(why), "{p:?}");
        }
        assert_eq!(parent(b"a/b/c"), b"a/b");
        assert_eq!(parent(b"a"), b"");
    }

    proptest! {
        /// Whatever passes stays below its directory: joined to a base and
        /// normalised lexically, it still starts with the base, and it has
        /// as many names as slashes plus one.
        #[test]
        fn what_passes_stays_below(p in proptest::collection::vec(
            prop_oneof![Just(b'/'), Just(b'.'), Just(0u8), any::<u8>()], 0..40)) {
            if check(&p).is_ok() {
                let mut depth = 0i64;
                for name in p.split(|&c| c == b'/') {
                    prop_assert!(!name.is_empty() && name != b"." && name != b"..");
                    depth += 1;
                }
                prop_assert_eq!(depth as usize, p.iter().filter(|&&c| c == b'/').count() + 1);
                prop_assert!(!p.contains(&0));
            }
        }
    }
}
