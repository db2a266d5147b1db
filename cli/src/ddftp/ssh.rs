//! The ssh mirrors this command started: one session per mirror, started
//! the first time a transfer names it and shared by every transfer after
//! (several files, an archive's entries), ended when the command ends.

use std::sync::Mutex;
use std::time::Duration;

use ddftp::session::Peer;
use ddftp::ssh::{Session, SshMirror};

/// Each mirror started, with the peer it became or why it could not.
type Started = (SshMirror, Result<Peer, String>, Option<Session>);

static SESSIONS: Mutex<Vec<Started>> = Mutex::new(vec![]);

/// How a command's flags failed when every mirror was an ssh mirror and
/// none could be started: a transfer that could not begin (exit 1), not
/// a usage error.
pub const NONE_STARTED: &str = "no mirror could be started over ssh";

/// The exit code of a transfer whose setup failed with `e`.
pub fn setup_exit(e: &str) -> super::Exit {
    match e.starts_with(NONE_STARTED) {
        true => super::Exit::Transfer,
        false => super::Exit::Usage,
    }
}

/// How `ssh` is run: `-e`'s words and the remote ddftpd's path.
pub struct Rsh<'a> {
    pub words: Vec<String>,
    pub remote_ddftpd: &'a str,
    pub within: Duration,
    /// `--via-ssh`: the connections through a tunnel inside ssh.
    pub via_ssh: bool,
}

/// The mirrors `ms` as ddftpd peers: started now when not yet, each on a
/// thread of its own (their ssh handshakes overlap). A mirror that could
/// not be started is left out, with a warning saying why.
pub fn peers(ms: &[SshMirror], rsh: &Rsh<'_>) -> Vec<Peer> {
    let mut sessions = SESSIONS.lock().unwrap_or_else(|p| p.into_inner());
    let new: Vec<&SshMirror> = ms.iter().filter(|m| !sessions.iter().any(|(s, _, _)| s == *m)).collect();
    let started: Vec<Started> = std::thread::scope(|s| {
        let runs: Vec<_> = new
            .iter()
            .map(|&m| {
                s.spawn(move || match ddftp::ssh::start(m, &rsh.words, rsh.remote_ddftpd, rsh.within, rsh.via_ssh) {
                    Ok((session, peer)) => (m.clone(), Ok(peer), Some(session)),
                    Err(e) => (m.clone(), Err(e.to_string()), None),
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("an ssh start does not panic")).collect()
    });
    for (m, r, _) in &started {
        if let Err(e) = r {
            eprintln!("ddftp: warning: {m}: {e}; going on without it");
        }
    }
    sessions.extend(started);
    ms.iter().filter_map(|m| sessions.iter().find(|(s, _, _)| s == m).and_then(|(_, r, _)| r.clone().ok())).collect()
}

/// Ends every session (the remote ddftpds exit). Dropping them at exit
/// would not run: called before the command returns.
pub fn end_all() {
    let mut sessions = SESSIONS.lock().unwrap_or_else(|p| p.into_inner());
    // All told at once, then waited for: their ends overlap.
    for (_, _, s) in sessions.iter_mut() {
        if let Some(s) = s {
            s.hang_up();
        }
    }
    sessions.clear();
}
