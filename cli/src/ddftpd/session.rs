//! `ddftpd session DIR`: a ddftpd for the one client that started it over
//! ssh ([`ddftpd::session`]): on the address family the ssh client
//! reached (`SSH_CONNECTION`), told to the client on standard output as
//! one line. It ends when standard input closes: the ssh session ended,
//! however (the client finished, failed or was killed), so nothing is
//! left running.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::AsyncReadExt;

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

pub fn run(dir: &Path, follow_symlinks: bool) -> anyhow::Result<()> {
    let host = ssh_server_address()?;
    let root = beneath_home(dir, std::env::var_os("HOME").as_deref().map(Path::new));
    let root = root.canonicalize().with_context(|| format!("cannot serve {}", root.display()))?;
    let rt = tokio::runtime::Runtime::new().context("cannot start runtime")?;
    rt.block_on(async {
        let session = ddftpd::session::Session::start(&root, host, follow_symlinks, None)
            .await
            .with_context(|| format!("cannot serve {}", root.display()))?;
        let line = session.announce(&host.to_string())?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush()).context("cannot tell the client where to connect")?;
        drop(out);
        tracing::info!("serving {} for this ssh session", root.display());
        session.run(until_stdin_closes()).await;
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
}
