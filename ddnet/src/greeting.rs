//! Accepted connections that have not yet said who they are: a bounded
//! set of tasks, one each, the oldest dropped past the cap. A stranger
//! who opens connections and says nothing (or something wrong) holds at
//! most the cap's descriptors, for at most the greeting's timeout; one
//! who speaks at once (a sender's link, a scraper) is served within its
//! round trip however many strangers wait. And an `accept` that fails for
//! want of descriptors or memory pauses the listener, it does not end it.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::task::{AbortHandle, JoinSet};

/// The tasks greeting connections, at most `cap` at once.
pub struct Greeters {
    tasks: JoinSet<()>,
    order: VecDeque<AbortHandle>,
    cap: usize,
}

impl Greeters {
    pub fn new(cap: usize) -> Greeters {
        Greeters { tasks: JoinSet::new(), order: VecDeque::new(), cap: cap.max(1) }
    }

    /// Greets one more connection with `task`; past the cap the oldest
    /// still running is dropped first.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.reap();
        while self.tasks.len() >= self.cap {
            let Some(oldest) = self.order.pop_front() else { break };
            oldest.abort();
            self.reap();
        }
        self.order.retain(|h| !h.is_finished());
        self.order.push_back(self.tasks.spawn(task));
    }

    /// Tasks greeting now.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits for one task to end (pending while there are none).
    pub async fn reaped(&mut self) {
        match self.tasks.join_next().await {
            Some(_) => {}
            None => std::future::pending().await,
        }
    }

    fn reap(&mut self) {
        while self.tasks.try_join_next().is_some() {}
    }
}

/// What to do after `accept` failed with `e`: `Some(pause)` where it is of
/// the moment (descriptors or memory short, a peer gone before it was
/// taken) and the listener goes on after the pause; `None`: it is broken.
pub fn after_failed_accept(e: &io::Error) -> Option<Duration> {
    let passing = matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::ECONNABORTED | libc::EPROTO)
    ) || matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset);
    passing.then_some(Duration::from_millis(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_cap_the_oldest_is_dropped() {
        let mut g = Greeters::new(2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let tx = tx.clone();
            g.spawn(async move {
                let _done = Dropped(i, tx);
                std::future::pending::<()>().await;
            });
        }
        assert_eq!(rx.recv().await, Some(0), "the oldest went first");
        assert_eq!(g.len(), 2);
        assert_eq!(after_failed_accept(&io::Error::from_raw_os_error(libc::EMFILE)), Some(Duration::from_millis(50)));
        assert_eq!(after_failed_accept(&io::Error::from_raw_os_error(libc::EBADF)), None);
    }

    struct Dropped(u32, tokio::sync::mpsc::UnboundedSender<u32>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.1.send(self.0);
        }
    }
}
