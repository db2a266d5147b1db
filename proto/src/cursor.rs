//! Where a stream is in its walk: the block it sends next, its bound, its
//! direction. The server walks a cursor to send; the client walks a copy to
//! check that every block is the one it must be; the simulator and the tests
//! walk it to behave like the server. One definition, so they cannot differ.

use crate::frame::Direction;

/// A stream's position: blocks `next`, `next±1`, ... through `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    next: u64,
    last: u64,
    dir: Direction,
    /// Went down past block 0: nothing can follow.
    exhausted: bool,
    /// Blocks taken so far.
    sent: u64,
}

impl Cursor {
    pub fn new(first: u64, last: u64, dir: Direction) -> Self {
        Cursor { next: first, last, dir, exhausted: false, sent: 0 }
    }

    /// The block that comes next, if the bound allows it.
    pub fn peek(&self) -> Option<u64> {
        (!self.finished()).then_some(self.next)
    }

    /// Takes the next block (see [`peek`](Self::peek)).
    pub fn take(&mut self) -> Option<u64> {
        let b = self.peek()?;
        match self.dir.step(b) {
            Some(n) => self.next = n,
            None => self.exhausted = true,
        }
        self.sent += 1;
        Some(b)
    }

    /// At the bound (the stream pauses there) or past block 0.
    pub fn finished(&self) -> bool {
        self.exhausted || self.dir.span(self.next, self.last) == 0
    }

    /// Moves the bound; a bound behind `next` pauses the stream at once.
    pub fn set_last(&mut self, last: u64) {
        self.last = last;
    }

    pub fn dir(&self) -> Direction {
        self.dir
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_both_ways_and_pauses_at_the_bound() {
        let mut up = Cursor::new(3, 5, Direction::Increment);
        assert_eq!((up.take(), up.take(), up.take(), up.take()), (Some(3), Some(4), Some(5), None));
        assert!(up.finished());
        up.set_last(6);
        assert_eq!(up.take(), Some(6));
        assert_eq!(up.sent(), 4);
        let mut down = Cursor::new(1, 0, Direction::Decrement);
        assert_eq!((down.take(), down.take(), down.take()), (Some(1), Some(0), None));
        down.set_last(0);
        assert!(down.finished(), "nothing below block 0");
        let mut shrunk = Cursor::new(10, 20, Direction::Increment);
        shrunk.set_last(5);
        assert_eq!(shrunk.peek(), None);
    }
}
