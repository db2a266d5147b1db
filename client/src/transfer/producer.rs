//! The producers a transfer starts with: greeted ddftpd connections and
//! HTTP mirrors, and how HTTP mirrors agree on what the file is.

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
) -> Result<(Lane, HttpVersion), (String, HttpError)> {
    let mut m = HttpMirror::parse(&url, &path).map_err(|e| (url.clone(), e))?;
    m.tls = tls;
    let shown = m.url.clone();
    Lane::probe(Arc::new(m)).await.map_err(|e| (shown, e))
}

/// The HTTP mirrors' version: the size `known` (a Metalink's) or else the
/// one a strict majority reports (those with another are dropped, with a
/// warning); among them, a date that a
/// strict majority shares drops the mirrors with another one.
pub(super) fn http_version(
    http: &mut Vec<(Lane, HttpVersion)>,
    path: &str,
    known: Option<u64>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Version, TransferError> {
    let n = http.len();
    let majority =
        || http.iter().map(|(_, v)| v.size).find(|s| http.iter().filter(|(_, v)| v.size == *s).count() * 2 > n);
    let Some(size) = known.or_else(majority) else {
        let versions = http.iter().map(|(l, v)| format!("{} has {} bytes", l.mirror().url, v.size)).collect();
        return Err(TransferError::NoMajority { path: path.to_string(), versions });
    };
    let same: Vec<Option<String>> =
        http.iter().filter(|(_, v)| v.size == size).map(|(_, v)| v.last_modified.clone()).collect();
    let date = same.iter().find(|d| d.is_some() && same.iter().filter(|e| e == d).count() * 2 > same.len()).cloned();
    http.retain(|(lane, v)| {
        let m = lane.mirror();
        let why = if v.size != size {
            format!("{} bytes, the majority's {size}", v.size)
        } else if date.as_ref().is_some_and(|d| *d != v.last_modified) {
            format!("Last-Modified {:?}, the majority's {:?}", v.last_modified, date.clone().flatten())
        } else {
            return true;
        };
        let w = format!(
            "dropping mirror {}: its copy of {path} differs from the majority's ({why}): a stale mirror?",
            m.url
        );
        progress.warn(&w);
        warnings.push(w);
        false
    });
    Ok(Version::sealed(size))
}
