//! The producers a transfer starts with: greeted ddftpd connections (and
//! the chunk manifest from one of them) and HTTP mirrors, and how HTTP
//! mirrors agree on what the file is.

use tokio_rustls::TlsConnector;

use super::*;

/// One producer slot's source: a greeted ddftpd connection, or an HTTP
/// mirror (its slot opens its own connections).
pub(super) enum Producer {
    Ddftpd(Route, Session),
    /// An HTTP mirror, and the round trip its probe took.
    Http(Arc<HttpMirror>, Duration),
}

impl Producer {
    /// How to reach it again.
    pub(super) fn source(&self) -> Source {
        match self {
            Producer::Ddftpd(r, _) => Source::Ddftpd(r.clone()),
            Producer::Http(m, ..) => Source::Http(m.clone()),
        }
    }

    /// A server that ignores Range: it can only send from the start.
    pub(super) fn whole_only(&self) -> bool {
        matches!(self, Producer::Http(m, _) if m.whole_only)
    }

    /// The largest block it serves, if it says (a ddftpd, in its greeting).
    pub(super) fn max_block_size(&self) -> Option<u32> {
        match self {
            Producer::Ddftpd(_, c) => Some(c.max_block_size),
            Producer::Http(..) => None,
        }
    }

    /// For the report: the route, or the URL.
    pub(super) fn route(&self) -> String {
        match self {
            Producer::Ddftpd(r, _) => r.to_string(),
            Producer::Http(m, ..) => m.url.clone(),
        }
    }
}

/// Producer slots: one per route, plus the virtual pair's second stream
/// on the last route when the count is odd. The probe's connection
/// becomes the slot's: no second handshake. A server that ignores Range
/// comes first: the low edge of the partition at block 0, the only place
/// it can send from; a second such server would only read what the first
/// sends, and is not used. Each slot's mirror index, and the mirrors' names.
pub(super) async fn make_slots(
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

/// Probes the HTTP mirror at `url` (for `path`); `tls` for an https one.
pub(super) async fn probe_http(
    url: String,
    path: String,
    tls: Option<TlsConnector>,
    asking: Arc<crate::http::auth::Asking>,
) -> Result<(Arc<HttpMirror>, HttpVersion), (String, HttpError)> {
    let mut m = HttpMirror::parse(&url, &path).map_err(|e| (url.clone(), e))?.asking(asking);
    m.tls = tls;
    let shown = m.url.clone();
    Lane::probe(Arc::new(m)).await.map_err(|e| (shown, e))
}

/// The HTTP mirrors' version when they are alone ([`plan::http_majority`]):
/// those with another copy are dropped, with a warning.
fn http_version(
    http: &mut Vec<(Arc<HttpMirror>, HttpVersion)>,
    path: &str,
    known: Option<u64>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(Version, plan::HttpCopy), TransferError> {
    let versions: Vec<&HttpVersion> = http.iter().map(|(_, v)| v).collect();
    let Some(copy) = plan::http_majority(&versions, known) else {
        let versions = http.iter().map(|(m, v)| format!("{} has {} bytes", m.url, v.size)).collect();
        return Err(TransferError::NoMajority { path: path.to_string(), versions });
    };
    http.retain(|(m, v)| {
        let Some(why) = copy.differs(v) else { return true };
        let w = format!(
            "dropping mirror {}: its copy of {path} differs from the majority's ({why}): a stale mirror?",
            m.url
        );
        tell(progress, warnings, w);
        false
    });
    Ok((Version::sealed(copy.size), copy))
}

/// The version the download moves: the one a majority of the ddftpd
/// mirrors report (each mirror one vote, however many routes reach it),
/// else the HTTP mirrors' own; mirrors with another copy are dropped, each
/// with a warning. Also whether the mirrors are HTTP alone, and the copy
/// an HTTP mirror must have (now, late or back).
pub(super) fn agree_on_version(
    spec: &GetSpec,
    usable: &mut Vec<(MirrorInfo, Session)>,
    http: &mut Vec<(Arc<HttpMirror>, HttpVersion)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(Version, bool, plan::HttpCopy), TransferError> {
    // Only mirrors of the version a majority reports serve blocks. Each
    // mirror votes once, however many routes reach it.
    let endpoints: Vec<_> = usable.iter().map(|(m, _)| &m.route.endpoint).collect();
    let voters: Vec<&MirrorInfo> = plan::one_vote_each(&endpoints).into_iter().map(|i| &usable[i].0).collect();
    // Only HTTP mirrors: they vote on the size (and their dates); nothing
    // says what the bytes must hash to unless --checksum does.
    let http_only = voters.is_empty();
    let mut copy = plan::HttpCopy::default();
    let versions: Vec<Version> = match http_only {
        true => {
            let known = spec.metalink.as_ref().and_then(|m| m.size);
            let (v, c) = http_version(http, &spec.path, known, progress, warnings)?;
            copy = c;
            vec![v]
        }
        false => voters.iter().map(|m| m.version).collect(),
    };
    let Some((version, stale)) = consensus::majority(&versions) else {
        let versions = voters.iter().map(|m| format!("{} has {}", m.route.endpoint, m.version.describe())).collect();
        return Err(TransferError::NoMajority { path: spec.path.clone(), versions });
    };
    for &i in &stale {
        let w = format!(
            "dropping mirror {}: its copy of {} differs from the majority's ({} vs {}): a stale or damaged mirror?",
            voters[i].route.endpoint,
            spec.path,
            voters[i].version.describe(),
            version.describe()
        );
        tell(progress, warnings, w);
    }
    usable.retain(|(m, _)| m.version == version);
    // Beside ddftpd mirrors, an HTTP mirror's copy must be theirs: the
    // same size, and the same SHA-256 if its headers give one.
    if !http_only {
        copy = plan::HttpCopy { size: version.size, date: None, sha256: Some(hex(&version.digest.sha256)) };
    }
    http.retain(|(m, v)| {
        let Some(why) = copy.differs(v) else { return true };
        let url = &m.url;
        let w = format!("dropping mirror {url}: its {} has {why}", spec.path);
        tell(progress, warnings, w);
        false
    });
    Ok((version, http_only, copy))
}

/// Connects to a mirror (or takes `pool`'s idle connection to it) and, with `stat` (path, and whether the chunk
/// manifest should come too), asks for the file's size and digests; a
/// sealed bundle's size is known (`sealed_size`) and nothing is asked.
pub(super) async fn probe(
    route: Route,
    stat: Option<(String, bool)>,
    token: Option<Arc<[u8]>>,
    sealed_size: Option<u64>,
    within: Duration,
    pool: Option<Arc<crate::pool::Pool>>,
) -> Result<(MirrorInfo, Session), SessionError> {
    let ask = stat.as_ref().map(|(p, m)| (p.as_str(), *m));
    let (conn, version, manifest) =
        crate::pool::connect_pooled(pool.as_deref(), &route, ask, token.as_deref(), within).await?;
    let version = match (version, sealed_size) {
        (Some(v), _) => v,
        (None, Some(size)) => Version::sealed(size),
        (None, None) => unreachable!("a probe without stat is for a sealed bundle"),
    };
    Ok((MirrorInfo { route, version, manifest }, conn))
}

/// The routes to `endpoint`: one from each local address (`--bind`), or
/// one from wherever the OS routes.
pub(super) fn routes_to(spec: &GetSpec, peer: &Peer) -> Vec<Route> {
    match spec.binds.is_empty() {
        true => vec![peer.route(None)],
        false => spec.binds.iter().map(|&l| peer.route(Some(l))).collect(),
    }
}

/// Fetches the chunk manifest from the first mirror in `usable` that serves
/// one matching `version`; a mirror whose manifest does not match is dropped.
pub(super) async fn fetch_manifest(
    path: &str,
    version: &Version,
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Manifest, TransferError> {
    let mut failures = vec![];
    while !usable.is_empty() {
        let (m, conn) = &mut usable[0];
        let fetch = crate::session::fetch_manifest(&mut conn.sock, path, version.size, &version.digest);
        match tokio::time::timeout(STAT_TIMEOUT, fetch).await.unwrap_or(Err(SessionError::ManifestTimeout)) {
            Ok(manifest) => return Ok(manifest),
            Err(e) => {
                let w = format!("dropping {}: chunk manifest: {e}", m.route);
                progress.warn(&w);
                warnings.push(w.clone());
                failures.push(w);
                usable.remove(0);
            }
        }
    }
    Err(TransferError::NoUsableMirror { path: path.to_string(), failures })
}

/// The weak checksums of `chunks` chunks of `path` from the first usable
/// mirror, for finding moved chunks in an older copy. Without them delta
/// still finds chunks moved by whole chunks; a mirror that fails to give
/// them is dropped like one that fails to give the manifest (its
/// connection is in no known state).
pub(super) async fn fetch_weak_sums(
    path: &str,
    chunks: usize,
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
) -> Option<Vec<u32>> {
    let (m, conn) = usable.iter_mut().find(|(_, c)| c.version >= ddftp_proto::frame::WEAK_SUMS_VERSION)?;
    let fetch = crate::session::fetch_weak_sums(&mut conn.sock, path, chunks as u64);
    match tokio::time::timeout(STAT_TIMEOUT, fetch).await.unwrap_or(Err(SessionError::ManifestTimeout)) {
        Ok(w) => Some(w),
        Err(e) => {
            let route = m.route.clone();
            progress.warn(&format!("dropping {route}: weak checksums: {e}"));
            usable.retain(|(m, _)| m.route != route);
            None
        }
    }
}

/// How to reach a mirror again.
#[derive(Clone, Debug)]
pub(super) enum Source {
    Ddftpd(Route),
    /// The mirror as its requests were pinned at the start.
    Http(Arc<HttpMirror>),
    /// An HTTP mirror (its URL) that did not answer at the start.
    LateHttp(String),
}

impl Source {
    /// Its mirror's name (the report's and the scheduler's).
    pub(super) fn mirror(&self) -> String {
        match self {
            Source::Ddftpd(r) => r.mirror(),
            Source::Http(m) => m.url.clone(),
            Source::LateHttp(u) => u.clone(),
        }
    }

    /// This route's name (a mirror may have one per local address).
    pub(super) fn route(&self) -> String {
        match self {
            Source::Ddftpd(r) => r.to_string(),
            Source::Http(m) => m.url.clone(),
            Source::LateHttp(u) => u.clone(),
        }
    }
}
