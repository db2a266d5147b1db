//! `ddftp demo`: the whole thing on one machine with nothing set up.
//!
//! Starts four producers (real `ddftpd` servers, in this process, on
//! 127.0.0.1) at different rates, makes a file of random bytes, downloads it
//! from all four with the progress bar while the fastest mirror slows down
//! half way, checks the copy, and prints who sent what.

use std::path::PathBuf;

use clap::Args;
use ddftp_proto::units::{parse_size, HumanBytes};
use ddftp_proto::Endpoint;
use ddftpd::{Server, ServerConfig};
use rand::RngCore;
use tokio::net::TcpListener;

use super::get::{fetch, print_summary, DEFAULT_BLOCK_SIZE};
use super::{report_error, runtime, Exit};
use ddftp::progress::Bar;
use ddftp::scheduler::Config;
use ddftp::transfer::{GetSpec, Peer, Progress};

/// See DDOps at work: 4 local mirrors of different speeds, one slowing down.
#[derive(Debug, Args)]
#[command(after_help = "Example:
  ddftp demo
Docs: README.md")]
pub struct DemoOpt {
    /// Size of the generated file.
    #[arg(long, default_value = "256MiB", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    pub size: u64,
    /// Work directory (default: a fresh one under the system temp dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Mirror rates in bytes per second; mirror 1 drops to the last value half way.
const RATES: [u64; 4] = [24_000_000, 16_000_000, 10_000_000, 6_000_000];
const SLOWED: u64 = 3_000_000;

/// Slows mirror 1 once half the bytes are in.
struct SlowDownHalfWay<'a> {
    inner: Bar,
    total: u64,
    server: &'a Server,
    started: Option<std::time::Instant>,
    /// Seconds after the start when mirror 1 slowed down.
    slowed_at: Option<f64>,
}

impl Progress for SlowDownHalfWay<'_> {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.total = total;
        self.started = Some(std::time::Instant::now());
        self.inner.start(total, mirrors);
    }
    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        if self.slowed_at.is_none() && done * 2 >= self.total {
            self.slowed_at = self.started.map(|t| t.elapsed().as_secs_f64());
            self.server.limiter().set_rate(Some(SLOWED));
            self.inner.warn(&format!("(demo) mirror 1 slows down to {}/s", HumanBytes(SLOWED)));
        }
        self.inner.update(done, per_mirror);
    }
    fn warn(&mut self, msg: &str) {
        self.inner.warn(msg);
    }
    fn joined(&mut self, mirror: &str) {
        self.inner.joined(mirror);
    }
    fn finish(&mut self) {
        self.inner.finish();
    }
}

pub fn run(opt: DemoOpt) -> Exit {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    let (dir, remove) = match &opt.dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("ddftp-demo-{}", std::process::id())), true),
    };
    let result = rt.block_on(demo(&opt, &dir));
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match result {
        Ok(()) => Exit::Ok,
        Err(e) => {
            report_error(&format!("{e:#}"));
            Exit::Transfer
        }
    }
}

async fn demo(opt: &DemoOpt, dir: &std::path::Path) -> anyhow::Result<()> {
    let root = dir.join("mirror");
    std::fs::create_dir_all(&root)?;
    let src = root.join("demo.bin");
    println!("ddftp demo: writing {} of random data to {}", HumanBytes(opt.size), src.display());
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src)?);
        let mut rng = rand::thread_rng();
        let mut buf = vec![0u8; 1 << 20];
        let mut left = opt.size;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            rng.fill_bytes(&mut buf[..n]);
            f.write_all(&buf[..n])?;
            left -= n as u64;
        }
        f.flush()?;
    }
    let want = ddftp::digest::sha256_file(&src)?;

    let mut servers = vec![];
    let mut mirrors = vec![];
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    for rate in RATES {
        let cfg = ServerConfig { rate_limit: Some(rate), log_errors: false, ..ServerConfig::default() };
        let server = Server::new(&root, &cfg)?;
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        mirrors.push(Peer::plain(Endpoint { host: addr.ip().to_string(), port: addr.port() }));
        let mut stop = stop_tx.subscribe();
        tokio::spawn(server.clone().run(vec![l], async move {
            let _ = stop.recv().await;
        }));
        servers.push(server);
    }
    println!("started 4 mirrors on 127.0.0.1:");
    for (i, (m, r)) in mirrors.iter().zip(RATES).enumerate() {
        let note = if i == 0 { format!(" (drops to {}/s half way)", HumanBytes(SLOWED)) } else { String::new() };
        println!("  mirror {} {m}: {}/s{note}", i + 1, HumanBytes(r));
    }
    println!("ddftp get demo.bin --mirrors {}", mirrors.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","));

    let out = dir.join("demo.bin.copy");
    let spec = GetSpec {
        path: "demo.bin".into(),
        mirrors,
        starting: vec![],
        http: vec![],
        output: out.clone(),
        block_size: DEFAULT_BLOCK_SIZE,
        sync: false,
        direct: false,
        stall_timeout: std::time::Duration::from_secs(5),
        restart: true,
        checksum: None,
        checksum_listed: false,
        token: None,
        binds: vec![],
        verify: true,
        scheduler: Config::default(),
        store: None,
        sealed_size: None,
        ca_file: None,
        checksum_url: None,
        metalink: None,
        retry: ddftp::retry::RetryPolicy::default(),
        connect_timeout: ddftp::session::CONNECT_TIMEOUT,
        limit_rate: None,
        stdout: None,
        bundle: None,
        range: None,
        no_clobber: false,
        delta: false,
        seeds: vec![],
        keep_mtime: false,
        share: None,
        asking: Default::default(),
        pool: None,
    };
    let mut progress = SlowDownHalfWay {
        inner: Bar::new(!opt.quiet, std::time::Duration::from_secs(10)),
        total: 0,
        server: &servers[0],
        started: None,
        slowed_at: None,
    };
    let result = fetch(&spec, &mut progress).await;
    let end = progress.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let slowed_at = progress.slowed_at.unwrap_or(end);
    let _ = stop_tx.send(());
    let r = result?;
    print_summary(&r, &mut std::io::stdout())?;
    let verdict =
        if r.transfer.sha256.as_ref() == Some(&want) { "identical to the source" } else { "DIFFERENT FROM THE SOURCE" };
    println!("verified: sha256 of the copy is {verdict}");
    // Each mirror's share of the capacity actually offered while the data
    // moved: mirror 1 at full rate until it slowed, then at the slow rate.
    let caps: Vec<f64> = RATES
        .iter()
        .enumerate()
        .map(|(i, &rate)| match i {
            0 => rate as f64 * slowed_at + SLOWED as f64 * (end - slowed_at),
            _ => rate as f64 * end,
        })
        .collect();
    let cap_total: f64 = caps.iter().sum();
    println!("balance: share of the bytes each mirror sent vs its share of the capacity offered");
    for (i, p) in r.transfer.producers.iter().enumerate() {
        println!(
            "  mirror {}: {:>5.1}% sent, {:>5.1}% of capacity",
            i + 1,
            100.0 * p.share,
            100.0 * caps[i] / cap_total
        );
    }
    if r.transfer.sha256.as_ref() != Some(&want) {
        anyhow::bail!("the copy does not match the source");
    }
    Ok(())
}
