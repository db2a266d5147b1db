//! What the server counts (`--metrics ADDR`): plain atomics bumped where
//! things happen, rendered as the Prometheus text format on request.
//!
//! Counters only go up; gauges (`connections`, `streams`) are moved by
//! guards that give back what they took when dropped, so an early return
//! or a cancelled task cannot leave one counted forever. Bytes per client
//! address are kept for a bounded number of addresses (the table is
//! cleared when full, as a top-talkers view needs only recent ones) and
//! the page shows the largest few.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::digests::Source;

/// Why a connection was turned away before any request was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `--max-connections` reached.
    Busy,
    /// `--max-per-client` reached for its address.
    PerClient,
    /// Not in `--allow`.
    NotAllowed,
    /// A wrong token (or none).
    Token,
    /// Its bad TLS, or plaintext on a TLS listener.
    Tls,
}

impl Refusal {
    const ALL: [Refusal; 5] = [Refusal::Busy, Refusal::PerClient, Refusal::NotAllowed, Refusal::Token, Refusal::Tls];

    fn label(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::PerClient => "per_client",
            Refusal::NotAllowed => "not_allowed",
            Refusal::Token => "token",
            Refusal::Tls => "tls",
        }
    }
}

/// What a connection is doing (the `connections` gauge's `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Accepted, TLS handshake or greeting not done.
    Handshake,
    /// Greeted, no stream running.
    Idle,
    /// Sending blocks.
    Streaming,
}

impl State {
    const ALL: [State; 3] = [State::Handshake, State::Idle, State::Streaming];

    fn label(self) -> &'static str {
        match self {
            State::Handshake => "handshake",
            State::Idle => "idle",
            State::Streaming => "streaming",
        }
    }
}

/// Client addresses whose bytes are kept; past it the table starts over.
const CLIENTS_KEPT: usize = 4096;
/// Addresses shown on the page, largest first.
pub const TOP_CLIENTS: usize = 10;

/// Every figure the server keeps.
#[derive(Debug, Default)]
pub struct Metrics {
    bytes: AtomicU64,
    blocks: AtomicU64,
    accepted: AtomicU64,
    refused: [AtomicU64; 5],
    states: [AtomicU64; 3],
    streams: AtomicU64,
    streams_started: AtomicU64,
    tls_handshakes: AtomicU64,
    tls_failures: AtomicU64,
    index: [AtomicU64; 3],
    index_micros: AtomicU64,
    indexed_background: AtomicU64,
    per_client: Mutex<HashMap<IpAddr, u64>>,
}

impl Metrics {
    /// One block of `payload` bytes sent to `peer`.
    pub fn sent(&self, peer: Option<IpAddr>, payload: u64) {
        self.bytes.fetch_add(payload, Relaxed);
        self.blocks.fetch_add(1, Relaxed);
        if let Some(ip) = peer {
            let mut t = self.per_client.lock().expect("metrics lock");
            if t.len() >= CLIENTS_KEPT && !t.contains_key(&ip) {
                t.clear();
            }
            *t.entry(ip).or_default() += payload;
        }
    }

    /// Connections open now, whatever they do.
    pub fn open_connections(&self) -> u64 {
        self.states.iter().map(|s| s.load(Relaxed)).sum()
    }

    pub fn bytes_sent(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    pub fn refused(&self, why: Refusal) {
        self.refused[why as usize].fetch_add(1, Relaxed);
    }

    pub fn tls_handshake(&self, ok: bool) {
        self.tls_handshakes.fetch_add(1, Relaxed);
        if !ok {
            self.tls_failures.fetch_add(1, Relaxed);
        }
    }

    pub fn stream_started(&self) {
        self.streams_started.fetch_add(1, Relaxed);
    }

    /// A digest lookup answered from `source` after `took`.
    pub fn index_lookup(&self, source: Source, took: Duration) {
        self.index[source as usize].fetch_add(1, Relaxed);
        self.index_micros.fetch_add(took.as_micros() as u64, Relaxed);
    }

    /// How many lookups `source` answered.
    pub fn index_lookups(&self, source: Source) -> u64 {
        self.index[source as usize].load(Relaxed)
    }

    /// A file indexed in the background (inotify or a rescan).
    pub fn indexed_in_background(&self) {
        self.indexed_background.fetch_add(1, Relaxed);
    }

    /// A connection in `Handshake` until the guard moves or drops it.
    pub fn connection(self: &Arc<Self>) -> ConnState {
        self.states[State::Handshake as usize].fetch_add(1, Relaxed);
        ConnState { of: self.clone(), now: State::Handshake }
    }

    /// One running stream, counted until the guard drops.
    pub fn stream(self: &Arc<Self>) -> StreamGuard {
        self.streams.fetch_add(1, Relaxed);
        StreamGuard { of: self.clone() }
    }

    /// The Prometheus text exposition of every figure.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(4096);
        let c = |o: &mut String, name: &str, help: &str, kind: &str| {
            let _ = writeln!(o, "# HELP ddftpd_{name} {help}\n# TYPE ddftpd_{name} {kind}");
        };
        c(&mut o, "sent_bytes_total", "Payload bytes of blocks sent.", "counter");
        let _ = writeln!(o, "ddftpd_sent_bytes_total {}", self.bytes.load(Relaxed));
        c(&mut o, "sent_blocks_total", "Blocks sent.", "counter");
        let _ = writeln!(o, "ddftpd_sent_blocks_total {}", self.blocks.load(Relaxed));
        c(&mut o, "connections_accepted_total", "Connections accepted.", "counter");
        let _ = writeln!(o, "ddftpd_connections_accepted_total {}", self.accepted.load(Relaxed));
        c(&mut o, "connections", "Open connections by state.", "gauge");
        for s in State::ALL {
            let n = self.states[s as usize].load(Relaxed);
            let _ = writeln!(o, "ddftpd_connections{{state=\"{}\"}} {n}", s.label());
        }
        c(&mut o, "refused_total", "Connections refused, by cause.", "counter");
        for r in Refusal::ALL {
            let n = self.refused[r as usize].load(Relaxed);
            let _ = writeln!(o, "ddftpd_refused_total{{cause=\"{}\"}} {n}", r.label());
        }
        c(&mut o, "streams", "Streams running.", "gauge");
        let _ = writeln!(o, "ddftpd_streams {}", self.streams.load(Relaxed));
        c(&mut o, "streams_started_total", "Streams started.", "counter");
        let _ = writeln!(o, "ddftpd_streams_started_total {}", self.streams_started.load(Relaxed));
        c(&mut o, "tls_handshakes_total", "TLS handshakes begun.", "counter");
        let _ = writeln!(o, "ddftpd_tls_handshakes_total {}", self.tls_handshakes.load(Relaxed));
        c(&mut o, "tls_handshake_failures_total", "TLS handshakes that failed.", "counter");
        let _ = writeln!(o, "ddftpd_tls_handshake_failures_total {}", self.tls_failures.load(Relaxed));
        c(&mut o, "token_failures_total", "Wrong or missing token proofs.", "counter");
        let _ = writeln!(o, "ddftpd_token_failures_total {}", self.refused[Refusal::Token as usize].load(Relaxed));
        c(&mut o, "index_lookups_total", "Digest lookups, by where the answer came from.", "counter");
        for (s, label) in
            [(Source::Memory, "memory"), (Source::IndexFile, "index_file"), (Source::Computed, "computed")]
        {
            let n = self.index[s as usize].load(Relaxed);
            let _ = writeln!(o, "ddftpd_index_lookups_total{{source=\"{label}\"}} {n}");
        }
        c(&mut o, "index_lookup_seconds_total", "Time clients waited for digest lookups.", "counter");
        let secs = self.index_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(o, "ddftpd_index_lookup_seconds_total {secs}");
        c(&mut o, "indexed_background_total", "Files indexed in the background.", "counter");
        let _ = writeln!(o, "ddftpd_indexed_background_total {}", self.indexed_background.load(Relaxed));
        c(&mut o, "client_sent_bytes", "Payload bytes sent to the top client addresses.", "gauge");
        for (ip, n) in self.top_clients(TOP_CLIENTS) {
            let _ = writeln!(o, "ddftpd_client_sent_bytes{{client=\"{ip}\"}} {n}");
        }
        o
    }

    /// The `n` client addresses sent the most, largest first.
    pub fn top_clients(&self, n: usize) -> Vec<(IpAddr, u64)> {
        let mut v: Vec<_> = self.per_client.lock().expect("metrics lock").iter().map(|(a, b)| (*a, *b)).collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

/// One connection's place in the `connections` gauge.
#[derive(Debug)]
pub struct ConnState {
    of: Arc<Metrics>,
    now: State,
}

impl ConnState {
    pub fn set(&mut self, to: State) {
        if to != self.now {
            self.of.states[self.now as usize].fetch_sub(1, Relaxed);
            self.of.states[to as usize].fetch_add(1, Relaxed);
            self.now = to;
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        self.of.states[self.now as usize].fetch_sub(1, Relaxed);
    }
}

/// One running stream in the `streams` gauge.
#[derive(Debug)]
pub struct StreamGuard {
    of: Arc<Metrics>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.of.streams.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_give_back_what_they_took() {
        let m = Arc::new(Metrics::default());
        {
            let mut c = m.connection();
            c.set(State::Idle);
            c.set(State::Streaming);
            let _s = m.stream();
            assert!(m.render().contains("ddftpd_connections{state=\"streaming\"} 1\n"));
            assert!(m.render().contains("ddftpd_streams 1\n"));
        }
        let page = m.render();
        for s in State::ALL {
            assert!(page.contains(&format!("ddftpd_connections{{state=\"{}\"}} 0\n", s.label())), "{page}");
        }
        assert!(page.contains("ddftpd_streams 0\n"));
    }

    #[test]
    fn top_talkers_are_the_largest_and_the_table_is_bounded() {
        let m = Metrics::default();
        for i in 0..(CLIENTS_KEPT as u32 + 5) {
            m.sent(Some(IpAddr::from(i.to_be_bytes())), u64::from(i));
        }
        assert!(m.per_client.lock().unwrap().len() <= CLIENTS_KEPT);
        let top = m.top_clients(3);
        assert_eq!(top.len(), 3);
        assert!(top[0].1 >= top[1].1 && top[1].1 >= top[2].1);
        assert_eq!(m.bytes_sent(), (0..(CLIENTS_KEPT as u64 + 5)).sum::<u64>());
    }
}
