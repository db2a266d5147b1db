//! A producer's streams on one connection, as `ddftpd` keeps them: one
//! running stream and at most one `Start` waiting behind it. The server,
//! the simulator and the scheduler's tests all obey these rules through
//! this type, so they cannot drift apart.
//!
//! - A `Start` goes behind the running stream; a second one waiting is a
//!   protocol error ([`QueueFull`]).
//! - A stream at its `last` pauses (an `Extend` may move it on) until a
//!   `Start` waits behind it; then it ends (`Stopped`) and the waiting one
//!   runs.
//! - `End` stops a stream at once, running or waiting, with `Stopped`.

use crate::{Cursor, Direction};

/// One stream: its id, where it is, and what the owner keeps with it.
#[derive(Debug)]
pub struct Stream<T> {
    pub id: u32,
    pub cursor: Cursor,
    pub data: T,
}

/// A stream that ended, for the `Stopped` reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    pub stream: u32,
    pub sent: u64,
}

/// A `Start` came while another was already waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("at most one Start may wait behind the running stream")]
pub struct QueueFull;

/// What the producer does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Send this block of the running stream.
    Block { stream: u32, block: u64 },
    /// The running stream ended at its `last` (a `Start` waits): reply.
    Stopped(Stopped),
    /// Nothing to send: no stream, or one paused with none waiting.
    Wait,
}

/// The streams of one connection.
#[derive(Debug)]
pub struct Streams<T> {
    running: Option<Stream<T>>,
    queued: Option<Stream<T>>,
}

impl<T> Default for Streams<T> {
    fn default() -> Self {
        Streams { running: None, queued: None }
    }
}

impl<T> Streams<T> {
    /// A `Start`. A stream paused at its `last` ends now (returned), not when
    /// the next block would go, or two `Start`s read together (a producer
    /// reassigned twice in a row) would find no room.
    pub fn start(
        &mut self,
        id: u32,
        first: u64,
        last: u64,
        dir: Direction,
        data: T,
    ) -> Result<Option<Stopped>, QueueFull> {
        let mut ended = None;
        if self.running.as_ref().is_some_and(|r| r.cursor.finished()) {
            let r = self.running.take().expect("checked");
            self.running = self.queued.take();
            ended = Some(Stopped { stream: r.id, sent: r.cursor.sent() });
        }
        let s = Stream { id, cursor: Cursor::new(first, last, dir), data };
        if self.running.is_none() {
            self.running = Some(s);
        } else if self.queued.is_none() {
            self.queued = Some(s);
        } else {
            // Whatever ended stays ended; the connection is dropped anyway.
            return Err(QueueFull);
        }
        Ok(ended)
    }

    /// The streams an `Extend` of `id` applies to (the running or the
    /// waiting one), for the owner to check the bound and move it.
    pub fn find_mut(&mut self, id: u32) -> impl Iterator<Item = &mut Stream<T>> {
        self.running.iter_mut().chain(self.queued.iter_mut()).filter(move |s| s.id == id)
    }

    /// An `End`: the stream stops now, with what it sent; `None` if no such
    /// stream is here (it ended already).
    pub fn end(&mut self, id: u32) -> Option<Stopped> {
        if self.running.as_ref().is_some_and(|s| s.id == id) {
            let s = self.running.take().expect("checked");
            self.running = self.queued.take();
            Some(Stopped { stream: id, sent: s.cursor.sent() })
        } else if self.queued.as_ref().is_some_and(|s| s.id == id) {
            self.queued = None;
            Some(Stopped { stream: id, sent: 0 })
        } else {
            None
        }
    }

    /// Something to send: a block, or a `Stopped` for a stream at its end
    /// with a `Start` waiting.
    pub fn has_work(&self) -> bool {
        self.running.as_ref().is_some_and(|s| !s.cursor.finished() || self.queued.is_some())
    }

    /// No stream, or one paused at its `last` with nothing waiting.
    pub fn is_idle(&self) -> bool {
        !self.has_work()
    }

    /// Paused at its `last` with nothing waiting (the producer waits for
    /// the client, maybe for long).
    pub fn is_paused(&self) -> bool {
        self.running.as_ref().is_some_and(|s| s.cursor.finished()) && self.queued.is_none()
    }

    /// The running stream.
    pub fn running(&self) -> Option<&Stream<T>> {
        self.running.as_ref()
    }

    /// Takes the next step: the running stream's next block, or its end
    /// once at its `last` with a `Start` waiting (which then runs).
    pub fn step(&mut self) -> Next {
        let Some(s) = self.running.as_mut() else { return Next::Wait };
        if let Some(block) = s.cursor.take() {
            return Next::Block { stream: s.id, block };
        }
        if self.queued.is_none() {
            return Next::Wait;
        }
        let s = self.running.take().expect("checked");
        self.running = self.queued.take();
        Next::Stopped(Stopped { stream: s.id, sent: s.cursor.sent() })
    }
}

/// What a producer that fetches runs of blocks at once does next.
#[derive(Debug, PartialEq, Eq)]
pub enum NextRun {
    /// Fetch `count` blocks of the running stream from `first`, in `dir`.
    Run { stream: u32, first: u64, count: u64, dir: Direction },
    /// The running stream ended at its `last` (a `Start` waits): reply.
    Stopped(Stopped),
    /// Nothing to send.
    Wait,
}

impl<T> Streams<T> {
    /// Like [`step`](Self::step), up to `max` blocks of the running stream
    /// at once (a producer that fetches ranges: an HTTP mirror).
    pub fn step_run(&mut self, max: u64) -> NextRun {
        match self.step() {
            Next::Block { stream, block } => {
                let s = self.running.as_mut().expect("it gave a block");
                let mut count = 1;
                while count < max && s.cursor.take().is_some() {
                    count += 1;
                }
                NextRun::Run { stream, first: block, count, dir: s.cursor.dir() }
            }
            Next::Stopped(s) => NextRun::Stopped(s),
            Next::Wait => NextRun::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Decrement, Increment};

    #[test]
    fn a_start_waits_behind_the_running_stream_and_one_more_is_refused() {
        let mut s = Streams::default();
        assert_eq!(s.start(1, 0, 3, Increment, ()), Ok(None));
        assert_eq!(s.start(2, 9, 7, Decrement, ()), Ok(None));
        assert_eq!(s.start(3, 4, 5, Increment, ()), Err(QueueFull));
    }

    #[test]
    fn a_stream_pauses_at_its_last_until_extended_or_a_start_waits() {
        let mut s = Streams::default();
        s.start(1, 0, 1, Increment, ()).unwrap();
        assert_eq!(s.step(), Next::Block { stream: 1, block: 0 });
        assert_eq!(s.step(), Next::Block { stream: 1, block: 1 });
        assert_eq!(s.step(), Next::Wait);
        assert!(s.is_paused());
        s.find_mut(1).for_each(|st| st.cursor.set_last(2));
        assert_eq!(s.step(), Next::Block { stream: 1, block: 2 });
        // A Start behind a paused stream ends it at once.
        assert_eq!(s.start(2, 9, 8, Decrement, ()), Ok(Some(Stopped { stream: 1, sent: 3 })));
        assert_eq!(s.step(), Next::Block { stream: 2, block: 9 });
    }

    #[test]
    fn a_running_stream_at_its_last_ends_when_the_next_step_comes() {
        let mut s = Streams::default();
        s.start(1, 0, 0, Increment, ()).unwrap();
        s.start(2, 5, 5, Increment, ()).unwrap();
        assert_eq!(s.step(), Next::Block { stream: 1, block: 0 });
        assert_eq!(s.step(), Next::Stopped(Stopped { stream: 1, sent: 1 }));
        assert_eq!(s.step(), Next::Block { stream: 2, block: 5 });
    }

    #[test]
    fn runs_stop_at_the_bound_and_count_as_sent() {
        let mut s = Streams::default();
        s.start(1, 9, 2, Decrement, ()).unwrap();
        assert_eq!(s.step_run(5), NextRun::Run { stream: 1, first: 9, count: 5, dir: Decrement });
        assert_eq!(s.step_run(5), NextRun::Run { stream: 1, first: 4, count: 3, dir: Decrement });
        assert_eq!(s.step_run(5), NextRun::Wait);
        assert_eq!(s.end(1), Some(Stopped { stream: 1, sent: 8 }));
    }

    #[test]
    fn end_stops_the_running_or_the_waiting_stream() {
        let mut s = Streams::default();
        s.start(1, 0, 9, Increment, ()).unwrap();
        s.start(2, 20, 10, Decrement, ()).unwrap();
        assert_eq!(s.end(2), Some(Stopped { stream: 2, sent: 0 }));
        s.step();
        assert_eq!(s.end(1), Some(Stopped { stream: 1, sent: 1 }));
        assert_eq!(s.end(1), None);
        assert!(s.is_idle() && !s.is_paused());
    }
}
