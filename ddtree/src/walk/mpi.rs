//! H-DRQS: the walk across MPI ranks (`mpirun -n N ddftp walk PATH`).
//!
//! One MPI process per node; inside it, worker threads share the rank's
//! queue, and only the main thread talks to other ranks (MPI "funneled").
//! Between ranks it is [`super::drqs`] again: a rank with nothing to do
//! (empty queue, no thread busy) asks a random rank for work, and the
//! asked rank gives a random half of its queue or says no; Dijkstra's
//! token goes round the ranks with the same colouring rule, and rank 0,
//! idle and white with a white token, tells all to stop. The argument in
//! `drqs`'s docs holds unchanged: work crosses ranks only in answer to a
//! request, and a rank with a request out is not idle.
//!
//! Each rank writes its own part of the list (`LIST.<rank>`); together
//! they are exactly a one-process walk.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::drqs::WorkerStats;
use super::{walk_on, Options, Output, Report, Totals, WalkError};

const TAG_REQUEST: i32 = 1;
const TAG_WORK: i32 = 2;
const TAG_NO_WORK: i32 = 3;
const TAG_TOKEN_WHITE: i32 = 4;
const TAG_TOKEN_BLACK: i32 = 5;
const TAG_STOP: i32 = 6;

/// An MPI job (initialised once per process).
pub struct Session {
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
}

/// Whether this process was started by `mpirun`/`mpiexec`.
pub fn launched_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some())
}

impl Session {
    pub fn init() -> Option<Session> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)?;
        let world = universe.world();
        Some(Session { _universe: universe, world })
    }

    /// Every rank of the job.
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// Every rank's `mine` (at most `max` bytes each; longer is cut), in
    /// rank order, on every rank.
    pub fn all_gather_bytes(&self, mine: &[u8], max: usize) -> Vec<Vec<u8>> {
        let n = mine.len().min(max);
        let mut padded = vec![0u8; max + 4];
        padded[..4].copy_from_slice(&(n as u32).to_le_bytes());
        padded[4..4 + n].copy_from_slice(&mine[..n]);
        let mut all = vec![0u8; (max + 4) * self.size()];
        self.world.all_gather_into(&padded[..], &mut all[..]);
        all.chunks(max + 4)
            .map(|c| {
                let len = (u32::from_le_bytes(c[..4].try_into().expect("4 bytes")) as usize).min(max);
                c[4..4 + len].to_vec()
            })
            .collect()
    }

    /// Waits until every rank has come here.
    pub fn barrier(&self) {
        self.world.barrier();
    }

    /// The whole job's report (the same on every rank): totals summed,
    /// seconds the slowest rank's, `per_worker` one entry count per rank.
    pub fn combine(&self, r: &Report) -> Report {
        let t = &r.totals;
        let mine = [t.dirs, t.files, t.links, t.others, t.bytes, t.errors, r.requests];
        let mut sum = [0u64; 7];
        self.world.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
        let mut seconds = 0f64;
        self.world.all_reduce_into(&r.seconds, &mut seconds, SystemOperation::max());
        let entries: u64 = r.per_worker.iter().sum();
        let dirs: u64 = r.per_worker_dirs.iter().sum();
        let mut per_rank = vec![0u64; self.size()];
        self.world.all_gather_into(&entries, &mut per_rank[..]);
        let mut dirs_per_rank = vec![0u64; self.size()];
        self.world.all_gather_into(&dirs, &mut dirs_per_rank[..]);
        let totals =
            Totals { dirs: sum[0], files: sum[1], links: sum[2], others: sum[3], bytes: sum[4], errors: sum[5] };
        Report { totals, seconds, per_worker: per_rank, per_worker_dirs: dirs_per_rank, requests: sum[6] }
    }
}

/// This rank's part of the walk of `root` (rank 0 starts it).
pub fn walk(s: &Session, root: &Path, opts: &Options, output: Output) -> Result<(Report, Output), WalkError> {
    let threads = opts.threads.max(1);
    walk_on(root, opts, output, s.rank() == 0, |seed, init, process| run(&s.world, threads, seed, init, process))
}

/// The rank's shared queue.
struct Pool {
    state: Mutex<PoolState>,
    cv: Condvar,
}

struct PoolState {
    items: Vec<PathBuf>,
    /// Threads processing an item now.
    busy: usize,
    stop: bool,
}

fn run<W: Send>(
    world: &SimpleCommunicator,
    threads: usize,
    seed: Vec<PathBuf>,
    init: &(dyn Fn(usize) -> W + Sync),
    process: &(dyn Fn(&mut W, PathBuf, &mut Vec<PathBuf>) + Sync),
) -> Vec<(W, WorkerStats)> {
    let pool = Pool { state: Mutex::new(PoolState { items: seed, busy: 0, stop: false }), cv: Condvar::new() };
    std::thread::scope(|sc| {
        let helpers: Vec<_> = (1..threads)
            .map(|t| {
                let pool = &pool;
                sc.spawn(move || {
                    let (mut w, mut stats, mut found) = (init(t), WorkerStats::default(), Vec::new());
                    loop {
                        let item = {
                            let mut g = pool.state.lock().expect("pool lock");
                            loop {
                                if g.stop {
                                    break None;
                                }
                                if let Some(i) = g.items.pop() {
                                    g.busy += 1;
                                    break Some(i);
                                }
                                g = pool.cv.wait(g).expect("pool lock");
                            }
                        };
                        let Some(item) = item else { break };
                        process(&mut w, item, &mut found);
                        stats.items += 1;
                        let mut g = pool.state.lock().expect("pool lock");
                        g.items.append(&mut found);
                        g.busy -= 1;
                        drop(g);
                        pool.cv.notify_all();
                    }
                    (w, stats)
                })
            })
            .collect();
        let leader = Leader::new(world, &pool).run(init(0), process);
        pool.state.lock().expect("pool lock").stop = true;
        pool.cv.notify_all();
        let mut out = vec![leader];
        out.extend(helpers.into_iter().map(|h| h.join().expect("walk thread panicked")));
        out
    })
}

/// The main thread: the rank's voice in DRQS, and a worker too.
struct Leader<'a> {
    world: &'a SimpleCommunicator,
    pool: &'a Pool,
    me: usize,
    n: usize,
    requested: bool,
    black: bool,
    token: Option<bool>,
    stop: bool,
    backoff: Duration,
    next_request: Instant,
    rng: StdRng,
    stats: WorkerStats,
}

impl<'a> Leader<'a> {
    fn new(world: &'a SimpleCommunicator, pool: &'a Pool) -> Leader<'a> {
        let me = world.rank() as usize;
        Leader {
            world,
            pool,
            me,
            n: world.size() as usize,
            requested: false,
            black: false,
            token: (me == 0).then_some(true),
            stop: false,
            backoff: Duration::ZERO,
            next_request: Instant::now(),
            rng: StdRng::seed_from_u64(0xd095 ^ me as u64),
            stats: WorkerStats::default(),
        }
    }

    fn run<W>(mut self, mut w: W, process: &(dyn Fn(&mut W, PathBuf, &mut Vec<PathBuf>) + Sync)) -> (W, WorkerStats) {
        let mut found = Vec::new();
        loop {
            while let Some(st) = self.world.any_process().immediate_probe() {
                let from = st.source_rank();
                let (data, st) = self.world.process_at_rank(from).receive_vec_with_tag::<u8>(st.tag());
                self.handle(st.tag(), from as usize, data);
            }
            if self.stop {
                return (w, self.stats);
            }
            let (item, busy) = {
                let mut g = self.pool.state.lock().expect("pool lock");
                let item = g.items.pop();
                if item.is_some() {
                    g.busy += 1;
                }
                (item, g.busy)
            };
            if let Some(item) = item {
                process(&mut w, item, &mut found);
                self.stats.items += 1;
                let mut g = self.pool.state.lock().expect("pool lock");
                g.items.append(&mut found);
                g.busy -= 1;
                drop(g);
                self.pool.cv.notify_all();
                continue;
            }
            if busy > 0 {
                // The rank's threads are still at work: not idle.
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            if self.n == 1 {
                return (w, self.stats);
            }
            if !self.requested && Instant::now() >= self.next_request {
                self.pass_token();
                if self.stop {
                    return (w, self.stats);
                }
                let mut peer = self.rng.gen_range(0..self.n - 1);
                if peer >= self.me {
                    peer += 1;
                }
                self.send(peer, TAG_REQUEST, &[]);
                self.requested = true;
                self.stats.requests += 1;
            }
            std::thread::sleep(Duration::from_micros(10));
        }
    }

    fn handle(&mut self, tag: i32, from: usize, data: Vec<u8>) {
        match tag {
            TAG_REQUEST => {
                let gift = {
                    let mut g = self.pool.state.lock().expect("pool lock");
                    let give = g.items.len() / 2 + usize::from(g.items.len() == 1 && g.busy == 0);
                    (0..give)
                        .map(|_| {
                            let i = self.rng.gen_range(0..g.items.len());
                            g.items.swap_remove(i)
                        })
                        .collect::<Vec<_>>()
                };
                if gift.is_empty() {
                    self.send(from, TAG_NO_WORK, &[]);
                } else {
                    self.stats.given += gift.len() as u64;
                    if from < self.me || self.me == 0 {
                        self.black = true;
                    }
                    self.send(from, TAG_WORK, &encode(&gift));
                }
            }
            TAG_WORK => {
                self.requested = false;
                self.backoff = Duration::ZERO;
                self.pool.state.lock().expect("pool lock").items.extend(decode(&data));
                self.pool.cv.notify_all();
            }
            TAG_NO_WORK => {
                self.requested = false;
                self.backoff = (self.backoff * 2).clamp(Duration::from_micros(20), Duration::from_millis(2));
                self.next_request = Instant::now() + self.backoff;
            }
            TAG_TOKEN_WHITE => self.token = Some(false),
            TAG_TOKEN_BLACK => self.token = Some(true),
            TAG_STOP => self.stop = true,
            _ => {}
        }
    }

    /// Only when the rank is idle: as in [`super::drqs`].
    fn pass_token(&mut self) {
        let Some(token_black) = self.token.take() else { return };
        if self.me == 0 {
            if !token_black && !self.black {
                self.stop = true;
                for r in 1..self.n {
                    self.send(r, TAG_STOP, &[]);
                }
                return;
            }
            self.black = false;
            self.send(1, TAG_TOKEN_WHITE, &[]);
        } else {
            let black = token_black || self.black;
            self.black = false;
            self.send((self.me + 1) % self.n, if black { TAG_TOKEN_BLACK } else { TAG_TOKEN_WHITE }, &[]);
        }
    }

    fn send(&self, to: usize, tag: i32, data: &[u8]) {
        self.world.process_at_rank(to as i32).send_with_tag(data, tag);
    }
}

/// Paths as `len: u32 | bytes`, back to back.
fn encode(paths: &[PathBuf]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for p in paths {
        let b = p.as_os_str().as_bytes();
        out.extend_from_slice(&(b.len() as u32).to_be_bytes());
        out.extend_from_slice(b);
    }
    out
}

fn decode(mut data: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    while data.len() >= 4 {
        let n = u32::from_be_bytes(data[..4].try_into().expect("4 bytes")) as usize;
        let Some(p) = data.get(4..4 + n) else { break };
        out.push(PathBuf::from(std::ffi::OsStr::from_bytes(p)));
        data = &data[4 + n..];
    }
    out
}
