//! The I/O driver of `ddftp get`: connections, block placement, and the
//! coordinator that feeds the [`Scheduler`].
//!
//! Each producer slot (one TCP connection) is a task that sends the
//! scheduler's commands and reads blocks. It knows exactly which block must
//! come next on its connection (it sent the `Start`s and `Extend`s), so it
//! checks every block *before* writing it at its offset: a confused or
//! hostile server can waste a connection but cannot write anywhere else in
//! the file. Payloads go from the receive buffer to the file with one
//! `pwrite`, never through the coordinator. Slots report progress in runs
//! ("blocks a..b of stream s"), not one message per block.
//!
//! The coordinator owns the scheduler: events in, actions out to the slots.
//!
//! This module sets a transfer up (mirrors probed and voted on, the block
//! size agreed, the part file and journal); `slot` is a producer slot's
//! task, `coordinator` the loop around the scheduler.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::session::Peer;
use bytes::BytesMut;
pub use check::{check, CheckReport, MirrorCheck};
use ddftp_proto::frame;
use ddftp_proto::manifest::hex;
use ddftp_proto::{Cursor, ErrorCode, Reply, Request};
use tokio::io::AsyncReadExt;

use std::net::IpAddr;
use tokio::sync::mpsc;

use crate::consensus::{self, Version};
use crate::digest::{Completed, PrefixHasher};
use crate::journal::{journal_path, Journal};
use crate::manifest::Manifest;
use crate::metalink::MetalinkFile;
use crate::scheduler::{Action, Config, ProducerId, StreamId};
pub use crate::session::Route;
use ddops::transfer::BlockRun;

mod already;
mod check;
mod coordinator;
mod error;
mod expected;
mod finish;
mod http_slot;
mod pieces;
mod plan;
mod probing;
mod producer;
mod rejoin;
mod report;
mod slot;
mod whole_slot;

pub use error::{Resume, TransferError, Unconfirmed};
use producer::{agree_on_version, fetch_manifest, probe, probe_http, routes_to, Producer};
pub use report::{LinkReport, ProducerReport, Sha256Checked, TransferReport};

use crate::http::{HttpError, HttpMirror, HttpVersion, Lane};
use crate::retry::RetryPolicy;
use crate::session::{connect, Session, SessionError, STAT_TIMEOUT};
use crate::store::Store;
use coordinator::run_transfer;
use slot::Check;

/// One route to a mirror as the consumer sees it.
#[derive(Debug, Clone)]
pub struct MirrorInfo {
    pub route: Route,
    pub version: Version,
    /// The chunk manifest, from the one mirror asked for it up front.
    pub manifest: Option<Manifest>,
}

/// Live figures for a progress display.
pub trait Progress: Send {
    /// Transfer starts: total bytes and the mirrors in use.
    fn start(&mut self, total: u64, mirrors: &[String]);
    /// Bytes received so far, overall and per mirror.
    fn update(&mut self, done: u64, per_mirror: &[u64]);
    /// A mirror was dropped or a similar event worth telling the user.
    fn warn(&mut self, msg: &str);
    /// A mirror joined the running transfer: `per_mirror` grows by one.
    fn joined(&mut self, mirror: &str);
    fn finish(&mut self);
    /// What a long step before the bytes move is doing (listing a tree,
    /// comparing it with DEST), shown on a terminal.
    fn status(&mut self, _msg: &str) {}
    /// Where a tree's entries stand (an archive), shown beside the bytes.
    fn entries(&mut self, _counts: EntryCounts) {}
}

/// A tree's entries so far: listed (and whether the walk still goes on),
/// and of those to move, how many have moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryCounts {
    pub listed: u64,
    /// Bytes of the files listed.
    pub listed_bytes: u64,
    pub walking: bool,
    pub moved: u64,
    pub to_move: u64,
}

/// What a `get` needs to know.
#[derive(Debug, Clone)]
pub struct GetSpec {
    pub path: String,
    pub mirrors: Vec<Peer>,
    pub output: PathBuf,
    pub block_size: u32,
    /// fsync the output before it is renamed into place.
    pub sync: bool,
    /// A producer that owes blocks and sends none for this long is dropped
    /// and its range taken over by the others.
    pub stall_timeout: Duration,
    /// Ignore (delete) the resume journal and part file of an earlier run.
    pub restart: bool,
    /// Published SHA-256 (lowercase hex) the output must have.
    pub checksum: Option<String>,
    /// It came from a `-i` list's `checksum=`, not `--checksum` (so
    /// messages name the right one).
    pub checksum_listed: bool,
    /// Shared token for servers that ask for one.
    pub token: Option<Arc<[u8]>>,
    /// Local addresses to connect from (one producer per mirror and
    /// address); empty: wherever the OS routes.
    pub binds: Vec<IpAddr>,
    /// Verify every block against the chunk manifest as it arrives.
    pub verify: bool,
    /// `path` is a bundle every mirror registered with this size
    /// ([`crate::archive`]): no `Stat`, no vote and no manifest (a bundle
    /// has none; each mirror checks every entry against the list as it
    /// reads it), and every block comes sealed with the hash of its bytes,
    /// checked before it is written.
    pub sealed_size: Option<u64>,
    pub scheduler: Config,
    /// Write here instead of a part file renamed to `output` at the end
    /// (an archive's files); the journal is still `output`'s.
    pub store: Option<Arc<dyn Store>>,
    /// HTTP mirrors (`http(s)://...` URLs; one ending in `/` is a
    /// directory `path` is appended to), producers beside the ddftpd ones.
    pub http: Vec<String>,
    /// A private CA (PEM) HTTPS mirrors may be signed by, besides the
    /// system's.
    pub ca_file: Option<PathBuf>,
    /// A `SHA256SUMS`-style listing that names the file's SHA-256.
    pub checksum_url: Option<String>,
    /// The file as a Metalink describes it: size, hash, piece hashes (its
    /// URLs are in `http`).
    pub metalink: Option<MetalinkFile>,
    /// How a mirror that failed, stalled, was busy or did not answer is
    /// asked again (and rejoins the running transfer).
    pub retry: RetryPolicy,
    /// How long a mirror has to accept a connection and greet.
    pub connect_timeout: Duration,
    /// The most bytes a second over all mirrors together (`--limit-rate`).
    pub limit_rate: Option<u64>,
    /// Write the file in order to standard output (`-o -`) through a
    /// reorder window of this many bytes: no part file, no journal.
    pub stdout: Option<u64>,
    /// A bundle's definition (`path` is its name): a mirror asked again
    /// registers it first (a restarted ddftpd has forgotten it).
    pub bundle: Option<Arc<[u8]>>,
    /// Move only these bytes of `path` (the blocks that hold any of them):
    /// an archive rank's part of a bundle the ranks share. The rest counts
    /// as there already, and the journal says so.
    pub range: Option<std::ops::Range<u64>>,
    /// An output that holds another file is kept, and the download fails.
    pub no_clobber: bool,
    /// The output gets the mirrors' modification time.
    pub keep_mtime: bool,
    /// What requests to web mirrors carry: headers, user agent, where
    /// credentials come from.
    pub asking: Arc<crate::http::auth::Asking>,
    /// Connections shared by the files of one command: a probe takes an
    /// idle one to its mirror, a completed transfer hands its own back.
    pub pool: Option<Arc<crate::pool::Pool>>,
}

/// Tells the user `w` (above the progress bar) and keeps it for the report.
fn tell(progress: &mut dyn Progress, warnings: &mut Vec<String>, w: String) {
    progress.warn(&w);
    warnings.push(w);
}

/// What kind of file `m` is, in words.
pub fn file_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    match () {
        _ if t.is_file() => "regular file",
        _ if t.is_dir() => "directory",
        _ if t.is_symlink() => "symlink",
        _ if t.is_char_device() => "character device",
        _ if t.is_block_device() => "block device",
        _ if t.is_fifo() => "FIFO",
        _ if t.is_socket() => "socket",
        _ => "special file",
    }
}

/// A probe's answer, by its mirror's place in the list.
enum Probed {
    Ddftpd(usize, Result<(MirrorInfo, Session), SessionError>),
    Http(usize, Result<(Arc<HttpMirror>, HttpVersion), (String, crate::http::HttpError)>),
}

/// Producer slots: one per route, plus the virtual pair's second stream
/// on the last route when the count is odd. The probe's connection
/// becomes the slot's: no second handshake. A server that ignores Range
/// comes first: the low edge of the partition at block 0, the only place
/// it can send from; a second such server would only read what the first
/// sends, and is not used. Each slot's mirror index, and the mirrors' names.
async fn make_slots(
    spec: &GetSpec,
    usable: Vec<(MirrorInfo, Session)>,
    http: Vec<(Arc<HttpMirror>, HttpVersion)>,
    mut spare: Option<tokio::task::JoinHandle<(Route, Result<crate::session::Probed, SessionError>)>>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> (Vec<(usize, Producer)>, Vec<String>) {
    let mut mirror_names: Vec<String> = vec![];
    let mut slots: Vec<(usize, Producer)> = vec![];
    let mut owner_of = |name: String| {
        mirror_names.iter().position(|n| *n == name).unwrap_or_else(|| {
            mirror_names.push(name);
            mirror_names.len() - 1
        })
    };
    // Every producer as named (ddftpd routes, then HTTP mirrors), paired
    // in the order the rules give ([`plan::pairing`]).
    let named: Vec<Producer> = usable
        .into_iter()
        .map(|(m, conn)| Producer::Ddftpd(m.route, conn))
        .chain(http.into_iter().map(|(m, v)| Producer::Http(Arc::new(m.pinned(&v)), v.rtt)))
        .collect();
    let (order, second) = plan::pairing(&named.iter().map(Producer::whole_only).collect::<Vec<_>>());
    let mut named: Vec<Option<Producer>> = named.into_iter().map(Some).collect();
    for o in order {
        let (Ok(i) | Err(i)) = o;
        let p = named[i].take().expect("each producer once");
        let name = p.source().mirror();
        let w = match (o.is_ok(), p.whole_only()) {
            (true, false) => None,
            (true, true) => Some(format!("{name} ignores Range: it sends the file from its start, the others meet it")),
            (false, _) => Some(format!("not using {name}: it ignores Range, as does another mirror in use")),
        };
        if let Some(w) = w {
            tell(progress, warnings, w);
        }
        if o.is_ok() {
            slots.push((owner_of(name), p));
        }
    }
    match slots.last().filter(|_| second) {
        Some((owner, Producer::Http(m, rtt))) => {
            let second = (*owner, Producer::Http(m.clone(), *rtt));
            slots.push(second);
        }
        Some((owner, Producer::Ddftpd(route, _))) => {
            let (owner, route) = (*owner, route.clone());
            let second = match spare.take() {
                Some(h) => match h.await.expect("connect task") {
                    (spare_route, r) if spare_route == route => r,
                    _ => connect(&route, None, spec.token.as_deref()).await,
                },
                None => connect(&route, None, spec.token.as_deref()).await,
            };
            match second {
                Ok((s, ..)) => slots.push((owner, Producer::Ddftpd(route, s))),
                Err(e) => {
                    let w = format!("{route}: second connection failed ({e}); using one stream");
                    tell(progress, warnings, w);
                }
            }
        }
        None => {}
    }
    (slots, mirror_names)
}

/// What one round of probes found.
struct Round {
    usable: Vec<(MirrorInfo, Session)>,
    http: Vec<(Arc<HttpMirror>, HttpVersion)>,
    /// Why each other mirror is not used, a line each.
    failures: Vec<String>,
    /// Mirrors that may answer later (down, silent, busy): asked again
    /// once the transfer runs, and joining it when they answer.
    later: Vec<producer::Source>,
    /// Some failure may pass (a mirror down, silent, busy, a 503).
    transient: bool,
    /// How long busy mirrors asked us to wait.
    hints: Vec<Duration>,
    /// How the mirrors that may answer later failed ([`crate::retry::AtStart`]).
    at_start: crate::retry::AtStart,
    /// Some mirror failed its TLS handshake.
    untrusted: bool,
    /// Mirrors that said the path is not a regular file (a directory?).
    not_a_file: usize,
    /// The virtual pair's second connection, under way.
    spare: Option<tokio::task::JoinHandle<(Route, Result<crate::session::Probed, SessionError>)>>,
}

/// Probes every mirror at once, HTTP and ddftpd alike: their answers
/// until the deadline the first answer sets ([`probing`]).
async fn probe_round(spec: &GetSpec, routes: &[Route], tls: &Option<tokio_rustls::TlsConnector>) -> Round {
    let probing_since = Instant::now();
    let mut probing = tokio::task::JoinSet::new();
    for (i, u) in spec.http.iter().enumerate() {
        let (u, path, tls, asking) = (u.clone(), spec.path.clone(), tls.clone(), spec.asking.clone());
        probing.spawn(async move { Probed::Http(i, probe_http(u, path, tls, asking).await) });
    }
    // The first route also sends the chunk manifest right behind its Stat,
    // so verification costs no extra round trip when that mirror agrees
    // with the majority (the usual case).
    for (i, r) in routes.iter().enumerate() {
        let stat = spec.sealed_size.is_none().then(|| (spec.path.clone(), spec.verify && i == 0));
        let (r, token, sealed, within) = (r.clone(), spec.token.clone(), spec.sealed_size, spec.connect_timeout);
        let pool = spec.pool.clone();
        probing.spawn(async move { Probed::Ddftpd(i, probe(r, stat, token, sealed, within, pool).await) });
    }
    // With an odd count the last route will also carry a virtual pair's
    // second stream: open that connection at the same time.
    let spare_token = spec.token.clone();
    let spare =
        routes.last().filter(|_| (routes.len() + spec.http.len()) % 2 == 1).cloned().map(|last| {
            tokio::spawn(async move { (last.clone(), connect(&last, None, spare_token.as_deref()).await) })
        });
    let mut ddftpd_probed: Vec<Option<_>> = routes.iter().map(|_| None).collect();
    let mut http_probed: Vec<Option<_>> = spec.http.iter().map(|_| None).collect();
    let (mut first, mut grace) = (None, None);
    loop {
        let next = match probing::deadline(probing_since, first, spec.connect_timeout) {
            None => probing.join_next().await,
            Some(d) => {
                grace = Some(d.saturating_duration_since(probing_since));
                match tokio::time::timeout_at(d.into(), probing.join_next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            }
        };
        let Some(done) = next else { break };
        match done.expect("probe task") {
            Probed::Ddftpd(i, r) => {
                if r.is_ok() {
                    first.get_or_insert_with(Instant::now);
                }
                ddftpd_probed[i] = Some(r);
            }
            Probed::Http(i, r) => {
                if r.is_ok() {
                    first.get_or_insert_with(Instant::now);
                }
                http_probed[i] = Some(r);
            }
        }
    }
    probing.abort_all();
    let late = |g: Option<Duration>| {
        format!(
            "no answer within {:.1} s, while others had answered: starting without it",
            g.unwrap_or_default().as_secs_f64()
        )
    };
    let mut r = Round {
        usable: vec![],
        http: vec![],
        failures: vec![],
        later: vec![],
        transient: false,
        hints: vec![],
        at_start: crate::retry::AtStart::NoSuchHost,
        untrusted: false,
        not_a_file: 0,
        spare,
    };
    let mut unreached = vec![];
    for (route, got) in routes.iter().zip(ddftpd_probed) {
        match got {
            Some(Ok(x)) => r.usable.push(x),
            Some(Err(e)) => {
                r.untrusted |= matches!(e, SessionError::Tls(_));
                r.not_a_file += usize::from(matches!(e, SessionError::Refused { code: ErrorCode::NotAFile, .. }));
                if e.is_transient() {
                    r.transient = true;
                    r.hints.extend(e.wait_hint());
                    r.later.push(producer::Source::Ddftpd(route.clone()));
                    unreached.push(e.unreached());
                }
                r.failures.push(format!("  {route}: {e}"))
            }
            None => {
                r.transient = true;
                unreached.push(None);
                r.later.push(producer::Source::Ddftpd(route.clone()));
                r.failures.push(format!("  {route}: {}", late(grace)))
            }
        }
    }
    for (url, got) in spec.http.iter().zip(http_probed) {
        match got {
            Some(Ok(x)) => r.http.push(x),
            Some(Err((shown, e))) => {
                r.untrusted |= matches!(e, crate::http::HttpError::Tls(_));
                if e.is_transient() {
                    r.transient = true;
                    r.hints.extend(e.wait_hint());
                    r.later.push(producer::Source::LateHttp(url.clone()));
                    unreached.push(e.unreached());
                }
                r.failures.push(format!("  {shown}: {e}"))
            }
            None => {
                unreached.push(None);
                r.later.push(producer::Source::LateHttp(url.clone()));
                r.failures.push(format!("  {url}: {}", late(grace)))
            }
        }
    }
    r.at_start = crate::retry::AtStart::of(unreached);
    if r.usable.is_empty() && r.http.is_empty() {
        if let Some(s) = r.spare.take() {
            s.abort();
        }
    }
    r
}

/// Probes the mirrors until one answers: with none answering (all down,
/// busy or silent), the probes are made again under the retry policy
/// before the download gives up, saying why.
async fn probe_until_one_answers(
    spec: &GetSpec,
    routes: &[Route],
    tls: &Option<tokio_rustls::TlsConnector>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Round, TransferError> {
    let mut asked = crate::retry::Retrying::default();
    let mut told_wait = Duration::ZERO;
    loop {
        let round = probe_round(spec, routes, tls).await;
        if !round.usable.is_empty() || !round.http.is_empty() {
            return Ok(round);
        }
        let hint = round.hints.iter().copied().max();
        let wait = if round.transient { asked.next_at_start(&spec.retry, hint, round.at_start) } else { None };
        let Some(wait) = wait else {
            let (path, failures) = (spec.path.clone(), round.failures);
            return Err(match round.untrusted {
                true => TransferError::Untrusted { path, failures },
                // Every mirror says so: most often a directory, for `archive`.
                false if round.not_a_file == failures.len() => TransferError::NotAFile { path, failures },
                false => TransferError::NoUsableMirror { path, failures },
            });
        };
        // Told at the first try and whenever the wait grows, not every
        // 0.1 s (nor every second a busy server asks for).
        if asked.tries == 1 || wait > told_wait {
            told_wait = wait;
            let w = format!(
                "no mirror could serve {} yet:\n{}\nasking again in {:.1} s (try {} of {})",
                spec.path,
                round.failures.join("\n"),
                wait.as_secs_f64(),
                asked.tries,
                spec.retry.tries_at_start(round.at_start)
            );
            tell(progress, warnings, w);
        }
        tokio::time::sleep(wait).await;
    }
}

/// One server under two names is one mirror ([`plan::one_name_per_server`]):
/// the names after the first are dropped, each with a warning.
fn one_name_each(usable: &mut Vec<(MirrorInfo, Session)>, progress: &mut dyn Progress, warnings: &mut Vec<String>) {
    let ids: Vec<_> = usable.iter().map(|(m, conn)| (conn.server_id, m.route.endpoint.clone())).collect();
    let mut verdicts = plan::one_name_per_server(&ids).into_iter();
    usable.retain(|(m, _)| match verdicts.next().expect("one verdict a route") {
        Ok(()) => true,
        Err(first) => {
            let w = format!(
                "skipping {}: it is the same server as {first} (one mirror under two names counts once)",
                m.route.endpoint
            );
            tell(progress, warnings, w);
            false
        }
    });
}

/// The temporary name the data is written under until it is complete.
pub fn part_path(output: &Path) -> PathBuf {
    ddtree::scratch::beside(output, "", ".ddftp-part")
}

/// Mirrors that become ready while a sealed transfer runs (an archive's,
/// as each registers the bundle): each joins as a new producer per local
/// address, or, with why not, is reported skipped.
pub type Joining = mpsc::UnboundedReceiver<(Peer, Result<(), SessionError>)>;

/// Downloads `spec.path` from the mirrors into `spec.output`. The file
/// appears under its name only once every byte has arrived.
pub async fn get(spec: &GetSpec, progress: &mut dyn Progress) -> Result<TransferReport, TransferError> {
    get_joining(spec, progress, None).await
}

/// [`get`], with mirrors that may join the running transfer (`joining`;
/// only for a sealed bundle, which needs no vote: whatever mirror
/// registered it serves the same list).
pub async fn get_joining(
    spec: &GetSpec,
    progress: &mut dyn Progress,
    joining: Option<&mut Joining>,
) -> Result<TransferReport, TransferError> {
    if spec.mirrors.is_empty() && spec.http.is_empty() {
        return Err(TransferError::NoMirrors);
    }
    let https = spec.http.iter().chain(&spec.checksum_url).any(|u| u.starts_with("https://"));
    let tls = match https {
        true => Some(crate::http::tls::connector(spec.ca_file.as_deref())?),
        false => None,
    };
    // The clock a user sees: from the first connection to the last byte.
    let started = Instant::now();
    let mut warnings = vec![];
    // Every (mirror, local address) pair is a route and a producer.
    let routes: Vec<Route> = spec.mirrors.iter().flat_map(|ep| routes_to(spec, ep)).collect();
    let Round { mut usable, mut http, failures, later, spare, .. } =
        probe_until_one_answers(spec, &routes, &tls, progress, &mut warnings).await?;
    for f in &failures {
        let w = format!("skipping {}", f.trim_start());
        tell(progress, &mut warnings, w);
    }
    one_name_each(&mut usable, progress, &mut warnings);
    let ddftpd = !usable.is_empty();
    for u in spec.metalink.iter().flat_map(|m| &m.unused) {
        tell(progress, &mut warnings, format!("Metalink: {u}"));
    }
    let expected = expected::published(spec, &mut http, tls.clone(), ddftpd, progress, &mut warnings).await?;
    if let Some(e) = &expected {
        let other = expected::drop_other_copies(e, &mut usable, &spec.path, progress, &mut warnings);
        if let Some(got) = other.filter(|_| usable.is_empty() && http.is_empty()) {
            // Every mirror serves another file than the one expected.
            let (path, expected, from) = (spec.path.clone(), e.sha256.clone(), e.from.source().to_string());
            return Err(TransferError::ChecksumMismatch { path, expected, got, from });
        }
    }
    if usable.is_empty() && http.is_empty() {
        return Err(TransferError::NoUsableMirror { path: spec.path.clone(), failures: warnings.clone() });
    }
    let (version, http_only, copy) = agree_on_version(spec, &mut usable, &mut http, progress, &mut warnings)?;
    let size = version.size;
    let mtime = mirrors_mtime(&usable, &http).filter(|_| spec.keep_mtime);
    if spec.stdout.is_none() && spec.store.is_none() && spec.sealed_size.is_none() {
        let want =
            expected.as_ref().map(|e| e.sha256.clone()).or_else(|| (!http_only).then(|| hex(&version.digest.sha256)));
        let checked = checked_against(false, http_only, expected.as_ref());
        if let Some(mut r) = already::done_before(spec, size, want, checked, mtime, started).await? {
            r.warnings = warnings;
            // Nothing moved on them: the next file of the command may.
            if let Some(pool) = &spec.pool {
                usable.into_iter().for_each(|(m, conn)| pool.put(m.route, conn, Default::default()));
            }
            return Ok(r);
        }
    }
    let early = usable.iter_mut().find_map(|(m, _)| m.manifest.take());
    let pieces = spec.metalink.as_ref().and_then(|m| m.pieces.clone()).filter(|_| http_only);
    let manifest = match early {
        _ if !spec.verify || size == 0 || spec.sealed_size.is_some() => None,
        Some(m) => Some(Arc::new(m)),
        // HTTP mirrors only: a Metalink's piece hashes verify the blocks.
        None if usable.is_empty() => pieces.map(Arc::new),
        None => Some(Arc::new(fetch_manifest(&spec.path, &version, &mut usable, progress, &mut warnings).await?)),
    };

    let (slots, mirror_names) = make_slots(spec, usable, http, spare, progress, &mut warnings).await;

    let sealed = spec.sealed_size.is_some();
    let sha256 = plan::journal_identity(
        sealed,
        (!http_only).then(|| hex(&version.digest.sha256)).as_deref(),
        expected.as_ref().map(|e| e.sha256.as_str()),
        size,
        copy.date.clone().flatten().as_deref(),
    );
    let part = part_path(&spec.output);
    let jpath = journal_path(&spec.output);
    let out_err = unwritable(&part);
    let to_stdout = spec.stdout.is_some();
    let earlier = earlier_run(spec, &slots, (&part, &jpath), size, &sha256, progress, &mut warnings)?;
    let mut manifest = manifest;
    let (block_size, pieces_over) =
        block_size(spec, &slots, &mut manifest, version.digest.chunk_size, earlier.as_ref(), progress, &mut warnings)?;
    let ring = spec.stdout.map(|w| Arc::new(crate::stdout::Ring::new(w, block_size)));
    let file = open_store(spec, &part, earlier.is_some(), size, ring.as_ref())?;
    let blocks = size.div_ceil(u64::from(block_size));
    let mut journal = Journal::new(&spec.path, size, &sha256, block_size);
    let completed = completed_before(spec, earlier.as_ref(), blocks, block_size);
    journal.done = completed.ranges();
    let reused_bytes = journal.done_bytes();
    // A file of one block has nothing to resume: its journal is written
    // only if it takes longer than a journal tick, or fails (a list of
    // small files then makes and removes no journal per file).
    if !to_stdout && blocks > 1 {
        journal.save(&jpath, spec.sync).map_err(|source| TransferError::Output {
            path: jpath.clone(),
            source,
            resume: Resume::Nothing,
        })?;
    }
    let hasher = match sealed {
        // A bundle's blocks are each checked against their seal; a SHA-256
        // of the range would read 100,000 files back, and match nothing.
        true => None,
        false => Some(spawn_hasher(&file, size, ring.as_ref()).map_err(out_err)?),
    };
    let (check, pieces) = checks(manifest, pieces_over, sealed && spec.verify);
    let plan = Prepared {
        size,
        block_size,
        check,
        pieces,
        file: file.clone(),
        slots,
        mirrors: mirror_names,
        completed,
        journal,
        jpath: jpath.clone(),
        reused_bytes,
        ring: ring.clone(),
        wanted: Arc::new(rejoin::Wanted {
            path: spec.path.clone(),
            version: (!sealed && !http_only).then_some(version),
            size,
            token: spec.token.clone(),
            bundle: spec.bundle.clone(),
            http: copy.clone(),
            tls: tls.clone(),
            asking: spec.asking.clone(),
            policy: spec.retry,
            connect_timeout: spec.connect_timeout,
        }),
        later,
    };
    let joining = joining.filter(|_| spec.sealed_size.is_some());
    let result = run_transfer(spec, plan, progress, &mut warnings, started, hasher.as_ref(), joining).await;
    let got = hasher.map(PrefixHasher::finish).transpose();
    // On failure the part file and the journal stay for the next run.
    let mut report = result?;
    report.sha256 = got.map_err(out_err)?;
    report.sha256_checked = checked_against(sealed, http_only, expected.as_ref());
    let done = finish::Done { report, file, part, jpath, sha256, http_only, to_stdout, mtime };
    finish::check_and_place(spec, done, expected.as_ref())
}

/// The mirrors' time for the output (`curl -R`): a ddftpd's, else a web
/// server's Last-Modified.
fn mirrors_mtime(usable: &[(MirrorInfo, Session)], http: &[(Arc<HttpMirror>, HttpVersion)]) -> Option<(i64, u32)> {
    usable.iter().find_map(|(_, conn)| conn.mtime).or_else(|| {
        http.iter().find_map(|(_, v)| v.last_modified.as_deref().and_then(already::http_date)).map(|s| (s, 0))
    })
}

/// An error writing the part file `part` (nothing of it kept).
fn unwritable(part: &Path) -> impl Fn(io::Error) -> TransferError + Copy + '_ {
    |source| TransferError::Output { path: part.to_path_buf(), source, resume: Resume::Nothing }
}

/// The block size ([`plan::blocks`]): the flag's, within what every ddftpd
/// in use serves (told in its greeting; agreed on before the journal is
/// written, so a rerun is not bound to a block size no mirror accepts), an
/// interrupted run's, and one the chunk hashes can check. A manifest whose
/// pieces cannot be checked as they arrive is dropped (with a warning);
/// also whether its pieces span several blocks.
fn block_size(
    spec: &GetSpec,
    slots: &[(usize, Producer)],
    manifest: &mut Option<Arc<Manifest>>,
    chunk_size: u32,
    earlier: Option<&Journal>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(u32, bool), TransferError> {
    let chunk_size = manifest.as_ref().map_or(chunk_size, |m| m.chunk_size);
    let limit = slots
        .iter()
        .filter_map(|(_, p)| match p {
            Producer::Ddftpd(_, c) => Some(c.max_block_size),
            Producer::Http(..) => None,
        })
        .min()
        .unwrap_or(u32::MAX);
    let chosen = plan::blocks(plan::Facts {
        asked: spec.block_size,
        limit,
        chunk: manifest.as_ref().map(|m| m.chunk_size),
        earlier: earlier.map(|j| j.block_size),
        stdout: spec.stdout.is_some(),
    })?;
    let block_size = chosen.size;
    if let plan::Checking::Dropped(why) = chosen.check {
        let w = format!("not checking {}'s pieces of {chunk_size} bytes as they arrive ({why}); the whole file's SHA-256 is still checked", spec.path);
        tell(progress, warnings, w);
        *manifest = None;
    }
    if let Some(why) = chosen.why {
        tell(progress, warnings, format!("using block size {block_size} ({why})"));
    }
    Ok((block_size, chosen.check == plan::Checking::WholePieces))
}

/// The blocks already in place: those an interrupted run wrote (its
/// journal), and, for an archive rank's part of a bundle, every block
/// outside its `range`.
fn completed_before(spec: &GetSpec, earlier: Option<&Journal>, blocks: u64, block_size: u32) -> Completed {
    let mut completed = Completed::new(blocks);
    for &(a, b) in earlier.map_or(&[][..], |j| &j.done[..]) {
        completed.mark(a, b);
    }
    if let Some(r) = &spec.range {
        let (first, end) = (r.start / u64::from(block_size), r.end.div_ceil(u64::from(block_size)).min(blocks));
        if first > 0 {
            completed.mark(0, first - 1);
        }
        if end < blocks {
            completed.mark(end, blocks - 1);
        }
    }
    completed
}

/// How blocks are checked as they arrive: against the manifest (or its
/// pieces once whole, when they span several blocks), their seals (a
/// bundle's, `sealed`), or not at all.
fn checks(manifest: Option<Arc<Manifest>>, pieces_over: bool, sealed: bool) -> (Check, Option<Arc<Manifest>>) {
    match manifest {
        Some(m) if pieces_over => (Check::Nothing, Some(m)),
        Some(m) => (Check::Manifest(m), None),
        None if sealed => (Check::Sealed, None),
        None => (Check::Nothing, None),
    }
}

/// The whole file's SHA-256, computed as its prefix completes; for `-o -`
/// each piece hashed then written out (and the reorder window freed).
fn spawn_hasher(file: &Arc<dyn Store>, size: u64, ring: Option<&Arc<crate::stdout::Ring>>) -> io::Result<PrefixHasher> {
    let sink = match ring {
        Some(r) => {
            let out = std::io::stdout().as_fd().try_clone_to_owned()?;
            Some(Box::new(r.sink(Box::new(std::fs::File::from(out)))) as Box<dyn crate::digest::Sink>)
        }
        None => None,
    };
    PrefixHasher::spawn_into(file.clone(), size, sink)
}

/// The journal of an interrupted run that this one resumes, if any (none
/// with `--restart`, which removes it and its part file, nor for `-o -`);
/// one whose mirrors all ignore Range cannot be resumed and is dropped,
/// with a warning.
fn earlier_run(
    spec: &GetSpec,
    slots: &[(usize, Producer)],
    (part, jpath): (&Path, &Path),
    size: u64,
    sha256: &str,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Option<Journal>, TransferError> {
    let out_err = unwritable(part);
    if spec.stdout.is_some() {
        return Ok(None);
    }
    if spec.restart {
        for f in [part, jpath] {
            match std::fs::remove_file(f) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(out_err(e)),
                _ => {}
            }
        }
    }
    Ok(match Journal::load(jpath)? {
        // A server that ignores Range alone cannot send what is missing
        // in the middle: the download starts over.
        Some(_) if slots.iter().all(|(_, p)| p.whole_only()) => {
            let w = format!(
                "{}: its only mirror ignores Range, so the interrupted run's data cannot be resumed; starting over",
                spec.path
            );
            tell(progress, warnings, w);
            None
        }
        Some(j) => {
            j.check(jpath, &spec.path, size, sha256, spec.store.is_none().then_some(part))?;
            Some(j)
        }
        None => None,
    })
}

/// Where the blocks are written: `-o -`'s reorder window, an archive's
/// store, or the part file (made, or reopened to resume `earlier`), with
/// the whole file's space reserved before a byte moves.
fn open_store(
    spec: &GetSpec,
    part: &Path,
    earlier: bool,
    size: u64,
    ring: Option<&Arc<crate::stdout::Ring>>,
) -> Result<Arc<dyn Store>, TransferError> {
    let out_err = unwritable(part);
    match (&spec.store, ring) {
        (_, Some(ring)) => Ok(ring.clone()),
        (Some(store), None) => Ok(store.clone()),
        (None, None) => {
            // Read-write (the hasher reads the data back as it completes),
            // never through a symlink or into another name's file.
            let f = match earlier {
                false => ddtree::scratch::create(part),
                true => ddtree::scratch::reopen(part),
            };
            let f = f.map_err(out_err)?;
            // A disk that cannot hold the file fails now, not half way.
            if let Err(e) = crate::journal::reserve(&f, size) {
                drop(f);
                if !earlier {
                    let _ = std::fs::remove_file(part);
                }
                return Err(match e.raw_os_error() {
                    Some(libc::ENOSPC) => TransferError::NoSpace { path: part.to_path_buf(), size },
                    _ => out_err(e),
                });
            }
            Ok(Arc::new(f))
        }
    }
}

/// What a download's SHA-256 is checked against.
fn checked_against(sealed: bool, http_only: bool, expected: Option<&expected::Expected>) -> Sha256Checked {
    match (sealed, http_only, expected) {
        (true, ..) => Sha256Checked::Sealed,
        (_, _, Some(e)) => e.from,
        (_, false, None) => Sha256Checked::Mirrors,
        (_, true, None) => Sha256Checked::Nothing,
    }
}

/// Everything a transfer starts from.
struct Prepared {
    size: u64,
    block_size: u32,
    check: Check,
    /// Pieces larger than a block, checked once whole.
    pieces: Option<Arc<Manifest>>,
    file: Arc<dyn Store>,
    /// (mirror index, source) per producer slot.
    slots: Vec<(usize, Producer)>,
    mirrors: Vec<String>,
    completed: Completed,
    journal: Journal,
    jpath: PathBuf,
    reused_bytes: u64,
    /// What a mirror asked again must serve.
    wanted: Arc<rejoin::Wanted>,
    /// Mirrors to ask again from the start (they did not answer in time).
    later: Vec<producer::Source>,
    /// `-o -`: the reorder window the blocks land in.
    ring: Option<Arc<crate::stdout::Ring>>,
}
