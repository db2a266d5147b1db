//! A frame on its way out of a link: header and payload, and how much of
//! them the socket has taken.

use std::io;

use bytes::{Buf, Bytes};

use super::state::Work;
use crate::plan::Claim;

/// Payloads up to this long are copied behind their header: one buffer
/// goes out with `send`, which costs the kernel less than a two-part
/// `sendmsg` (a good part of a short message's cost), and copying a few
/// KiB costs less than that. (At 16 KiB the copy costs more: a 16 KiB
/// ping-pong over loopback went from 0.981 to 0.989 of one TCP stream's
/// speed when this was lowered from 16 to 4 KiB.)
pub(super) const COPY_PAYLOAD: usize = 4 * 1024;

/// A frame being written: header (acks, reports, run header) and payload.
pub(super) struct Unsent {
    pub(super) head: Vec<u8>,
    /// How much of `head` is written.
    pub(super) head_at: usize,
    pub(super) payload: Bytes,
    /// The run it carries, or whether it is the closing frame.
    pub(super) run: Option<Claim>,
    pub(super) close: bool,
}

impl Unsent {
    /// The frame a piece of work writes, if any.
    pub(super) fn of(work: Work) -> Option<Unsent> {
        match work {
            Work::Frame(head, run) if !head.is_empty() || run.is_some() => Some(Unsent::frame(head, run)),
            Work::Close(head) => Some(Unsent { head, head_at: 0, payload: Bytes::new(), run: None, close: true }),
            _ => None,
        }
    }

    /// A frame: its header, and the run it carries if any.
    pub(super) fn frame(mut head: Vec<u8>, run: Option<(Claim, Bytes)>) -> Unsent {
        let (run, mut payload) = run.map_or((None, Bytes::new()), |(c, p)| (Some(c), p));
        if payload.len() <= COPY_PAYLOAD {
            head.extend_from_slice(&payload);
            payload = Bytes::new();
        }
        Unsent { head, head_at: 0, payload, run, close: false }
    }

    pub(super) fn is_written(&self) -> bool {
        self.head_at == self.head.len() && self.payload.is_empty()
    }

    pub(super) fn slices(&self) -> [io::IoSlice<'_>; 2] {
        [io::IoSlice::new(&self.head[self.head_at..]), io::IoSlice::new(&self.payload)]
    }

    pub(super) fn advance(&mut self, n: usize) {
        let from_head = n.min(self.head.len() - self.head_at);
        self.head_at += from_head;
        self.payload.advance(n - from_head);
    }
}
