//! `ddftp simulate`: the real scheduler against simulated producers, so
//! users and tests can check its balance and message counts against the
//! paper without a network.

use clap::Args;

use super::flags::{parse_block_size, parse_seconds};
use super::{report_error, Exit};
use ddftp::sim::{self, group, Fault, FaultKind, SimSpec, SpeedChange};
use ddops::transfer;

/// Run the DDOps scheduler against simulated mirrors (no sockets).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp simulate --blocks 4096 --speeds 40,20,10,5
  ddftp simulate --blocks 4096 --speeds 146,146 --receivers 100 --receiver-speeds 182
Docs: man ddftp-simulate; docs/simulate.md")]
pub struct SimulateOpt {
    /// Number of blocks in the file.
    #[arg(long)]
    pub blocks: u64,
    /// Speed of each mirror in blocks per second: S1,S2,...
    #[arg(long, value_delimiter = ',', required = true)]
    pub speeds: Vec<f64>,
    /// At T seconds, mirror I (1-based) changes to SPEED: T:I:SPEED (repeatable).
    #[arg(long = "change", value_parser = parse_change)]
    pub changes: Vec<SpeedChange>,
    /// At T seconds, mirror I (1-based) fails: its connections drop (T:I, repeatable).
    #[arg(long = "fail", value_parser = parse_fail)]
    pub fails: Vec<Fault>,
    /// At T seconds, mirror I stalls: connected, sending nothing (T:I, repeatable).
    #[arg(long = "stall", value_parser = parse_stall)]
    pub stalls: Vec<Fault>,
    /// At T seconds, mirror I sends a block that fails verification (T:I, repeatable).
    #[arg(long = "corrupt", value_parser = parse_corrupt)]
    pub corrupts: Vec<Fault>,
    /// At T seconds, mirror I answers again (after --fail or --stall): a
    /// producer of it rejoins the transfer, as get's retries make one (T:I, repeatable).
    #[arg(long = "rejoin", value_parser = parse_rejoin)]
    pub rejoins: Vec<Fault>,
    /// Round-trip time between consumer and every mirror, milliseconds.
    #[arg(long, default_value_t = 0.0)]
    pub rtt_ms: f64,
    /// Block size, as `get --block-size` (sizes the first grants).
    #[arg(long, value_parser = parse_block_size, default_value = "256KiB")]
    pub block_size: u32,
    /// As `get --stall-timeout`: a mirror owing blocks that sends none for
    /// this long is dropped.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub stall_timeout: f64,
    /// Simulate N receivers sharing the file (`get --share`): each
    /// downloads from the mirrors (--speeds: their uplinks) and from every
    /// other receiver.
    #[arg(long, value_name = "N", requires = "receiver_speeds")]
    pub receivers: Option<usize>,
    /// Each receiver's link, blocks per second each way: one value for all,
    /// or one per receiver.
    #[arg(long, value_delimiter = ',', value_name = "S1,S2,...")]
    pub receiver_speeds: Vec<f64>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_change(s: &str) -> Result<SpeedChange, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [t, i, v] = parts[..] else {
        return Err(format!("{s:?}: expected T:I:SPEED, e.g. 2:1:500"));
    };
    let at: f64 = t.parse().map_err(|_| format!("{t:?} is not a time in seconds"))?;
    let server: usize = i.parse().map_err(|_| format!("{i:?} is not a mirror number"))?;
    let speed: f64 = v.parse().map_err(|_| format!("{v:?} is not a speed"))?;
    if server == 0 || at < 0.0 || speed <= 0.0 || !speed.is_finite() || !at.is_finite() {
        return Err(format!("{s:?}: mirror numbers start at 1, time and speed must be positive"));
    }
    Ok(SpeedChange { at, server: server - 1, speed })
}

fn parse_fault(s: &str, kind: FaultKind) -> Result<Fault, String> {
    let Some((t, i)) = s.split_once(':') else {
        return Err(format!("{s:?}: expected T:I, e.g. 2.5:1 (mirror 1 at 2.5 s)"));
    };
    let at: f64 = t.parse().map_err(|_| format!("{t:?} is not a time in seconds"))?;
    let server: usize = i.parse().map_err(|_| format!("{i:?} is not a mirror number"))?;
    if server == 0 || !(at.is_finite() && at >= 0.0) {
        return Err(format!("{s:?}: mirror numbers start at 1, the time must be 0 or more"));
    }
    Ok(Fault { at, server: server - 1, kind })
}

fn parse_fail(s: &str) -> Result<Fault, String> {
    parse_fault(s, FaultKind::Fail)
}

fn parse_stall(s: &str) -> Result<Fault, String> {
    parse_fault(s, FaultKind::Stall)
}

fn parse_corrupt(s: &str) -> Result<Fault, String> {
    parse_fault(s, FaultKind::Corrupt)
}

fn parse_rejoin(s: &str) -> Result<Fault, String> {
    parse_fault(s, FaultKind::Rejoin)
}

pub fn run(opt: SimulateOpt) -> Exit {
    let positive = |s: &&f64| !(s.is_finite() && **s > 0.0);
    if let Some(bad) = opt.speeds.iter().chain(&opt.receiver_speeds).find(positive) {
        report_error(&format!("speed {bad} must be a positive number of blocks per second"));
        return Exit::Usage;
    }
    if let Some(n) = opt.receivers {
        return receivers(&opt, n);
    }
    if let Some(c) = opt.changes.iter().find(|c| c.server >= opt.speeds.len()) {
        report_error(&format!("--change names mirror {}, but there are {} mirrors", c.server + 1, opt.speeds.len()));
        return Exit::Usage;
    }
    let faults: Vec<Fault> =
        opt.fails.iter().chain(&opt.stalls).chain(&opt.corrupts).chain(&opt.rejoins).cloned().collect();
    if let Some(f) = faults.iter().find(|f| f.server >= opt.speeds.len()) {
        report_error(&format!("a fault names mirror {}, but there are {} mirrors", f.server + 1, opt.speeds.len()));
        return Exit::Usage;
    }
    if opt.rtt_ms < 0.0 || !opt.rtt_ms.is_finite() {
        report_error(&"--rtt-ms must be 0 or more");
        return Exit::Usage;
    }
    let spec = SimSpec {
        blocks: opt.blocks,
        servers: sim::servers_like_get(&opt.speeds),
        changes: opt.changes.clone(),
        faults,
        one_way_delay: opt.rtt_ms / 2000.0,
        config: transfer::Config {
            stall_timeout: std::time::Duration::from_secs_f64(opt.stall_timeout),
            ..transfer::Config::for_blocks(u64::from(opt.block_size))
        },
    };
    let r = sim::run(&spec, std::time::Instant::now());
    let k = opt.speeds.len() as f64;
    let eq10 = k + (k / 2.0) * ((opt.blocks.max(1) as f64).ln() / 4f64.ln() - 1.0);
    if opt.json {
        let mut v = serde_json::to_value(&r).expect("report serialises");
        v["eq10_starts"] = serde_json::json!(eq10);
        v["exit_code"] = serde_json::json!(if r.completed { 0 } else { Exit::Transfer as i32 });
        super::outcome::print_json(&v);
    } else {
        println!(
            "{} blocks, {} mirrors: makespan {:.3} s, ideal {:.3} s, efficiency {:.3}",
            r.blocks,
            opt.speeds.len(),
            r.makespan,
            r.ideal,
            r.efficiency
        );
        println!(
            "control: {} Start (Eq. 10 average case: {:.1}), {} Extend, {} End; duplicate blocks {}",
            r.starts, eq10, r.extends, r.ends, r.duplicate_blocks
        );
        println!("  {:>6} {:>10} {:>10} {:>14}", "mirror", "blocks", "share", "capacity share");
        for (i, b) in r.server_blocks.iter().enumerate() {
            println!(
                "  {:>6} {:>10} {:>9.1}% {:>13.1}%",
                i + 1,
                b,
                100.0 * r.server_share[i],
                100.0 * r.capacity_share[i]
            );
        }
    }
    if !opt.json {
        for d in &r.dropped {
            println!("  at {:.3} s dropped mirror {}: {}", d.at, d.server + 1, d.why);
        }
    }
    if r.completed {
        Exit::Ok
    } else {
        report_error(&"the simulation did not complete");
        Exit::Transfer
    }
}

const MAX_RECEIVERS: usize = 10_000;

/// `--receivers N`: the group model ([`ddftp::sim::group`]).
fn receivers(opt: &SimulateOpt, n: usize) -> Exit {
    let faults = opt.changes.len() + opt.fails.len() + opt.stalls.len() + opt.corrupts.len() + opt.rejoins.len();
    if faults > 0 {
        report_error(&"--receivers does not take --change, --fail, --stall, --corrupt or --rejoin yet");
        return Exit::Usage;
    }
    let links = match (n, opt.receiver_speeds.len()) {
        (0, _) => {
            report_error(&"--receivers must be 1 or more");
            return Exit::Usage;
        }
        // Time grows with N (each receiver reads from at most 64 others)
        // times the blocks.
        (n, _) if n > MAX_RECEIVERS => {
            report_error(&format!(
                "--receivers {n}: at most {MAX_RECEIVERS} (1,000 receivers of 4,096 blocks take about half a minute)"
            ));
            return Exit::Usage;
        }
        (_, 1) => vec![opt.receiver_speeds[0]; n],
        (n, k) if n == k => opt.receiver_speeds.clone(),
        (n, k) => {
            report_error(&format!(
                "--receiver-speeds gives {k} speeds for {n} receivers: give one for all, or one each"
            ));
            return Exit::Usage;
        }
    };
    let spec = group::GroupSpec {
        blocks: opt.blocks,
        mirrors: opt.speeds.clone(),
        receivers: links.iter().map(|&s| group::Link { down: s, up: s }).collect(),
        one_way_delay: opt.rtt_ms / 2000.0,
        config: transfer::Config {
            stall_timeout: std::time::Duration::from_secs_f64(opt.stall_timeout),
            ..transfer::Config::for_blocks(u64::from(opt.block_size))
        },
    };
    let r = group::run(&spec, std::time::Instant::now());
    // A pipelined schedule's start-up: a block passes about log2(N+1)
    // hops before the last receiver has one.
    let slowest = links.iter().copied().fold(f64::INFINITY, f64::min);
    let target = r.bound + ((n + 1) as f64).log2() / slowest;
    if opt.json {
        let mut v = serde_json::to_value(&r).expect("report serialises");
        v["bound_plus_pipeline"] = serde_json::json!(target);
        v["exit_code"] = serde_json::json!(if r.completed { 0 } else { Exit::Transfer as i32 });
        super::outcome::print_json(&v);
    } else {
        print_receivers(&r, n, target);
    }
    if r.completed {
        Exit::Ok
    } else {
        report_error(&"the simulation did not complete: some receiver never held the whole file");
        Exit::Transfer
    }
}

fn print_receivers(r: &group::GroupReport, n: usize, target: f64) {
    println!(
        "{} blocks, {n} receivers: the last has the file at {:.3} s; bound {:.3} s ({:.3}x), bound + log2(N+1) blocks {:.3} s ({:.3}x); mirrors sent {:.3} copies",
        r.blocks,
        r.last,
        r.bound,
        r.last / r.bound,
        target,
        r.last / target,
        r.mirror_copies
    );
    let mut order: Vec<usize> = (0..r.receivers.len()).collect();
    order.sort_by(|&a, &b| {
        r.receivers[b].done_at.unwrap_or(f64::INFINITY).total_cmp(&r.receivers[a].done_at.unwrap_or(f64::INFINITY))
    });
    println!("  {:>8} {:>10} {:>12} {:>12}", "receiver", "done (s)", "from mirrors", "from peers");
    // The slowest first; all of them only for a few.
    for &i in order.iter().take(if n <= 16 { n } else { 8 }) {
        let x = &r.receivers[i];
        let done = x.done_at.map_or("never".to_string(), |t| format!("{t:.3}"));
        println!("  {:>8} {:>10} {:>12} {:>12}", i + 1, done, x.from_mirrors, x.from_peers);
    }
    if n > 16 {
        println!("  ... {} more (--json lists every receiver)", n - 8);
    }
    for d in r.dropped.iter().take(20) {
        println!("  at {:.3} s receiver {} dropped {}: {}", d.at, d.receiver + 1, d.from, d.why);
    }
    if r.dropped.len() > 20 {
        println!("  ... {} more drops (--json lists them)", r.dropped.len() - 20);
    }
}
