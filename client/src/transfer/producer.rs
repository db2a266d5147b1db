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
    pub(super) fn source(&self) -> super::rejoin::Source {
        match self {
            Producer::Ddftpd(r, _) => super::rejoin::Source::Ddftpd(r.clone()),
            Producer::Http(m, ..) => super::rejoin::Source::Http(m.clone()),
        }
    }

    /// A server that ignores Range: it can only send from the start.
    pub(super) fn whole_only(&self) -> bool {
        matches!(self, Producer::Http(m, _) if m.whole_only)
    }

    /// For the report: the route, or the URL.
    pub(super) fn route(&self) -> String {
        match self {
            Producer::Ddftpd(r, _) => r.to_string(),
            Producer::Http(m, ..) => m.url.clone(),
        }
    }
}

/// Probes the HTTP mirror at `url` (for `path`); `tls` for an https one.
pub(super) async fn probe_http(
    url: String,
    path: String,
    tls: Option<TlsConnector>,
) -> Result<(Arc<HttpMirror>, HttpVersion), (String, HttpError)> {
    let mut m = HttpMirror::parse(&url, &path).map_err(|e| (url.clone(), e))?;
    m.tls = tls;
    let shown = m.url.clone();
    Lane::probe(Arc::new(m)).await.map_err(|e| (shown, e))
}

/// The HTTP mirrors' version when they are alone ([`plan::http_majority`]):
/// those with another copy are dropped, with a warning.
pub(super) fn http_version(
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

/// Connects to a mirror and, with `stat` (path, and whether the chunk
/// manifest should come too), asks for the file's size and digests; a
/// sealed bundle's size is known (`sealed_size`) and nothing is asked.
pub(super) async fn probe(
    route: Route,
    stat: Option<(String, bool)>,
    token: Option<Arc<[u8]>>,
    sealed_size: Option<u64>,
    within: Duration,
) -> Result<(MirrorInfo, Session), SessionError> {
    let ask = stat.as_ref().map(|(p, m)| (p.as_str(), *m));
    let (conn, version, manifest) = crate::session::connect_within(&route, ask, token.as_deref(), within).await?;
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
