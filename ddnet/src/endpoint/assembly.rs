//! A message as its runs arrive: kept as the buffers they were read
//! into (never copied into one), each byte taken once however the runs
//! overlap, and delivered as those runs in order.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

/// A message being put together from its runs.
pub struct Assembly {
    /// The runs arrived, by offset, as they were read (never copied into
    /// one buffer): no two overlap, a run sent again (or one overlapping
    /// others) adds only the bytes not here yet.
    pub(super) runs: BTreeMap<u64, Bytes>,
    pub(super) len: u64,
    pub(super) got: u64,
    /// When its first run arrived, and whether no other message was
    /// arriving meanwhile (then each link's part measures the link).
    pub(super) first: Instant,
    pub(super) alone: bool,
    /// Per link: bytes carried, and when its last run arrived.
    pub(super) parts: Vec<(u64, Instant)>,
}

impl Assembly {
    /// A message of `len` bytes over `links` links, its first run come
    /// at `now`.
    pub fn new(len: u64, links: usize, now: Instant, alone: bool) -> Assembly {
        Assembly { runs: BTreeMap::new(), len, got: 0, first: now, alone, parts: vec![(0, now); links] }
    }

    /// Every byte has come.
    pub fn is_whole(&self) -> bool {
        self.got == self.len
    }

    /// The message, as its runs in order.
    pub fn into_message(self) -> Message {
        Message(self.runs.into_values().collect())
    }

    /// Places `run` at `offset`: the bytes of it no run here covers yet
    /// (and none past the message's end). Returns how many it added.
    pub fn place(&mut self, offset: u64, run: Bytes) -> u64 {
        let end = offset.saturating_add(run.len() as u64).min(self.len);
        if offset >= end {
            return 0;
        }
        let mut gaps = vec![];
        let mut at = offset;
        let before = self.runs.range(..offset).next_back().map(|(&o, r)| (o, r.len() as u64));
        for (o, n) in before.into_iter().chain(self.runs.range(offset..end).map(|(&o, r)| (o, r.len() as u64))) {
            if o > at {
                gaps.push((at, o.min(end)));
            }
            at = at.max(o + n);
            if at >= end {
                break;
            }
        }
        if at < end {
            gaps.push((at, end));
        }
        let mut added = 0;
        for (a, b) in gaps {
            added += b - a;
            self.runs.insert(a, run.slice((a - offset) as usize..(b - offset) as usize));
        }
        self.got += added;
        added
    }
}

/// A message as it arrived: its runs in order (one, for a message sent
/// whole).
#[derive(Debug, Clone, Default)]
pub struct Message(pub(super) Vec<Bytes>);

impl Message {
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Bytes::is_empty)
    }

    /// Its runs, in order (no copy).
    pub fn runs(&self) -> &[Bytes] {
        &self.0
    }

    /// One buffer: the run itself for a message that came in one, else
    /// the runs copied together.
    pub fn into_bytes(mut self) -> Bytes {
        match self.0.len() {
            0 => Bytes::new(),
            1 => self.0.pop().expect("one"),
            _ => {
                let mut b = BytesMut::with_capacity(self.len());
                self.0.iter().for_each(|r| b.extend_from_slice(r));
                b.freeze()
            }
        }
    }
}
