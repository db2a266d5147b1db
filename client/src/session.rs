//! A connection to one mirror, up to where blocks stream: connecting
//! (from a local address with `--bind`), the greeting (protocol, token,
//! the server's id and block limit) and what is asked before data moves
//! (`Stat`, the chunk manifest, a walk, a bundle definition). `get` and
//! `archive` reach mirrors only through a [`Session`]; what a mirror says
//! wrong is a [`SessionError`]. A second kind of producer (an HTTP mirror)
//! is a second kind of session: the transfer above it does not change.

use std::io;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ddftp_proto::auth;
use ddftp_proto::frame::{PROTOCOL_VERSION, SERVER_ID_LEN};
use ddftp_proto::{ErrorCode, ProtoError, Reply, Request};
use ddnet::tls::Stream;
use ddops::scheduler::StreamId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::consensus::Version;
use crate::manifest::{Manifest, ManifestMismatch};
pub use crate::route::{Own, Peer, Route, Secure};
use ddftp_proto::manifest::{chunk_count, MAX_MANIFEST_HASHES};
use ddftp_proto::FileDigest;

/// What went wrong with a mirror.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("connect: {0}")]
    Connect(io::Error),
    #[error("connect: timed out")]
    ConnectTimeout,
    /// The TLS handshake failed: a certificate that does not verify, a
    /// peer that does not speak TLS, our certificate refused.
    #[error("{0}")]
    Tls(String),
    #[error("no reply (timed out)")]
    NoReply,
    #[error("no answer to stat (timed out)")]
    StatTimeout,
    #[error(
        "its digest of a {size}-byte file has chunks of {got} bytes; ddftpd cuts such a file into chunks of {want}"
    )]
    ChunkSize { size: u64, got: u32, want: u32 },
    #[error("chunk manifest: timed out")]
    ManifestTimeout,
    #[error("chunk manifest: reply for chunk {first} out of order")]
    ManifestOrder { first: u64 },
    #[error("chunk manifest: {0}")]
    Manifest(#[from] ManifestMismatch),
    #[error("its list: {0}")]
    List(#[from] ddtree::list::ListError),
    #[error("its list stopped")]
    ListStopped,
    #[error("no answer to the bundle definition in {0:?}")]
    DefineTimeout(Duration),
    #[error("it registered the list as {name}, the first mirror as {expected}")]
    BundleName { name: String, expected: String },
    #[error("send: {0}")]
    Send(io::Error),
    #[error("receive: {0}")]
    Receive(io::Error),
    #[error("connection closed by the server")]
    Closed,
    #[error("bad reply: {0}")]
    Protocol(ProtoError),
    #[error("it answered in HTTP, not as a ddftpd: if it is a web server, give it as http://HOST:PORT/DIR/ (DIR holding the file)")]
    SpeaksHttp,
    #[error("this server requires a token: give --token-file")]
    TokenRequired,
    #[error("server speaks protocol {server}, we speak {PROTOCOL_VERSION}")]
    Version { server: u16 },
    #[error("{what} needs a ddftpd of protocol {needs} or later, and this one speaks {server}: update it, or go without {what}")]
    TooOld { what: &'static str, needs: u16, server: u16 },
    /// The mirror said no (busy, not found, forbidden...), and why.
    #[error("{message} ({code:?})")]
    Refused { code: ErrorCode, message: String },
    #[error("unexpected reply {0}")]
    Unexpected(String),
}

impl SessionError {
    /// Whether asking again may work: the mirror was down, cut off, slow
    /// or busy. A wrong answer, a refusal on principle or a certificate is
    /// never retried.
    pub fn is_transient(&self) -> bool {
        match self {
            SessionError::Refused { code, .. } => *code == ErrorCode::Busy,
            SessionError::Connect(_)
            | SessionError::ConnectTimeout
            | SessionError::NoReply
            | SessionError::StatTimeout
            | SessionError::ManifestTimeout
            | SessionError::Send(_)
            | SessionError::Receive(_)
            | SessionError::Closed => true,
            _ => false,
        }
    }

    /// Whether the mirror was never reached, and how ([`crate::reach`]).
    pub fn unreached(&self) -> Option<crate::reach::Unreached> {
        match self {
            SessionError::Connect(e) => crate::reach::unreached(e),
            _ => None,
        }
    }

    /// How long the mirror asked us to wait (a busy one says).
    pub fn wait_hint(&self) -> Option<Duration> {
        match self {
            SessionError::Refused { code: ErrorCode::Busy, message } => ddftp_proto::busy::wait(message),
            _ => None,
        }
    }
}

/// How long to wait for a mirror to accept and answer the handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a mirror may take to answer `Stat`: one that has not indexed
/// the file reads it whole first (`ddftpd index` avoids the wait).
pub(crate) const STAT_TIMEOUT: Duration = Duration::from_secs(600);

/// A greeted connection to one mirror (a producer), the round trip its
/// greeting took and what the greeting said. Blocks then stream on `sock`.
pub(crate) struct Session {
    pub sock: Stream,
    pub rtt: Duration,
    /// The server's identity from its greeting: one server reached under
    /// two names has one.
    pub server_id: [u8; SERVER_ID_LEN],
    /// The largest block the server serves.
    pub max_block_size: u32,
    /// The protocol version the server answered in.
    pub version: u16,
    /// The file's modification time on this mirror (seconds, nanoseconds),
    /// from its `Stat`.
    pub mtime: Option<(i64, u32)>,
}

/// What a probe learns: the mirror's version of the file and, when asked
/// for, its chunk manifest.
pub(crate) type Probed = (Session, Option<Version>, Option<Manifest>);

/// Connects and greets a producer; with `stat` (path, and whether the chunk
/// manifest should follow), asks for that file's size and digests in the
/// same round trip (both requests go out together).
/// With a `token`, answers the server's challenge before anything else.
pub(crate) async fn connect(
    route: &Route,
    stat: Option<(&str, bool)>,
    token: Option<&[u8]>,
) -> Result<Probed, SessionError> {
    connect_within(route, stat, token, CONNECT_TIMEOUT).await
}

/// [`connect`], with `within` to accept the connection and greet.
pub(crate) async fn connect_within(
    route: &Route,
    stat: Option<(&str, bool)>,
    token: Option<&[u8]>,
    within: Duration,
) -> Result<Probed, SessionError> {
    match greet(route, stat, token, within, PROTOCOL_VERSION).await {
        // A server from before protocol 9 refuses a newer client (later
        // ones answer in their own): greeted again in the version it names.
        Err(SessionError::Refused { code: ErrorCode::BadRequest, message }) => match older_spoken(&message) {
            Some(version) => greet(route, stat, token, within, version).await,
            None => Err(SessionError::Refused { code: ErrorCode::BadRequest, message }),
        },
        r => r,
    }
}

/// The version an older server's refusal of this client's `Hello` says it
/// speaks ("protocol version 9 not supported (server speaks 8)"), if this
/// client speaks it too.
fn older_spoken(message: &str) -> Option<u16> {
    let rest = message.strip_prefix(&format!("protocol version {PROTOCOL_VERSION} not supported (server speaks "))?;
    let v: u16 = rest.strip_suffix(')')?.parse().ok()?;
    (v < PROTOCOL_VERSION && ddftp_proto::frame::spoken(v)).then_some(v)
}

/// Connects and greets in protocol `version` ([`connect_within`]).
async fn greet(
    route: &Route,
    stat: Option<(&str, bool)>,
    token: Option<&[u8]>,
    within: Duration,
    version: u16,
) -> Result<Probed, SessionError> {
    // A mirror's own token wins over the one every mirror is given.
    let token = route.own.as_ref().map(|o| &*o.token).or(token);
    let fut = async {
        let sock = open_socket(route).await.map_err(SessionError::Connect)?;
        sock.set_nodelay(true).map_err(SessionError::Connect)?;
        match &route.tls {
            None => Ok::<_, SessionError>(Stream::Plain(sock)),
            Some(Secure(tls)) => Stream::connect(tls, &route.endpoint.host, sock)
                .await
                .map_err(|e| SessionError::Tls(ddnet::tls::explain(&e))),
        }
    };
    let mut sock = tokio::time::timeout(within, fut).await.map_err(|_| SessionError::ConnectTimeout)??;
    let stat_req = |out: &mut BytesMut| {
        if let Some((path, manifest)) = stat {
            Request::Stat { path: path.to_string(), manifest }.encode(out);
        }
    };
    let exchange = async {
        // Without a token, Stat rides with Hello: one round trip.
        let mut out = BytesMut::new();
        Request::Hello { version }.encode(&mut out);
        if token.is_none() {
            stat_req(&mut out);
        }
        send(&mut sock, &out).await?;
        let sent = Instant::now();
        let mut buf = BytesMut::with_capacity(256);
        let mut reply = read_reply(&mut sock, &mut buf).await?;
        let rtt = sent.elapsed();
        if let Some(token) = token {
            out.clear();
            if let Reply::Challenge { nonce } = reply {
                Request::Auth { mac: auth::respond(token, &nonce) }.encode(&mut out);
                stat_req(&mut out);
                send(&mut sock, &out).await?;
                reply = read_reply(&mut sock, &mut buf).await?;
            } else {
                stat_req(&mut out);
                send(&mut sock, &out).await?;
            }
        } else if let Reply::Challenge { .. } = reply {
            return Err(SessionError::TokenRequired);
        }
        let hello = match reply {
            Reply::Hello { version, server_id, max_block_size } if ddftp_proto::frame::spoken(version) => {
                (server_id, max_block_size, version)
            }
            Reply::Hello { version, .. } => return Err(SessionError::Version { server: version }),
            other => return Err(unexpected(other)),
        };
        Ok((buf, rtt, hello))
    };
    let (mut buf, rtt, (server_id, max_block_size, version)) =
        tokio::time::timeout(within, exchange).await.map_err(|_| SessionError::NoReply)??;
    let mut session = Session { sock, rtt, server_id, max_block_size, version, mtime: None };
    let Some((_, with_manifest)) = stat else {
        return Ok((session, None, None));
    };
    let (version, manifest) = session.read_stat(&mut buf, with_manifest).await?;
    Ok((session, Some(version), manifest))
}

/// What a handed-back connection still owes before its next reply: the
/// `Stopped` of each stream ended as it was handed back (blocks of those
/// streams may come first), and what was read past the last frame.
#[derive(Default)]
pub(crate) struct Leftover {
    pub streams: Vec<StreamId>,
    pub buf: BytesMut,
}

/// A TCP connection along `route`: from its local address if it has one
/// (to a mirror address of the same family).
async fn open_socket(route: &Route) -> io::Result<TcpStream> {
    let ep = &route.endpoint;
    let Some(local) = route.local else {
        return crate::reach::connect(&ep.host, ep.port).await;
    };
    let remote = crate::reach::resolve(&ep.host, ep.port)
        .await?
        .into_iter()
        .find(|a| a.is_ipv4() == local.is_ipv4())
        .ok_or_else(|| io::Error::other(format!("{ep} has no address of the same family as {local}")))?;
    ddnet::sys::connect_from(Some(local), remote).await
}

/// Writes all of `out` and flushes it (TLS holds its last record until then).
pub(crate) async fn send(sock: &mut (impl AsyncWrite + Unpin), out: &[u8]) -> Result<(), SessionError> {
    sock.write_all(out).await.map_err(|e| tls_or(e, SessionError::Send))?;
    sock.flush().await.map_err(|e| tls_or(e, SessionError::Send))
}

/// An i/o error that is TLS's (in TLS 1.3 a server refuses a client's
/// certificate after the client's side of the handshake is done, so it
/// shows on the first read) as [`SessionError::Tls`], else as `other`.
fn tls_or(e: io::Error, other: fn(io::Error) -> SessionError) -> SessionError {
    match e.get_ref().is_some_and(|i| i.is::<ddnet::tls::rustls::Error>()) {
        true => SessionError::Tls(ddnet::tls::explain(&e)),
        false => other(e),
    }
}

/// The next reply on `sock` (`buf` holds what was read past the last one).
pub(crate) async fn read_reply(sock: &mut (impl AsyncRead + Unpin), buf: &mut BytesMut) -> Result<Reply, SessionError> {
    loop {
        let decoded = Reply::decode(buf).map_err(|e| match looks_like_http(buf) {
            true => SessionError::SpeaksHttp,
            false => SessionError::Protocol(e),
        });
        if let Some(r) = decoded? {
            return Ok(r);
        }
        if sock.read_buf(buf).await.map_err(|e| tls_or(e, SessionError::Receive))? == 0 {
            return Err(SessionError::Closed);
        }
    }
}

/// Whether what a "ddftpd" sent is an HTTP server's reply (a status line,
/// or an HTML page sent without one).
fn looks_like_http(b: &[u8]) -> bool {
    b.starts_with(b"HTTP/") || b.starts_with(b"<")
}

/// A reply that is not the one asked for: the mirror's refusal, or a
/// confused mirror.
pub(crate) fn unexpected(r: Reply) -> SessionError {
    match r {
        Reply::Error { code, message } => SessionError::Refused { code, message },
        other => SessionError::Unexpected(format!("{other:?}")),
    }
}

/// A `Stat`'s digest, if its chunk size is the one every ddftpd uses for
/// that size (a chunk size of 0, or of 1 byte over a terabyte, would be a
/// division by zero or a manifest of that many hashes).
fn checked_digest(size: u64, digest: FileDigest) -> Result<FileDigest, SessionError> {
    let want = ddftp_proto::manifest::chunk_size(size);
    match digest.chunk_size == want {
        true => Ok(digest),
        false => Err(SessionError::ChunkSize { size, got: digest.chunk_size, want }),
    }
}

/// Asks for the whole manifest of `path` on a greeted connection (every
/// range request at once: one round trip) and checks it against `digest`.
pub(crate) async fn fetch_manifest(
    sock: &mut Stream,
    path: &str,
    size: u64,
    digest: &FileDigest,
) -> Result<Manifest, SessionError> {
    let mut out = BytesMut::new();
    for (first, count) in runs(chunk_count(size, digest.chunk_size)) {
        Request::Manifest { path: path.to_string(), first, count }.encode(&mut out);
    }
    send(sock, &out).await?;
    read_manifest(sock, &mut BytesMut::with_capacity(64 * 1024), size, digest).await
}

/// The (first, count) runs that ask for `n` chunks' hashes or sums, each
/// at most [`MAX_MANIFEST_HASHES`].
fn runs(n: u64) -> impl Iterator<Item = (u64, u32)> {
    let most = u64::from(MAX_MANIFEST_HASHES);
    (0..n.div_ceil(most)).map(move |k| (k * most, (n - k * most).min(most) as u32))
}

/// Asks for the weak checksums of all `chunks` chunks of `path` (every
/// range request at once) on a greeted connection. They are hints only
/// (a chunk is taken on its strong hash), so nothing ties them to a digest.
pub(crate) async fn fetch_weak_sums(sock: &mut Stream, path: &str, chunks: u64) -> Result<Vec<u32>, SessionError> {
    let mut out = BytesMut::new();
    for (first, count) in runs(chunks) {
        Request::WeakSums { path: path.to_string(), first, count }.encode(&mut out);
    }
    send(sock, &out).await?;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut sums = Vec::with_capacity(chunks as usize);
    while (sums.len() as u64) < chunks {
        match read_reply(sock, &mut buf).await? {
            Reply::WeakSums { first, sums: part }
                if first == sums.len() as u64 && !part.is_empty() && (sums.len() + part.len()) as u64 <= chunks =>
            {
                sums.extend_from_slice(&part)
            }
            Reply::WeakSums { first, .. } => return Err(SessionError::ManifestOrder { first }),
            other => return Err(unexpected(other)),
        }
    }
    Ok(sums)
}

/// Reads the `Manifest` replies of a whole manifest (asked for by `fetch`,
/// or by a `Stat` with `manifest`) and checks them against `digest`.
pub(crate) async fn read_manifest(
    sock: &mut Stream,
    buf: &mut BytesMut,
    size: u64,
    digest: &FileDigest,
) -> Result<Manifest, SessionError> {
    let n = chunk_count(size, digest.chunk_size);
    let mut hashes = Vec::with_capacity(n as usize);
    while (hashes.len() as u64) < n {
        match read_reply(sock, buf).await? {
            Reply::Manifest { first, hashes: part } if first == hashes.len() as u64 && !part.is_empty() => {
                hashes.extend_from_slice(&part)
            }
            Reply::Manifest { first, .. } => return Err(SessionError::ManifestOrder { first }),
            other => return Err(unexpected(other)),
        }
    }
    Ok(Manifest::checked(hashes, size, digest)?)
}

/// What a walk could not read: (path, why).
pub(crate) type WalkErrors = Vec<(String, String)>;

/// Entries a walk hands over at a time.
const WALK_BATCH: usize = 4096;

/// How long a mirror may take to read and seal a run of blocks.
const SEALS_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a mirror may take to register a bundle definition.
const DEFINE_TIMEOUT: Duration = Duration::from_secs(600);

impl Session {
    /// The `Stat` reply (and, `with_manifest`, the chunk manifest behind
    /// it) to a `Stat` sent; sets [`Session::mtime`].
    async fn read_stat(
        &mut self,
        buf: &mut BytesMut,
        with_manifest: bool,
    ) -> Result<(Version, Option<Manifest>), SessionError> {
        let version = match tokio::time::timeout(STAT_TIMEOUT, read_reply(&mut self.sock, buf)).await {
            Err(_) => return Err(SessionError::StatTimeout),
            Ok(Ok(Reply::Stat { size, digest, mtime_secs, mtime_nanos })) => {
                self.mtime = Some((mtime_secs, mtime_nanos));
                Version { size, digest: checked_digest(size, digest)? }
            }
            Ok(Ok(other)) => return Err(unexpected(other)),
            Ok(Err(e)) => return Err(e),
        };
        if !with_manifest {
            return Ok((version, None));
        }
        let read = read_manifest(&mut self.sock, buf, version.size, &version.digest);
        let manifest = tokio::time::timeout(STAT_TIMEOUT, read).await.map_err(|_| SessionError::ManifestTimeout)??;
        Ok((version, Some(manifest)))
    }

    /// Asks a connection a finished download handed back for `path`'s
    /// `Stat` (and manifest), first reading past what `left` says it still
    /// owes: the blocks and the `Stopped` of the streams that were ended
    /// as it was handed back (the `Stat` goes out at once: the mirror
    /// answers it after those). Anything else there is an error.
    pub(crate) async fn restat(
        &mut self,
        left: Leftover,
        path: &str,
        with_manifest: bool,
        within: Duration,
    ) -> Result<(Version, Option<Manifest>), SessionError> {
        let Leftover { mut streams, mut buf } = left;
        let mut out = BytesMut::new();
        Request::Stat { path: path.to_string(), manifest: with_manifest }.encode(&mut out);
        send(&mut self.sock, &out).await?;
        let past = async {
            while !streams.is_empty() {
                match read_reply(&mut self.sock, &mut buf).await? {
                    Reply::Block { stream, .. } | Reply::SealedBlock { stream, .. } | Reply::Waiting { stream }
                        if streams.contains(&stream) => {}
                    Reply::Unreadable { .. } => {}
                    Reply::Stopped { stream, .. } if streams.contains(&stream) => streams.retain(|s| *s != stream),
                    other => return Err(unexpected(other)),
                }
            }
            Ok(())
        };
        tokio::time::timeout(within, past).await.map_err(|_| SessionError::NoReply)??;
        self.read_stat(&mut buf, with_manifest).await
    }

    /// Connects along `route` and greets (no `Stat`).
    pub(crate) async fn open(route: &Route, token: Option<&[u8]>) -> Result<Session, SessionError> {
        Ok(connect(route, None, token).await?.0)
    }

    /// Asks the mirror to walk `src` (as `ask` says), handing its entries to `out` a batch
    /// at a time as the walk goes (the list is unpacked and read on a
    /// thread); `began` is set once some of the list has come. What the
    /// walk could not read comes back (the list holds the rest).
    pub(crate) async fn walk(
        &mut self,
        src: &str,
        ask: &WalkAsk,
        out: tokio::sync::mpsc::Sender<Vec<ddtree::list::Entry>>,
        began: &mut bool,
    ) -> Result<WalkErrors, SessionError> {
        use ddftp_proto::frame::{MAX_CONTROL_BODY, MAX_WALK_RULES};
        use ddftp_proto::packed::{self, MAX_LIST};
        let mut req = BytesMut::new();
        // The mirror leaves out what the rules exclude as it walks (never
        // reading an excluded directory); rules too many for one request
        // are applied here only (the client filters the list either way).
        let WalkAsk { rules, xattrs, names, merge, one_fs } = ask;
        // An older server refuses -x's flag as unknown: said plainly here.
        if *one_fs > 1 && self.version < ddftp_proto::frame::MERGE_NAMES_VERSION {
            return Err(SessionError::TooOld {
                what: "-xx",
                needs: ddftp_proto::frame::MERGE_NAMES_VERSION,
                server: self.version,
            });
        }
        if *one_fs > 0 && self.version < ddftp_proto::frame::WAITING_VERSION {
            return Err(SessionError::TooOld {
                what: "-x",
                needs: ddftp_proto::frame::WAITING_VERSION,
                server: self.version,
            });
        }
        let several = ddftp_proto::frame::MERGE_NAMES_VERSION;
        if merge.contains('/') && self.version < several {
            return Err(SessionError::TooOld {
                what: "several dir-merge rules (-F with -C)",
                needs: several,
                server: self.version,
            });
        }
        let size = rules.iter().map(|(_, p)| 3 + p.len()).sum::<usize>() + 7 + src.len() + merge.len();
        let fits = rules.len() <= MAX_WALK_RULES && size <= MAX_CONTROL_BODY;
        let rules = if fits { rules.clone() } else { vec![] };
        match rules.is_empty() && !xattrs && !names && merge.is_empty() && *one_fs == 0 {
            false => {
                let (path, xattrs, names, merge, one_fs) = (src.to_string(), *xattrs, *names, merge.clone(), *one_fs);
                Request::WalkFiltered { path, rules, xattrs, names, merge, one_fs }.encode(&mut req)
            }
            true => Request::Walk { path: src.to_string() }.encode(&mut req),
        }
        send(&mut self.sock, &req).await?;
        let (feed, unpacked) = packed::unpacker(MAX_LIST);
        let reader = tokio::task::spawn_blocking(move || {
            let name = std::path::Path::new("the mirror's list");
            ddtree::list::ddftp::read_batches(unpacked, name, WALK_BATCH, |b| out.blocking_send(b).is_ok())
        });
        let mut buf = BytesMut::new();
        let mut told = vec![];
        let errors = loop {
            match read_reply(&mut self.sock, &mut buf).await {
                Ok(Reply::WalkError { path, message }) => told.push((path, message)),
                Ok(Reply::ListData { data }) => {
                    *began = true;
                    if !feed.piece(data.to_vec()) {
                        break None;
                    }
                }
                Ok(Reply::ListEnd { errors }) => break Some(Ok(errors)),
                Ok(other) => break Some(Err(unexpected(other))),
                Err(e) => break Some(Err(e)),
            }
        };
        drop(feed);
        let read = reader.await.map_err(|e| SessionError::Receive(io::Error::other(e)))?;
        match errors {
            Some(Ok(errors)) => {
                read?;
                if errors > told.len() as u64 {
                    let more = errors - told.len() as u64;
                    told.push((src.to_string(), format!("and {more} more entries below it could not be read")));
                }
                Ok(told)
            }
            Some(Err(e)) => Err(e),
            // The list could not be read (the reader says why).
            None => read.map_err(SessionError::from).and(Err(SessionError::ListStopped)),
        }
    }

    /// Registers a bundle (`def`: its packed list) and returns its name.
    /// The mirror's size and digests of `path` (its SHA-256 computed on
    /// first use, then cached by the mirror).
    pub(crate) async fn stat(&mut self, path: &str) -> Result<(u64, FileDigest), SessionError> {
        let mut out = BytesMut::new();
        Request::Stat { path: path.to_string(), manifest: false }.encode(&mut out);
        send(&mut self.sock, &out).await?;
        let mut buf = BytesMut::new();
        match read_reply(&mut self.sock, &mut buf).await? {
            Reply::Stat { size, digest, .. } => Ok((size, checked_digest(size, digest)?)),
            other => Err(unexpected(other)),
        }
    }

    /// The seals of blocks `first..first + count` of bundle `path` cut into
    /// `block_size`-byte blocks, as this mirror reads them.
    pub(crate) async fn seals(
        &mut self,
        path: &str,
        block_size: u32,
        first: u64,
        count: u32,
    ) -> Result<Vec<ddftp_proto::manifest::Hash>, SessionError> {
        let mut out = BytesMut::new();
        Request::Seals { path: path.to_string(), block_size, first, count }.encode(&mut out);
        send(&mut self.sock, &out).await?;
        let mut buf = BytesMut::new();
        match tokio::time::timeout(SEALS_TIMEOUT, read_reply(&mut self.sock, &mut buf)).await {
            Ok(Ok(Reply::Manifest { first: f, hashes })) if f == first && hashes.len() == count as usize => Ok(hashes),
            Ok(Ok(Reply::Manifest { first, .. })) => Err(SessionError::ManifestOrder { first }),
            Ok(Ok(other)) => Err(unexpected(other)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SessionError::NoReply),
        }
    }

    pub(crate) async fn define_bundle(&mut self, def: &[u8]) -> Result<String, SessionError> {
        use ddftp_proto::frame::MAX_BUNDLE_CHUNK;
        let mut out = BytesMut::with_capacity(def.len() + def.len() / MAX_BUNDLE_CHUNK * 8 + 64);
        for piece in def.chunks(MAX_BUNDLE_CHUNK) {
            Request::Bundle { data: bytes::Bytes::copy_from_slice(piece) }.encode(&mut out);
        }
        Request::BundleEnd.encode(&mut out);
        // A refusal may come while the definition is still going out: its
        // reply is read either way.
        let sent = send(&mut self.sock, &out).await;
        let mut buf = BytesMut::new();
        match tokio::time::timeout(DEFINE_TIMEOUT, read_reply(&mut self.sock, &mut buf)).await {
            Ok(Ok(Reply::Bundle { name, .. })) => Ok(name),
            Ok(Ok(other)) => Err(unexpected(other)),
            Ok(Err(e)) => Err(sent.err().unwrap_or(e)),
            Err(_) => Err(SessionError::DefineTimeout(DEFINE_TIMEOUT)),
        }
    }
}

/// What a walk asks the mirror for beyond the entries.
#[derive(Debug, Clone, Default)]
pub struct WalkAsk {
    /// Filter rules the mirror applies as it walks (`(include, pattern)`).
    pub rules: Vec<(bool, String)>,
    /// List each entry's extended attributes.
    pub xattrs: bool,
    /// List the names of each entry's owner and group.
    pub names: bool,
    /// rsync's `dir-merge NAME`: list the content of each file NAME (its
    /// directory's filter rules); empty for none.
    pub merge: String,
    /// rsync's `-x`: directories on another file system than SRC's are
    /// listed, not entered.
    pub one_fs: u8,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_server_s_refusal_names_a_version_greeted_again_in_only_if_spoken() {
        let says = |v: u16| format!("protocol version {PROTOCOL_VERSION} not supported (server speaks {v})");
        assert_eq!(older_spoken(&says(8)), Some(8));
        assert_eq!(older_spoken(&says(7)), Some(7));
        for v in [6, PROTOCOL_VERSION, PROTOCOL_VERSION + 1] {
            assert_eq!(older_spoken(&says(v)), None, "{v}");
        }
        assert_eq!(older_spoken("protocol version 9 not supported"), None);
        assert_eq!(older_spoken(&format!("{} trailing", says(8))), None);
    }

    proptest::proptest! {
        // Whatever a server says, the client greets again at most in a
        // version it speaks, older than its own.
        #[test]
        fn any_refusal_names_at_most_an_older_spoken_version(tail in ".{0,12}", v in proptest::num::u16::ANY) {
            let prefix = format!("protocol version {PROTOCOL_VERSION} not supported (server speaks ");
            for m in [format!("{prefix}{tail}"), format!("{prefix}{v})"), tail.clone()] {
                if let Some(v) = older_spoken(&m) {
                    proptest::prop_assert!(v < PROTOCOL_VERSION && ddftp_proto::frame::spoken(v));
                }
            }
        }
    }

    #[test]
    fn runs_ask_for_every_chunk_once_in_capped_pieces() {
        let most = u64::from(MAX_MANIFEST_HASHES);
        for n in [0, 1, most - 1, most, most + 1, 3 * most + 7] {
            let r: Vec<(u64, u32)> = runs(n).collect();
            assert!(r.iter().all(|&(_, c)| c >= 1 && u64::from(c) <= most));
            let mut next = 0;
            for &(first, count) in &r {
                assert_eq!(first, next);
                next += u64::from(count);
            }
            assert_eq!(next, n);
        }
    }
}
