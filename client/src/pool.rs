//! Connections a finished download leaves to the next file of the same
//! command (`get -i LIST`, `get A B C`, a Metalink of several files): a
//! whole list streams over one set of greeted connections per mirror, as
//! FDT does, instead of a connect, a greeting (and a TLS handshake) per
//! file, and a socket left in TIME_WAIT by each.
//!
//! A connection is handed back only by a transfer that completed, from a
//! producer still in it (one dropped as failed, stalled or lying never
//! is), without waiting: the streams it still ran were ended as it was
//! handed back, and what they still send is read past by whoever takes
//! it ([`Leftover`], [`connect_pooled`]).

use std::sync::Mutex;

use std::time::Duration;

use crate::session::{connect_within, Leftover, Probed, Route, Session, SessionError};

/// Idle connections, by route (a mirror reached from one local address,
/// over TLS or not: a connection is only ever reused for its own route).
pub struct Pool {
    idle: Mutex<Vec<(Route, Session, Leftover)>>,
    per_route: usize,
}

impl Pool {
    /// A pool keeping at most `per_route` idle connections to each route
    /// (more are closed: a command runs that many files at once at most).
    pub fn new(per_route: usize) -> Pool {
        Pool { idle: Mutex::new(vec![]), per_route }
    }

    /// The connection to `route` handed back last, if any.
    pub(crate) fn take(&self, route: &Route) -> Option<(Session, Leftover)> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let i = idle.iter().rposition(|(r, ..)| r == route)?;
        let (_, s, left) = idle.remove(i);
        Some((s, left))
    }

    /// Keeps `s` for the next file that goes to `route` (or closes it, if
    /// the route has enough idle connections).
    pub(crate) fn put(&self, route: Route, s: Session, left: Leftover) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.iter().filter(|(r, ..)| *r == route).count() < self.per_route {
            idle.push((route, s, left));
        }
    }

    /// How many connections are idle (for tests and logs).
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} idle)", self.idle())
    }
}

/// [`connect_within`], on an idle connection `pool` holds to `route` when
/// it has one (a list's next file: no connect, no greeting, the `Stat`
/// alone). A pooled connection that no longer serves (the mirror closed
/// it, restarted, or sends what it should not) is closed, and a new one
/// made as if there had been none: what the probe answers is the same.
pub(crate) async fn connect_pooled(
    pool: Option<&Pool>,
    route: &Route,
    stat: Option<(&str, bool)>,
    token: Option<&[u8]>,
    within: Duration,
) -> Result<Probed, SessionError> {
    // Only a probe asks `Stat`; a connection without one (a bundle's, the
    // virtual pair's second) is new.
    if let (Some(pool), Some((path, with_manifest))) = (pool, stat) {
        while let Some((mut s, left)) = pool.take(route) {
            match s.restat(left, path, with_manifest, within).await {
                Ok((version, manifest)) => return Ok((s, Some(version), manifest)),
                // The mirror's answer about this path (not found, not a
                // file...): the connection still serves other paths.
                Err(e @ SessionError::Refused { .. }) => {
                    pool.put(route.clone(), s, Leftover::default());
                    return Err(e);
                }
                // It is hashing the file, or lying about it: a new
                // connection would only wait or hear the same.
                Err(
                    e @ (SessionError::StatTimeout
                    | SessionError::ManifestTimeout
                    | SessionError::ChunkSize { .. }
                    | SessionError::Manifest(_)),
                ) => return Err(e),
                Err(e) => tracing::debug!(%route, "an idle connection no longer serves ({e}): connecting anew"),
            }
        }
    }
    connect_within(route, stat, token, within).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddftp_proto::Endpoint;

    /// A connected session (to a listener nobody reads) along `route`.
    async fn session(listener: &tokio::net::TcpListener) -> Session {
        let sock = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let sock = ddnet::tls::Stream::Plain(sock);
        Session { sock, rtt: std::time::Duration::ZERO, server_id: [0; _], max_block_size: 1, version: 8, mtime: None }
    }

    fn route(port: u16, local: Option<std::net::IpAddr>) -> Route {
        Route { endpoint: Endpoint { host: "127.0.0.1".into(), port }, local, tls: None, own: None }
    }

    #[tokio::test]
    async fn a_connection_goes_only_to_its_own_route_and_each_route_keeps_at_most_its_share() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let pool = Pool::new(2);
        let (a, b) = (route(1, None), route(2, None));
        let a_from = route(1, Some("127.0.0.1".parse().unwrap()));
        for _ in 0..3 {
            pool.put(a.clone(), session(&listener).await, Leftover::default());
        }
        assert_eq!(pool.idle(), 2, "a third idle connection to one route is closed");
        assert!(pool.take(&b).is_none(), "another mirror's connection is not handed out");
        assert!(pool.take(&a_from).is_none(), "nor one from another local address");
        pool.put(b.clone(), session(&listener).await, Leftover { streams: vec![7], buf: bytes::BytesMut::new() });
        let (_, left) = pool.take(&b).expect("b's own");
        assert_eq!(left.streams, [7], "what it still owes comes with it");
        assert!(pool.take(&a).is_some() && pool.take(&a).is_some() && pool.take(&a).is_none());
    }
}
