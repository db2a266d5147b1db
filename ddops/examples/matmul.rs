//! DDPar: the DDOps scheduler handing out rows of a matrix product to
//! heterogeneous workers, the papers' third use (no files, no network).
//!
//! `k` worker threads compute rows of C = A x B. Each is throttled to a
//! given number of rows per second (a slower core, a busier node); one
//! slows down mid-way. Rows are handed out by the same [`Transfer`] that
//! moves blocks for `ddftp get`: pairs of workers take a partition from
//! both ends, a free worker helps the busiest pair, a worker owing rows
//! that goes silent is dropped. Each worker keeps its streams by ddftpd's
//! rules ([`Streams`]). The same product is then computed with a static
//! equal split (each worker a fixed slice), and both are compared with the
//! ideal (every worker busy until the end) and checked against a serial
//! product.
//!
//! ```text
//! cargo run --release -p ddops --example matmul -- [--rows 2048] [--cols 256]
//!     [--speeds 400,300,200,100] [--slow-worker 1] [--slow-factor 0.2]
//!     [--slow-at SECONDS (default: half the ideal)] [--json]
//! ```

use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use ddftp_proto::streams::{Next, Streams};
use ddftp_proto::Direction;
use ddops::scheduler::{Action, StreamId};
use ddops::transfer::{BlockRun, Config, Event, Transfer};

#[derive(Parser, Debug)]
struct Opt {
    /// Rows of A (work items).
    #[arg(long, default_value_t = 2048)]
    rows: usize,
    /// Columns of A, and the side of the square B.
    #[arg(long, default_value_t = 256)]
    cols: usize,
    /// Rows per second of each worker.
    #[arg(long, value_delimiter = ',', default_values_t = vec![400.0, 300.0, 200.0, 100.0])]
    speeds: Vec<f64>,
    /// The worker (1-based) that slows down.
    #[arg(long, default_value_t = 1)]
    slow_worker: usize,
    /// Its speed is multiplied by this.
    #[arg(long, default_value_t = 0.2)]
    slow_factor: f64,
    /// When, in seconds from the start (default: half the ideal time).
    #[arg(long)]
    slow_at: Option<f64>,
    /// One JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// How fast each worker goes, over time.
#[derive(Clone)]
struct Speeds {
    base: Vec<f64>,
    slow: usize,
    factor: f64,
    at: f64,
}

impl Speeds {
    fn of(&self, w: usize, t: f64) -> f64 {
        if w == self.slow && t >= self.at {
            self.base[w] * self.factor
        } else {
            self.base[w]
        }
    }

    /// Every worker busy from 0 until `rows` are done.
    fn ideal(&self, rows: usize) -> f64 {
        let before: f64 = self.base.iter().sum();
        let after = before - self.base[self.slow] * (1.0 - self.factor);
        let rows = rows as f64;
        if before * self.at >= rows {
            rows / before
        } else {
            self.at + (rows - before * self.at) / after
        }
    }
}

struct Matrices {
    a: Vec<f64>,
    b: Vec<f64>,
    rows: usize,
    cols: usize,
}

impl Matrices {
    fn new(rows: usize, cols: usize) -> Self {
        // Deterministic, not trivial: rows of a product must not all match.
        let a = (0..rows * cols).map(|i| ((i * 7919) % 1009) as f64 / 1009.0).collect();
        let b = (0..cols * cols).map(|i| ((i * 104_729) % 997) as f64 / 997.0 - 0.5).collect();
        Matrices { a, b, rows, cols }
    }

    /// Row `i` of A x B.
    fn row(&self, i: usize) -> Vec<f64> {
        let n = self.cols;
        let mut out = vec![0.0; n];
        for (k, &aik) in self.a[i * n..(i + 1) * n].iter().enumerate() {
            for (o, &bkj) in out.iter_mut().zip(&self.b[k * n..(k + 1) * n]) {
                *o += aik * bkj;
            }
        }
        out
    }
}

/// Worker to coordinator.
enum Report {
    Row { worker: usize, stream: StreamId, row: u64, dir: Direction, values: Vec<f64> },
    Stopped { worker: usize, stream: StreamId, sent: u64 },
}

/// Keeps a worker to its speed: the next row starts no sooner than one
/// row-time (at the speed of the moment) after the last.
fn pace(w: usize, speeds: &Speeds, start: Instant, last: &mut Instant) {
    let t = last.duration_since(start).as_secs_f64();
    let next = *last + Duration::from_secs_f64(1.0 / speeds.of(w, t));
    let now = Instant::now();
    if next > now {
        thread::sleep(next - now);
    }
    *last = next.max(now);
}

/// A worker under the scheduler: obeys Start/Extend/End by ddftpd's rules.
fn worker(
    w: usize,
    m: Arc<Matrices>,
    speeds: Speeds,
    start: Instant,
    cmds: mpsc::Receiver<Action>,
    out: mpsc::Sender<Report>,
) {
    let mut streams: Streams<()> = Streams::default();
    let mut last = start;
    loop {
        // Take every command waiting; wait for one when there is no work.
        loop {
            let cmd = if streams.has_work() {
                match cmds.try_recv() {
                    Ok(c) => c,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            } else {
                match cmds.recv() {
                    Ok(c) => c,
                    Err(_) => return,
                }
            };
            let stopped = match cmd {
                Action::Start { stream, first, last, dir, .. } => {
                    streams.start(stream, first, last, dir, ()).expect("the scheduler queues one Start at most")
                }
                Action::Extend { stream, last, .. } => {
                    streams.find_mut(stream).for_each(|s| s.cursor.set_last(last));
                    None
                }
                Action::End { stream, .. } => streams.end(stream),
            };
            if let Some(s) = stopped {
                let _ = out.send(Report::Stopped { worker: w, stream: s.stream, sent: s.sent });
            }
        }
        match streams.step() {
            Next::Block { stream, block } => {
                let dir = streams.running().expect("it gave a row").cursor.dir();
                let values = m.row(block as usize);
                pace(w, &speeds, start, &mut last);
                let _ = out.send(Report::Row { worker: w, stream, row: block, dir, values });
            }
            Next::Stopped(s) => {
                let _ = out.send(Report::Stopped { worker: w, stream: s.stream, sent: s.sent });
            }
            Next::Wait => {}
        }
    }
}

/// The product with rows handed out by the DDOps transfer.
fn dual_direction(m: &Arc<Matrices>, speeds: &Speeds) -> (f64, Vec<f64>, Vec<u64>) {
    let k = speeds.base.len();
    let start = Instant::now();
    let (out_tx, out_rx) = mpsc::channel();
    let mut cmds = vec![];
    let mut threads = vec![];
    for w in 0..k {
        let (tx, rx) = mpsc::channel();
        cmds.push(tx);
        let (m, speeds, out) = (m.clone(), speeds.clone(), out_tx.clone());
        threads.push(thread::spawn(move || worker(w, m, speeds, start, rx, out)));
    }
    drop(out_tx);
    let workers: Vec<usize> = (0..k).collect();
    let mut tr = Transfer::fresh(m.rows as u64, &workers, k, &Config::default(), start);
    let mut c = vec![0.0; m.rows * m.cols];
    while !tr.is_done() {
        while let Some(a) = tr.poll_action() {
            let (Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. }) = a;
            let _ = cmds[producer].send(a);
        }
        if let Some(Event::Dropped { producer, why, .. }) = tr.poll_event() {
            eprintln!("worker {} dropped: {why}", producer + 1);
        }
        assert!(!tr.is_stuck(), "every worker was dropped");
        let wait = tr.poll_timeout().map_or(Duration::from_secs(1), |d| d.saturating_duration_since(Instant::now()));
        let now = |_: ()| Instant::now();
        match out_rx.recv_timeout(wait) {
            Ok(Report::Row { worker, stream, row, dir, values }) => {
                let i = row as usize * m.cols;
                c[i..i + m.cols].copy_from_slice(&values);
                let run = BlockRun { stream, first: row, count: 1, bytes: 0, dir };
                tr.handle_blocks(worker, run, now(()));
            }
            Ok(Report::Stopped { worker, stream, sent }) => tr.handle_stopped(worker, stream, sent, now(())),
            Err(_) => tr.handle_timeout(now(())),
        }
    }
    let makespan = start.elapsed().as_secs_f64();
    drop(cmds);
    for t in threads {
        t.join().expect("worker");
    }
    (makespan, c, tr.contributions())
}

/// The product with a static equal split: worker w takes rows
/// `w * rows / k .. (w + 1) * rows / k`.
fn static_split(m: &Arc<Matrices>, speeds: &Speeds) -> (f64, Vec<f64>) {
    let k = speeds.base.len();
    let start = Instant::now();
    let threads: Vec<_> = (0..k)
        .map(|w| {
            let (m, speeds) = (m.clone(), speeds.clone());
            thread::spawn(move || {
                let (lo, hi) = (w * m.rows / k, (w + 1) * m.rows / k);
                let mut last = start;
                let mut rows = vec![];
                for i in lo..hi {
                    rows.push(m.row(i));
                    pace(w, &speeds, start, &mut last);
                }
                (lo, rows)
            })
        })
        .collect();
    let mut c = vec![0.0; m.rows * m.cols];
    for t in threads {
        let (lo, rows) = t.join().expect("worker");
        for (j, r) in rows.into_iter().enumerate() {
            c[(lo + j) * m.cols..(lo + j + 1) * m.cols].copy_from_slice(&r);
        }
    }
    (start.elapsed().as_secs_f64(), c)
}

fn main() {
    let opt = Opt::parse();
    let k = opt.speeds.len();
    assert!(k >= 1 && opt.speeds.iter().all(|s| s.is_finite() && *s > 0.0), "--speeds: positive rows per second");
    assert!((1..=k).contains(&opt.slow_worker), "--slow-worker: 1..={k}");
    let mut speeds =
        Speeds { base: opt.speeds.clone(), slow: opt.slow_worker - 1, factor: opt.slow_factor, at: f64::MAX };
    speeds.at = opt.slow_at.unwrap_or_else(|| speeds.ideal(opt.rows) / 2.0);
    let ideal = speeds.ideal(opt.rows);
    let m = Arc::new(Matrices::new(opt.rows, opt.cols));
    let serial: Vec<f64> = (0..opt.rows).flat_map(|i| m.row(i)).collect();
    let (makespan, c, rows_by) = dual_direction(&m, &speeds);
    let (static_s, c_static) = static_split(&m, &speeds);
    let exact = c == serial && c_static == serial;
    if opt.json {
        let v = serde_json::json!({
            "rows": opt.rows, "cols": opt.cols, "speeds": opt.speeds,
            "slow_worker": opt.slow_worker, "slow_factor": opt.slow_factor, "slow_at_s": speeds.at,
            "makespan_s": makespan, "ideal_s": ideal, "static_s": static_s,
            "of_ideal": ideal / makespan, "static_of_ideal": ideal / static_s,
            "rows_by_worker": rows_by, "exact": exact,
        });
        println!("{v}");
    } else {
        println!(
            "{} rows x {} on {k} workers {:?} rows/s, worker {} x{} from {:.2} s",
            opt.rows, opt.cols, opt.speeds, opt.slow_worker, opt.slow_factor, speeds.at
        );
        println!("  dual-direction: {makespan:.3} s ({:.3} of the ideal {ideal:.3} s)", ideal / makespan);
        println!("  static split:   {static_s:.3} s ({:.3} of the ideal)", ideal / static_s);
        println!("  rows by worker: {rows_by:?}; product equals the serial one: {exact}");
    }
    if !exact {
        std::process::exit(1);
    }
}
