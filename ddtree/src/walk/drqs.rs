//! Distributed random queue splitting (DRQS) for threads, with no master.
//!
//! Every worker owns a LIFO queue of items. A worker with work answers the
//! requests in its mailbox between items, giving a requester a random half
//! of its queue; a worker with none asks one random peer at a time, and
//! after a refusal waits a little longer before asking again (so idle
//! workers do not steal the CPU the busy ones need). Nothing is shared but
//! the mailboxes, so the walk scales like the tree-walk paper's, and the same
//! messages would cross MPI ranks.
//!
//! # Termination: Dijkstra's token ring (EWD 840)
//! The token goes 0 → 1 → … → n−1 → 0. A worker is *idle* when its queue
//! is empty and it has no request out; only an idle worker passes the
//! token, blackened if the worker is black, and then turns white. A worker
//! turns black when it gives work to a worker the token may already have
//! passed in this round: a lower-numbered one, or anyone if the giver is
//! worker 0 (EWD 840's "machine 0" is last in its ring order, so every gift
//! of 0's goes "backwards"). Worker 0, idle and white, holding a white
//! token, knows every worker is idle: then it tells all to stop.
//!
//! Why that is enough with asynchronous mailboxes: work moves only in
//! answer to a request, and a worker with a request out is not idle, so it
//! cannot pass the token while work is on its way to it. A worker that asks
//! again after passing the token holds nothing it could give; it can only
//! gain work from a giver, and EWD 840's invariant (everyone the token has
//! passed is idle, or some worker the token has yet to visit, or the token,
//! is black) holds as in the paper.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

enum Msg<T> {
    Request { from: usize },
    Work(Vec<T>),
    NoWork,
    Token { black: bool },
    Stop,
}

/// What one worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Items this worker processed.
    pub items: u64,
    /// Work requests it sent.
    pub requests: u64,
    /// Items it gave away.
    pub given: u64,
}

/// The first wait after a refusal, and the longest.
const BACKOFF_MIN: Duration = Duration::from_micros(20);
const BACKOFF_MAX: Duration = Duration::from_millis(2);

/// Runs `process` on every item of `seed` and every item it pushes, over
/// `workers` threads; returns each worker's state and stats. `seed` starts
/// in worker 0's queue. `process(state, item, queue)` pushes new items on
/// `queue`.
pub fn run<T, W>(
    workers: usize,
    seed: Vec<T>,
    init: impl Fn(usize) -> W + Sync,
    process: impl Fn(&mut W, T, &mut Vec<T>) + Sync,
) -> Vec<(W, WorkerStats)>
where
    T: Send,
    W: Send,
{
    let n = workers.max(1);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel::<Msg<T>>()).unzip();
    let mut seed = Some(seed);
    std::thread::scope(|s| {
        let handles: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(id, rx)| {
                let worker = Worker {
                    id,
                    n,
                    rx,
                    peers: txs.clone(),
                    queue: if id == 0 { seed.take().unwrap_or_default() } else { Vec::new() },
                    requested: false,
                    black: false,
                    // Worker 0 starts the first round as if a black token came home.
                    token: (id == 0).then_some(true),
                    stop: false,
                    backoff: Duration::ZERO,
                    rng: StdRng::seed_from_u64(0x5eed ^ id as u64),
                    stats: WorkerStats::default(),
                };
                let (init, process) = (&init, &process);
                s.spawn(move || {
                    let mut state = init(id);
                    let stats = worker.run(&mut state, process);
                    (state, stats)
                })
            })
            .collect();
        drop(txs);
        handles.into_iter().map(|h| h.join().expect("walk worker panicked")).collect()
    })
}

struct Worker<T> {
    id: usize,
    n: usize,
    rx: Receiver<Msg<T>>,
    peers: Vec<Sender<Msg<T>>>,
    queue: Vec<T>,
    /// A request is out and unanswered: not idle, even with an empty queue.
    requested: bool,
    black: bool,
    /// The token, if this worker holds it (`true` = black).
    token: Option<bool>,
    stop: bool,
    /// How long to wait before the next request (grows with refusals).
    backoff: Duration,
    rng: StdRng,
    stats: WorkerStats,
}

impl<T> Worker<T> {
    fn run<W>(mut self, state: &mut W, process: &impl Fn(&mut W, T, &mut Vec<T>)) -> WorkerStats {
        loop {
            while let Ok(m) = self.rx.try_recv() {
                self.handle(m);
            }
            if self.stop {
                return self.stats;
            }
            if let Some(item) = self.queue.pop() {
                process(state, item, &mut self.queue);
                self.stats.items += 1;
                continue;
            }
            if self.n == 1 {
                return self.stats;
            }
            if !self.requested {
                self.pass_token();
                if self.stop {
                    return self.stats;
                }
                if self.backoff > Duration::ZERO {
                    // Wait out the backoff, answering whatever comes.
                    match self.rx.recv_timeout(self.backoff) {
                        Ok(m) => {
                            self.handle(m);
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return self.stats,
                    }
                }
                let mut peer = self.rng.gen_range(0..self.n - 1);
                if peer >= self.id {
                    peer += 1;
                }
                self.send(peer, Msg::Request { from: self.id });
                self.requested = true;
                self.stats.requests += 1;
            }
            match self.rx.recv() {
                Ok(m) => self.handle(m),
                Err(_) => return self.stats,
            }
        }
    }

    fn handle(&mut self, m: Msg<T>) {
        match m {
            Msg::Request { from } => {
                if self.queue.is_empty() {
                    self.send(from, Msg::NoWork);
                } else {
                    let gift = self.split();
                    self.stats.given += gift.len() as u64;
                    if from < self.id || self.id == 0 {
                        self.black = true;
                    }
                    self.send(from, Msg::Work(gift));
                }
            }
            Msg::Work(items) => {
                self.requested = false;
                self.backoff = Duration::ZERO;
                self.queue.extend(items);
            }
            Msg::NoWork => {
                self.requested = false;
                self.backoff = (self.backoff * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
            }
            Msg::Token { black } => self.token = Some(black),
            Msg::Stop => self.stop = true,
        }
    }

    /// Takes a random half (rounded up) of the queue.
    fn split(&mut self) -> Vec<T> {
        let give = self.queue.len().div_ceil(2);
        (0..give)
            .map(|_| {
                let i = self.rng.gen_range(0..self.queue.len());
                self.queue.swap_remove(i)
            })
            .collect()
    }

    /// Called only when idle: passes the token on, or at worker 0 either
    /// ends the walk or starts a new round.
    fn pass_token(&mut self) {
        let Some(token_black) = self.token.take() else { return };
        if self.id == 0 {
            if !token_black && !self.black {
                self.stop = true;
                for peer in 1..self.n {
                    self.send(peer, Msg::Stop);
                }
                return;
            }
            self.black = false;
            self.send(1, Msg::Token { black: false });
        } else {
            let black = token_black || self.black;
            self.black = false;
            self.send((self.id + 1) % self.n, Msg::Token { black });
        }
    }

    fn send(&self, to: usize, m: Msg<T>) {
        // A peer that has stopped has dropped its mailbox; nothing is lost:
        // it stops only when every queue is empty.
        let _ = self.peers[to].send(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic tree: item `(depth, k)` has `k % 7` children down to depth 6.
    fn children(depth: u32, k: u64) -> impl Iterator<Item = (u32, u64)> {
        let n = if depth >= 6 { 0 } else { k % 7 };
        (0..n).map(move |i| (depth + 1, k * 7 + i + 3))
    }

    fn count(depth: u32, k: u64) -> u64 {
        1 + children(depth, k).map(|(d, c)| count(d, c)).sum::<u64>()
    }

    #[test]
    fn every_item_is_processed_exactly_once_for_any_worker_count() {
        let seed = vec![(0u32, 5u64), (0, 6), (0, 4)];
        let want: u64 = seed.iter().map(|&(d, k)| count(d, k)).sum();
        assert!(want > 1000, "tree too small to exercise stealing: {want}");
        for workers in [1, 2, 3, 4, 7, 16] {
            for _round in 0..5 {
                let out = run(
                    workers,
                    seed.clone(),
                    |_| Vec::new(),
                    |seen: &mut Vec<(u32, u64)>, (d, k), q| {
                        seen.push((d, k));
                        q.extend(children(d, k));
                    },
                );
                assert_eq!(out.len(), workers);
                let mut all: Vec<_> = out.iter().flat_map(|(seen, _)| seen.iter().copied()).collect();
                let total = all.len() as u64;
                all.sort_unstable();
                all.dedup();
                assert_eq!((total, all.len() as u64), (want, want), "{workers} workers");
                let items: u64 = out.iter().map(|(_, s)| s.items).sum();
                assert_eq!(items, want);
            }
        }
    }

    #[test]
    fn slow_items_get_shared() {
        let out = run(4, (0..64u32).collect(), |_| (), |_, _, _| std::thread::sleep(Duration::from_millis(2)));
        let busy = out.iter().filter(|(_, s)| s.items > 0).count();
        assert!(busy >= 2, "work was not shared: {:?}", out.iter().map(|o| &o.1).collect::<Vec<_>>());
    }

    #[test]
    fn an_empty_seed_terminates() {
        for workers in [1, 2, 5] {
            let out = run(workers, Vec::<u8>::new(), |_| (), |_, _, _| {});
            assert!(out.iter().all(|(_, s)| s.items == 0));
        }
    }
}
