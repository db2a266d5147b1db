//! Accepted connections that have not yet said who they are: a bounded
//! set of tasks, one each, the oldest dropped past the cap. A stranger
//! who opens connections and says nothing (or something wrong) holds at
//! most the cap's descriptors, for at most the greeting's timeout; one
//! who speaks at once (a sender's link, a scraper) is served within its
//! round trip however many strangers wait. And an `accept` that fails for
//! want of descriptors or memory pauses the listener, it does not end it.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use tokio::task::{AbortHandle, JoinSet};

/// The most links one channel has.
pub const MAX_LINKS: u32 = 64;

/// The most sessions whose links are still arriving, and how long one may
/// wait for the rest: a stranger's `Hello` naming a session of its own
/// holds a socket that long at most, and strangers together at most
/// `MAX_PENDING` sessions' worth.
pub const MAX_PENDING: usize = 32;
pub const PENDING_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a `Hello`'s link index and count can be a channel's.
pub fn admissible(index: u32, count: u32) -> bool {
    (1..=MAX_LINKS).contains(&count) && index < count
}

/// The links of sessions still arriving (an accepting end's), bounded in
/// number and age; `L` is a link. Pure: the time is passed in.
pub struct Pending<L> {
    sessions: HashMap<u64, (Instant, Vec<Option<L>>)>,
}

impl<L> Default for Pending<L> {
    fn default() -> Self {
        Pending { sessions: HashMap::new() }
    }
}

impl<L> Pending<L> {
    /// Adds link `index` of `count` of `session` ([`admissible`] ones
    /// only) at `now`; the session's links, in order, when it is
    /// complete. Sessions older than [`PENDING_TIMEOUT`] are dropped, and
    /// past [`MAX_PENDING`] the oldest goes for a new one. A link given
    /// twice replaces the first; a count that differs from the session's
    /// first is refused (dropped).
    pub fn add(&mut self, now: Instant, session: u64, index: u32, count: u32, link: L) -> Option<Vec<L>> {
        if !admissible(index, count) {
            return None;
        }
        self.sessions.retain(|_, (since, _)| now.saturating_duration_since(*since) < PENDING_TIMEOUT);
        if !self.sessions.contains_key(&session) && self.sessions.len() >= MAX_PENDING {
            let oldest = self.sessions.iter().min_by_key(|(_, (since, _))| *since).map(|(s, _)| *s);
            if let Some(s) = oldest {
                self.sessions.remove(&s);
            }
        }
        let (_, slots) = self.sessions.entry(session).or_insert_with(|| (now, (0..count).map(|_| None).collect()));
        if slots.len() != count as usize {
            return None;
        }
        slots[index as usize] = Some(link);
        if !slots.iter().all(Option::is_some) {
            return None;
        }
        let (_, slots) = self.sessions.remove(&session).expect("present");
        Some(slots.into_iter().flatten().collect())
    }

    /// Sessions waiting, and the links they hold.
    pub fn held(&self) -> (usize, usize) {
        let links = self.sessions.values().map(|(_, s)| s.iter().flatten().count()).sum();
        (self.sessions.len(), links)
    }
}

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
        // `order` holds the tasks not yet ended nor told to end.
        self.order.retain(|h| !h.is_finished());
        while self.order.len() >= self.cap {
            let Some(oldest) = self.order.pop_front() else { break };
            oldest.abort();
        }
        self.order.push_back(self.tasks.spawn(task));
    }

    /// Tasks greeting now (not ended, nor dropped).
    pub fn len(&self) -> usize {
        self.order.iter().filter(|h| !h.is_finished()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
            let done = Dropped(i, tx);
            g.spawn(async move {
                let _done = done;
                std::future::pending::<()>().await;
            });
        }
        assert_eq!(rx.recv().await, Some(0), "the oldest went first");
        assert_eq!(g.len(), 2);
        assert_eq!(after_failed_accept(&io::Error::from_raw_os_error(libc::EMFILE)), Some(Duration::from_millis(50)));
        assert_eq!(after_failed_accept(&io::Error::from_raw_os_error(libc::EBADF)), None);
    }

    #[test]
    fn strangers_hold_few_links_for_a_short_time() {
        let t0 = Instant::now();
        let mut p = Pending::default();
        assert!(p.add(t0, 1, 0, 2, "a0").is_none());
        for s in 100..200u64 {
            assert!(p.add(t0, s, 0, 64, "stranger").is_none());
        }
        let (sessions, links) = p.held();
        assert!(sessions <= MAX_PENDING && links <= MAX_PENDING, "{sessions} {links}");
        // A session whose links come at once completes.
        assert!(p.add(t0, 7, 1, 2, "b1").is_none());
        assert_eq!(p.add(t0, 7, 0, 2, "b0"), Some(vec!["b0", "b1"]));
        // Past the timeout nothing is held.
        assert!(p.add(t0 + PENDING_TIMEOUT, 9, 0, 3, "c").is_none());
        assert_eq!(p.held(), (1, 1));
        assert!(!admissible(0, 0) && !admissible(3, 3) && !admissible(0, 65) && admissible(63, 64));
    }

    proptest::proptest! {
        #[test]
        fn whatever_greets_what_is_held_is_bounded_and_complete_sessions_are_whole(
            hellos in proptest::collection::vec((0u64..40, 0u32..70, 0u32..70, 0u64..30), 0..400)
        ) {
            let t0 = Instant::now();
            let mut p = Pending::default();
            for (i, (session, index, count, secs)) in hellos.into_iter().enumerate() {
                if let Some(links) = p.add(t0 + Duration::from_secs(secs), session, index, count, (session, i)) {
                    proptest::prop_assert_eq!(links.len(), count as usize);
                    proptest::prop_assert!(links.iter().all(|(s, _)| *s == session));
                }
                let (sessions, links) = p.held();
                proptest::prop_assert!(sessions <= MAX_PENDING && links <= MAX_PENDING * MAX_LINKS as usize);
            }
        }
    }

    struct Dropped(u32, tokio::sync::mpsc::UnboundedSender<u32>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.1.send(self.0);
        }
    }
}
