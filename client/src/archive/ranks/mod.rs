//! `mpirun -n N ddftp archive SRC --mirrors ... --dest DIR`: one tree
//! moved by N ranks, each a mover on its own node, all writing into DIR
//! (a filesystem they share).
//!
//! Rank 0, the lead, does what one process does before and after the
//! bytes move: the list, the plan against DEST, the directories, the
//! mirrors' bundle. It then tells every rank the bundle (its list and
//! name) and deals its range in parts ([`ddops::deal`]): from both ends,
//! shrinking as the range empties, each part sized by the asking rank's
//! measured rate, so ranks of different speeds finish together. Every rank,
//! the lead too, moves the parts it is dealt from every mirror with pairs
//! of its own ([`part::Mover`]; so the mirrors' uplinks are shared by all
//! ranks and, within a rank, by the engine's shares) and finishes the
//! files wholly inside a part. Parts are cut on block boundaries: no two
//! ranks write the same block. Once every part is in, the lead finishes
//! the files cut between parts, then links, special files, deletions and
//! directories, and reports.
//!
//! A rank that fails tells the lead, which deals nothing more and fails
//! the job naming it; a rank that is killed is named by `mpirun`, which
//! ends the job. Nothing is journaled across ranks: a file gets its mode
//! and mtime only once all its bytes are in, so the same command run again
//! (with any N, or one process) skips every complete file and moves the
//! rest.
//!
//! Only a rank's main thread talks MPI: the lead's serving loop and a
//! rank's asks run in the future `block_on` drives; the moving is on the
//! runtime's workers.

mod part;

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ddftp_proto::packed::{self, MAX_LIST};
use ddops::deal::Dealer;
use ddtree::list::{ddftp, Kind};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::listing::saved_list;
use super::mirrors::Defining;
use super::tree::{TreeStore, Unread};
use super::{deep, ArchiveError, ArchiveSpec, Archiving, Item, Phases, RankReport};
use crate::transfer::Progress;
use part::{Bundle, Done, Mover};

/// The file in DEST by which each rank checks that it sees the lead's
/// DEST (named like the ranks' journals: a later run clears it).
const SHARED_CHECK: &str = ".ddftp-archive.rank-check";

const TAG_ASK: i32 = 11;
const TAG_FAILED: i32 = 12;
const TAG_PART: i32 = 13;

/// The smallest part dealt (but the last), unless the bundle is small:
/// long enough that a part's start (a connection to every mirror, the
/// pairs' first grants) costs little, short enough that the last parts
/// leave no rank waiting long.
const MIN_PART: u64 = 4 << 20;

/// An MPI job's ranks, seen from one of them.
pub struct Job {
    session: ddtree::walk::mpi::Session,
    host: String,
    /// What the lead has told the ranks: 0 nothing yet, 1 the bundle's
    /// list, 2 everything (its name too, or that there is nothing to move).
    told: Cell<u8>,
}

/// What the lead tells every rank before the bytes move.
#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    /// The bundle's name on the mirrors.
    name: String,
    /// DEST was empty when the lead planned.
    fresh: bool,
    block: u32,
}

/// A rank's ask for its next part, with what it did with its last.
#[derive(serde::Serialize, serde::Deserialize)]
struct Ask {
    host: String,
    done: Option<Done>,
}

/// A rank's word that its part failed.
#[derive(serde::Serialize, serde::Deserialize)]
struct Failed {
    host: String,
    why: String,
}

impl Job {
    /// This process's place in the MPI job (`None` if MPI cannot start).
    pub fn init() -> Option<Job> {
        let session = ddtree::walk::mpi::Session::init()?;
        let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
        Some(Job { session, host, told: Cell::new(0) })
    }

    pub fn rank(&self) -> usize {
        self.session.rank()
    }

    pub fn size(&self) -> usize {
        self.session.size()
    }

    fn world(&self) -> &SimpleCommunicator {
        self.session.world()
    }

    /// This rank, as messages name it.
    pub fn name(&self) -> String {
        self.who(self.rank(), &self.host)
    }

    /// `rank R (HOST)`, as messages name a rank.
    fn who(&self, rank: usize, host: &str) -> String {
        format!("rank {rank} ({host})")
    }

    /// Tells the other ranks there is nothing (more) to move, unless the
    /// lead told them all already (a lead that failed, had nothing to
    /// move, or made a dry run): every rank then ends.
    pub fn release(&self) {
        match (self.rank(), self.told.get()) {
            (0, 0) => drop(self.broadcast(None, PLAN_BLOBS)),
            (0, 1) => drop(self.broadcast(None, 1)),
            _ => {}
        }
    }

    /// `n` blobs from the lead to every rank (on the lead `Some`, on the
    /// others ignored); `None` for nothing to move.
    fn broadcast(&self, blobs: Option<&[&[u8]]>, n: usize) -> Option<Vec<Vec<u8>>> {
        let root = self.world().process_at_rank(0);
        let mut lens = vec![0u64; n];
        for (l, b) in lens.iter_mut().zip(blobs.unwrap_or_default()) {
            *l = b.len() as u64;
        }
        root.broadcast_into(&mut lens[..]);
        if lens[0] == 0 {
            self.told.set(2);
            return None;
        }
        self.told.set(self.told.get() + 1);
        let mut all = match blobs {
            Some(b) => b.concat(),
            None => vec![0u8; lens.iter().sum::<u64>() as usize],
        };
        root.broadcast_into(&mut all[..]);
        let mut out = Vec::with_capacity(n);
        for l in lens.iter().rev() {
            out.push(all.split_off(all.len() - *l as usize));
        }
        out.reverse();
        Some(out)
    }

    /// Ends every rank of the job at once (`MPI_Abort`), exit code `code`.
    pub fn abort(&self, code: i32) -> ! {
        self.world().abort(code)
    }

    fn send<T: serde::Serialize>(&self, to: usize, tag: i32, msg: &T) {
        let data = serde_json::to_vec(msg).expect("message serialises");
        self.world().process_at_rank(to as i32).send_with_tag(&data[..], tag);
    }
}

/// The lead's side: `todo` (registered on the mirrors by `defs`) moved by
/// every rank; the files cut between parts finished. Each rank's report.
pub(super) async fn lead(
    run: &Archiving<'_>,
    job: &Job,
    todo: &[&Item],
    mut defs: Defining,
    progress: &mut dyn Progress,
    phases: &mut Phases,
) -> Result<Vec<RankReport>, ArchiveError> {
    let spec = run.spec;
    // The destination made ready while the mirrors register the bundle.
    let prepared = Instant::now();
    let owned: Vec<Item> = todo.iter().map(|it| (*it).clone()).collect();
    let store = Arc::new(TreeStore::new(todo, &run.dest, run.fresh, run.umask, spec.owners)?);
    store.create()?;
    let def = defs.def.clone().expect("a bundle to move has a definition");
    // Ranks that wrote into a DEST of their own would leave the files cut
    // between parts with holes the lead cannot see: each rank first finds
    // the lead's token in what it takes for DEST.
    let token = format!("{} {} {:?}", job.host, std::process::id(), std::time::SystemTime::now());
    let check = spec.dest.join(SHARED_CHECK);
    let written = ddtree::scratch::create(&check).and_then(|mut f| std::io::Write::write_all(&mut f, token.as_bytes()));
    written.map_err(super::local(&check))?;
    // The ranks make their stores ready too while the mirrors register.
    job.broadcast(Some(&[&saved_list(todo), &def, token.as_bytes(), &names_below_dest(todo)]), PLAN_BLOBS);
    phases.prepare += prepared.elapsed().as_secs_f64();
    let waited = Instant::now();
    let (mut name, mut failures) = (None, vec![]);
    while let Some((ep, r)) = defs.join_next().await {
        match r {
            Ok(n) if name.as_ref().is_none_or(|m| *m == n) => name = Some(n),
            Ok(n) => progress.warn(&format!("skipping {ep}: it names the bundle {n}, the others {name:?}")),
            Err(e) => {
                let w = format!("skipping {ep}: {e}");
                progress.warn(&w);
                failures.push(format!("  {w}"));
            }
        }
    }
    let Some(name) = name else { return Err(ArchiveError::NoBundle { failures }) };
    let header = Header { name: name.clone(), fresh: run.fresh, block: spec.get.block_size };
    let header = serde_json::to_vec(&header).expect("header serialises");
    job.broadcast(Some(&[&header]), 1);
    phases.check += waited.elapsed().as_secs_f64();
    let moving = Instant::now();
    let size = store.layout.size();
    let bundle = Bundle { name, def, block: spec.get.block_size, fresh: run.fresh };
    let mover = Arc::new(Mover::new(spec, (owned, store), bundle, (0, job.who(0, &job.host))));
    let min = (size / (8 * job.size() as u64)).clamp(u64::from(mover.block), MIN_PART);
    let state = Arc::new(Mutex::new(Lead {
        dealer: Dealer::new(size, job.size(), u64::from(mover.block), min),
        parts: vec![],
        ranks: (0..job.size()).map(|r| RankReport { rank: r, ..RankReport::default() }).collect(),
        ended: vec![false; job.size()],
        failed: None,
        unread: HashMap::new(),
    }));
    state.lock().expect("lead lock").ranks[0].host = job.host.clone();
    progress.start(size, &spec.get.mirrors.iter().map(|m| m.to_string()).collect::<Vec<_>>());
    let own = tokio::spawn(move_own(mover.clone(), state.clone()));
    serve(job, &mover, &state, spec.get.mirrors.len(), progress).await;
    own.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    progress.update(size, &vec![0; spec.get.mirrors.len()]);
    let mut lead =
        Arc::try_unwrap(state).ok().expect("the lead's state is the lead's alone now").into_inner().expect("lead lock");
    if let Some((rank, why)) = lead.failed.take() {
        let who = job.who(rank, &lead.ranks[rank].host);
        return Err(ArchiveError::Rank { who, why });
    }
    finish_cut_files(&mover, &mut lead)?;
    let _ = std::fs::remove_file(&check);
    phases.moving += moving.elapsed().as_secs_f64();
    let mut unread: Vec<(&Item, Unread)> =
        lead.unread.drain().map(|(i, (why, mirrors))| (&mover.todo[i], Unread { why, mirrors })).collect();
    unread.sort_unstable_by(|a, b| a.0.rel.cmp(&b.0.rel));
    run.read_elsewhere(unread, progress, phases).await?;
    Ok(lead.ranks)
}

/// What the lead knows while the ranks move.
struct Lead {
    dealer: Dealer,
    /// The parts dealt so far.
    parts: Vec<Range<u64>>,
    ranks: Vec<RankReport>,
    /// Ranks told there is nothing more (or that failed).
    ended: Vec<bool>,
    /// The first rank that failed, and why.
    failed: Option<(usize, String)>,
    /// Entries a mirror could not read: why, and which mirrors.
    unread: HashMap<usize, (String, Vec<String>)>,
}

impl Lead {
    /// Takes rank `r`'s word on its last part; its next part, if any.
    fn next(&mut self, r: usize, done: Option<Done>, mover: &Mover) -> Option<Range<u64>> {
        if let Some(d) = done {
            self.dealer.handle_done(r, d.bytes, d.secs);
            let rep = &mut self.ranks[r];
            rep.bytes += d.bytes;
            rep.files += d.files;
            rep.parts += 1;
            rep.seconds += d.secs;
            for (m, b) in d.mirrors {
                match rep.mirrors.iter_mut().find(|(n, _)| *n == m) {
                    Some((_, have)) => *have += b,
                    None => rep.mirrors.push((m, b)),
                }
            }
            for (i, why, mirrors) in d.unread {
                if (i as usize) < mover.todo.len() {
                    self.unread.entry(i as usize).or_insert((why, mirrors));
                }
            }
        }
        let part = match self.failed {
            Some(_) => None,
            None => self.dealer.poll_part(r, |x| mover.cut_at(x)),
        };
        match &part {
            Some(p) => self.parts.push(p.clone()),
            None => self.ended[r] = true,
        }
        part
    }

    /// Rank `r` failed: nothing more is dealt.
    fn fail(&mut self, r: usize, why: String) {
        self.failed.get_or_insert((r, why));
        self.ended[r] = true;
    }
}

/// The lead's own moving: parts until none is left.
async fn move_own(mover: Arc<Mover>, state: Arc<Mutex<Lead>>) {
    let mut done = None;
    loop {
        let Some(part) = state.lock().expect("lead lock").next(0, done.take(), &mover) else { return };
        match mover.run(part).await {
            Ok(d) => done = Some(d),
            Err(e) => return state.lock().expect("lead lock").fail(0, e.to_string()),
        }
    }
}

/// The lead's serving loop: every rank's asks answered until each has
/// been told there is nothing more (or failed); the progress of all.
async fn serve(job: &Job, mover: &Mover, state: &Mutex<Lead>, mirrors: usize, progress: &mut dyn Progress) {
    let world = job.world();
    let mirrors = vec![0; mirrors];
    let mut told = Instant::now();
    loop {
        while let Some(st) = world.any_process().immediate_probe() {
            let from = st.source_rank();
            let (data, st) = world.process_at_rank(from).receive_vec_with_tag::<u8>(st.tag());
            let r = from as usize;
            let mut lead = state.lock().expect("lead lock");
            match st.tag() {
                TAG_ASK => {
                    let ask: Option<Ask> = serde_json::from_slice(&data).ok();
                    let (host, done) = ask.map_or((None, None), |a| (Some(a.host), a.done));
                    if let Some(h) = host {
                        lead.ranks[r].host = h;
                    }
                    let part = lead.next(r, done, mover).map(|p| (p.start, p.end));
                    drop(lead);
                    job.send(r, TAG_PART, &part);
                }
                TAG_FAILED => {
                    let f: Option<Failed> = serde_json::from_slice(&data).ok();
                    let (host, why) = f.map_or_else(|| ("?".into(), "failed".into()), |f| (f.host, f.why));
                    lead.ranks[r].host = host;
                    lead.fail(r, why);
                }
                _ => {}
            }
        }
        let (ended, moved) = {
            let lead = state.lock().expect("lead lock");
            (lead.ended.iter().all(|&e| e), lead.ranks.iter().map(|r| r.bytes).sum::<u64>())
        };
        if told.elapsed() >= Duration::from_millis(200) {
            progress.update(moved + mover.live.load(Ordering::Relaxed), &mirrors);
            told = Instant::now();
        }
        if ended {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The files whose bytes more than one part holds, finished once every
/// part is in (those a mirror could not read are not).
fn finish_cut_files(mover: &Mover, lead: &mut Lead) -> Result<(), ArchiveError> {
    let mut parts = lead.parts.clone();
    parts.sort_unstable_by_key(|p| p.start);
    let layout = &mover.store.layout;
    let whole = |i: usize| {
        let (start, len) = (layout.start_of(i), layout.len_of(i));
        let p = parts.partition_point(|p| p.start <= start);
        p > 0 && start + len <= parts[p - 1].end
    };
    for (i, it) in mover.todo.iter().enumerate() {
        if it.entry.kind != Kind::File || layout.len_of(i) == 0 || whole(i) {
            continue;
        }
        lead.ranks[0].files += 1;
        let part = mover.store.part_path(i);
        if lead.unread.contains_key(&i) {
            let _ = deep::remove_file(&part);
            continue;
        }
        let path = part.to_path_buf();
        mover.store.put_in_place(i, &it.entry).map_err(|source| ArchiveError::Local { path, source })?;
    }
    Ok(())
}

/// Why a rank other than the lead stopped.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// Before it asked for a part: the lead may be waiting on it in a
    /// collective call, so only aborting the job ends it.
    #[error(transparent)]
    Setup(ArchiveError),
    /// A part failed: the lead was told, deals nothing more and names it.
    #[error(transparent)]
    Part(ArchiveError),
}

/// A rank's side (not the lead): the lead's plan taken, parts asked for
/// and moved until there are none.
pub async fn follow(spec: &ArchiveSpec, job: &Job) -> Result<(), Stopped> {
    let Some(mover) = ready(spec, job).map_err(Stopped::Setup)? else { return Ok(()) };
    let mut done = None;
    loop {
        job.send(0, TAG_ASK, &Ask { host: job.host.clone(), done: done.take() });
        let (data, _) = job.world().process_at_rank(0).receive_vec_with_tag::<u8>(TAG_PART);
        let part = serde_json::from_slice::<Option<(u64, u64)>>(&data).map_err(|e| ArchiveError::BadEntry {
            path: format!("the part rank 0 sent to {}", job.name()),
            why: e.to_string(),
        });
        let moved = match part {
            Ok(None) => return Ok(()),
            Ok(Some((a, b))) => mover.run(a..b).await,
            Err(e) => Err(e),
        };
        match moved {
            Ok(d) => done = Some(d),
            Err(e) => {
                job.send(0, TAG_FAILED, &Failed { host: job.host.clone(), why: e.to_string() });
                return Err(Stopped::Part(e));
            }
        }
    }
}

/// The blobs of the lead's first message (the list, the transfer's
/// definition, the check token, the names below DEST): `release` sends as
/// many empty ones, or the ranks wait for the rest forever.
const PLAN_BLOBS: usize = 4;

/// Each entry's name below DEST, as the lead sends them to the ranks
/// (NUL-separated, packed): with `-L` an entry is its referent's (the
/// path the bytes are read from) under the link's name.
fn names_below_dest(todo: &[&Item]) -> Vec<u8> {
    let mut names = vec![];
    for it in todo {
        names.extend_from_slice(it.rel.as_os_str().as_bytes());
        names.push(0);
    }
    packed::pack(&names)
}

/// The `n` names [`names_below_dest`] sent; each must stay below DEST.
fn read_names(blob: &[u8], n: usize) -> Result<Vec<PathBuf>, String> {
    let names = packed::unpack(blob, MAX_LIST).map_err(|e| e.to_string())?;
    let names: Vec<PathBuf> = names.split(|&b| b == 0).take(n).map(|b| PathBuf::from(OsStr::from_bytes(b))).collect();
    if names.len() != n {
        return Err(format!("{} names for {n} entries", names.len()));
    }
    let below = |p: &PathBuf| p.components().all(|c| matches!(c, std::path::Component::Normal(_)));
    match names.iter().find(|p| !below(p)) {
        Some(p) => Err(format!("a name not below DEST: {}", p.display())),
        None => Ok(names),
    }
}

/// A rank's mover, made from what the lead tells (none: nothing to move).
fn ready(spec: &ArchiveSpec, job: &Job) -> Result<Option<Mover>, ArchiveError> {
    let Some(mut got) = job.broadcast(None, PLAN_BLOBS) else { return Ok(None) };
    let (names, token, def, list) = (
        got.pop().unwrap_or_default(),
        got.pop().unwrap_or_default(),
        got.pop().unwrap_or_default(),
        got.pop().unwrap_or_default(),
    );
    if ddtree::scratch::read(&spec.dest.join(SHARED_CHECK)).ok().as_deref() != Some(&token[..]) {
        let why = "this node does not see rank 0's DEST here: every rank must write into one file system they all mount at the same path";
        return Err(ArchiveError::Local { path: spec.dest.clone(), source: std::io::Error::other(why) });
    }
    let bad =
        |why: String| ArchiveError::BadEntry { path: format!("the plan rank 0 sent to rank {}", job.rank()), why };
    let list = packed::unpack(&list, MAX_LIST).map_err(|e| bad(e.to_string()))?;
    let entries = ddftp::read(&list[..], std::path::Path::new("the lead's list")).map_err(ArchiveError::List)?;
    let names = read_names(&names, entries.len()).map_err(bad)?;
    let todo: Vec<Item> = entries.into_iter().zip(names).map(|(entry, rel)| Item { entry, rel }).collect();
    let dest = deep::Dest::open(&spec.dest).map_err(super::local(&spec.dest))?;
    let refs: Vec<&Item> = todo.iter().collect();
    let Some(mut got) = job.broadcast(None, 1) else { return Ok(None) };
    let header: Header = serde_json::from_slice(&got.pop().unwrap_or_default()).map_err(|e| bad(e.to_string()))?;
    let store = Arc::new(TreeStore::new(&refs, &dest, header.fresh, super::umask(), spec.owners)?);
    let who = job.who(job.rank(), &job.host);
    let bundle = Bundle { name: header.name, def: def.into(), block: header.block, fresh: header.fresh };
    Ok(Some(Mover::new(spec, (todo, store), bundle, (job.rank(), who))))
}
