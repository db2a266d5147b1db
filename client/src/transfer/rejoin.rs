//! Mirrors asked again. A producer whose connection failed or stalled, or
//! a mirror that did not answer its probe (down, silent, busy), is tried
//! again under the one retry policy ([`crate::retry`]); when it answers
//! with the same file it becomes a new producer of the running transfer
//! (`Transfer::handle_join`, as a late mirror). A mirror whose data failed
//! verification, or that now serves another version, is not asked again.
//!
//! "The same file": for ddftpd the version every mirror agreed on (size,
//! SHA-256, manifest root; a restarted ddftpd has a new server id, so the
//! id cannot say it); for HTTP the same size and the validator
//! (`ETag`/`Last-Modified`) its requests are pinned to.

use super::producer::Source;
use super::slot::Event;
use super::*;
use crate::retry::Retrying;

/// What a mirror must serve to rejoin, and how to ask.
pub(super) struct Wanted {
    pub(super) path: String,
    /// The version agreed on; `None` for a sealed bundle (no `Stat`).
    pub(super) version: Option<Version>,
    pub(super) size: u64,
    pub(super) token: Option<Arc<[u8]>>,
    /// A bundle's definition, registered again before the mirror rejoins.
    pub(super) bundle: Option<Arc<[u8]>>,
    /// For an HTTP mirror late at the start: the copy it must have (the
    /// others' size, date or SHA-256), and the TLS connector.
    pub(super) http: plan::HttpCopy,
    pub(super) tls: Option<tokio_rustls::TlsConnector>,
    pub(super) asking: Arc<crate::http::auth::Asking>,
    pub(super) policy: RetryPolicy,
    pub(super) connect_timeout: Duration,
}

impl Wanted {
    /// What `spec`'s mirrors must serve to rejoin: `version` (none for a
    /// sealed bundle or web mirrors alone), or for a web mirror `copy`.
    pub(super) fn of(
        spec: &super::GetSpec,
        version: Option<Version>,
        size: u64,
        copy: &plan::HttpCopy,
        tls: &Option<tokio_rustls::TlsConnector>,
    ) -> Wanted {
        Wanted {
            path: spec.path.clone(),
            version,
            size,
            token: spec.token.clone(),
            bundle: spec.bundle.clone(),
            http: copy.clone(),
            tls: tls.clone(),
            asking: spec.asking.clone(),
            policy: spec.retry,
            connect_timeout: spec.connect_timeout,
        }
    }
}

/// Why one try failed, and whether another may help.
struct Failed {
    why: String,
    again: bool,
    hint: Option<Duration>,
}

/// Tries `source` until it serves the wanted file again or the budget is
/// spent; each wait is told through `events`. The answer is a `Joined`.
pub(super) async fn retry(
    source: Source,
    wanted: Arc<Wanted>,
    mut hint: Option<Duration>,
    events: mpsc::Sender<Event>,
) -> Event {
    let mut state = Retrying::default();
    let mut last = String::from("no answer");
    while let Some(wait) = state.next(&wanted.policy, hint) {
        if let Some(w) = state.tell(&format!("{}: asking", source.route()), wait, &wanted.policy) {
            let _ = events.send(Event::Warn(w)).await;
        }
        tokio::time::sleep(wait).await;
        match attempt(&source, &wanted).await {
            Ok(producer) => return Event::Joined(Box::new((source, Ok(producer)))),
            Err(f) => {
                last = f.why;
                hint = f.hint;
                if !f.again {
                    break;
                }
            }
        }
    }
    let why = format!("not used again after {} tries: {last}", state.tries.min(wanted.policy.tries()));
    Event::Joined(Box::new((source, Err(why))))
}

/// A mirror late at the start (an ssh mirror that answered once the
/// transfer ran): tried at once, then, if that may pass, as a mirror
/// asked again. The answer is a `Joined`.
pub(super) async fn join_late(source: Source, wanted: Arc<Wanted>, events: mpsc::Sender<Event>) -> Event {
    match attempt(&source, &wanted).await {
        Ok(producer) => Event::Joined(Box::new((source, Ok(producer)))),
        Err(f) if f.again => retry(source, wanted, f.hint, events).await,
        Err(f) => Event::Joined(Box::new((source, Err(f.why)))),
    }
}

/// One try: a producer on a fresh connection, if it serves the same file.
async fn attempt(source: &Source, wanted: &Wanted) -> Result<Producer, Failed> {
    match source {
        Source::Ddftpd(route) => {
            let stat = wanted.version.as_ref().map(|_| (wanted.path.as_str(), false));
            let token = wanted.token.as_deref();
            let failed = |e: SessionError| Failed { why: e.to_string(), again: e.is_transient(), hint: e.wait_hint() };
            if let Some(def) = &wanted.bundle {
                // Registered again (it says under which name: the same
                // list has the same name everywhere).
                let name = crate::session::Session::open(route, token).await.map_err(failed)?;
                let name = { name }.define_bundle(def).await.map_err(failed)?;
                if name != wanted.path {
                    let why = format!("it registered the list as {name}, the others as {}", wanted.path);
                    return Err(Failed { why, again: false, hint: None });
                }
            }
            let (conn, version, _) =
                crate::session::connect_within(route, stat, token, wanted.connect_timeout)
                    .await
                    .map_err(|e| Failed { why: e.to_string(), again: e.is_transient(), hint: e.wait_hint() })?;
            match (&wanted.version, version) {
                (Some(want), Some(got)) if got != *want => Err(Failed {
                    why: format!("it now serves another version of {} ({} bytes)", wanted.path, got.size),
                    again: false,
                    hint: None,
                }),
                _ => Ok(Producer::Ddftpd(route.clone(), conn)),
            }
        }
        Source::LateHttp(url) => {
            let (m, v) = super::producer::probe_http(
                url.clone(),
                wanted.path.clone(),
                wanted.tls.clone(),
                wanted.asking.clone(),
            )
            .await
            .map_err(|(_, e)| Failed {
                why: e.to_string(),
                again: e.is_transient(),
                hint: e.wait_hint(),
            })?;
            let copy = plan::HttpCopy { size: wanted.size, ..wanted.http.clone() };
            let why = match copy.differs(&v) {
                Some(why) => format!("its {} has {why}", wanted.path),
                // Only from the start can such a server send.
                None if !v.ranges => "it ignores Range, and the transfer is under way".to_string(),
                None => return Ok(Producer::Http(Arc::new(m.pinned(&v)), v.rtt)),
            };
            Err(Failed { why, again: false, hint: None })
        }
        Source::Http(m) => {
            let fresh = HttpMirror { if_range: None, ..(**m).clone() };
            let (_, v) = Lane::probe(Arc::new(fresh)).await.map_err(|e| Failed {
                why: e.to_string(),
                again: e.is_transient(),
                hint: e.wait_hint(),
            })?;
            let same = v.size == wanted.size && m.pinned(&v).if_range == m.if_range;
            match same {
                true => Ok(Producer::Http(m.clone(), v.rtt)),
                false => Err(Failed {
                    why: format!(
                        "its {} changed ({} bytes, validator {:?})",
                        wanted.path,
                        v.size,
                        m.pinned(&v).if_range
                    ),
                    again: false,
                    hint: None,
                }),
            }
        }
    }
}
