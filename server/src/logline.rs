//! What reaches the log from a client (a path it names, an error that
//! quotes it) is escaped, so one event is always one line: a name holding
//! a newline cannot forge an access line, an escape sequence cannot drive
//! an operator's terminal. The same rule for text and JSON logs.

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with control characters (and the bidirectional overrides, which
/// reorder what a terminal shows) written as `\u{..}`, as `escape_debug`
/// writes them; everything else as it is.
pub fn one_line(s: &str) -> Cow<'_, str> {
    let bad = ddftp_proto::shown::must_escape;
    if !s.chars().any(bad) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match bad(c) {
            true => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            false => out.push(c),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_newline_cannot_start_another_line() {
        let forged = "x\n2026-11-28T00:00:00Z INFO ddftpd::access: served client=6.6.6.6:1 FORGED";
        assert_eq!(one_line(forged).lines().count(), 1);
        assert_eq!(one_line("a\u{1b}[31m\u{202e}b"), "a\\u{1b}[31m\\u{202e}b");
        assert!(matches!(one_line("plain/path é"), Cow::Borrowed(_)));
    }

    proptest! {
        #[test]
        fn any_text_is_one_line_without_escapes(s in "\\PC*|.*[\\n\\r\\x1b].*") {
            let l = one_line(&s);
            prop_assert!(!l.contains(['\n', '\r', '\x1b']), "{:?}", l);
        }
    }
}
