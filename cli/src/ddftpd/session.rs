//! `ddftpd session DIR`: a ddftpd for the one client that started it over
//! ssh. It listens on a free port of the address the ssh client reached
//! (`SSH_CONNECTION`), speaks TLS with a certificate made for the session
//! and serves only connections that prove a token made for it; the four
//! go to the client on standard output, one line (see [`announce`]). It
//! ends when standard input closes: the ssh session ended, however (the
//! client finished, failed or was killed), so nothing is left running.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use ddftpd::{Server, ServerConfig};
use tokio::io::AsyncReadExt;

/// The first word of the line the client reads, and the line's version.
pub const GREETING: &str = "ddftpd-session 1";

/// The line that tells the client where and how to connect.
pub fn announce(host: IpAddr, port: u16, token: &str, fingerprint: &[u8; 32]) -> String {
    let pin: String = fingerprint.iter().map(|b| format!("{b:02x}")).collect();
    format!("{GREETING} {host} {port} {token} {pin}")
}

/// The address the ssh client connected to: the server's half of
/// `SSH_CONNECTION` ("client port server port").
fn ssh_server_address() -> anyhow::Result<IpAddr> {
    let Ok(c) = std::env::var("SSH_CONNECTION") else {
        bail!("ddftpd session is started by ddftp over ssh (SSH_CONNECTION is not set)");
    };
    let ip = c.split_whitespace().nth(2).unwrap_or_default();
    ip.parse().with_context(|| format!("SSH_CONNECTION {c:?} names no server address"))
}

/// `~`, `~/...` and relative paths from the home directory (where an ssh
/// session starts).
fn beneath_home(dir: &Path, home: Option<&Path>) -> PathBuf {
    let home = home.map(Path::to_path_buf).unwrap_or_default();
    match dir.strip_prefix("~") {
        Ok(rest) => home.join(rest),
        Err(_) if dir.is_relative() => home.join(dir),
        Err(_) => dir.to_path_buf(),
    }
}

/// The index of `root`'s digests: beneath the user's cache directory, one
/// per root, made private.
fn index_dir(root: &Path) -> anyhow::Result<PathBuf> {
    let cache = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(c), _) if Path::new(&c).is_absolute() => PathBuf::from(c),
        (_, Some(h)) => Path::new(&h).join(".cache"),
        _ => bail!("no home directory (HOME) to keep the digest index in"),
    };
    let dir = cache.join("ddftpd").join(root_name(root));
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .with_context(|| format!("cannot make the digest index {}", dir.display()))?;
    Ok(dir)
}

/// A short stable name for a root: its path hashed.
fn root_name(root: &Path) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
    h[..16].iter().map(|b| format!("{b:02x}")).collect()
}

pub fn run(dir: &Path, follow_symlinks: bool) -> anyhow::Result<()> {
    let host = ssh_server_address()?;
    let root = beneath_home(dir, std::env::var_os("HOME").as_deref().map(Path::new));
    let root = root.canonicalize().with_context(|| format!("cannot serve {}", root.display()))?;
    let index = index_dir(&root)?;
    let identity = ddnet::pinned::Identity::generate().context("cannot make the session's certificate")?;
    let acceptor = identity.acceptor().context("cannot use the session's certificate")?;
    let token: String = rand::random::<[u8; 32]>().iter().map(|b| format!("{b:02x}")).collect();
    let cfg = ServerConfig {
        follow_symlinks,
        token: Some(token.clone().into_bytes()),
        index_dir: Some(index),
        tls: Some(ddftpd::tls::Tls::from_acceptor(acceptor)),
        ..ServerConfig::default()
    };
    let server = Server::new(&root, &cfg).with_context(|| format!("cannot serve {}", root.display()))?;
    let rt = tokio::runtime::Runtime::new().context("cannot start runtime")?;
    rt.block_on(async {
        let any = match host {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let l = tokio::net::TcpListener::bind(SocketAddr::new(any, 0)).await.context("cannot listen")?;
        let port = l.local_addr()?.port();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", announce(host, port, &token, &identity.fingerprint()))
            .and_then(|()| out.flush())
            .context("cannot tell the client where to connect")?;
        drop(out);
        tracing::info!("serving {} on port {port} for this ssh session", root.display());
        server.run(vec![l], until_stdin_closes()).await;
        anyhow::Ok(())
    })?;
    rt.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// Resolves when standard input reaches its end (or fails): the ssh
/// session is over. What comes on it is read and dropped.
async fn until_stdin_closes() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    tracing::info!("the ssh session ended; stopping");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_found_from_home_as_rsync_does() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(beneath_home(Path::new("data"), home), Path::new("/home/u/data"));
        assert_eq!(beneath_home(Path::new("~/data"), home), Path::new("/home/u/data"));
        assert_eq!(beneath_home(Path::new("~"), home), Path::new("/home/u"));
        assert_eq!(beneath_home(Path::new("/srv/x"), home), Path::new("/srv/x"));
    }

    #[test]
    fn the_announcement_is_one_line_of_five_fields_after_the_greeting() {
        let line = announce("10.0.0.1".parse().unwrap(), 4242, "ab12", &[7u8; 32]);
        assert!(line.starts_with(GREETING));
        let f: Vec<&str> = line[GREETING.len()..].split_whitespace().collect();
        assert_eq!(f, ["10.0.0.1", "4242", "ab12", &"07".repeat(32)]);
    }
}
