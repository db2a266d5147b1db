//! What an archive asks of the mirrors: a walk of SRC (whole, or as it
//! comes), and registering a bundle.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ddftp_proto::frame::MAX_BUNDLE_CHUNK;
use ddftp_proto::packed::{self, MAX_LIST};
use ddftp_proto::{Endpoint, ErrorCode, Reply, Request};
use ddtree::list::{self, ddftp, Entry};
use tokio::io::AsyncWriteExt;

use super::{ArchiveError, ArchiveSpec};
use crate::session::{self, read_reply, unexpected, Route};

/// Entries a walk hands over at a time.
const WALK_BATCH: usize = 4096;

/// What a walk could not read: (path, why).
pub(super) type WalkErrors = Vec<(String, String)>;

/// The list: from `--list` (with `--strip`), or walked by the first mirror
/// that answers, and what that walk could not read. A walk that could not
/// read everything is taken only if no mirror's walk can.
pub(super) async fn fetch_list(spec: &ArchiveSpec) -> Result<(Vec<Entry>, WalkErrors), ArchiveError> {
    if let Some(path) = &spec.list {
        let mut entries = list::read(path)?;
        if let Some(prefix) = &spec.strip {
            let prefix = prefix.trim_end_matches('/').as_bytes();
            for e in &mut entries {
                let rest =
                    e.path.strip_prefix(prefix).filter(|r| r.is_empty() || r.starts_with(b"/")).ok_or_else(|| {
                        ArchiveError::BadEntry {
                            path: String::from_utf8_lossy(&e.path).into_owned(),
                            why: format!("does not start with --strip {:?}", String::from_utf8_lossy(prefix)),
                        }
                    })?;
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                e.path = if rest.is_empty() { b".".to_vec() } else { rest.to_vec() };
            }
        }
        return Ok((entries, vec![]));
    }
    let mut failures = vec![];
    let mut partial: Option<(Vec<Entry>, WalkErrors)> = None;
    for ep in &spec.get.mirrors {
        match walk_on(ep, &spec.src, spec.get.token.as_deref()).await {
            Ok((entries, errors)) if errors.is_empty() => return Ok((entries, errors)),
            Ok((entries, errors)) => {
                failures.push(format!("  {ep}: {} entries under {} could not be read", errors.len(), spec.src));
                if partial.as_ref().is_none_or(|(_, e)| e.len() > errors.len()) {
                    partial = Some((entries, errors));
                }
            }
            Err(e) => failures.push(format!("  {ep}: {e}")),
        }
    }
    partial.ok_or(ArchiveError::Walk { src: spec.src.clone(), failures })
}

pub(super) async fn greet(ep: &Endpoint, token: Option<&[u8]>) -> Result<tokio::net::TcpStream, String> {
    let route = Route { endpoint: ep.clone(), local: None };
    Ok(session::connect(&route, None, token).await.map_err(|e| e.to_string())?.0.sock)
}

/// Asks one mirror to walk `src`.
pub(super) async fn walk_on(
    ep: &Endpoint,
    src: &str,
    token: Option<&[u8]>,
) -> Result<(Vec<Entry>, WalkErrors), String> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let mut began = false;
    let walk = walk_stream(ep, src, token, tx, &mut began);
    let collect = async {
        let mut all = vec![];
        while let Some(mut batch) = rx.recv().await {
            all.append(&mut batch);
        }
        all
    };
    let (walked, all) = tokio::join!(walk, collect);
    walked.map(|errors| (all, errors))
}

/// Asks one mirror to walk `src`, handing its entries to `out` a batch at
/// a time as the walk goes (the list is unpacked and read on a thread);
/// `began` is set once some of the list has come. What the walk could
/// not read comes back (the list holds the rest).
pub(super) async fn walk_stream(
    ep: &Endpoint,
    src: &str,
    token: Option<&[u8]>,
    out: tokio::sync::mpsc::Sender<Vec<Entry>>,
    began: &mut bool,
) -> Result<WalkErrors, String> {
    let mut sock = greet(ep, token).await?;
    let mut req = BytesMut::new();
    Request::Walk { path: src.to_string() }.encode(&mut req);
    sock.write_all(&req).await.map_err(|e| format!("send: {e}"))?;
    let (feed, unpacked) = packed::unpacker(MAX_LIST);
    let reader = tokio::task::spawn_blocking(move || {
        ddftp::read_batches(unpacked, Path::new("the mirror's list"), WALK_BATCH, |b| out.blocking_send(b).is_ok())
    });
    let mut buf = BytesMut::new();
    let mut told = vec![];
    let errors = loop {
        match read_reply(&mut sock, &mut buf).await {
            Ok(Reply::WalkError { path, message }) => told.push((path, message)),
            Ok(Reply::ListData { data }) => {
                *began = true;
                if !feed.piece(data.to_vec()) {
                    break None;
                }
            }
            Ok(Reply::ListEnd { errors }) => break Some(Ok(errors)),
            Ok(other) => break Some(Err(unexpected(other).to_string())),
            Err(e) => break Some(Err(e.to_string())),
        }
    };
    drop(feed);
    let read = reader.await.map_err(|e| e.to_string())?;
    match errors {
        Some(Ok(0)) => read.map_err(|e| e.to_string()).map(|()| told),
        Some(Ok(errors)) => {
            read.map_err(|e| e.to_string())?;
            if errors > told.len() as u64 {
                let more = errors - told.len() as u64;
                told.push((src.to_string(), format!("and {more} more entries below it could not be read")));
            }
            Ok(told)
        }
        Some(Err(e)) => Err(e),
        // The list could not be read (the reader says why).
        None => read.map_err(|e| e.to_string()).and(Err("the list stopped".into())),
    }
}

/// Defines the bundle on one mirror (`def`: the packed list); its name, or
/// why not. A mirror busy taking in other definitions is asked again, for
/// up to [`BUSY_WAIT`].
pub(super) async fn define_on(ep: &Endpoint, def: &[u8], token: Option<&[u8]>) -> Result<String, String> {
    let started = std::time::Instant::now();
    loop {
        match define_once(ep, def, token).await {
            Err(Busy(_)) if started.elapsed() < BUSY_WAIT => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(Busy(why)) | Err(Other(why)) => return Err(why),
            Ok(name) => return Ok(name),
        }
    }
}

/// How long a busy mirror is asked again.
const BUSY_WAIT: Duration = Duration::from_secs(60);

/// Why a definition was not registered.
enum Refused {
    /// The mirror is busy with other definitions: worth asking again.
    Busy(String),
    Other(String),
}
use Refused::{Busy, Other};

async fn define_once(ep: &Endpoint, def: &[u8], token: Option<&[u8]>) -> Result<String, Refused> {
    let mut sock = greet(ep, token).await.map_err(Other)?;
    let mut out = BytesMut::with_capacity(def.len() + def.len() / MAX_BUNDLE_CHUNK * 8 + 64);
    for piece in def.chunks(MAX_BUNDLE_CHUNK) {
        Request::Bundle { data: bytes::Bytes::copy_from_slice(piece) }.encode(&mut out);
    }
    Request::BundleEnd.encode(&mut out);
    // A refusal may come while the definition is still going out: its
    // reply is read either way.
    let sent = sock.write_all(&out).await.map_err(|e| format!("send: {e}"));
    let mut buf = BytesMut::new();
    match tokio::time::timeout(Duration::from_secs(600), read_reply(&mut sock, &mut buf)).await {
        Ok(Ok(Reply::Bundle { name, .. })) => Ok(name),
        Ok(Ok(Reply::Error { code: ErrorCode::Busy, message })) => Err(Busy(message)),
        Ok(Ok(other)) => Err(Other(unexpected(other).to_string())),
        Ok(Err(e)) => Err(Other(sent.err().unwrap_or(e.to_string()))),
        Err(_) => Err(Other("no answer in 600 s".into())),
    }
}

/// The mirrors registering a bundle, each answering with its name for it.
pub(super) type Defining = tokio::task::JoinSet<(Endpoint, Result<String, String>)>;

/// Asks every mirror to register the bundle defined by `def` (if there is
/// anything to move); each task answers with its mirror.
pub(super) fn define_everywhere(
    spec: &ArchiveSpec,
    def: Option<Vec<u8>>,
) -> tokio::task::JoinSet<(Endpoint, Result<String, String>)> {
    let mut set = tokio::task::JoinSet::new();
    let Some(def) = def else { return set };
    let def: Arc<[u8]> = def.into();
    for ep in &spec.get.mirrors {
        let (ep, def, token) = (ep.clone(), def.clone(), spec.get.token.clone());
        set.spawn(async move {
            let r = define_on(&ep, &def, token.as_deref()).await;
            (ep, r)
        });
    }
    set
}
