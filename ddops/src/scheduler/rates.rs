//! What the scheduler knows of each producer's speed: measured rates,
//! their round trips, and how far ahead a claim should run.

use super::*;

impl Scheduler {
    pub(super) fn rate(&self, p: ProducerId) -> Option<f64> {
        self.producers[p].rate.estimate
    }

    /// The rate `p` shows at `now`: the measured one, or less once it has
    /// sent nothing for [`SILENT`] and longer than a block takes it at that
    /// rate (it has sent at most one block in all that time). A peer that
    /// waits for a block it has not got itself sends nothing, and its last
    /// estimate would call it as fast as ever.
    pub(super) fn rate_now(&self, p: ProducerId, now: Instant) -> Option<f64> {
        let r = self.rate(p)?;
        let last = self.producers[p].rate.last;
        let silent = last.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        Some(match silent >= SILENT {
            true => r.min(1.0 / silent.as_secs_f64()),
            false => r,
        })
    }

    /// Whether stream `id` is a peer's with blocks claimed: one whose
    /// silence says something (with nothing claimed, held by pacing or
    /// waiting for a grant, it has nothing to send).
    fn owing_peer(&self, id: StreamId) -> bool {
        let s = &self.streams[&id];
        self.producers[s.producer].home_only && s.remaining > 0
    }

    /// [`Scheduler::speed`] of stream `id`'s producer, for a peer that owes
    /// blocks as [`Scheduler::rate_now`]: what the helper rules weigh a
    /// peer's share by.
    pub(super) fn speed_now(&self, id: StreamId, now: Instant) -> Option<f64> {
        let p = self.streams[&id].producer;
        match self.owing_peer(id) {
            true => self.rate_now(p, now).or_else(|| self.speed(p, now)),
            false => self.speed(p, now),
        }
    }

    /// The rate stream `id`'s claim is weighed by: a peer's as it shows
    /// now ([`Scheduler::rate_now`]: one that waits for a block it has not
    /// got itself would otherwise hold this receiver until the stall
    /// timeout).
    pub(super) fn claim_rate(&self, id: StreamId, now: Instant) -> Option<f64> {
        let p = self.streams[&id].producer;
        match self.owing_peer(id) {
            true => self.rate_now(p, now),
            false => self.rate(p),
        }
    }

    /// When `p`'s silence began: its last delivery, or since it was last
    /// given blocks when it had none to send.
    pub(super) fn silent_since(&self, p: ProducerId) -> Option<Instant> {
        self.producers[p].rate.last
    }

    /// The measured rate, or for a producer that delivered only a burst too
    /// short to measure, its average since the start (it is at least that fast).
    pub(super) fn speed(&self, p: ProducerId, now: Instant) -> Option<f64> {
        let since = now.duration_since(self.started).as_secs_f64();
        let contributed = self.producers[p].contributed;
        self.rate(p).or_else(|| (contributed > 0 && since > 0.0).then(|| contributed as f64 / since))
    }

    /// Blocks a stream of `p` should have claimed ahead of its data.
    pub(super) fn want(&self, p: ProducerId) -> u64 {
        let pr = &self.producers[p];
        match pr.rate.estimate {
            None => {
                let rtt = pr.rtt.unwrap_or_default().as_secs_f64();
                let assumed = ((self.cfg.first_rate * 2.0 * rtt).ceil() as u64).min(self.cfg.max_unmeasured_window);
                pr.window.max(assumed)
            }
            Some(r) => {
                let ahead = 2.0 * pr.rtt.unwrap_or_default().as_secs_f64() + self.cfg.lookahead.as_secs_f64();
                ((r * ahead).ceil() as u64).max(self.cfg.min_window).max(pr.floor)
            }
        }
        .max(1)
    }

    /// Speed used to divide work: measured rate, else contribution.
    pub(super) fn weight(&self, p: ProducerId) -> f64 {
        self.rate(p).unwrap_or(self.producers[p].contributed as f64).max(1e-9)
    }
}

/// Silence shorter than this is a connection's jitter (a lost packet, a
/// full queue), not slowness.
pub(super) const SILENT: Duration = Duration::from_millis(500);
