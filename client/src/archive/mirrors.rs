//! What an archive asks of the mirrors: a walk of SRC (whole, or as it
//! comes), and registering a bundle.

use std::sync::Arc;
use std::time::Duration;

use ddftp_proto::ErrorCode;
use ddtree::list::{self, Entry};

use super::{ArchiveError, ArchiveSpec};
pub(super) use crate::session::WalkErrors;
use crate::session::{Peer, Session, SessionError, WalkAsk};
use crate::transfer::Progress;

/// The list: from `--list` (with `--strip`), or walked by the first mirror
/// that answers, and what that walk could not read. A walk that could not
/// read everything is taken only if no mirror's walk can.
pub(super) async fn fetch_list(
    spec: &ArchiveSpec,
    progress: &mut dyn Progress,
) -> Result<(Vec<Entry>, WalkErrors), ArchiveError> {
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
    if spec.more_src.is_empty() {
        return walk_src(spec, (0, &spec.src), progress).await;
    }
    // Several SRCs: each walked, merged; a name an earlier SRC gives is
    // not taken from a later one (rsync's order).
    let (mut all, mut unread, mut seen) = (vec![], vec![], std::collections::HashSet::new());
    for (i, src) in spec.srcs().enumerate() {
        let (entries, errors) = walk_src(spec, (i, src), progress).await?;
        for e in entries {
            let Some(rel) = super::listing::below_src(&e, src.as_bytes()) else { continue };
            if seen.insert(rel.to_vec()) {
                all.push(e);
            }
        }
        unread.extend(errors);
    }
    Ok((all, unread))
}

/// One SRC (its number in [`ArchiveSpec::srcs`], its path) walked by the
/// first mirror that answers (see [`fetch_list`]).
async fn walk_src(
    spec: &ArchiveSpec,
    (i, src): (usize, &str),
    progress: &mut dyn Progress,
) -> Result<(Vec<Entry>, WalkErrors), ArchiveError> {
    let (mut failures, mut untrusted, mut files) = (vec![], false, 0);
    let mut partial: Option<(Vec<Entry>, WalkErrors)> = None;
    for ep in &spec.get.mirrors {
        let started = std::time::Instant::now();
        let mut tell = |n: usize| {
            let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-3);
            progress.status(&format!("listing {src} on {ep}: {n} entries ({rate:.0}/s)"));
        };
        match walk_on(ep, src, &spec.walk_ask(i), spec.get.token.as_deref(), &mut tell).await {
            Ok((entries, errors)) if errors.is_empty() => return Ok((entries, errors)),
            Ok((entries, errors)) => {
                failures.push(format!("  {ep}: {} entries under {src} could not be read", errors.len()));
                if partial.as_ref().is_none_or(|(_, e)| e.len() > errors.len()) {
                    partial = Some((entries, errors));
                }
            }
            Err(e) => {
                untrusted |= matches!(e, SessionError::Tls(_));
                files += usize::from(names_a_file(&e));
                failures.push(format!("  {ep}: {e}"))
            }
        }
    }
    let a_file = files > 0 && files == failures.len();
    partial.ok_or(ArchiveError::Walk { src: src.to_string(), failures, untrusted, a_file })
}

/// Asks one mirror to walk `src`.
pub(super) async fn walk_on(
    ep: &Peer,
    src: &str,
    ask: &WalkAsk,
    token: Option<&[u8]>,
    tell: &mut dyn FnMut(usize),
) -> Result<(Vec<Entry>, WalkErrors), SessionError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let mut began = false;
    let walk = walk_stream(ep, src, ask, token, tx, &mut began);
    let collect = async {
        let mut all = vec![];
        while let Some(mut batch) = rx.recv().await {
            all.append(&mut batch);
            tell(all.len());
        }
        all
    };
    let (walked, all) = tokio::join!(walk, collect);
    walked.map(|errors| (all, errors))
}

/// Asks one mirror to walk `src`, handing its entries to `out` a batch at
/// a time as the walk goes; `began` is set once some of the list has come.
pub async fn walk_stream(
    ep: &Peer,
    src: &str,
    ask: &WalkAsk,
    token: Option<&[u8]>,
    out: tokio::sync::mpsc::Sender<Vec<Entry>>,
    began: &mut bool,
) -> Result<WalkErrors, SessionError> {
    let route = ep.route(None);
    Session::open(&route, token).await?.walk(src, ask, out, began).await
}

/// Defines the bundle on one mirror (`def`: the packed list); its name, or
/// why not. A mirror busy taking in other definitions is asked again, for
/// up to [`BUSY_WAIT`].
pub(super) async fn define_on(ep: &Peer, def: &[u8], token: Option<&[u8]>) -> Result<String, SessionError> {
    let started = std::time::Instant::now();
    let route = ep.route(None);
    loop {
        let r = async { Session::open(&route, token).await?.define_bundle(def).await }.await;
        match r {
            Err(SessionError::Refused { code: ErrorCode::Busy, .. }) if started.elapsed() < BUSY_WAIT => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            r => return r,
        }
    }
}

/// How long a busy mirror is asked again.
const BUSY_WAIT: Duration = Duration::from_secs(60);

/// The mirrors registering a bundle, each answering with its name for it;
/// and the definition, for a mirror that must register it again (one
/// restarted while the bundle moves has forgotten it).
pub(super) struct Defining {
    set: tokio::task::JoinSet<(Peer, Result<String, SessionError>)>,
    pub(super) def: Option<Arc<[u8]>>,
}

impl Defining {
    /// The next mirror's answer, if any is still coming.
    pub(super) async fn join_next(&mut self) -> Option<(Peer, Result<String, SessionError>)> {
        self.set.join_next().await.map(|r| r.expect("define task"))
    }
}

/// Asks every mirror to register the bundle defined by `def` (if there is
/// anything to move); each task answers with its mirror.
pub(super) fn define_everywhere(spec: &ArchiveSpec, def: Option<Vec<u8>>) -> Defining {
    let mut set = tokio::task::JoinSet::new();
    let Some(def) = def else { return Defining { set, def: None } };
    let def: Arc<[u8]> = def.into();
    for ep in &spec.get.mirrors {
        let (ep, def, token) = (ep.clone(), def.clone(), spec.get.token.clone());
        set.spawn(async move {
            let r = define_on(&ep, &def, token.as_deref()).await;
            (ep, r)
        });
    }
    Defining { set, def: Some(def) }
}

/// Whether a mirror refused a walk because SRC is a file there.
pub(super) fn names_a_file(e: &SessionError) -> bool {
    matches!(e, SessionError::Refused { code: ErrorCode::NotAFile, .. })
}
