//! The ssh mirrors this command started: one session per mirror, started
//! the first time a transfer names it and shared by every transfer after
//! (several files, an archive's entries), ended when the command ends.
//! Each starts on a thread of its own (their logins overlap); a transfer
//! waits for the first to answer and begins with those that have, and the
//! others join it as they answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ddftp::session::Peer;
use ddftp::ssh::{Session, SshMirror, Starting};

/// One mirror's start: its outcome as transfers see it, its session once
/// it answered, and the thread starting it.
struct Entry {
    mirror: SshMirror,
    starting: Starting,
    session: Option<Session>,
    thread: Option<JoinHandle<()>>,
}

struct All {
    entries: Vec<Entry>,
    /// The command ends: a session that answers now is ended at once.
    ended: bool,
}

static ALL: Mutex<All> = Mutex::new(All { entries: vec![], ended: false });
/// Told whenever a start ends.
static ANSWERED: Condvar = Condvar::new();
/// Set when the command ends: starts still waiting give up.
static CANCEL: AtomicBool = AtomicBool::new(false);

fn all() -> MutexGuard<'static, All> {
    ALL.lock().unwrap_or_else(|p| p.into_inner())
}

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

/// Where one ssh mirror stands for a transfer about to begin.
pub enum Now {
    Up(Peer),
    /// Still starting: it joins the transfer when it answers.
    Starting(Starting),
    /// It could not start (a warning said why).
    Failed,
}

/// The mirrors `ms`, in their order, once the first of them has answered
/// (or every one has failed): those not started yet are started now.
pub fn peers(ms: &[SshMirror], rsh: &Rsh<'_>) -> Vec<Now> {
    let mut all = all();
    for m in ms {
        if !all.entries.iter().any(|e| e.mirror == *m) {
            let entry = start(m, rsh);
            all.entries.push(entry);
        }
    }
    let ours = |all: &All| -> Vec<Starting> {
        ms.iter().filter_map(|m| all.entries.iter().find(|e| e.mirror == *m)).map(|e| e.starting.clone()).collect()
    };
    loop {
        let now: Vec<_> = ours(&all).iter().map(Starting::now).collect();
        if now.iter().any(|n| matches!(n, Some(Some(_)))) || now.iter().all(Option::is_some) {
            break;
        }
        all = ANSWERED.wait(all).unwrap_or_else(|p| p.into_inner());
    }
    ours(&all)
        .into_iter()
        .map(|s| match s.now() {
            Some(Some(p)) => Now::Up(p),
            Some(None) => Now::Failed,
            None => Now::Starting(s),
        })
        .collect()
}

/// `m`'s start, on a thread of its own.
fn start(m: &SshMirror, rsh: &Rsh<'_>) -> Entry {
    let (starting, answer) = ddftp::ssh::starting(&m.to_string());
    let (mirror, words, remote) = (m.clone(), rsh.words.clone(), rsh.remote_ddftpd.to_string());
    let (within, via_ssh) = (rsh.within, rsh.via_ssh);
    let thread = std::thread::spawn(move || {
        let r = ddftp::ssh::start(&mirror, &words, &remote, within, via_ssh, &CANCEL);
        let mut all = all();
        let ended = all.ended;
        let (peer, late) = match r {
            Ok((session, peer)) => match all.entries.iter_mut().find(|e| e.mirror == mirror) {
                Some(e) if !ended => {
                    e.session = Some(session);
                    (Some(peer), None)
                }
                // Too late: nobody will connect to it.
                _ => (None, Some(session)),
            },
            Err(ddftp::ssh::SshError::Cancelled) => (None, None),
            Err(e) => {
                eprintln!("ddftp: warning: {mirror}: {e}; going on without it");
                (None, None)
            }
        };
        answer.send(peer);
        ANSWERED.notify_all();
        drop(all);
        drop(late);
    });
    Entry { mirror: m.clone(), starting, session: None, thread: Some(thread) }
}

/// Ends every session (the remote ddftpds exit) and gives up the starts
/// still waiting. Dropping them at exit would not run: called before the
/// command returns.
pub fn end_all() {
    CANCEL.store(true, Ordering::Release);
    let (threads, mut sessions): (Vec<_>, Vec<_>) = {
        let mut all = all();
        all.ended = true;
        all.entries.iter_mut().map(|e| (e.thread.take(), e.session.take())).unzip()
    };
    // All told at once, then waited for: their ends overlap.
    for s in sessions.iter_mut().flatten() {
        s.hang_up();
    }
    for t in threads.into_iter().flatten() {
        let _ = t.join();
    }
    drop(sessions);
}
