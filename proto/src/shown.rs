//! Which characters of a name or message from elsewhere (a mirror, a
//! client, a list) may not reach a terminal or a log line as they are:
//! the one rule that `ddftp`'s messages, `ddftp ls` and ddftpd's log all
//! escape by.

/// Whether `c` must be escaped before it is shown: a control character
/// (a newline forges a line, an escape sequence drives the terminal) or a
/// bidirectional formatting character (U+202E and its kin reorder what
/// the terminal shows, so `gpj.exe` reads as `exe.jpg`).
pub fn must_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_formatting_are_escaped_letters_are_not() {
        for c in ['\n', '\r', '\u{1b}', '\u{7f}', '\u{9b}', '\u{202e}', '\u{2067}', '\u{200f}'] {
            assert!(must_escape(c), "{c:?}");
        }
        for c in ['a', 'é', 'ש', '中', ' ', '\u{2013}'] {
            assert!(!must_escape(c), "{c:?}");
        }
    }
}
