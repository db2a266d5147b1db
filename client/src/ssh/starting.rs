//! An ssh mirror still starting, as a transfer sees it. Logins take their
//! time (a far host, a slow one, one behind a bastion), so a command
//! begins with the ssh mirrors that have answered and each other one
//! joins the running transfer when its remote ddftpd answers, as a late
//! ddftpd mirror does. Its starter ([`Answer`]) says what came of it: the
//! mirror to connect to, or nothing (it said why itself).

use std::sync::Arc;

use tokio::sync::watch;

use crate::session::Peer;

/// What came of a start: `None` while it goes on, then the mirror, or
/// `Some(None)` when it could not start.
type Outcome = Option<Option<Peer>>;

/// A mirror being started elsewhere (a thread of the command's): cloned
/// into each transfer that could use it.
#[derive(Clone)]
pub struct Starting {
    name: Arc<str>,
    rx: watch::Receiver<Outcome>,
}

/// The starter's half: sent once, when the remote ddftpd answered or the
/// start failed. Dropped unsent, it says the start failed.
pub struct Answer(watch::Sender<Outcome>);

/// A start of the mirror called `name` (its `ssh://` URL), and the half
/// its starter answers with.
pub fn starting(name: &str) -> (Starting, Answer) {
    let (tx, rx) = watch::channel(None);
    (Starting { name: name.into(), rx }, Answer(tx))
}

impl Answer {
    /// The start ended: with the mirror to connect to, or `None`.
    pub fn send(self, peer: Option<Peer>) {
        self.0.send_replace(Some(peer));
    }
}

impl Starting {
    /// Its `ssh://` name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What came of it so far: `None` while it goes on.
    pub fn now(&self) -> Outcome {
        self.rx.borrow().clone()
    }

    /// The mirror, once it answers; `None` if it could not start.
    pub async fn started(mut self) -> Option<Peer> {
        match self.rx.wait_for(Option::is_some).await {
            Ok(o) => o.clone().flatten(),
            // The starter went away without a word.
            Err(_) => None,
        }
    }
}

impl std::fmt::Debug for Starting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Starting").field("name", &self.name).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddftp_proto::Endpoint;

    fn peer() -> Peer {
        Peer::plain(Endpoint { host: "127.0.0.1".into(), port: 7 })
    }

    #[tokio::test]
    async fn a_start_is_seen_by_every_clone_once_it_answers() {
        let (s, answer) = starting("ssh://h/d");
        let (a, b) = (s.clone(), s.clone());
        assert_eq!(s.now(), None);
        let waiting = tokio::spawn(a.started());
        answer.send(Some(peer()));
        assert_eq!(waiting.await.unwrap(), Some(peer()));
        assert_eq!(b.started().await, Some(peer()));
        assert_eq!(s.now(), Some(Some(peer())));
    }

    #[tokio::test]
    async fn a_failed_or_abandoned_start_gives_no_mirror() {
        let (s, answer) = starting("ssh://h/d");
        answer.send(None);
        assert_eq!(s.started().await, None);
        let (s, answer) = starting("ssh://h/d");
        drop(answer);
        assert_eq!(s.clone().started().await, None);
        assert_eq!(s.now(), None);
    }
}
