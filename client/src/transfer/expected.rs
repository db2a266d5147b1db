//! The SHA-256 a download must have, when something other than ddftpd
//! mirrors says so: `--checksum`, a Metalink's hash, a `--checksum-url`
//! listing, or (with HTTP mirrors only) their `Repr-Digest`/`Digest`
//! headers: the first of these there is. ddftpd mirrors whose copy has
//! another SHA-256 are not used, nor HTTP mirrors whose header names
//! another. Beside ddftpd mirrors a header is checked against theirs
//! instead: a server's header does not outvote them.

use tokio_rustls::TlsConnector;

use super::*;
use crate::checksum;

/// Listings larger than this are not a `SHA256SUMS`.
const MAX_LISTING: usize = 16 << 20;

/// The SHA-256 expected, and what said so.
pub(super) struct Expected {
    pub(super) sha256: String,
    pub(super) from: Sha256Checked,
    /// The mirrors that sent this digest, when others in use sent none:
    /// nothing confirms it, so a download that does not match it is kept
    /// aside for the user to judge rather than thrown away.
    pub(super) unconfirmed: Option<Vec<String>>,
}

/// What the download's SHA-256 must be, if anything says.
pub(super) async fn published(
    spec: &GetSpec,
    http: &mut Vec<(Arc<HttpMirror>, HttpVersion)>,
    tls: Option<TlsConnector>,
    ddftpd: bool,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Option<Expected>, TransferError> {
    let said = |sha256: String, from| Ok(Some(Expected { sha256, from, unconfirmed: None }));
    if let Some(c) = &spec.checksum {
        let from = if spec.checksum_listed { Sha256Checked::ListChecksum } else { Sha256Checked::Checksum };
        return said(c.clone(), from);
    }
    if let Some(c) = spec.metalink.as_ref().and_then(|m| m.sha256.clone()) {
        return said(c, Sha256Checked::Metalink);
    }
    if let Some(url) = &spec.checksum_url {
        let no = |why: String| TransferError::NoChecksum { path: spec.path.clone(), why };
        let mut m = HttpMirror::parse(url, "").map_err(|e| no(e.to_string()))?.asking(spec.asking.clone());
        m.tls = tls;
        let listing = Lane::get_small(Arc::new(m), MAX_LISTING).await.map_err(|e| no(format!("{url}: {e}")))?;
        let listing = String::from_utf8_lossy(&listing);
        return match checksum::from_sums(&listing, &spec.path) {
            Some(c) => said(c, Sha256Checked::ChecksumUrl),
            None => Err(no(format!("{url} lists no SHA-256 for {}", spec.path))),
        };
    }
    if ddftpd {
        return Ok(None);
    }
    // The digest most HTTP mirrors send; those sending another are dropped.
    // A tie decides nothing (the order mirrors are named in must not): the
    // download stops before a byte moves.
    let top = match digest_vote(http.iter().filter_map(|(m, v)| Some((m.url.as_str(), v.sha256.as_deref()?)))) {
        Vote::None => return Ok(None),
        Vote::Tie(versions) => return Err(TransferError::NoMajority { path: spec.path.clone(), versions }),
        Vote::Top(top) => top,
    };
    http.retain(|(m, v)| match &v.sha256 {
        Some(d) if *d != top => {
            let url = &m.url;
            let w = format!("dropping mirror {url}: its Repr-Digest SHA-256 {d} is not the majority's {top}");
            tell(progress, warnings, w);
            false
        }
        _ => true,
    });
    let senders: Vec<String> = http.iter().filter(|(_, v)| v.sha256.is_some()).map(|(m, _)| m.url.clone()).collect();
    let unconfirmed = (senders.len() < http.len()).then_some(senders);
    Ok(Some(Expected { sha256: top, from: Sha256Checked::DigestHeader, unconfirmed }))
}

/// What the mirrors' digest headers say together.
#[derive(Debug, PartialEq, Eq)]
enum Vote {
    /// None sent one.
    None,
    /// The digest more of them sent than any other.
    Top(String),
    /// Two or more digests sent by as many mirrors each: who sent which.
    Tie(Vec<String>),
}

/// The vote over `(mirror, digest)` pairs.
fn digest_vote<'a>(said: impl Iterator<Item = (&'a str, &'a str)>) -> Vote {
    let said: Vec<(&str, &str)> = said.collect();
    let mut counts: Vec<(&str, usize)> = vec![];
    for &(_, d) in &said {
        match counts.iter_mut().find(|(e, _)| *e == d) {
            Some((_, n)) => *n += 1,
            None => counts.push((d, 1)),
        }
    }
    let Some(most) = counts.iter().map(|&(_, n)| n).max() else { return Vote::None };
    let top: Vec<&str> = counts.iter().filter(|&&(_, n)| n == most).map(|&(d, _)| d).collect();
    match top[..] {
        [one] => Vote::Top(one.to_string()),
        _ => Vote::Tie(
            said.iter()
                .filter(|(_, d)| top.contains(d))
                .map(|(m, d)| format!("{m}: Repr-Digest SHA-256 {d}"))
                .collect(),
        ),
    }
}

/// Drops the ddftpd mirrors whose copy is not the one `expected` names;
/// the SHA-256 of a copy dropped, if any was.
pub(super) fn drop_other_copies(
    expected: &Expected,
    usable: &mut Vec<(MirrorInfo, Session)>,
    path: &str,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let mut other = None;
    usable.retain(|(m, _)| {
        let theirs = hex(&m.version.digest.sha256);
        if theirs == expected.sha256 {
            return true;
        }
        other = Some(theirs.clone());
        let w = format!(
            "dropping mirror {}: its copy of {path} has SHA-256 {theirs}, not the {} that {} says",
            m.route,
            expected.sha256,
            expected.from.source()
        );
        tell(progress, warnings, w);
        false
    });
    other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tie_decides_nothing_whatever_the_order() {
        assert_eq!(digest_vote([].into_iter()), Vote::None);
        assert_eq!(digest_vote([("a", "x"), ("b", "x"), ("c", "y")].into_iter()), Vote::Top("x".into()));
        for order in [[("a", "x"), ("b", "y")], [("b", "y"), ("a", "x")]] {
            match digest_vote(order.into_iter()) {
                Vote::Tie(v) => assert_eq!(v.len(), 2),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(digest_vote([("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")].into_iter()), Vote::Tie(_)));
    }
}
