//! `ddftp send` / `ddftp recv`: standard input on one host to standard
//! output on another over several links at once (DDNet striping), e.g.
//! `tar c dir | ddftp send --links A:P,B:P` and
//! `ddftp recv --listen A:P,B:P | tar x`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use ddftp_proto::units::HumanBytes;
use ddnet::{Relink, StripeListener, Striped};

use ddftp::retry::{RetryPolicy, Retrying, QUICK_EVERY};

use super::{mapped_input, report_error, runtime, Exit};

/// Send standard input to a `ddftp recv` over several links at once.
#[derive(Debug, Args)]
#[command(after_help = "Example:
  tar c data | ddftp send --links 10.0.1.2:7500,10.0.2.2:7500
Docs: man ddftp-send; docs/send-recv.md")]
pub struct SendOpt {
    /// The receiver's addresses, one link each: HOST:PORT,HOST:PORT,...
    #[arg(long, value_delimiter = ',', required = true, value_name = "ADDR:PORT,...")]
    pub links: Vec<String>,
    /// Local address for each link, in the same order (default: the OS picks).
    #[arg(long, value_delimiter = ',', value_name = "ADDR,...")]
    pub bind: Vec<IpAddr>,
    /// Every link over TLS 1.3 (the receiver runs with --tls-cert); each
    /// link's certificate must name the host given for it in --links.
    #[arg(long)]
    pub tls: bool,
    /// A private CA's certificate(s) (PEM) the receiver's certificate may
    /// be signed by, trusted besides the system's.
    #[arg(long, value_name = "PEM", requires = "tls")]
    pub ca_file: Option<PathBuf>,
    /// Our certificate chain (PEM), for a receiver started with --client-ca.
    #[arg(long, value_name = "CERT.pem", requires_all = ["key", "tls"])]
    pub cert: Option<PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "KEY.pem", requires = "cert")]
    pub key: Option<PathBuf>,
    /// A lost link is connected again (the others carry its part
    /// meanwhile) by the same policy as a lost mirror.
    #[command(flatten)]
    pub retry: super::flags::RetryOpt,
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Receive one `ddftp send` stream and write it to standard output.
#[derive(Debug, Args)]
#[command(after_help = "Example:
  ddftp recv --listen 0.0.0.0:7500 | tar x
Docs: man ddftp-recv; docs/send-recv.md")]
pub struct RecvOpt {
    /// Addresses to listen on, one per link: ADDR:PORT,ADDR:PORT,...
    #[arg(long, value_delimiter = ',', required = true, value_name = "ADDR:PORT,...")]
    pub listen: Vec<SocketAddr>,
    /// Every link over TLS 1.3 with this certificate chain (PEM); needs
    /// --tls-key. The sender adds --tls.
    #[arg(long, value_name = "CERT.pem", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "KEY.pem", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require the sender's certificate, signed by this CA (PEM).
    #[arg(long, value_name = "CA.pem", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// With every link lost, wait as long as a sender with these flags
    /// tries to connect one again before giving up.
    #[command(flatten)]
    pub retry: super::flags::RetryOpt,
    /// No summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// The host of a `--links` entry: the name its certificate must carry.
fn link_host(spec: &str) -> String {
    ddftp_proto::parse_endpoint(spec).map_or_else(|_| spec.to_string(), |ep| ep.host)
}

async fn resolve(spec: &str) -> Result<SocketAddr, String> {
    let ep = ddftp_proto::parse_endpoint(spec).map_err(|e| e.to_string())?;
    let mut addrs = tokio::net::lookup_host((ep.host.as_str(), ep.port)).await.map_err(|e| format!("{spec}: {e}"))?;
    addrs.next().ok_or_else(|| format!("{spec}: no address"))
}

/// The summary line, and a warning for each link lost on the way (the
/// stream went on over the others) or that came back.
fn summary(what: &str, bytes: u64, started: Instant, stats: &ddnet::Stats, names: &[String], quiet: bool) {
    let name = |i: usize| names.get(i).map_or_else(|| format!("link {}", i + 1), Clone::clone);
    for (i, why) in stats.lost.iter().enumerate() {
        if let Some(why) = why {
            eprintln!("ddftp: warning: {} was lost on the way ({why}); the other links carried the rest", name(i));
        }
    }
    for (i, &n) in stats.returned.iter().enumerate().filter(|(_, &n)| n > 0) {
        let times = if n == 1 { "once".to_string() } else { format!("{n} times") };
        eprintln!("ddftp: warning: {} was lost and came back {times}; the others carried its part meanwhile", name(i));
    }
    if quiet {
        return;
    }
    let secs = started.elapsed().as_secs_f64();
    let alive = stats.alive.iter().filter(|&&a| a).count();
    let links = match stats.alive.len() - alive {
        0 => format!("over {alive} links"),
        lost => format!("over {} links ({lost} lost on the way)", stats.alive.len()),
    };
    let per: Vec<String> = stats.sent.iter().map(|b| HumanBytes(*b).to_string()).collect();
    // What a lost or frozen link had carried, sent again on the others.
    let again = match stats.resent {
        0 => String::new(),
        n => format!(", {} sent again", HumanBytes(n)),
    };
    eprintln!(
        "ddftp: {what} {} in {secs:.2} s ({}/s) {links}{}",
        HumanBytes(bytes),
        HumanBytes((bytes as f64 / secs.max(1e-9)) as u64),
        if what != "sent" { String::new() } else { format!("{again} ({})", per.join(" / ")) }
    );
}

/// Largest message `send` makes of its input.
const PIECE: usize = 4 << 20;

/// Standard input's file as messages for `send`, mapped a piece at a time.
fn map_input(mut input: mapped_input::Input, tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>) {
    loop {
        let piece = match input.next_piece(PIECE) {
            Ok(Some(piece)) => Ok(piece),
            Ok(None) => return,
            Err(e) => Err(e),
        };
        let failed = piece.is_err();
        if tx.blocking_send(piece).is_err() || failed {
            return;
        }
    }
}

/// Reads standard input into messages for `send`: as much as can be read
/// without waiting (a whole piece from a file, what a pipe holds), so a
/// file goes in pieces of [`PIECE`] and a slow pipe's bytes go out as
/// they come, never held back for company.
fn read_input(tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>) {
    let mut buf = Vec::with_capacity(PIECE);
    loop {
        let mut end = false;
        while buf.len() < PIECE {
            match read_stdin(&mut buf) {
                Ok(0) => {
                    end = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
            if !readable_now() {
                break;
            }
        }
        // A whole piece goes as it is (a new buffer takes its place); a
        // short one is copied out, so a pipe's small reads neither hold
        // nor allocate a piece each.
        let piece = if buf.len() == PIECE {
            bytes::Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(PIECE)))
        } else {
            let short = bytes::Bytes::copy_from_slice(&buf);
            buf.clear();
            short
        };
        if !piece.is_empty() && tx.blocking_send(Ok(piece)).is_err() {
            return;
        }
        if end {
            return;
        }
    }
}

/// Reads standard input into `buf`'s spare capacity (never zeroed first:
/// a fresh piece a read is four megabytes of memset saved).
fn read_stdin(buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: read(2) writes at most `spare.len()` bytes into memory `buf`
    // owns; the length grows by what it wrote, nothing more.
    let n = unsafe { libc::read(0, spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the first `n` spare bytes were just written.
    unsafe { buf.set_len(buf.len() + n as usize) };
    Ok(n as usize)
}

/// Writes the channel's messages to standard output in order, each run
/// as it was read from its link (no copy) with `write`s of its own, on a
/// thread of its own; returns the bytes written. Not through tokio's stdout: it copies every write into a
/// buffer of its own and hands it to a thread of the blocking pool (with
/// `tokio::io::copy`'s 8 KiB at a time, a thread switch per 8 KiB), and
/// std's stdout scans binary data for newlines.
async fn to_stdout(ch: &Striped) -> std::io::Result<u64> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let mut out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ddnet::Message>(8);
    let writer = tokio::task::spawn_blocking(move || {
        let mut n = 0u64;
        while let Some(m) = rx.blocking_recv() {
            for run in m.runs() {
                out.write_all(run)?;
                n += run.len() as u64;
            }
        }
        Ok::<_, std::io::Error>(n)
    });
    let fed = async {
        while let Some(b) = ch.recv_message().await? {
            // The writer stopped: its error says why.
            if tx.send(b).await.is_err() {
                break;
            }
        }
        Ok::<_, std::io::Error>(())
    }
    .await;
    drop(tx);
    let written = writer.await.map_err(std::io::Error::other)?;
    fed.and(written)
}

/// Whether standard input has more to read right now.
fn readable_now() -> bool {
    let mut p = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; a zero timeout only looks.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

fn link_names(links: &[String]) -> Vec<String> {
    links.iter().map(|l| format!("link {l}")).collect()
}

/// The sending end's lost links are connected again, each under the
/// retry policy in a task of its own, the waits told on stderr; a link
/// whose budget is spent stays lost (the others go on), and so does one
/// that came back as often as it is retried (a receiver that drops it at
/// once, as one that wants TLS drops a plaintext link, is not asked for
/// ever). With every link lost the stream waits for one to come back,
/// and fails once none can. Ends when the channel has failed.
async fn keep_links(r: Relink, policy: RetryPolicy, names: Vec<String>) {
    r.wait_for_links();
    let (mut trying, mut spent) = (std::collections::HashSet::new(), std::collections::HashSet::new());
    let mut comebacks = vec![0u32; r.links()];
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel::<(usize, bool)>();
    while !r.failed() {
        while let Ok((l, back)) = done.try_recv() {
            trying.remove(&l);
            comebacks[l] += u32::from(back);
            if !back || comebacks[l] >= policy.retries {
                spent.insert(l);
            }
        }
        let lost = r.lost();
        if !lost.is_empty() && lost.len() == r.links() && lost.iter().all(|l| spent.contains(l)) {
            r.give_up(&format!("every link was lost and none came back after {} tries", policy.tries()));
            return;
        }
        for link in lost {
            if !spent.contains(&link) && trying.insert(link) {
                let name = names.get(link).cloned().unwrap_or_else(|| format!("link {}", link + 1));
                let (r, done) = (r.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let back = reconnect(&r, link, &policy, &name).await;
                    let _ = done.send((link, back));
                });
            }
        }
        tokio::time::sleep(QUICK_EVERY).await;
    }
}

/// The receiving end waits as long as a sender with the same retry flags
/// tries (and a greeting more) for a lost link while every link is lost;
/// then the stream fails.
async fn await_links(r: Relink, policy: RetryPolicy) {
    r.wait_for_links();
    let patience = policy.total() + std::time::Duration::from_secs(10);
    let mut since: Option<Instant> = None;
    while !r.failed() {
        let all = r.lost().len() == r.links();
        since = if all { since.or(Some(Instant::now())) } else { None };
        if since.is_some_and(|t| t.elapsed() > patience) {
            r.give_up(&format!("every link was lost and none came back within {:.0} s", patience.as_secs_f64()));
            return;
        }
        tokio::time::sleep(QUICK_EVERY).await;
    }
}

/// Connects `link` again until it is back (true) or the budget is spent.
async fn reconnect(r: &Relink, link: usize, policy: &RetryPolicy, name: &str) -> bool {
    if policy.retries == 0 {
        return false;
    }
    let mut state = Retrying::default();
    let mut last = String::from("no answer");
    while let Some(wait) = state.next(policy, None) {
        if let Some(w) = state.tell(&format!("{name} lost; connecting it"), wait, policy) {
            eprintln!("ddftp: warning: {w}");
        }
        tokio::time::sleep(wait).await;
        if r.failed() {
            return false;
        }
        match r.reconnect(link).await {
            Ok(()) => {
                eprintln!("ddftp: warning: {name} is back");
                return true;
            }
            Err(e) => last = e.to_string(),
        }
    }
    eprintln!(
        "ddftp: warning: {name}: not connected again after {} tries ({last}); going on without it",
        policy.tries()
    );
    false
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
        let tls = match &opt.tls {
            false => None,
            true => {
                let identity = opt.cert.as_deref().zip(opt.key.as_deref());
                let client = ddnet::tls::ClientTls { ca_file: opt.ca_file.as_deref(), identity };
                match ddnet::tls::client_config(&client) {
                    Ok(connector) => {
                        let names = opt.links.iter().map(|l| link_host(l)).collect();
                        Some(ddnet::endpoint::ClientSide { connector, names })
                    }
                    Err(e) => {
                        report_error(&e);
                        return Exit::Usage;
                    }
                }
            }
        };
        let started = Instant::now();
        let ch = match Striped::connect_with(&routes, tls.as_ref()).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                report_error(&e);
                return Exit::Transfer;
            }
        };
        let keeper = tokio::spawn(keep_links(ch.relink(), opt.retry.policy(), link_names(&opt.links)));
        let r = async {
            let (tx, mut rx) = tokio::sync::mpsc::channel(2);
            std::thread::spawn(move || match mapped_input::Input::stdin() {
                Some(input) => map_input(input, tx),
                None => read_input(tx),
            });
            let mut n = 0;
            while let Some(piece) = rx.recv().await {
                let piece: bytes::Bytes = piece?;
                n += piece.len() as u64;
                ch.send(piece).await?;
            }
            ch.close().await?;
            Ok::<_, std::io::Error>(n)
        }
        .await;
        keeper.abort();
        match r {
            Ok(n) => {
                summary("sent", n, started, &ch.stats(), &link_names(&opt.links), opt.quiet);
                Exit::Ok
            }
            Err(e) => {
                summary("sent", 0, started, &ch.stats(), &link_names(&opt.links), true);
                match mapped_input::stdin_shrank() {
                    true => report_error(&mapped_input::shrank_error()),
                    false => report_error(&e),
                }
                Exit::Transfer
            }
        }
    })
}

/// Runs freed by the stdout writer are memory the next runs reuse: kept
/// by the allocator (up to twice the senders' 64 MiB window of unacked
/// bytes), not handed back to the kernel and faulted in and zeroed again
/// a page at a time, which glibc's defaults do for buffers of a few MiB.
fn keep_freed_buffers() {
    // SAFETY: mallopt only sets the allocator's thresholds.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}

pub fn run_recv(opt: RecvOpt) -> Exit {
    keep_freed_buffers();
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    rt.block_on(async {
        let tls = match (&opt.tls_cert, &opt.tls_key) {
            (Some(cert), Some(key)) => match ddnet::tls::server_config(cert, key, opt.client_ca.as_deref()) {
                Ok(a) => Some(a),
                Err(e) => {
                    report_error(&e);
                    return Exit::Usage;
                }
            },
            _ => None,
        };
        let l = match StripeListener::bind(&opt.listen).await {
            Ok(l) if tls.is_some() => l.with_tls(tls.expect("checked")),
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
        // A lost link the sender connects again is taken back.
        let back = {
            let (l, relink) = (Arc::new(l), ch.relink());
            tokio::spawn(async move { l.take_back(relink).await })
        };
        let waiting = tokio::spawn(await_links(ch.relink(), opt.retry.policy()));
        let started = Instant::now();
        let r = async {
            let n = to_stdout(&ch).await?;
            // An orderly end: our last acks and our Close reach the sender.
            ch.close().await?;
            Ok::<_, std::io::Error>(n)
        }
        .await;
        back.abort();
        waiting.abort();
        match r {
            Ok(n) => {
                let names: Vec<String> = opt.listen.iter().map(|a| format!("link {a}")).collect();
                summary("received", n, started, &ch.stats(), &names, opt.quiet);
                Exit::Ok
            }
            Err(e) => {
                report_error(&e);
                Exit::Transfer
            }
        }
    })
}
