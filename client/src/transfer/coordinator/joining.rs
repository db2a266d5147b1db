//! Mirrors joining the running transfer: one asked again after it was
//! lost or did not answer at the start, an archive's as it registers the
//! bundle, an ssh mirror once its remote ddftpd answers; each a new
//! producer with a slot of its own, or a line saying why not.

use super::super::producer::{routes_to, Source};
use super::super::slot::Event;
use super::super::slots::spawn_slot;
use super::super::*;
use super::Coordinator;

impl Coordinator<'_> {
    /// Asks `source` again under the retry policy, unless it is asked
    /// already or still has a producer in the transfer; `wait`: how long
    /// its server asked us to wait.
    pub(super) fn ask_again(&mut self, source: Source, wait: Option<Duration>) {
        // A server that ignores Range can only start over from byte 0.
        if matches!(&source, Source::Http(m) if m.whole_only) {
            return;
        }
        let route = source.route();
        let live = (0..self.tr.producers()).any(|p| !self.tr.is_dropped(p) && self.sources[p].route() == route);
        // A mirror that answers and then fails again at once (a restarted
        // server that lost a bundle's registration) is not asked forever:
        // it rejoins at most as often as it would be retried.
        let rejoined =
            self.sources[self.first_joined.min(self.sources.len())..].iter().filter(|s| s.route() == route).count();
        if live || rejoined as u32 >= self.wanted.policy.retries || !self.retrying.insert(route) {
            return;
        }
        let (wanted, events) = (self.wanted.clone(), self.events.clone());
        tokio::spawn(async move {
            let answer = super::rejoin::retry(source, wanted, wait, events.clone()).await;
            let _ = events.send(answer).await;
        });
    }

    /// An ssh mirror that was still starting answered: it joins along
    /// each route as a late mirror does (the same version, the bundle
    /// registered first), or it could not start (it said why).
    pub(super) fn on_started(&mut self, spec: &GetSpec, peer: Option<Peer>) {
        self.starting -= 1;
        for route in peer.iter().flat_map(|p| routes_to(spec, p)) {
            self.connecting += 1;
            let (wanted, events) = (self.wanted.clone(), self.events.clone());
            tokio::spawn(async move {
                let answer = super::rejoin::join_late(Source::Ddftpd(route), wanted, events.clone()).await;
                let _ = events.send(answer).await;
            });
        }
    }

    /// A producer of `source`'s mirror joins: a new producer, and its slot.
    fn join(
        &mut self,
        source: &Source,
        now: Instant,
        progress: &mut dyn Progress,
    ) -> (ProducerId, mpsc::UnboundedReceiver<Action>) {
        let name = source.mirror();
        let mirror = self.mirrors.iter().position(|m| *m == name).unwrap_or_else(|| {
            progress.joined(&name);
            self.mirrors.push(name);
            self.tr.add_mirror()
        });
        let slot = self.tr.handle_join(mirror, now);
        tracing::info!(mirror = %self.mirrors[mirror], producer = slot, "joined");
        let (tx, rx) = mpsc::unbounded_channel();
        self.cmds.push(Some(tx));
        self.routes.push(source.route());
        self.sources.push(source.clone());
        (slot, rx)
    }

    /// A mirror ready to join (an archive's, once it has registered the
    /// bundle): a connection along each of its routes, under way; `None`:
    /// no more will.
    pub(super) fn on_joining(
        &mut self,
        spec: &GetSpec,
        j: Option<(Peer, Result<(), SessionError>)>,
        progress: &mut dyn Progress,
    ) -> bool {
        match j {
            Some((endpoint, Ok(()))) => {
                for route in routes_to(spec, &endpoint) {
                    let (tx, token) = (self.events.clone(), spec.token.clone());
                    self.connecting += 1;
                    tokio::spawn(async move {
                        let conn = connect(&route, None, token.as_deref()).await;
                        let got = conn.map(|(s, ..)| Producer::Ddftpd(route.clone(), s)).map_err(|e| e.to_string());
                        let _ = tx.send(Event::Joined(Box::new((Source::Ddftpd(route), got)))).await;
                    });
                }
            }
            Some((endpoint, Err(why))) => self.tell(progress, format!("skipping {endpoint}: {why}")),
            None => return false,
        }
        true
    }

    /// A producer that joins the running transfer (a late mirror, one
    /// asked again, a joining one), or why it could not.
    pub(super) fn on_joined(
        &mut self,
        source: Source,
        got: Result<Producer, String>,
        now: Instant,
        progress: &mut dyn Progress,
    ) {
        let retried = self.retrying.remove(&source.route());
        if !retried {
            self.connecting -= 1;
        }
        match got {
            Ok(producer) => {
                let (slot, rx) = self.join(&source, now, progress);
                let pool = self.pool.as_ref();
                let (rtt, task) =
                    spawn_slot(producer, &mut self.slot_tasks, slot, &self.ctx, rx, self.events.clone(), pool);
                self.tasks.push(task);
                self.tr.handle_round_trip(slot, rtt, now);
                if retried {
                    self.tell(progress, format!("{}: back; it rejoins the transfer", source.route()));
                }
            }
            Err(why) => self.tell(progress, format!("skipping {}: {why}", source.route())),
        }
    }
}
