//! The accepting end: links arrive on any of the listener's addresses,
//! each greeted in a task of its own (bounded, timed out), and become a
//! channel once every link of one session is in, or take the place of a
//! lost link of a running one.

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::secure::{self, Tls};
use super::{Relink, Striped, HELLO_TIMEOUT, MAX_GREETING};
use crate::wire::Frame;

/// A connected link, over TLS or not.
type Link = (TcpStream, Option<Tls>);

/// An accepted connection that greeted: its `Hello`, the link, and who.
type Greeted = (u64, u32, u32, Link, SocketAddr);

/// Accepts striped channels on one or more addresses.
pub struct StripeListener {
    listeners: Vec<TcpListener>,
    tls: Option<crate::tls::TlsAcceptor>,
}

impl StripeListener {
    pub async fn bind(addrs: &[SocketAddr]) -> io::Result<StripeListener> {
        let mut listeners = vec![];
        for a in addrs {
            listeners.push(TcpListener::bind(a).await.map_err(|e| io::Error::new(e.kind(), format!("{a}: {e}")))?);
        }
        Ok(StripeListener { listeners, tls: None })
    }

    /// Every link must then come over TLS (a TLS 1.3 handshake with this
    /// acceptor before its Hello); others are dropped.
    pub fn with_tls(mut self, acceptor: crate::tls::TlsAcceptor) -> StripeListener {
        self.tls = Some(acceptor);
        self
    }

    /// The bound addresses (with the real ports when 0 was asked).
    pub fn local_addrs(&self) -> io::Result<Vec<SocketAddr>> {
        self.listeners.iter().map(|l| l.local_addr()).collect()
    }

    /// The next channel: waits until every link of one session has arrived
    /// (on any of the addresses). Connections that do not greet properly
    /// are dropped.
    pub async fn accept(&self) -> io::Result<Striped> {
        let mut pending = crate::greeting::Pending::default();
        self.greeted(|(session, index, count, sock, _)| {
            let socks = pending.add(std::time::Instant::now(), session, index, count, sock)?;
            Some(Striped::start(socks, session, None))
        })
        .await
    }

    /// After [`accept`](Self::accept): takes the links of `ch`'s channel
    /// that connect again (its session, its link count, an index in range)
    /// and puts each in place of the one it replaces; others are dropped.
    /// Runs until the listener fails: spawn it, and end it with the channel.
    pub async fn take_back(&self, ch: Relink) -> io::Result<()> {
        let (session, count) = (ch.0.session, ch.0.out.len() as u32);
        let mut strangers = 0u64;
        self.greeted(|(s, index, n, (sock, tls), peer)| {
            if (s, n) != (session, count) {
                // Named while few; a flood is counted, not logged line by
                // line (a stranger must not fill the log, or block a
                // stderr nobody reads).
                strangers += 1;
                if strangers <= 3 || strangers.is_power_of_two() {
                    tracing::warn!(%peer, refused = strangers, "a link of another session refused");
                }
                return None;
            }
            if let Err(e) = ch.0.revive(index as usize, sock, tls) {
                tracing::warn!(%peer, link = index, "a returning link refused: {e}");
            }
            None::<()>
        })
        .await
        .map(|_| ())
    }

    /// Accepts connections, each greeted in a task of its own (a slow
    /// one holds no other; at most [`MAX_GREETING`], the oldest dropped
    /// past it), and hands each well-formed `Hello` (a count of 1 to 64,
    /// an index below it) with its link to `on`, until `on` returns
    /// something. Nothing a peer does ends it: descriptors running out
    /// pause accepting a moment, they do not fail the channel.
    async fn greeted<T>(&self, mut on: impl FnMut(Greeted) -> Option<T>) -> io::Result<T> {
        let (tx, mut rx) = mpsc::channel::<Greeted>(64);
        let mut greeting = crate::greeting::Greeters::new(MAX_GREETING);
        loop {
            let accepts = self.listeners.iter().map(|l| Box::pin(l.accept()));
            tokio::select! {
                (r, _, _) = futures_select_all(accepts) => {
                    let (sock, peer) = match r {
                        Ok(a) => a,
                        Err(e) => match crate::greeting::after_failed_accept(&e) {
                            Some(pause) => {
                                tracing::warn!("accepting a link: {e}; trying again shortly");
                                tokio::time::sleep(pause).await;
                                continue;
                            }
                            None => return Err(e),
                        },
                    };
                    let tx = tx.clone();
                    let tls = self.tls.clone();
                    greeting.spawn(async move {
                        let greet = async {
                            let mut sock = sock;
                            match &tls {
                                None => Ok((Frame::read_hello(&mut sock).await?, (sock, None))),
                                Some(a) => secure::accept(a, sock).await.map(|(f, s, t)| (f, (s, Some(t)))),
                            }
                        };
                        match tokio::time::timeout(HELLO_TIMEOUT, greet).await {
                            Ok(Ok((Frame::Hello { session, index, count }, link))) => {
                                let _ = tx.send((session, index, count, link, peer)).await;
                            }
                            Ok(Err(e)) => tracing::warn!(%peer, "link refused: {e}"),
                            Ok(Ok(_)) | Err(_) => tracing::warn!(%peer, "link refused: no Hello"),
                        }
                    });
                }
                Some(g) = rx.recv() => {
                    if !crate::greeting::admissible(g.1, g.2) {
                        continue;
                    }
                    if let Some(t) = on(g) {
                        return Ok(t);
                    }
                }
                // Finished greeting tasks are reaped.
                _ = greeting.reaped() => {}
            }
        }
    }
}

/// The first of several futures to finish (all are polled each time).
async fn futures_select_all<F: std::future::Future + Unpin>(futs: impl Iterator<Item = F>) -> (F::Output, usize, ()) {
    let mut futs: Vec<F> = futs.collect();
    std::future::poll_fn(move |cx| {
        for (i, f) in futs.iter_mut().enumerate() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready((v, i, ()));
            }
        }
        std::task::Poll::Pending
    })
    .await
}
