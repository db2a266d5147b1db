//! The pieces of changed chunks ([`crate::delta::pieces`]), asked of one
//! mirror before the transfer begins: the seals of each chunk worth
//! cutting, then, after the local files gave what they hold, the pieces
//! still missing, as streams of piece-sized blocks on the same connection.
//! A few MiB of missing chunks that lie before the last chunk found come
//! the same way (the whole file's hash, which reads in order, would wait
//! for them). A chunk assembled this way is kept (in memory, within a
//! budget) only if it matches its manifest hash; the others move whole in
//! the transfer.

use std::fs::File;
use std::time::Duration;

use bytes::BytesMut;
use ddftp_proto::manifest::Hash;
use ddftp_proto::{Direction, Reply, Request};
use ddnet::tls::Stream;

use crate::delta::{self, pieces, Found};
use crate::manifest::Manifest;
use crate::session::{read_reply, send, unexpected, Session, SessionError};

use super::{MirrorInfo, Progress};

/// Chunks cut at once are held in memory until the part file is open.
const MOST_BYTES: u64 = 64 << 20;
/// Missing chunks before the last one found ([`pieces::holes`]) fetched
/// with them, at most: more would be better moved by every mirror.
const HOLES_MOST: u64 = 4 << 20;
/// Stream ids of the pieces' streams (the transfer's own are small).
const FIRST_STREAM: u32 = 0xC000_0000;
/// All of it, seals and pieces, within this.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Chunks assembled from local pieces and fetched ones, each checked
/// whole: (chunk, its bytes, the bytes of it fetched).
#[derive(Default)]
pub(super) struct Cut {
    pub(super) chunks: Vec<(u64, Vec<u8>, u64)>,
}

/// A chunk being assembled.
struct Assembly {
    chunk: u64,
    buf: Vec<u8>,
    have: Vec<bool>,
    fetched: u64,
}

/// A local file to look into: the file, its length, its chunks found.
pub(super) type Local<'a> = (&'a File, u64, &'a Found);

/// Cuts the missing chunks next to found ones into pieces and assembles
/// those the local files hold some of, and fetches a few MiB of the other
/// missing chunks before the last one found, asking the first mirror that
/// speaks protocol 8. A mirror that fails at it is dropped (as it would be
/// for a failed manifest); one that refuses is only not asked.
pub(super) async fn cut(
    path: &str,
    m: &Manifest,
    size: u64,
    locals: &[Local<'_>],
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
) -> Cut {
    let (chunk, n) = (u64::from(m.chunk_size), m.hashes.len() as u64);
    let found: Vec<&Found> = locals.iter().map(|l| l.2).collect();
    let most = (MOST_BYTES / chunk) as usize;
    let (piece, todo) = match pieces::piece_size(m.chunk_size) {
        Some(p) => (p, pieces::worth_cutting(&found, n, most)),
        None => (m.chunk_size, vec![]),
    };
    let holes = pieces::holes(&found, n, (HOLES_MOST / chunk) as usize);
    let v8 = ddftp_proto::frame::WEAK_SUMS_VERSION;
    let some = !todo.is_empty() || !holes.is_empty();
    let Some((mirror, conn)) = usable.iter_mut().find(|(_, c)| c.version >= v8).filter(|_| some) else {
        return Cut::default();
    };
    progress.status(&format!("looking for the pieces of {} changed chunks", todo.len()));
    let work = assemble(&mut conn.sock, path, m, size, piece, (&todo, &holes), locals);
    match tokio::time::timeout(TIMEOUT, work).await.unwrap_or(Err(SessionError::NoReply)) {
        Ok(cut) => cut,
        Err(SessionError::Refused { message, .. }) => {
            tracing::info!(mirror = %mirror.route, "no seals of the file's pieces: {message}");
            Cut::default()
        }
        Err(e) => {
            let route = mirror.route.clone();
            progress.warn(&format!("dropping {route}: pieces of changed chunks: {e}"));
            usable.retain(|(m, _)| m.route != route);
            Cut::default()
        }
    }
}

async fn assemble(
    sock: &mut Stream,
    path: &str,
    m: &Manifest,
    size: u64,
    piece: u32,
    (todo, holes): (&[u64], &[u64]),
    locals: &[Local<'_>],
) -> Result<Cut, SessionError> {
    let chunk = u64::from(m.chunk_size);
    let per = chunk / u64::from(piece);
    let seals =
        fetch_seals(sock, path, piece, todo.iter().map(|&j| (j * per, pieces_of(size, chunk, j, piece)))).await?;
    let mut work = vec![];
    for (&j, seals) in todo.iter().zip(&seals) {
        let len = delta::chunk_len(size, chunk, j);
        let mut a = Assembly { chunk: j, buf: vec![0; len], have: vec![false; seals.len()], fetched: 0 };
        let mut held = 0;
        for &(file, flen, found) in locals {
            let bases = pieces::bases(found, j, chunk, flen);
            // A local file that cannot be read holds nothing here.
            held += pieces::find_pieces(file, flen, &bases, seals, piece, &mut a.buf, &mut a.have).unwrap_or(0);
        }
        if held > 0 {
            work.push(a);
        }
    }
    // Holes, whole: those cut above whose pieces no file held too.
    for &j in holes {
        if !work.iter().any(|a| a.chunk == j) {
            let have = vec![false; pieces_of(size, chunk, j, piece) as usize];
            work.push(Assembly { chunk: j, buf: vec![0; delta::chunk_len(size, chunk, j)], have, fetched: 0 });
        }
    }
    fetch_pieces(sock, path, size, piece, per, &mut work).await?;
    let mut cut = Cut::default();
    for a in work {
        match m.kind.of(&a.buf) == m.hashes[a.chunk as usize] {
            true => cut.chunks.push((a.chunk, a.buf, a.fetched)),
            false => tracing::info!(chunk = a.chunk, "its pieces do not make the chunk; it moves whole"),
        }
    }
    Ok(cut)
}

/// Pieces in chunk `j`.
fn pieces_of(size: u64, chunk: u64, j: u64, piece: u32) -> u32 {
    (delta::chunk_len(size, chunk, j) as u64).div_ceil(u64::from(piece)) as u32
}

/// The seals of each run of pieces (first piece, count), all asked at once.
async fn fetch_seals(
    sock: &mut Stream,
    path: &str,
    piece: u32,
    runs: impl Iterator<Item = (u64, u32)>,
) -> Result<Vec<Vec<Hash>>, SessionError> {
    let runs: Vec<(u64, u32)> = runs.collect();
    let mut out = BytesMut::new();
    for &(first, count) in &runs {
        Request::Seals { path: path.to_string(), block_size: piece, first, count }.encode(&mut out);
    }
    send(sock, &out).await?;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut seals = Vec::with_capacity(runs.len());
    // Every request has its reply: all are read, even after a refusal,
    // so that the connection is left with nothing pending.
    let mut refused = None;
    for &(first, count) in &runs {
        match read_reply(sock, &mut buf).await? {
            Reply::Manifest { first: f, hashes } if f == first && hashes.len() == count as usize => seals.push(hashes),
            Reply::Manifest { first, .. } => return Err(SessionError::ManifestOrder { first }),
            Reply::Error { code, message } => refused = refused.or(Some(SessionError::Refused { code, message })),
            other => return Err(unexpected(other)),
        }
    }
    refused.map_or(Ok(seals), Err)
}

/// A run of missing pieces: which assembly, its first and last piece.
struct Run {
    at: usize,
    first: u64,
    last: u64,
    got: u64,
}

/// Fetches the pieces the assemblies lack, a stream per run of them: two
/// `Start`s outstanding at a time (the server keeps one waiting behind the
/// running one), the next sent when a run is whole.
async fn fetch_pieces(
    sock: &mut Stream,
    path: &str,
    size: u64,
    piece: u32,
    per: u64,
    work: &mut [Assembly],
) -> Result<(), SessionError> {
    let mut runs: Vec<Run> = vec![];
    for (at, a) in work.iter().enumerate() {
        for (k0, k1) in pieces::missing(&a.have) {
            runs.push(Run { at, first: a.chunk * per + k0, last: a.chunk * per + k1, got: 0 });
        }
    }
    if runs.is_empty() {
        return Ok(());
    }
    let start = |r: usize, runs: &[Run]| {
        let mut out = BytesMut::new();
        let (first, last) = (runs[r].first, runs[r].last);
        let stream = FIRST_STREAM + r as u32;
        Request::Start { stream, path: path.to_string(), block_size: piece, first, last, dir: Direction::Increment }
            .encode(&mut out);
        out
    };
    let mut out = start(0, &runs);
    if runs.len() > 1 {
        out.extend_from_slice(&start(1, &runs));
    }
    send(sock, &out).await?;
    let (mut whole, mut stopped) = (0usize, 0usize);
    let mut buf = BytesMut::with_capacity(256 * 1024);
    while stopped < runs.len() {
        match read_reply(sock, &mut buf).await? {
            Reply::Block { stream, block, payload } => {
                let r = stream.wrapping_sub(FIRST_STREAM) as usize;
                let run = runs.get_mut(r).filter(|run| block == run.first + run.got && block <= run.last);
                let at = block * u64::from(piece);
                let wrong = || SessionError::Unexpected(format!("block {block} of stream {stream} was not asked for"));
                let Some(run) = run.filter(|_| payload.len() as u64 == (size - at).min(u64::from(piece))) else {
                    return Err(wrong());
                };
                let a = &mut work[run.at];
                let from = (at - a.chunk * per * u64::from(piece)) as usize;
                a.buf[from..from + payload.len()].copy_from_slice(&payload);
                a.have[(block - a.chunk * per) as usize] = true;
                a.fetched += payload.len() as u64;
                run.got += 1;
                if run.first + run.got > run.last {
                    whole += 1;
                    let next = match r + 2 < runs.len() {
                        true => start(r + 2, &runs),
                        false if whole == runs.len() => {
                            let mut out = BytesMut::new();
                            Request::End { stream: FIRST_STREAM + (runs.len() - 1) as u32 }.encode(&mut out);
                            out
                        }
                        false => BytesMut::new(),
                    };
                    if !next.is_empty() {
                        send(sock, &next).await?;
                    }
                }
            }
            Reply::Stopped { .. } => stopped += 1,
            // Refused halfway: the connection's streams are in no known
            // state, so this is a failure (the mirror is dropped), not a no.
            Reply::Error { message, .. } => {
                return Err(SessionError::Unexpected(format!("a piece refused: {message}")))
            }
            other => return Err(unexpected(other)),
        }
    }
    Ok(())
}
