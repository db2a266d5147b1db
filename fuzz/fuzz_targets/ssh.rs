//! What an ssh mirror's remote end answers, and what a user gives as an
//! ssh mirror or `-e`: parsed without a panic; a host or user taken never
//! reads as an option or a shell word, and the remote command line is
//! single-quoted words.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ddftp::ssh::parse_announce(text);
    let _ = ddftp::ssh::split_rsh(text);
    let shell = |c: char| c.is_whitespace() || "'\"`$;&|<>()\\!*?[]{}#~=/".contains(c);
    for m in [ddftp::ssh::SshMirror::parse_url(text), ddftp::ssh::SshMirror::parse_rsync(text)].into_iter().flatten() {
        assert!(!m.host.starts_with('-') && !m.host.contains(shell), "{text:?}");
        assert!(m.user.as_deref().is_none_or(|u| !u.starts_with('-') && !u.contains(shell)), "{text:?}");
        let c = m.command(&["ssh".into()], "ddftpd");
        let last = c.get_args().last().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
        assert!(last.starts_with('\'') && last.ends_with('\''), "{last:?}");
    }
});
