//! `ddftp get --check`: the probes and the vote of a download, and no
//! data: what each mirror says of the file (size, SHA-256 or validators,
//! round trip) and whether it agrees with the majority, for scripts that
//! validate a mirror set (as `wget --spider` does for one URL).

use super::*;

/// What one mirror said.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MirrorCheck {
    pub mirror: String,
    pub size: Option<u64>,
    /// A ddftpd's SHA-256, or a web server's `Repr-Digest`.
    pub sha256: Option<String>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub rtt_ms: Option<f64>,
    /// It serves the version most mirrors serve (`None`: it did not answer).
    pub agrees: Option<bool>,
    pub error: Option<String>,
}

/// The whole check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    pub path: String,
    /// The version most mirrors serve, if a strict majority of those that
    /// answered serves one.
    pub size: Option<u64>,
    pub sha256: Option<String>,
    pub mirrors: Vec<MirrorCheck>,
}

impl CheckReport {
    /// Every mirror answered, and all serve one version.
    pub fn all_agree(&self) -> bool {
        self.mirrors.iter().all(|m| m.agrees == Some(true))
    }

    /// Some mirror did not answer.
    pub fn some_silent(&self) -> bool {
        self.mirrors.iter().any(|m| m.agrees.is_none())
    }
}

/// Probes every mirror of `spec` once (no retries) and votes.
pub async fn check(spec: &GetSpec) -> Result<CheckReport, TransferError> {
    let https = spec.http.iter().any(|u| u.starts_with("https://"));
    let tls = match https {
        true => Some(crate::http::tls::connector(spec.ca_file.as_deref())?),
        false => None,
    };
    let routes: Vec<Route> = spec.mirrors.iter().flat_map(|ep| routes_to(spec, ep)).collect();
    let round = probe_round(spec, &routes, &tls).await;
    if let Some(s) = round.spare {
        s.abort();
    }
    let mut mirrors = vec![];
    for (m, conn) in &round.usable {
        mirrors.push(MirrorCheck {
            mirror: m.route.to_string(),
            size: Some(m.version.size),
            sha256: Some(hex(&m.version.digest.sha256)),
            etag: None,
            last_modified: None,
            rtt_ms: Some(conn.rtt.as_secs_f64() * 1e3),
            agrees: None,
            error: None,
        });
    }
    for (m, v) in &round.http {
        mirrors.push(MirrorCheck {
            mirror: m.url.clone(),
            size: Some(v.size),
            sha256: v.sha256.clone(),
            etag: v.etag.clone(),
            last_modified: v.last_modified.clone(),
            rtt_ms: Some(v.rtt.as_secs_f64() * 1e3),
            agrees: None,
            error: None,
        });
    }
    // The majority: the (size, SHA-256) most answers carry, counting a web
    // server without a digest by its size.
    let answered = mirrors.len();
    let mut best: Option<((u64, Option<String>), usize)> = None;
    for m in &mirrors {
        let key = (m.size.unwrap_or(0), m.sha256.clone());
        let n = mirrors.iter().filter(|o| same(o, &key)).count();
        let better = match &best {
            None => true,
            Some((_, b)) => n > *b,
        };
        if better {
            best = Some((key, n));
        }
    }
    let majority = best.filter(|(_, n)| *n * 2 > answered).map(|(k, _)| k);
    for m in &mut mirrors {
        m.agrees = Some(majority.as_ref().is_some_and(|k| same(m, k)));
    }
    for f in &round.failures {
        let (mirror, error) = f.trim_start().split_once(": ").unwrap_or((f.trim_start(), ""));
        mirrors.push(MirrorCheck {
            mirror: mirror.to_string(),
            size: None,
            sha256: None,
            etag: None,
            last_modified: None,
            rtt_ms: None,
            agrees: None,
            error: Some(error.to_string()),
        });
    }
    let (size, sha256) = match majority {
        Some((size, sha)) => (Some(size), sha),
        None => (None, None),
    };
    Ok(CheckReport { path: spec.path.clone(), size, sha256, mirrors })
}

/// Whether `m` serves the version `key`: its size, and its SHA-256 where
/// both are known.
fn same(m: &MirrorCheck, key: &(u64, Option<String>)) -> bool {
    m.size == Some(key.0)
        && match (&m.sha256, &key.1) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}
