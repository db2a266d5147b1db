//! rsync's name patterns for `--usermap`/`--groupmap` FROM values, as its
//! wildmatch takes them: `*` any run, `?` one byte, `[...]` a class
//! (`[abc]`, ranges `[a-z]`, `[!...]` or `[^...]` the others, a `]` first
//! is itself, `\` takes the next byte as itself, POSIX `[:alpha:]` and
//! the like), anything else itself. A name holds no `/`, so nothing here
//! treats one apart.

/// Whether `name` matches `pattern`, in time linear in their product at
/// most (one star remembered, as wildmatch's own backtracking bound).
pub fn wild(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n, mut star, mut from) = (0, 0, None, 0);
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some(p);
                from = n;
                p += 1;
                continue;
            }
            Some(b'[') => class(pattern, p, name[n]).filter(|&(hit, _)| hit).map(|(_, end)| end),
            Some(b'?') => Some(p + 1),
            Some(b'\\') if pattern.get(p + 1) == Some(&name[n]) => Some(p + 2),
            Some(b'\\') => None,
            Some(&c) if c == name[n] => Some(p + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                n += 1;
            }
            (None, Some(s)) => {
                p = s + 1;
                from += 1;
                n = from;
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Why `pattern` cannot be taken (a class not closed, a POSIX class
/// rsync does not know, a `\` at the end), if it cannot.
pub fn check(pattern: &[u8]) -> Result<(), String> {
    let mut p = 0;
    while p < pattern.len() {
        p = match pattern[p] {
            b'[' => match class(pattern, p, 0) {
                Some((_, end)) => end,
                None => return Err("a `[` class is not closed (or names no POSIX class rsync knows)".into()),
            },
            b'\\' if p + 1 == pattern.len() => return Err("it ends with a backslash".into()),
            b'\\' => p + 2,
            _ => p + 1,
        };
    }
    Ok(())
}

/// The class at `pattern[p]` (a `[`): whether it holds `c`, and where the
/// pattern goes on past its `]`; `None` if it is not closed or names an
/// unknown POSIX class.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = p + 1;
    let negated = matches!(pattern.get(i), Some(b'!' | b'^'));
    i += usize::from(negated);
    let (mut hit, mut first) = (false, true);
    loop {
        let x = *pattern.get(i)?;
        if x == b']' && !first {
            return Some((hit != negated, i + 1));
        }
        first = false;
        if x == b'[' && pattern.get(i + 1) == Some(&b':') {
            let len = pattern[i + 2..].windows(2).position(|w| w == b":]")?;
            hit |= posix(&pattern[i + 2..i + 2 + len])?(c);
            i += 2 + len + 2;
            continue;
        }
        let (lo, next) = match x {
            b'\\' => (*pattern.get(i + 1)?, i + 2),
            _ => (x, i + 1),
        };
        match (pattern.get(next), pattern.get(next + 1)) {
            (Some(b'-'), Some(&hi)) if hi != b']' => {
                let (hi, after) = match hi {
                    b'\\' => (*pattern.get(next + 2)?, next + 3),
                    _ => (hi, next + 2),
                };
                hit |= (lo..=hi).contains(&c);
                i = after;
            }
            _ => {
                hit |= lo == c;
                i = next;
            }
        }
    }
}

/// A POSIX class by its name, as wildmatch knows them.
fn posix(name: &[u8]) -> Option<fn(u8) -> bool> {
    Some(match name {
        b"alnum" => |c: u8| c.is_ascii_alphanumeric(),
        b"alpha" => |c: u8| c.is_ascii_alphabetic(),
        b"blank" => |c: u8| c == b' ' || c == b'\t',
        b"cntrl" => |c: u8| c.is_ascii_control(),
        b"digit" => |c: u8| c.is_ascii_digit(),
        b"graph" => |c: u8| c.is_ascii_graphic(),
        b"lower" => |c: u8| c.is_ascii_lowercase(),
        b"print" => |c: u8| c.is_ascii_graphic() || c == b' ',
        b"punct" => |c: u8| c.is_ascii_punctuation(),
        b"space" => |c: u8| c.is_ascii_whitespace() || c == 0x0b,
        b"upper" => |c: u8| c.is_ascii_uppercase(),
        b"xdigit" => |c: u8| c.is_ascii_hexdigit(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_marks_and_classes_match_as_rsync_s_wildmatch() {
        for (p, n, m) in [
            ("a?c", "abc", true),
            ("*b*", "abc", true),
            ("a*", "ba", false),
            ("**", "", true),
            ("a", "ab", false),
            ("[mn]obody", "nobody", true),
            ("[mn]obody", "lobody", false),
            ("[!n]*", "nogroup", false),
            ("[!n]*", "root", true),
            ("[^n]*", "root", true),
            ("[!n]*", "", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[]a]", "]", true),
            ("[!]a]", "b", true),
            ("[a-]", "-", true),
            ("[[:digit:]]*", "7up", true),
            ("[[:digit:]]*", "up", false),
            ("u[[:alpha:][:digit:]_]", "u_", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("*[0-9]", "www1", true),
            ("*[0-9]", "www", false),
        ] {
            assert_eq!(wild(p.as_bytes(), n.as_bytes()), m, "{p} {n}");
            assert_eq!(check(p.as_bytes()), Ok(()), "{p}");
        }
        for bad in ["[ab", "[]", "[[:nosuch:]]", "a\\", "[[:alpha:]"] {
            assert!(check(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Any pattern against any name: an answer, never a panic; a
        /// pattern of the name itself (no wildcard) matches it.
        #[test]
        fn any_pattern_and_name_are_matched(p in "[a-c*?\\[\\]!^:\\\\-]{0,12}", n in "[a-c\\]\\[-]{0,12}") {
            let _ = check(p.as_bytes());
            let _ = wild(p.as_bytes(), n.as_bytes());
            let plain: String = n.chars().filter(|c| c.is_ascii_alphabetic()).collect();
            proptest::prop_assert!(wild(plain.as_bytes(), plain.as_bytes()));
        }
    }
}
