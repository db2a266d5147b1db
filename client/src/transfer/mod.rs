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
use crate::journal::{journal_path, Journal, PartFile};
use crate::manifest::Manifest;
use crate::metalink::MetalinkFile;
use crate::scheduler::{Action, Config, ProducerId, StreamId};
pub use crate::session::Route;
use ddops::transfer::BlockRun;

mod already;
mod check;
mod claimed;
mod coordinator;
mod cut;
mod early_part;
mod error;
mod expected;
mod finish;
mod http_slot;
mod pieces;
mod plan;
mod probing;
use probing::{one_name_each, probe_round, probe_until_one_answers, Round};
use producer::make_slots;
mod producer;
mod rejoin;
mod report;
mod seals;
mod seed;
pub mod share;
mod slot;
mod slots;
mod start;
mod told;
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
    /// ssh mirrors still starting: each joins the running transfer when
    /// its remote ddftpd answers ([`crate::ssh::Starting`]).
    pub starting: Vec<crate::ssh::Starting>,
    pub output: PathBuf,
    pub block_size: u32,
    /// fsync the output before it is renamed into place.
    pub sync: bool,
    /// Write whole blocks with `O_DIRECT` (`--direct`): not through the
    /// page cache.
    pub direct: bool,
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
    /// An output that holds an older version gives the chunks it shares
    /// with the new one (found by the mirrors' chunk manifest), and only
    /// the rest moves (`--no-delta` fetches the whole file).
    pub delta: bool,
    /// Other local files that may hold some of the new version
    /// (`--seed`), looked into after the output.
    pub seeds: Vec<PathBuf>,
    /// The output gets the mirrors' modification time.
    pub keep_mtime: bool,
    /// What requests to web mirrors carry: headers, user agent, where
    /// credentials come from.
    pub asking: Arc<crate::http::auth::Asking>,
    /// Connections shared by the files of one command: a probe takes an
    /// idle one to its mirror, a completed transfer hands its own back.
    pub pool: Option<Arc<crate::pool::Pool>>,
    /// Other receivers of the file, and where this one serves what it has
    /// verified (`--share`).
    pub share: Option<share::Share>,
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
    let tls = https.then(|| crate::http::tls::connector(spec.ca_file.as_deref())).transpose()?;
    // The clock a user sees: from the first connection to the last byte.
    let started = Instant::now();
    let mut warnings = vec![];
    let Agreed { mut usable, http, later, spare, expected, version, http_only, copy } =
        agree(spec, &tls, progress, &mut warnings).await?;
    let size = version.size;
    let mirrors_time = mirrors_mtime(&usable, &http);
    let mtime = mirrors_time.filter(|_| spec.keep_mtime);
    let plain = spec.stdout.is_none() && spec.store.is_none() && spec.sealed_size.is_none();
    let want =
        expected.as_ref().map(|e| e.sha256.clone()).or_else(|| (!http_only).then(|| hex(&version.digest.sha256)));
    let checked = start::checked_against(false, http_only, expected.as_ref().map(|e| e.from));
    // An older output that delta reads anyway tells by its chunks (under
    // the mirrors' manifest) whether it is the file already: not read
    // twice. A SHA-256 the user gave is checked as given.
    let by_chunks = plain && expected.is_none() && !http_only && seed::reads_output(spec);
    if plain && !by_chunks {
        if let Some(r) = already::done_before(spec, size, want.clone(), checked, mtime, started).await? {
            return Ok(nothing_moved(spec, r, warnings, usable));
        }
    }
    let looking = (by_chunks, by_chunks && !seed::likely_the_file(spec, size, mirrors_time));
    let (manifest, claims) = block_hashes(spec, &version, looking, &mut usable, progress, &mut warnings).await?;
    let part = part_path(&spec.output);
    let jpath = journal_path(&spec.output);
    let to_stdout = spec.stdout.is_some();
    let earlier = match to_stdout {
        true => None,
        false => load_earlier(spec, &part, &jpath)?,
    };
    let looked = (earlier.is_some(), claims);
    let mut seed = seed::find(spec, manifest.as_ref(), size, looked, &mut usable, progress, &mut warnings).await;
    if let (true, Some(sha)) = (by_chunks && seed.as_ref().is_some_and(seed::Seed::is_the_output), &want) {
        let r = already::done(spec, size, sha.clone(), checked, mtime, started);
        return Ok(nothing_moved(spec, r, warnings, usable));
    }
    // ddftpd mirrors that agreed on the digest (the manifest's root beside
    // its SHA-256).
    let agreeing = usable.len();
    let (slots, mirror_names) = make_slots(spec, usable, http, spare, progress, &mut warnings).await;
    let sealed = spec.sealed_size.is_some();
    let out_err = unwritable(&part);
    let mirrors_sha256 = hex(&version.digest.sha256);
    let limit = slots.iter().filter_map(|(_, p)| p.max_block_size()).min().unwrap_or(u32::MAX);
    let started_from = start::plan(&start::Facts {
        path: &spec.path,
        size,
        sealed,
        http_only,
        verify: spec.verify,
        to_stdout,
        asked_block: seed.as_ref().map_or(spec.block_size, seed::Seed::block_size),
        limit,
        hashes: manifest.as_ref().map(|m| m.chunk_size),
        tied: manifest.as_ref().is_some_and(|m| m.kind == crate::manifest::ChunkHash::Blake3),
        agreeing,
        mirrors_sha256: Some(&mirrors_sha256),
        expected: expected.as_ref().map(|e| (e.sha256.as_str(), e.from)),
        http_date: copy.date.as_ref().and_then(|d| d.as_deref()),
        earlier: earlier.as_ref().map(|(j, what)| start::Earlier {
            journal: j,
            file: &jpath,
            part: spec.store.is_none().then_some((part.as_path(), what)),
        }),
        whole_only: slots.iter().all(|(_, p)| p.whole_only()),
        range: spec.range.clone(),
    })?;
    started_from.warnings.iter().for_each(|w| tell(progress, &mut warnings, w.clone()));
    let start::Plan { identity: sha256, block_size, blocks, check, resume, mut done, .. } = started_from;
    let ring = spec.stdout.map(|w| Arc::new(crate::stdout::Ring::new(w, block_size)));
    let landed = seed.as_mut().and_then(seed::Seed::take_landed);
    let (file, refused) = open_store(spec, (&part, landed), resume, size, ring.as_ref())?;
    if let Some(e) = refused {
        let w = format!("--direct: {} does not take O_DIRECT ({e}): writing through the page cache", part.display());
        tell(progress, &mut warnings, w);
    }
    let hasher = match started_from.hash_whole {
        true => Some(spawn_hasher(&file, size, ring.as_ref()).map_err(out_err)?),
        false => None,
    };
    // The whole file's hash follows the chunks placed, on its own thread.
    let whole_to = |bytes| hasher.iter().for_each(|h| h.advance(bytes));
    let placed = seed::place(seed, size, block_size, file.as_ref(), whole_to).map_err(out_err)?;
    done.extend(placed.blocks);
    let mut journal = Journal::new(&spec.path, size, &sha256, block_size);
    let mut completed = Completed::new(blocks);
    for &(a, b) in &done {
        completed.mark(a, b);
    }
    journal.done = completed.ranges();
    let reused_bytes = journal.done_bytes();
    if started_from.save_journal {
        journal.save(&jpath, spec.sync).map_err(|source| TransferError::Output {
            path: jpath.clone(),
            source,
            resume: Resume::Nothing,
        })?;
    }
    let (check, pieces) = block_check(check, manifest);
    let at = share::Known {
        part: &part,
        store: &file,
        mtime: mirrors_time.unwrap_or_default(),
        hashes: share::checked_by(spec, &check, pieces.as_ref()),
        sealed: matches!(check, Check::Sealed(_)),
        // Pieces checked whole are offered as each is found good (what
        // an earlier run left is checked again first).
        done: if pieces.is_some() { &[] } else { &done },
        block_size,
    };
    let shared = share::start(spec, &version, at, progress, &mut warnings).await?;
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
        wanted: Arc::new(rejoin::Wanted::of(spec, (!sealed && !http_only).then_some(version), size, &copy, &tls)),
        later,
        shared,
    };
    let joining = joining.filter(|_| spec.sealed_size.is_some());
    let result = run_transfer(spec, plan, progress, &mut warnings, started, hasher.as_ref(), joining).await;
    let got = hasher.map(PrefixHasher::finish).transpose();
    // On failure the part file and the journal stay for the next run.
    let mut report = result?;
    report.matched_bytes = placed.matched;
    report.piece_bytes = placed.pieces;
    whole_sha256(&mut report, got.map_err(out_err)?, (!sealed).then_some(&mirrors_sha256));
    report.sha256_checked = started_from.sha256_checked;
    let done = finish::Done { report, file, part, jpath, sha256, http_only, to_stdout, mtime };
    finish::check_and_place(spec, done, expected.as_ref())
}

/// The output's SHA-256 in `report`: the one computed, or where none was
/// and the file is no bundle, the mirrors' (every block matched their
/// chunk manifest: `start::manifest_vouches`).
fn whole_sha256(report: &mut TransferReport, computed: Option<String>, mirrors: Option<&String>) {
    report.sha256_computed = computed.is_some();
    report.sha256 = computed.or_else(|| mirrors.cloned());
}

/// The chunk hashes blocks are checked against, if any: the manifest a
/// probe brought, a Metalink's pieces, or fetched; for a download onto an
/// older output (`by_chunks`), only the hashes of the chunks it lacks
/// (with where it holds the others, and the weak checksums), else the
/// whole manifest. The output's chunks land in the part file from the
/// first one found with `eager` (the output is likely not the file), else
/// from its first difference on.
async fn block_hashes(
    spec: &GetSpec,
    version: &Version,
    (by_chunks, eager): (bool, bool),
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(Option<Arc<Manifest>>, Option<seed::Looked>), TransferError> {
    let early = usable.iter_mut().find_map(|(m, _)| m.manifest.take());
    let pieces = spec.metalink.as_ref().and_then(|m| m.pieces.clone());
    let wanted = (spec.verify && version.size > 0, spec.sealed_size.is_some());
    Ok(match start::hashes_from(wanted, early.is_some(), !usable.is_empty(), pieces.is_some()) {
        start::HashesFrom::None => (None, None),
        start::HashesFrom::Probe => (early.map(Arc::new), None),
        start::HashesFrom::Metalink => (pieces.map(Arc::new), None),
        start::HashesFrom::Fetch => {
            let claimed = match by_chunks {
                true => claimed::manifest(spec, version, usable, progress, eager).await,
                false => None,
            };
            match claimed {
                Some(c) => {
                    let looked = seed::Looked { found: c.found, weak: c.weak, landed: c.landed };
                    (Some(Arc::new(c.manifest)), Some(looked))
                }
                None => (Some(Arc::new(fetch_manifest(&spec.path, version, usable, progress, warnings).await?)), None),
            }
        }
    })
}

/// The report of a download whose output was the file already; its
/// mirrors' connections go back to the pool (the next file of the
/// command may use them).
fn nothing_moved(
    spec: &GetSpec,
    mut r: TransferReport,
    warnings: Vec<String>,
    usable: Vec<(MirrorInfo, Session)>,
) -> TransferReport {
    r.warnings = warnings;
    if let Some(pool) = &spec.pool {
        usable.into_iter().for_each(|(m, conn)| pool.put(m.route, conn, Default::default()));
    }
    r
}

/// What each block is checked against as it arrives, and the pieces
/// checked whole once all their blocks are in, by the plan's verdict.
fn block_check(verdict: start::BlockCheck, hashes: Option<Arc<Manifest>>) -> (Check, Option<Arc<Manifest>>) {
    match (verdict, hashes) {
        (start::BlockCheck::Hashes, Some(m)) => (Check::Manifest(m), None),
        (start::BlockCheck::WholePieces, Some(m)) => (Check::Nothing, Some(m)),
        (start::BlockCheck::Sealed, _) => (Check::Sealed(None), None),
        _ => (Check::Nothing, None),
    }
}

/// The mirrors that answered and agree on one version of the file (and
/// the published SHA-256, if any), and those to ask again later.
struct Agreed {
    usable: Vec<(MirrorInfo, Session)>,
    http: Vec<(Arc<HttpMirror>, HttpVersion)>,
    later: Vec<producer::Source>,
    spare: Option<tokio::task::JoinHandle<(Route, Result<crate::session::Probed, SessionError>)>>,
    expected: Option<expected::Expected>,
    version: Version,
    http_only: bool,
    copy: plan::HttpCopy,
}

/// Probes the mirrors until one answers, drops the names of a server
/// after its first and the copies of another file than the published one,
/// and has the rest vote on the version.
async fn agree(
    spec: &GetSpec,
    tls: &Option<tokio_rustls::TlsConnector>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Agreed, TransferError> {
    // Every (mirror, local address) pair is a route and a producer.
    let routes: Vec<Route> = spec.mirrors.iter().flat_map(|ep| routes_to(spec, ep)).collect();
    let Round { mut usable, mut http, failures, later, spare, .. } =
        probe_until_one_answers(spec, &routes, tls, progress, warnings).await?;
    for f in &failures {
        let w = format!("skipping {}", f.trim_start());
        tell(progress, warnings, w);
    }
    one_name_each(&mut usable, progress, warnings);
    let ddftpd = !usable.is_empty();
    for u in spec.metalink.iter().flat_map(|m| &m.unused) {
        tell(progress, warnings, format!("Metalink: {u}"));
    }
    let expected = expected::published(spec, &mut http, tls.clone(), ddftpd, progress, warnings).await?;
    if let Some(e) = &expected {
        let other = expected::drop_other_copies(e, &mut usable, &spec.path, progress, warnings);
        if let Some(got) = other.filter(|_| usable.is_empty() && http.is_empty()) {
            // Every mirror serves another file than the one expected.
            let (path, expected, from) = (spec.path.clone(), e.sha256.clone(), e.from.source().to_string());
            return Err(TransferError::ChecksumMismatch { path, expected, got, from });
        }
    }
    if usable.is_empty() && http.is_empty() {
        return Err(TransferError::NoUsableMirror { path: spec.path.clone(), failures: warnings.clone() });
    }
    let (version, http_only, copy) = agree_on_version(spec, &mut usable, &mut http, progress, warnings)?;
    Ok(Agreed { usable, http, later, spare, expected, version, http_only, copy })
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

/// The journal an interrupted run left beside the output, and what its
/// part file is now (`--restart` first removes both).
fn load_earlier(spec: &GetSpec, part: &Path, jpath: &Path) -> Result<Option<(Journal, PartFile)>, TransferError> {
    if spec.restart {
        for f in [part, jpath] {
            match std::fs::remove_file(f) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(unwritable(part)(e)),
                _ => {}
            }
        }
    }
    Ok(Journal::load(jpath)?.map(|j| (j, PartFile::look(part))))
}

/// Where the blocks are written: `-o -`'s reorder window, an archive's
/// store, or the part file (made, or reopened to resume `earlier`, or the
/// one delta made and wrote the output's chunks in: `landed`), with the
/// whole file's space reserved before a byte moves.
fn open_store(
    spec: &GetSpec,
    (part, landed): (&Path, Option<early_part::EarlyPart>),
    earlier: bool,
    size: u64,
    ring: Option<&Arc<crate::stdout::Ring>>,
) -> Result<(Arc<dyn Store>, Option<io::Error>), TransferError> {
    let out_err = unwritable(part);
    match (&spec.store, ring) {
        (_, Some(ring)) => Ok((ring.clone(), None)),
        (Some(store), None) => Ok((store.clone(), None)),
        (None, None) => {
            // Read-write (the hasher reads the data back as it completes),
            // never through a symlink or into another name's file.
            let f = match (earlier, landed) {
                (false, Some(l)) => Ok(l.take()),
                (false, None) => ddtree::scratch::create(part),
                (true, _) => ddtree::scratch::reopen(part),
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
            if !spec.direct {
                return Ok((Arc::new(crate::store::OneWriter::new(f)), None));
            }
            match crate::store::DirectWriter::new(f) {
                Ok(d) => Ok((Arc::new(d), None)),
                Err((f, e)) => Ok((Arc::new(crate::store::OneWriter::new(f)), Some(e))),
            }
        }
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
    /// `--share`: what this receiver serves, and the other receivers.
    shared: Option<(Arc<dyn share::Offered>, share::Peers)>,
}
