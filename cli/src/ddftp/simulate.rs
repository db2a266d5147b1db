//! `ddftp simulate`: the real scheduler against simulated producers, so
//! users and tests can check its balance and message counts against the
//! paper without a network.

use clap::Args;

use super::flags::{parse_block_size, parse_seconds};
use super::{report_error, Exit};
use ddftp::sim::{self, Fault, FaultKind, SimSpec, SpeedChange};
use ddops::transfer;

/// Run the DDOps scheduler against simulated mirrors (no sockets).
#[derive(Debug, Args)]
#[command(after_help = "Example:
  ddftp simulate --blocks 4096 --speeds 40,20,10,5
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
    if let Some(bad) = opt.speeds.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        report_error(&format!("speed {bad} must be a positive number of blocks per second"));
        return Exit::Usage;
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
        println!("{v}");
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
