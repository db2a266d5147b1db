//! `ddftp send` / `ddftp recv`: standard input on one host to standard
//! output on another over several links at once (DDNet striping), e.g.
//! `tar c dir | ddftp send --links A:P,B:P` and
//! `ddftp recv --listen A:P,B:P | tar x`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use ddftp_proto::units::HumanBytes;
use ddnet::{StripeListener, Striped, StripedReader, StripedWriter};
use tokio::io::AsyncWriteExt;

use super::{report_error, runtime, Exit};

/// Send standard input to a `ddftp recv` over several links at once.
#[derive(Debug, Args)]
pub struct SendOpt {
    /// The receiver's addresses, one link each: HOST:PORT,HOST:PORT,...
    #[arg(long, value_delimiter = ',', required = true, value_name = "ADDR:PORT,...")]
    pub links: Vec<String>,
    /// Local address for each link, in the same order (default: the OS picks).
    #[arg(long, value_delimiter = ',', value_name = "ADDR,...")]
    pub bind: Vec<IpAddr>,
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Receive one `ddftp send` stream and write it to standard output.
#[derive(Debug, Args)]
pub struct RecvOpt {
    /// Addresses to listen on, one per link: ADDR:PORT,ADDR:PORT,...
    #[arg(long, value_delimiter = ',', required = true, value_name = "ADDR:PORT,...")]
    pub listen: Vec<SocketAddr>,
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

async fn resolve(spec: &str) -> Result<SocketAddr, String> {
    let ep = ddftp_proto::parse_endpoint(spec).map_err(|e| e.to_string())?;
    let mut addrs = tokio::net::lookup_host((ep.host.as_str(), ep.port)).await.map_err(|e| format!("{spec}: {e}"))?;
    addrs.next().ok_or_else(|| format!("{spec}: no address"))
}

fn summary(what: &str, bytes: u64, started: Instant, links: usize, per_link: &[u64]) {
    let secs = started.elapsed().as_secs_f64();
    let shares: Vec<String> = per_link.iter().map(|b| HumanBytes(*b).to_string()).collect();
    eprintln!(
        "ddftp: {what} {} in {secs:.2} s ({:.1} MB/s) over {} links{}",
        HumanBytes(bytes),
        bytes as f64 / secs.max(1e-9) / 1e6,
        links,
        if shares.is_empty() { String::new() } else { format!(" ({})", shares.join(" / ")) }
    );
}

pub fn run_send(opt: SendOpt) -> Exit {
    if !opt.bind.is_empty() && opt.bind.len() != opt.links.len() {
        report_error(&format!("--bind gives {} addresses for {} links", opt.bind.len(), opt.links.len()));
        return Exit::Usage;
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    rt.block_on(async {
        let mut routes = vec![];
        for (i, l) in opt.links.iter().enumerate() {
            match resolve(l).await {
                Ok(a) => routes.push((opt.bind.get(i).copied(), a)),
                Err(e) => {
                    report_error(&e);
                    return Exit::Usage;
                }
            }
        }
        let started = Instant::now();
        let ch = match Striped::connect(&routes).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                report_error(&e);
                return Exit::Transfer;
            }
        };
        let mut w = StripedWriter::new(ch.clone());
        let r = async {
            let n = tokio::io::copy(&mut tokio::io::stdin(), &mut w).await?;
            w.shutdown().await?;
            Ok::<_, std::io::Error>(n)
        }
        .await;
        match r {
            Ok(n) => {
                if !opt.quiet {
                    summary("sent", n, started, ch.links(), &ch.stats().sent);
                }
                Exit::Ok
            }
            Err(e) => {
                report_error(&e);
                Exit::Transfer
            }
        }
    })
}

pub fn run_recv(opt: RecvOpt) -> Exit {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    rt.block_on(async {
        let l = match StripeListener::bind(&opt.listen).await {
            Ok(l) => l,
            Err(e) => {
                report_error(&e);
                return Exit::Usage;
            }
        };
        if !opt.quiet {
            let addrs = l.local_addrs().unwrap_or_default();
            let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
            eprintln!("ddftp: receiving on {}", addrs.join(","));
        }
        let ch = match l.accept().await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                report_error(&e);
                return Exit::Transfer;
            }
        };
        let started = Instant::now();
        let mut out = tokio::io::stdout();
        let r = async {
            let n = tokio::io::copy(&mut StripedReader::new(ch.clone()), &mut out).await?;
            out.flush().await?;
            // An orderly end: our last acks and our Close reach the sender.
            ch.close().await?;
            Ok::<_, std::io::Error>(n)
        }
        .await;
        match r {
            Ok(n) => {
                if !opt.quiet {
                    summary("received", n, started, ch.links(), &[]);
                }
                Exit::Ok
            }
            Err(e) => {
                report_error(&e);
                Exit::Transfer
            }
        }
    })
}
