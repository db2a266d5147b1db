//! What the scheduler knows of each producer's speed: measured rates,
//! their round trips, and how far ahead a claim should run.

use super::*;

impl Scheduler {
    pub(super) fn rate(&self, p: ProducerId) -> Option<f64> {
        self.producers[p].rate.estimate
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
