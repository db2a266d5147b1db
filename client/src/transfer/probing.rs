//! The mirrors probed: every one at once, HTTP and ddftpd alike, in
//! rounds until one answers (retried under [`crate::retry`]'s policy for
//! the start), one server under two names counted once.
//!
//! How long a transfer waits for its mirrors' probes: while none has
//! answered, as long as they take (a ddftpd hashing a large file for its
//! first `Stat` may take minutes, and is the only way to start); once one
//! has, the others get a grace of four times that mirror's answer (at
//! least [`GRACE_MIN`]), and the download starts with those that answered.
//! One slow or silent mirror (redirects that each take 29 s) no longer
//! holds the start of everyone else.

use std::time::{Duration, Instant};

use super::*;

/// The least grace the other mirrors get after the first answer.
pub(super) const GRACE_MIN: Duration = Duration::from_secs(3);

/// The deadline of the probes still out, if one has answered: `first` is
/// when the first answer came, `started` when probing began; the grace is
/// never longer than the connect timeout (a mirror that has not answered
/// by then joins later, when it does).
pub(super) fn deadline(started: Instant, first: Option<Instant>, connect_timeout: Duration) -> Option<Instant> {
    let first = first?;
    Some(first + (4 * first.saturating_duration_since(started)).max(GRACE_MIN).min(connect_timeout))
}

/// A probe's answer, by its mirror's place in the list.
pub(super) enum Probed {
    Ddftpd(usize, Result<(MirrorInfo, Session), SessionError>),
    Http(usize, Result<(Arc<HttpMirror>, HttpVersion), (String, crate::http::HttpError)>),
}

/// What one round of probes found.
pub(super) struct Round {
    pub(super) usable: Vec<(MirrorInfo, Session)>,
    pub(super) http: Vec<(Arc<HttpMirror>, HttpVersion)>,
    /// Why each other mirror is not used, a line each.
    pub(super) failures: Vec<String>,
    /// Mirrors that may answer later (down, silent, busy): asked again
    /// once the transfer runs, and joining it when they answer.
    pub(super) later: Vec<producer::Source>,
    /// Some failure may pass (a mirror down, silent, busy, a 503).
    pub(super) transient: bool,
    /// How long busy mirrors asked us to wait.
    pub(super) hints: Vec<Duration>,
    /// How the mirrors that may answer later failed ([`crate::retry::AtStart`]).
    pub(super) at_start: crate::retry::AtStart,
    /// Some mirror failed its TLS handshake.
    pub(super) untrusted: bool,
    /// Mirrors that said the path is not a regular file (a directory?).
    pub(super) not_a_file: usize,
    /// Mirrors that said there is no such file (ddftpd's NotFound, HTTP
    /// 404 or 410).
    pub(super) not_found: usize,
    /// The virtual pair's second connection, under way.
    pub(super) spare: Option<tokio::task::JoinHandle<(Route, Result<crate::session::Probed, SessionError>)>>,
}

/// Probes every mirror at once, HTTP and ddftpd alike: their answers
/// until the deadline the first answer sets ([`probing`]).
pub(super) async fn probe_round(spec: &GetSpec, routes: &[Route], tls: &Option<tokio_rustls::TlsConnector>) -> Round {
    let probing_since = Instant::now();
    let mut probing = tokio::task::JoinSet::new();
    for (i, u) in spec.http.iter().enumerate() {
        let (u, path, tls, asking) = (u.clone(), spec.path.clone(), tls.clone(), spec.asking.clone());
        probing.spawn(async move { Probed::Http(i, probe_http(u, path, tls, asking).await) });
    }
    // The first route also sends the chunk manifest right behind its Stat,
    // so verification costs no extra round trip when that mirror agrees
    // with the majority (the usual case); not onto an older output, which
    // needs only the hashes of the chunks it lacks.
    let whole_manifest = spec.verify && !super::seed::reads_output(spec);
    for (i, r) in routes.iter().enumerate() {
        let stat = spec.sealed_size.is_none().then(|| (spec.path.clone(), whole_manifest && i == 0));
        let (r, token, sealed, within) = (r.clone(), spec.token.clone(), spec.sealed_size, spec.connect_timeout);
        let pool = spec.pool.clone();
        probing.spawn(async move { Probed::Ddftpd(i, probe(r, stat, token, sealed, within, pool).await) });
    }
    // With an odd count the last route will also carry a virtual pair's
    // second stream: open that connection at the same time.
    let spare_token = spec.token.clone();
    let spare =
        routes.last().filter(|_| (routes.len() + spec.http.len()) % 2 == 1).cloned().map(|last| {
            tokio::spawn(async move { (last.clone(), connect(&last, None, spare_token.as_deref()).await) })
        });
    let mut ddftpd_probed: Vec<Option<_>> = routes.iter().map(|_| None).collect();
    let mut http_probed: Vec<Option<_>> = spec.http.iter().map(|_| None).collect();
    let (mut first, mut grace) = (None, None);
    loop {
        let next = match probing::deadline(probing_since, first, spec.connect_timeout) {
            None => probing.join_next().await,
            Some(d) => {
                grace = Some(d.saturating_duration_since(probing_since));
                match tokio::time::timeout_at(d.into(), probing.join_next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                }
            }
        };
        let Some(done) = next else { break };
        match done.expect("probe task") {
            Probed::Ddftpd(i, r) => {
                if r.is_ok() {
                    first.get_or_insert_with(Instant::now);
                }
                ddftpd_probed[i] = Some(r);
            }
            Probed::Http(i, r) => {
                if r.is_ok() {
                    first.get_or_insert_with(Instant::now);
                }
                http_probed[i] = Some(r);
            }
        }
    }
    probing.abort_all();
    let late = |g: Option<Duration>| {
        format!(
            "no answer within {:.1} s, while others had answered: starting without it",
            g.unwrap_or_default().as_secs_f64()
        )
    };
    let mut r = Round {
        usable: vec![],
        http: vec![],
        failures: vec![],
        later: vec![],
        transient: false,
        hints: vec![],
        at_start: crate::retry::AtStart::NoSuchHost,
        untrusted: false,
        not_a_file: 0,
        not_found: 0,
        spare,
    };
    let mut unreached = vec![];
    for (route, got) in routes.iter().zip(ddftpd_probed) {
        match got {
            Some(Ok(x)) => r.usable.push(x),
            Some(Err(e)) => {
                r.untrusted |= matches!(e, SessionError::Tls(_));
                r.not_a_file += usize::from(matches!(e, SessionError::Refused { code: ErrorCode::NotAFile, .. }));
                r.not_found += usize::from(matches!(e, SessionError::Refused { code: ErrorCode::NotFound, .. }));
                if e.is_transient() {
                    r.transient = true;
                    r.hints.extend(e.wait_hint());
                    r.later.push(producer::Source::Ddftpd(route.clone()));
                    unreached.push(e.unreached());
                }
                r.failures.push(format!("  {route}: {e}"))
            }
            None => {
                r.transient = true;
                unreached.push(None);
                r.later.push(producer::Source::Ddftpd(route.clone()));
                r.failures.push(format!("  {route}: {}", late(grace)))
            }
        }
    }
    for (url, got) in spec.http.iter().zip(http_probed) {
        match got {
            Some(Ok(x)) => r.http.push(x),
            Some(Err((shown, e))) => {
                r.untrusted |= matches!(e, crate::http::HttpError::Tls(_));
                r.not_found +=
                    usize::from(matches!(&e, crate::http::HttpError::Status(s) if matches!(s.as_u16(), 404 | 410)));
                if e.is_transient() {
                    r.transient = true;
                    r.hints.extend(e.wait_hint());
                    r.later.push(producer::Source::LateHttp(url.clone()));
                    unreached.push(e.unreached());
                }
                r.failures.push(format!("  {shown}: {e}"))
            }
            None => {
                unreached.push(None);
                r.later.push(producer::Source::LateHttp(url.clone()));
                r.failures.push(format!("  {url}: {}", late(grace)))
            }
        }
    }
    r.at_start = crate::retry::AtStart::of(unreached);
    if r.usable.is_empty() && r.http.is_empty() {
        if let Some(s) = r.spare.take() {
            s.abort();
        }
    }
    r
}

/// Probes the mirrors until one answers: with none answering (all down,
/// busy or silent), the probes are made again under the retry policy
/// before the download gives up, saying why.
pub(super) async fn probe_until_one_answers(
    spec: &GetSpec,
    routes: &[Route],
    tls: &Option<tokio_rustls::TlsConnector>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Round, TransferError> {
    let mut asked = crate::retry::Retrying::default();
    let mut told_wait = Duration::ZERO;
    loop {
        let round = probe_round(spec, routes, tls).await;
        if !round.usable.is_empty() || !round.http.is_empty() {
            return Ok(round);
        }
        let hint = round.hints.iter().copied().max();
        let wait = if round.transient { asked.next_at_start(&spec.retry, hint, round.at_start) } else { None };
        let Some(wait) = wait else {
            let (path, failures) = (spec.path.clone(), round.failures);
            return Err(match round.untrusted {
                true => TransferError::Untrusted { path, failures },
                // Every mirror says so: most often a directory, for `archive`.
                false if round.not_a_file == failures.len() => TransferError::NotAFile { path, failures },
                false if round.not_found == failures.len() => TransferError::NotFound { path, failures },
                false => TransferError::NoUsableMirror { path, failures },
            });
        };
        // Told at the first try and whenever the wait grows, not every
        // 0.1 s (nor every second a busy server asks for).
        if asked.tries == 1 || wait > told_wait {
            told_wait = wait;
            let w = format!(
                "no mirror could serve {} yet:\n{}\nasking again in {:.1} s (try {} of {})",
                spec.path,
                round.failures.join("\n"),
                wait.as_secs_f64(),
                asked.tries,
                spec.retry.tries_at_start(round.at_start)
            );
            tell(progress, warnings, w);
        }
        tokio::time::sleep(wait).await;
    }
}

/// One server under two names is one mirror ([`plan::one_name_per_server`]):
/// the names after the first are dropped, each with a warning.
pub(super) fn one_name_each(
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) {
    let ids: Vec<_> = usable.iter().map(|(m, conn)| (conn.server_id, m.route.endpoint.clone())).collect();
    let mut verdicts = plan::one_name_per_server(&ids).into_iter();
    usable.retain(|(m, _)| match verdicts.next().expect("one verdict a route") {
        Ok(()) => true,
        Err(first) => {
            let w = format!(
                "skipping {}: it is the same server as {first} (one mirror under two names counts once)",
                m.route.endpoint
            );
            tell(progress, warnings, w);
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_deadline_until_one_answers_then_a_grace_of_four_times_its_wait() {
        let t0 = Instant::now();
        let ct = Duration::from_secs(60);
        assert_eq!(deadline(t0, None, ct), None);
        assert_eq!(deadline(t0, Some(t0 + Duration::from_millis(100)), ct), Some(t0 + Duration::from_millis(3100)));
        assert_eq!(deadline(t0, Some(t0 + Duration::from_secs(2)), ct), Some(t0 + Duration::from_secs(10)));
        let short = Duration::from_secs(1);
        assert_eq!(deadline(t0, Some(t0 + Duration::from_secs(2)), short), Some(t0 + Duration::from_secs(3)));
    }
}
