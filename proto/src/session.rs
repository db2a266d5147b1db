//! The one line a server started over ssh for one client answers (`ddftpd
//! session`, or the serving end of a push): where to connect and how.
//! `ddftpd-session 1 HOST PORT TOKEN SHA256`: the address (`-` for the
//! address the ssh client came from, which only the other end knows), a
//! port, a token of visible characters and the SHA-256 of the session's
//! TLS certificate in hexadecimal.

/// The line's first words: its name and version.
pub const GREETING: &str = "ddftpd-session 1";

/// The line for `host` (or `-`), `port`, `token` and `pin`.
pub fn announce(host: &str, port: u16, token: &str, pin: &[u8; 32]) -> String {
    let pin: String = pin.iter().map(|b| format!("{b:02x}")).collect();
    format!("{GREETING} {host} {port} {token} {pin}")
}
