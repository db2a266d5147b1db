//! Segments and their edges: a gap of unclaimed blocks with a stream on
//! each side, claims granted and extended from the edges, released when a
//! stream ends.

use super::*;

impl Scheduler {
    pub(super) fn add_segment(&mut self, lo: u64, hi: u64) -> usize {
        let id = self.next_segment;
        self.next_segment += 1;
        self.segments.insert(id, Segment { lo, hi, span: hi - lo, up: None, down: None, told: None });
        id
    }

    /// Cuts segment `sid`'s gap at `at`: the part below keeps its low
    /// edge, the part above (a new segment, returned) takes its high edge.
    pub(super) fn cut(&mut self, sid: usize, at: u64) -> usize {
        let seg = self.segments[&sid].clone();
        let upper = self.add_segment(at, seg.hi);
        let lower = self.segments.get_mut(&sid).expect("live");
        lower.hi = at;
        lower.span = at - lower.lo;
        lower.down = None;
        if let Some(d) = seg.down {
            self.segments.get_mut(&upper).expect("just made").down = Some(d);
            self.streams.get_mut(&d).expect("live").segment = Some(upper);
        }
        upper
    }

    /// Per producer: its streams not finished, and whether it is a
    /// segment's edge (what decides whether it can take new work).
    pub(super) fn load(&self) -> (Vec<usize>, Vec<bool>) {
        let mut busy = vec![0usize; self.producers.len()];
        let mut edge = vec![false; self.producers.len()];
        for s in self.streams.values().filter(|s| !s.finished()) {
            busy[s.producer] += 1;
            edge[s.producer] |= s.segment.is_some();
        }
        (busy, edge)
    }

    /// Makes a pending stream for `producer` on one edge of segment `sid`.
    pub(super) fn attach(&mut self, sid: usize, side: Side, producer: ProducerId, now: Instant) {
        let id = self.next_stream;
        self.next_stream += 1;
        let seg = self.segments.get_mut(&sid).expect("live segment");
        let (dir, next, slot) = match side {
            Side::Lo => (Direction::Increment, seg.lo, &mut seg.up),
            Side::Hi => (Direction::Decrement, seg.hi.wrapping_sub(1), &mut seg.down),
        };
        *slot = Some(id);
        let idle = !self.streams.values().any(|s| s.producer == producer && !s.finished());
        if idle {
            self.producers[producer].rate.restart(now);
        }
        let rtt_probe = idle.then_some(now);
        self.streams.insert(
            id,
            Stream {
                producer,
                dir,
                next,
                remaining: 0,
                pending: true,
                delivered: 0,
                segment: Some(sid),
                rtt_probe,
                ending: false,
            },
        );
    }

    /// Removes a stream, returning its undelivered claim to the gaps; says
    /// which segment edge it vacated, if any.
    pub(super) fn release(&mut self, id: StreamId) -> Option<(usize, Side)> {
        let s = self.streams.remove(&id).expect("live stream");
        if let Some(sid) = s.segment {
            let seg = self.segments.get_mut(&sid).expect("attached segment");
            if seg.up == Some(id) {
                seg.up = None;
                if s.remaining > 0 {
                    seg.lo = s.next;
                }
                Some((sid, Side::Lo))
            } else {
                seg.down = None;
                if s.remaining > 0 {
                    seg.hi = s.next + 1;
                }
                Some((sid, Side::Hi))
            }
        } else {
            if s.remaining > 0 {
                let (lo, hi) = s.claim();
                self.add_segment(lo, hi + 1);
            }
            None
        }
    }

    /// Claims for `p` ran dry: double how far ahead they run.
    pub(super) fn widen(&mut self, p: ProducerId) {
        let w = self.want(p);
        let cap = (self.total / 8).max(self.cfg.min_window);
        let pr = &mut self.producers[p];
        pr.window = 2 * pr.window.max(w);
        pr.floor = (2 * w).min(cap);
    }

    /// Tops up the claims on both edges of a segment, splitting the last of
    /// the gap so both edges finish together; removes the segment once its
    /// gap is empty.
    pub(super) fn grant(&mut self, sid: usize) {
        let seg = self.segments[&sid].clone();
        let gap = seg.hi.saturating_sub(seg.lo);
        let need = |slot: Option<StreamId>| -> u64 {
            slot.map_or(0, |id| {
                let s = &self.streams[&id];
                let mut w = self.want(s.producer);
                if self.rate(s.producer).is_none() {
                    w = w.min((seg.span / 4).max(1));
                }
                if s.remaining * 2 <= w {
                    w - s.remaining
                } else {
                    0
                }
            })
        };
        let (nl, nr) = self.paced(sid, &seg, (need(seg.up), need(seg.down)));
        if gap > 0 && nl + nr > 0 {
            let (gl, gr) = if nl + nr <= gap {
                (nl, nr)
            } else {
                match (seg.up, seg.down) {
                    (Some(l), Some(r)) => {
                        let (sl, sr) = (&self.streams[&l], &self.streams[&r]);
                        let (wl, wr) = (self.weight(sl.producer), self.weight(sr.producer));
                        // Equal finish times: (rem_l + x) / wl = (rem_r + gap - x) / wr.
                        let x = (wl * (sr.remaining + gap) as f64 - wr * sl.remaining as f64) / (wl + wr);
                        let x = (x.round().max(0.0) as u64).min(gap);
                        (x, gap - x)
                    }
                    (Some(_), None) => (gap, 0),
                    (None, Some(_)) => (0, gap),
                    (None, None) => (0, 0),
                }
            };
            if let Some(l) = seg.up {
                self.extend(sid, l, gl);
            }
            if let Some(r) = seg.down {
                self.extend(sid, r, gr);
            }
        }
        let seg = &self.segments[&sid];
        if seg.hi <= seg.lo && !self.relay_waits_on(seg) {
            // Nothing left to hand out: the edges finish their claims and are
            // free to help elsewhere. Pending edges never start.
            let seg = self.segments.remove(&sid).expect("live");
            for id in [seg.up, seg.down].into_iter().flatten() {
                if self.streams[&id].pending {
                    self.streams.remove(&id);
                } else {
                    self.streams.get_mut(&id).expect("live").segment = None;
                }
            }
        }
    }

    /// Moves `n` blocks from the segment's gap into stream `id`'s claim.
    pub(super) fn extend(&mut self, sid: usize, id: StreamId, n: u64) {
        if n == 0 {
            return;
        }
        let seg = self.segments.get_mut(&sid).expect("live");
        let s = self.streams.get_mut(&id).expect("live");
        if s.dir == Direction::Increment {
            seg.lo += n;
        } else {
            seg.hi -= n;
        }
        if s.remaining == 0 && !s.pending {
            // It had nothing to send until now: not silent before.
            self.producers[s.producer].rate.last = Some(self.now);
        }
        s.remaining += n;
        let last = match s.dir {
            Direction::Increment => s.next + s.remaining - 1,
            Direction::Decrement => s.next + 1 - s.remaining,
        };
        // The blocks just granted, lowest first.
        let (producer, dir) = (s.producer, s.dir);
        let granted = match dir {
            Direction::Increment => last + 1 - n..last + 1,
            Direction::Decrement => last..last + n,
        };
        self.tell(producer, dir, granted);
        let s = self.streams.get_mut(&id).expect("live");
        if s.pending {
            s.pending = false;
            self.stats.starts += 1;
            self.actions.push_back(Action::Start { producer: s.producer, stream: id, first: s.next, last, dir: s.dir });
        } else {
            self.stats.extends += 1;
            self.actions.push_back(Action::Extend { producer: s.producer, stream: id, last });
        }
    }
}
