//! Who sends which bytes of which message: the sans-IO claim state shared by
//! a striped endpoint's link writers.
//!
//! Each message is cut into segments; a segment has up to two workers, one
//! claiming runs from its low end upwards, one from its high end downwards,
//! so a pair of links meets wherever their speeds put the meeting point and
//! neither waits for the other. Live links are paired in order and each
//! pair gets a segment sized by the pair's measured rate; an odd link works a
//! segment alone from its low end. A link with nothing left helps: it takes
//! a free end of the segment that would finish last, or splits that segment
//! (rates decide where) and works the new gap's high end (the DDOps rule,
//! one link at a time). Messages below `small` go whole to the fastest link:
//! striping them would cost more than it gains.
//!
//! A link's socket swallows far more than the link has sent, so claiming as
//! fast as sockets take data would split a short message evenly whatever the
//! speeds. So each link's backlog (bytes written, not yet acknowledged) is
//! fed in, and a pair worker takes its next run only if it would have
//! delivered it before its partner could deliver everything left of the
//! segment: the meeting point then falls where the links' speeds put it,
//! for a 64 KiB message as for a 64 MiB one.
//!
//! Claims are remembered by the caller until the peer acknowledges the
//! message; when a link fails, its claims come back here ([`Plan::on_failed`])
//! and are claimed again by the others before anything new.

use std::collections::VecDeque;

use ddops::split::lower_share;

/// How many delivery-rate samples a link's rate is taken from (their lower
/// quartile): one sample can be far off, and one wrong rate would starve a
/// link or flood it. Low, not middle: a link given a short part delivers it
/// in a token-bucket burst and looks faster than it is once given more.
const SAMPLES: usize = 8;

/// A link's index in its endpoint.
pub type LinkId = usize;

/// Bytes `offset..offset+len` of message `msg`, to be sent by one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub msg: u64,
    pub offset: u64,
    pub len: u32,
}

/// Tuning, with defaults that suit links from 10 Mbit/s to 10 Gbit/s.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    /// Messages shorter than this go on one link.
    pub small: u64,
    /// Largest run one claim takes.
    pub max_run: u32,
    /// Smallest run (except a message's last bytes).
    pub min_run: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig { small: 32 * 1024, max_run: 512 * 1024, min_run: 8 * 1024 }
    }
}

#[derive(Debug)]
struct Segment {
    lo: u64,
    hi: u64,
    lo_worker: Option<LinkId>,
    hi_worker: Option<LinkId>,
}

#[derive(Debug)]
struct Message {
    id: u64,
    /// Run size for this message.
    run: u64,
    segments: Vec<Segment>,
    /// Helpers may join (not for small messages).
    helpable: bool,
    /// A zero-length message still needs one (empty) run.
    empty_pending: bool,
}

#[derive(Debug)]
struct Link {
    alive: bool,
    /// Bytes per second: the lower quartile of the last samples; 0 until
    /// measured.
    rate: f64,
    /// The last [`SAMPLES`] rate samples, oldest overwritten first.
    samples: Vec<f64>,
    next_sample: usize,
    /// Bytes written on the link and not yet acknowledged by the peer.
    backlog: u64,
}

/// What a link should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send this run.
    Run(Claim),
    /// Its partner will deliver the rest sooner: look again when backlogs
    /// have moved.
    Later,
    /// Nothing for this link now.
    Nothing,
}

/// The claim state of one sending endpoint.
#[derive(Debug)]
pub struct Plan {
    cfg: PlanConfig,
    links: Vec<Link>,
    messages: VecDeque<Message>,
    /// How many of `messages` are striped (helpable): none, and every
    /// message goes whole on one link.
    striped: usize,
    redo: VecDeque<Claim>,
    next_id: u64,
    /// Emptied segment lists of messages gone, for the next ones: no
    /// allocation a message.
    spare: Vec<Vec<Segment>>,
}

/// How many emptied segment lists a plan keeps.
const SPARE_SEGMENTS: usize = 8;

impl Plan {
    pub fn new(links: usize, cfg: PlanConfig) -> Plan {
        Plan {
            cfg,
            links: (0..links)
                .map(|_| Link { alive: true, rate: 0.0, samples: vec![], next_sample: 0, backlog: 0 })
                .collect(),
            messages: VecDeque::new(),
            striped: 0,
            redo: VecDeque::new(),
            next_id: 0,
            spare: vec![],
        }
    }

    /// Ids given so far (the next message gets this one).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    pub fn alive(&self) -> usize {
        self.links.iter().filter(|l| l.alive).count()
    }

    /// A link's rate for planning: measured, or the mean of the measured
    /// ones (1.0 if none is), so unmeasured links get an equal share.
    fn rate(&self, l: LinkId) -> f64 {
        if self.links[l].rate > 0.0 {
            return self.links[l].rate;
        }
        // No allocation: this is asked for every short message queued.
        let (sum, n) =
            self.links.iter().filter(|l| l.alive && l.rate > 0.0).fold((0.0, 0), |(s, n), l| (s + l.rate, n + 1));
        if n == 0 {
            1.0
        } else {
            sum / f64::from(n)
        }
    }

    /// The link's last measured rate (bytes/s; 0 before any).
    pub fn measured_rate(&self, link: LinkId) -> f64 {
        self.links[link].rate
    }

    /// Queues a message of `len` bytes; returns its id.
    pub fn push(&mut self, len: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let live = || (0..self.links.len()).filter(|&l| self.links[l].alive);
        let n = live().count();
        let empty_pending = len == 0;
        let m = if len < self.cfg.small || n <= 1 {
            let fastest = self.fastest();
            // Whole on one link, in runs as long as they may be: a short
            // message is one run, one frame, one write (two writes put a
            // short segment on the wire between them).
            let run = len.clamp(1, u64::from(self.cfg.max_run));
            let mut segments = self.spare.pop().unwrap_or_default();
            segments.push(Segment { lo: 0, hi: len, lo_worker: fastest, hi_worker: None });
            Message { id, run, segments, helpable: false, empty_pending }
        } else {
            let run = (len / (4 * n as u64)).clamp(u64::from(self.cfg.min_run), u64::from(self.cfg.max_run));
            let mut m =
                Message { id, run, segments: self.spare.pop().unwrap_or_default(), helpable: true, empty_pending };
            let live: Vec<LinkId> = live().collect();
            let groups: Vec<&[LinkId]> = live.chunks(2).collect();
            let weights: Vec<f64> = groups.iter().map(|g| g.iter().map(|&l| self.rate(l)).sum()).collect();
            let total: f64 = weights.iter().sum();
            let mut at = 0u64;
            for (i, g) in groups.iter().enumerate() {
                let end =
                    if i + 1 == groups.len() { len } else { (at + (len as f64 * weights[i] / total) as u64).min(len) };
                m.segments.push(Segment { lo: at, hi: end, lo_worker: Some(g[0]), hi_worker: g.get(1).copied() });
                at = end;
            }
            m
        };
        self.striped += usize::from(m.helpable);
        self.messages.push_back(m);
        id
    }

    /// The live link with the highest measured rate (ties, and no rate
    /// measured yet, go to the first given): asked for every short message.
    fn fastest(&self) -> Option<LinkId> {
        let mut best: Option<(LinkId, f64)> = None;
        for (l, link) in self.links.iter().enumerate().filter(|(_, l)| l.alive) {
            if best.is_none_or(|(_, r)| link.rate > r) {
                best = Some((l, link.rate));
            }
        }
        best.map(|(l, _)| l)
    }

    /// The link a message of `len` bytes goes on whole at once, claimed as
    /// it is queued ([`Plan::claim_whole`]), if it is short and nothing is
    /// left to claim (nothing it would have to wait behind): the caller
    /// then need not queue it and claim it back.
    pub fn whole_link(&self, len: u64) -> Option<LinkId> {
        (len < self.cfg.small && self.is_idle()).then(|| self.fastest()).flatten()
    }

    /// A message of `len` bytes that [`Plan::whole_link`] gave a link,
    /// queued and claimed whole by that link in one step: its claim.
    pub fn claim_whole(&mut self, len: u64) -> Claim {
        debug_assert!(len < self.cfg.small && self.is_idle(), "only what whole_link allows");
        let id = self.next_id;
        self.next_id += 1;
        Claim { msg: id, offset: 0, len: len as u32 }
    }

    /// The next run `link` should send, if any (tests drive the plan so).
    #[cfg(test)]
    fn claim(&mut self, link: LinkId) -> Option<Claim> {
        match self.next(link) {
            Next::Run(c) => Some(c),
            Next::Later | Next::Nothing => None,
        }
    }

    /// What `link` should do next: a run to send, wait for backlogs to
    /// move, or nothing.
    pub fn next(&mut self, link: LinkId) -> Next {
        if !self.links.get(link).is_some_and(|l| l.alive) {
            return Next::Nothing;
        }
        if let Some(c) = self.redo.pop_front() {
            return Next::Run(c);
        }
        let next = match self.own_work(link) {
            Next::Nothing => self.help(link).map_or(Next::Nothing, Next::Run),
            n => n,
        };
        // Claimed messages leave from the front (one claimed behind an
        // unclaimed one waits its turn): a pass over all of them per claim
        // was quadratic in a queue of many short messages.
        while self.messages.front().is_some_and(|m| !m.empty_pending && m.segments.iter().all(|s| s.lo >= s.hi)) {
            let mut m = self.messages.pop_front().expect("front");
            self.striped -= usize::from(m.helpable);
            if self.spare.len() < SPARE_SEGMENTS {
                m.segments.clear();
                self.spare.push(m.segments);
            }
        }
        next
    }

    /// Whether `link` would deliver a run of the segment before `partner`,
    /// working from the other end, could deliver all of what is left.
    fn before_partner(&self, link: LinkId, partner: Option<LinkId>, s: &Segment, run: u64) -> bool {
        let Some(p) = partner.filter(|&p| self.links[p].alive) else { return true };
        let mine = (self.links[link].backlog + run.min(s.hi - s.lo)) as f64 / self.rate(link);
        let theirs = (self.links[p].backlog + (s.hi - s.lo)) as f64 / self.rate(p);
        mine <= theirs
    }

    fn own_work(&mut self, link: LinkId) -> Next {
        let mut later = false;
        for mi in 0..self.messages.len() {
            let m = &self.messages[mi];
            if m.empty_pending {
                if m.segments[0].lo_worker == Some(link) {
                    let m = &mut self.messages[mi];
                    m.empty_pending = false;
                    return Next::Run(Claim { msg: m.id, offset: 0, len: 0 });
                }
                continue;
            }
            let (id, run) = (m.id, m.run);
            let mine =
                m.segments.iter().position(|s| s.lo < s.hi && (s.lo_worker == Some(link) || s.hi_worker == Some(link)));
            let Some(si) = mine else { continue };
            let s = &m.segments[si];
            let (low_end, partner) = if s.lo_worker == Some(link) { (true, s.hi_worker) } else { (false, s.lo_worker) };
            if !self.before_partner(link, partner, s, run) {
                // The partner finishes this segment sooner; a later
                // message may still have work for this link.
                later = true;
                continue;
            }
            let s = &mut self.messages[mi].segments[si];
            return Next::Run(if low_end { take_lo(id, run, s) } else { take_hi(id, run, s) });
        }
        if later {
            Next::Later
        } else {
            Next::Nothing
        }
    }

    fn help(&mut self, link: LinkId) -> Option<Claim> {
        for mi in 0..self.messages.len() {
            let m = &self.messages[mi];
            // An orphan small message (its link died) is taken whole.
            let orphan = |s: &Segment, links: &[Link]| !s.lo_worker.is_some_and(|w| links[w].alive);
            if m.empty_pending {
                if orphan(&m.segments[0], &self.links) {
                    let m = &mut self.messages[mi];
                    m.segments[0].lo_worker = Some(link);
                    m.empty_pending = false;
                    return Some(Claim { msg: m.id, offset: 0, len: 0 });
                }
                continue;
            }
            if !m.helpable {
                if m.segments[0].lo < m.segments[0].hi && orphan(&m.segments[0], &self.links) {
                    let m = &mut self.messages[mi];
                    m.segments[0].lo_worker = Some(link);
                    return Some(take_lo(m.id, m.run, &mut m.segments[0]));
                }
                continue;
            }
            // The segment that would finish last.
            let eta = |s: &Segment| {
                let r: f64 = [s.lo_worker, s.hi_worker]
                    .iter()
                    .flatten()
                    .filter(|&&w| self.links[w].alive)
                    .map(|&w| self.rate(w))
                    .sum();
                if r > 0.0 {
                    (s.hi - s.lo) as f64 / r
                } else {
                    f64::INFINITY
                }
            };
            let Some(si) = (0..m.segments.len())
                .filter(|&i| m.segments[i].lo < m.segments[i].hi)
                .max_by(|&a, &b| eta(&m.segments[a]).total_cmp(&eta(&m.segments[b])))
            else {
                continue;
            };
            let dead = |w: Option<LinkId>| !w.is_some_and(|w| self.links[w].alive);
            let (lo_free, hi_free) = (dead(m.segments[si].lo_worker), dead(m.segments[si].hi_worker));
            let (id, run) = (m.id, m.run);
            let my_rate = self.rate(link);
            let lo_rate = m.segments[si].lo_worker.map_or(0.0, |w| self.rate(w));
            let hi_rate = m.segments[si].hi_worker.map_or(0.0, |w| self.rate(w));
            let m = &mut self.messages[mi];
            let s = &mut m.segments[si];
            if hi_free {
                s.hi_worker = Some(link);
                return Some(take_hi(id, run, s));
            }
            if lo_free {
                s.lo_worker = Some(link);
                return Some(take_lo(id, run, s));
            }
            let left = s.hi - s.lo;
            if left < 2 * run {
                // Not worth a split: the owners finish it within a run or two.
                continue;
            }
            // [lo, cut) stays with the low worker and gets us at its high
            // end; [cut, hi) stays with the high worker alone.
            // The DDOps split rule, weights in bytes per second.
            let w = |r: f64| r.max(0.0) as u128;
            let lower = lower_share(left, w(lo_rate) + w(my_rate), w(lo_rate) + w(my_rate) + w(hi_rate));
            let cut = s.lo + lower.clamp(run, left - run);
            let rest = Segment { lo: cut, hi: s.hi, lo_worker: None, hi_worker: s.hi_worker };
            s.hi = cut;
            s.hi_worker = Some(link);
            let c = take_hi(id, run, s);
            m.segments.insert(si + 1, rest);
            // The new segment's low end is free: the next helper takes it.
            return Some(c);
        }
        None
    }

    /// A delivery-rate sample (bytes per second) for `link`, as measured by
    /// its sender or reported by the receiver; the link's rate is the lower
    /// quartile of its last samples.
    pub fn set_rate(&mut self, link: LinkId, rate: f64) {
        if rate.is_nan() || rate <= 0.0 {
            return;
        }
        let l = &mut self.links[link];
        if l.samples.len() < SAMPLES {
            l.samples.push(rate);
        } else {
            l.samples[l.next_sample] = rate;
        }
        l.next_sample = (l.next_sample + 1) % SAMPLES;
        let mut sorted = l.samples.clone();
        sorted.sort_by(f64::total_cmp);
        l.rate = sorted[sorted.len() / 4];
    }

    /// Bytes `link` has written and the peer not yet acknowledged.
    pub fn set_backlog(&mut self, link: LinkId, bytes: u64) {
        self.links[link].backlog = bytes;
    }

    /// A link failed; `lost` are its claims the peer has not acknowledged.
    pub fn on_failed(&mut self, link: LinkId, lost: impl IntoIterator<Item = Claim>) {
        if let Some(l) = self.links.get_mut(link) {
            l.alive = false;
        }
        self.redo.extend(lost);
    }

    /// `link` works again (on a new connection): it claims and helps as
    /// before; its rate is kept, its backlog starts at nothing.
    pub fn on_revived(&mut self, link: LinkId) {
        if let Some(l) = self.links.get_mut(link) {
            l.alive = true;
            l.backlog = 0;
        }
    }

    /// The peer acknowledged message `msg`: a claim of it a failed link
    /// left to send again is moot (a link can fail, the peer having
    /// closed it, before the ack that another link carries arrives).
    pub fn on_acked(&mut self, msg: u64) {
        if !self.redo.is_empty() {
            self.redo.retain(|c| c.msg != msg);
        }
    }

    /// The link a queued message goes on whole, if it is one of those.
    pub fn sole_link(&self, id: u64) -> Option<LinkId> {
        // Usually the one just queued, at the back.
        let m = self.messages.iter().rev().find(|m| m.id == id)?;
        (!m.helpable && m.segments.len() == 1).then_some(m.segments[0].lo_worker).flatten()
    }

    /// What is left to claim goes whole on one link each (short messages,
    /// or a single link): no pair decision needs the links' backlogs.
    pub fn one_link_work(&self) -> bool {
        self.redo.is_empty() && self.striped == 0
    }

    /// Nothing left to claim (the front message is never a claimed one:
    /// `next` takes those away).
    pub fn is_idle(&self) -> bool {
        self.redo.is_empty() && self.messages.is_empty()
    }
}

fn take_lo(msg: u64, run: u64, s: &mut Segment) -> Claim {
    let n = run.min(s.hi - s.lo);
    let c = Claim { msg, offset: s.lo, len: n as u32 };
    s.lo += n;
    c
}

fn take_hi(msg: u64, run: u64, s: &mut Segment) -> Claim {
    let n = run.min(s.hi - s.lo);
    s.hi -= n;
    Claim { msg, offset: s.hi, len: n as u32 }
}

#[cfg(test)]
mod tests;
