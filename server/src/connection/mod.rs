//! One client connection.
//!
//! A reader task decodes requests and hands them over a small channel; this
//! task owns the socket's write half, so blocks, `Stopped` and error replies
//! leave in exactly the order they were decided. Between two blocks it takes
//! any `Extend`/`End` that arrived, so a stream reacts within one block.
//!
//! Each block is its 17-byte header and a `sendfile` of the payload from the
//! page cache ([`crate::socket`]).

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ddftp_proto::auth::{self, NONCE_LEN};
use ddftp_proto::frame::{
    put_block_header, put_sealed_block_header, seal, BLOCK_PREFIX_LEN, HEADER_LEN, MAX_LIST_CHUNK,
    OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, SEALED_PREFIX_LEN,
};
use ddftp_proto::manifest::MAX_MANIFEST_HASHES;
use ddftp_proto::packed;
use ddftp_proto::streams::{Next, Stopped, Streams};
use ddftp_proto::{Direction, ErrorCode, ProtoError, Reply, Request};
use ddnet::tls::{ReadHalf, Stream, WriteHalf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::bundle::{self, Bundle, Unreadable};
use crate::digests::Digests;
use crate::metrics::{ConnState, Refusal, State, StreamGuard};
use crate::root::PathError;
use crate::share::ShareBytes;
use crate::shared::{Phase, Shared};
use crate::socket;

mod bundles;
mod served;
mod start;
mod tell;
mod unsent;
mod waiting;
mod walk;

pub use start::{check_start, BadStart};

use served::Served;

/// Why a connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("protocol: {0}")]
    Proto(#[from] ProtoError),
    #[error("refused: {0}")]
    Refused(String),
    #[error("idle for {0:?}, closed")]
    Idle(Duration),
    #[error("a TLS client on this plaintext listener: start ddftpd with --tls-cert and --tls-key for it, or connect without TLS")]
    TlsOnPlain,
    #[error("TLS: {0}")]
    Tls(String),
    #[error("closed: the server is shutting down")]
    ShuttingDown,
}

/// What a stream reads its blocks from.
#[derive(Clone)]
enum Source {
    File(Arc<File>),
    Bundle(Arc<Bundle>),
    /// A file this receiver is downloading: a block goes once verified.
    Share(Arc<crate::share::Share>),
}

/// What a `Start` being served or waiting its turn reads.
struct Active {
    source: Source,
    size: u64,
    block_size: u32,
    /// Where its path's bytes are counted in [`Conn::served`].
    served: usize,
    /// Its place in the `streams` gauge.
    _counted: StreamGuard,
}

struct Conn {
    shared: Arc<Shared>,
    wr: WriteHalf,
    out: BytesMut,
    /// Where a TLS connection reads a block's pieces before encrypting them.
    copy: Vec<u8>,
    greeted: bool,
    /// The protocol version the client spoke in its `Hello`.
    version: u16,
    /// The nonce of a `Challenge` sent and the token it asks about, until
    /// `Auth` answers it.
    challenge: Option<([u8; NONCE_LEN], Arc<[u8]>)>,
    /// The client's address (failed token proofs are throttled by it).
    peer: Option<std::net::IpAddr>,
    /// Running, draining or closing.
    phase: watch::Receiver<Phase>,
    /// Its place in the `connections` gauge.
    state: ConnState,
    /// Paths streamed and their bytes sent, for the access log.
    served: Served,
    /// One running stream, one `Start` waiting ([`Streams`]' rules).
    streams: Streams<Active>,
    /// Last file opened, so a new `Start` on the same path costs no open.
    open: Option<(String, Arc<File>)>,
    /// What the kernel may hold unsent, by the rate blocks go out at.
    unsent: unsent::UnsentLimit,
    /// A bundle definition being uploaded (`Bundle` pieces until `BundleEnd`).
    upload: Vec<u8>,
    /// Its share of the server's budget for uploads ([`Shared::uploads`]).
    upload_permits: Option<OwnedSemaphorePermit>,
    /// Since when the running stream has waited for a shared block not
    /// verified yet, or last said so (`Waiting`).
    waiting_since: Option<Instant>,
    /// `Tell` was asked: the connection tells what the share's mirrors
    /// fetch, and nothing else (`tell.rs`).
    telling: Option<Arc<crate::share::Share>>,
}

/// Serves one connection until the client leaves or breaks the protocol
/// (or the server closes), then writes its access log line.
pub async fn handle(
    sock: Stream,
    shared: Arc<Shared>,
    addr: SocketAddr,
    subject: Option<String>,
    state: ConnState,
) -> Result<(), ConnError> {
    sock.tcp().set_nodelay(true)?;
    socket::limit_unsent(sock.tcp(), unsent::FLOOR)?;
    let peer = Some(addr.ip());
    let began = std::time::Instant::now();
    let (rd, wr) = sock.into_split();
    let (tx, mut rx) = mpsc::channel(64);
    let reader = tokio::spawn(read_requests(rd, tx));
    let mut c = Conn {
        shared: shared.clone(),
        wr,
        out: BytesMut::new(),
        copy: Vec::new(),
        greeted: false,
        version: PROTOCOL_VERSION,
        challenge: None,
        peer,
        phase: shared.phase.subscribe(),
        state,
        served: Served::default(),
        streams: Streams::default(),
        open: None,
        unsent: unsent::UnsentLimit::new(began),
        upload: Vec::new(),
        upload_permits: None,
        waiting_since: None,
        telling: None,
    };
    let result = match c.run(&mut rx).await {
        // The client went away: an ordinary end, not an error.
        // (Over TLS, one that did not say close_notify: every frame is
        // whole or refused, so nothing can be cut short unnoticed.)
        Err(ConnError::Io(e))
            if matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
            ) =>
        {
            Ok(())
        }
        r => r,
    };
    reader.abort();
    match &result {
        // Best effort: tell the peer why before closing.
        Err(ConnError::Proto(e)) => {
            let _ = c.reply(Reply::Error { code: ErrorCode::BadRequest, message: e.to_string() }).await;
        }
        Err(ConnError::ShuttingDown) => {
            let why = ddftp_proto::busy::message("the server is shutting down", Duration::from_secs(5));
            let _ = c.reply(Reply::Error { code: ErrorCode::Busy, message: why }).await;
        }
        _ => {}
    }
    if c.greeted {
        c.served.log(addr, subject.as_deref(), began.elapsed(), &result);
    }
    result
}

/// Answers a connection that is not welcome with one error and closes it
/// (giving up on a client that does not take it within a second).
pub async fn refuse(mut sock: Stream, code: ErrorCode, message: String) -> io::Result<()> {
    let mut out = BytesMut::new();
    Reply::Error { code, message }.encode(&mut out);
    let send = async {
        sock.write_all(&out).await?;
        sock.flush().await?;
        sock.shutdown().await?;
        // What the client sent is read (and dropped) until it closes:
        // closing with it unread would reset the connection, and the
        // client might lose the reply before reading it.
        let mut junk = [0u8; 4096];
        while sock.read(&mut junk).await? > 0 {}
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(1), send).await.unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

async fn read_requests(mut rd: ReadHalf, tx: mpsc::Sender<Result<Request, ConnError>>) {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let mut first = true;
    loop {
        match Request::decode(&mut buf) {
            Err(_) if first && buf.first() == Some(&ddnet::tls::HANDSHAKE_RECORD) => {
                let _ = tx.send(Err(ConnError::TlsOnPlain)).await;
                return;
            }
            Ok(Some(req)) => {
                first = false;
                if tx.send(Ok(req)).await.is_err() {
                    return;
                }
            }
            Ok(None) => match rd.read_buf(&mut buf).await {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            },
            Err(e) => {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
        }
    }
}

impl Conn {
    async fn run(&mut self, rx: &mut mpsc::Receiver<Result<Request, ConnError>>) -> Result<(), ConnError> {
        loop {
            // Nothing to send: no stream, or one paused at its `last` with no
            // `Start` waiting behind it. Wait for the client, as long as
            // `--idle-timeout` at most: a client that stops (frozen, gone
            // without a word) must not hold its slot, whether it has a
            // stream waiting for a grant or none.
            let phase = *self.phase.borrow_and_update();
            if phase == Phase::Closing {
                return Err(ConnError::ShuttingDown);
            }
            if let Some(share) = self.telling.take() {
                return self.tell(share, rx).await;
            }
            if self.streams.is_idle() {
                if self.greeted {
                    self.state.set(State::Idle);
                }
                // Draining, a connection with nothing to do gives the
                // server back soon (its client may have more to ask).
                let idle = match phase {
                    Phase::Running => self.shared.idle_timeout,
                    _ => DRAINING_IDLE.min(self.shared.idle_timeout),
                };
                let req = tokio::select! {
                    r = tokio::time::timeout(idle, rx.recv()) => r,
                    _ = self.phase.changed() => continue,
                };
                match req {
                    Err(_) if phase != Phase::Running => return Err(ConnError::ShuttingDown),
                    Err(_) => return Err(ConnError::Idle(idle)),
                    Ok(None) => return Ok(()),
                    Ok(Some(req)) => self.on_request(req?).await?,
                }
                continue;
            }
            self.state.set(State::Streaming);
            loop {
                match rx.try_recv() {
                    Ok(req) => self.on_request(req?).await?,
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return Ok(()),
                }
            }
            // Requests just handled may have ended or paused the stream.
            if !self.streams.has_work() {
                continue;
            }
            match self.not_yet_verified() {
                None => {
                    self.waiting_since = None;
                    self.step().await?
                }
                // A shared block not verified yet (waiting.rs).
                Some(grew) => {
                    if self.wait_for_block(grew, rx).await? {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn hello(&self) -> Reply {
        Reply::Hello {
            version: self.version,
            server_id: self.shared.server_id,
            max_block_size: self.shared.max_block_size,
        }
    }

    async fn reply(&mut self, r: Reply) -> io::Result<()> {
        self.out.clear();
        r.encode(&mut self.out);
        socket::write_all_within(&mut self.wr, &self.out, self.shared.idle_timeout).await
    }

    async fn refuse(&mut self, code: ErrorCode, message: String) -> Result<(), ConnError> {
        self.reply(Reply::Error { code, message: message.clone() }).await?;
        Err(ConnError::Refused(message))
    }

    async fn on_request(&mut self, req: Request) -> Result<(), ConnError> {
        if let Some((nonce, token)) = self.challenge.take() {
            let (throttle, now) = (&self.shared.failed_proofs, std::time::Instant::now());
            if let (Some(ip), Request::Auth { .. }) = (self.peer, &req) {
                if let Err(wait) = throttle.check(ip, now) {
                    let why = ddftp_proto::busy::message(&format!("too many wrong tokens from {ip}"), wait);
                    return self.refuse(ErrorCode::Busy, why).await;
                }
            }
            return match req {
                Request::Auth { mac } if auth::verify(&token, &nonce, &mac) => {
                    if let Some(ip) = self.peer {
                        throttle.succeeded(ip);
                    }
                    self.greeted = true;
                    Ok(self.reply(self.hello()).await?)
                }
                Request::Auth { .. } => {
                    if let Some(ip) = self.peer {
                        throttle.failed(ip, now);
                    }
                    self.shared.metrics.refused(Refusal::Token);
                    self.refuse(ErrorCode::Forbidden, "wrong token".into()).await
                }
                _ => {
                    self.shared.metrics.refused(Refusal::Token);
                    self.refuse(ErrorCode::Forbidden, "this server needs a token: answer its challenge".into()).await
                }
            };
        }
        if !self.greeted {
            let Request::Hello { version } = req else {
                return self.refuse(ErrorCode::BadRequest, "the first message must be Hello".into()).await;
            };
            if version < OLDEST_PROTOCOL_VERSION {
                return self
                    .refuse(
                        ErrorCode::BadRequest,
                        format!("protocol version {version} not supported (server speaks {PROTOCOL_VERSION})"),
                    )
                    .await;
            }
            // The conversation's version: the client's (every spoken one
            // is a subset of ours), or ours to a newer client, which
            // speaks ours too (it answers in it, or says it does not).
            self.version = version.min(PROTOCOL_VERSION);
            let token = self.shared.token.read().expect("token lock").clone();
            if let Some(token) = token {
                let nonce: [u8; NONCE_LEN] = rand::random();
                self.challenge = Some((nonce, token));
                return Ok(self.reply(Reply::Challenge { nonce }).await?);
            }
            self.greeted = true;
            return Ok(self.reply(self.hello()).await?);
        }
        if self.shared.shares.is_only()
            && matches!(
                req,
                Request::Walk { .. } | Request::WalkFiltered { .. } | Request::Bundle { .. } | Request::BundleEnd
            )
        {
            let why = "this is a receiver sharing the file it downloads (ddftp get --share): it serves that file only";
            return self.refuse(ErrorCode::Forbidden, why.into()).await;
        }
        match req {
            Request::Hello { .. } => self.refuse(ErrorCode::BadRequest, "Hello sent twice".into()).await,
            Request::Auth { .. } => self.refuse(ErrorCode::BadRequest, "Auth without a Challenge".into()).await,
            Request::Stat { path, manifest } => self.on_stat(path, manifest).await,
            Request::Manifest { path, first, count } => self.on_manifest(path, first, count).await,
            Request::WeakSums { path, first, count } => self.on_weak_sums(path, first, count).await,
            Request::Tell { path } => self.on_tell(path).await,
            Request::Start { stream, path, block_size, first, last, dir } => {
                self.on_start(stream, path, block_size, first, last, dir).await
            }
            Request::Extend { stream, last } => self.on_extend(stream, last).await,
            Request::End { stream } => {
                if let Some(Stopped { stream, sent }) = self.streams.end(stream) {
                    self.reply(Reply::Stopped { stream, sent }).await?;
                }
                Ok(())
            }
            Request::Bundle { data } => self.on_bundle_piece(data).await,
            Request::BundleEnd => self.on_bundle_end().await,
            Request::Seals { path, block_size, first, count } => self.on_seals(path, block_size, first, count).await,
            Request::Walk { path } => self.walk(path, None, Default::default()).await,
            Request::WalkFiltered { path, rules, xattrs, names, merge, one_fs } => {
                let merge = (!merge.is_empty()).then(|| Arc::from(merge.as_bytes()));
                let extra = ddtree::walk::Extra { xattrs, names, merge, one_fs };
                match ddtree::filter::Filter::from_rules(&rules) {
                    Ok(f) if f.is_empty() => self.walk(path, None, extra).await,
                    Ok(f) => self.walk(path, Some(Arc::new(f)), extra).await,
                    Err(e) => {
                        Ok(self.reply(Reply::Error { code: ErrorCode::BadRequest, message: e.to_string() }).await?)
                    }
                }
            }
        }
    }

    /// `Stat`: the file's size, time and digests (its chunk manifest too, if asked).
    async fn on_stat(&mut self, path: String, manifest: bool) -> Result<(), ConnError> {
        let d = match self.digests(&path).await {
            Ok(d) => d,
            Err(e) => return Ok(self.reply(path_error_reply(e)).await?),
        };
        let stat = Reply::Stat {
            size: d.key.size,
            mtime_secs: d.key.mtime_secs,
            mtime_nanos: d.key.mtime_nanos,
            digest: d.digest,
        };
        self.reply(stat).await?;
        if manifest {
            for (i, part) in d.hashes.chunks(MAX_MANIFEST_HASHES as usize).enumerate() {
                let first = (i * MAX_MANIFEST_HASHES as usize) as u64;
                self.reply(Reply::Manifest { first, hashes: part.to_vec() }).await?;
            }
        }
        Ok(())
    }

    /// `Manifest`: a run of the file's chunk hashes.
    async fn on_manifest(&mut self, path: String, first: u64, count: u32) -> Result<(), ConnError> {
        let d = match self.digests(&path).await {
            Ok(d) => d,
            Err(e) => return Ok(self.reply(path_error_reply(e)).await?),
        };
        let Some(run) = chunk_run(d.hashes.len(), first, count) else {
            return self.refuse(ErrorCode::BadRequest, past_end(&path, d.hashes.len(), first)).await;
        };
        Ok(self.reply(Reply::Manifest { first, hashes: d.hashes[run].to_vec() }).await?)
    }

    /// `WeakSums`: the weak checksums beside the manifest (from the same
    /// digests: one read of the file gives both).
    async fn on_weak_sums(&mut self, path: String, first: u64, count: u32) -> Result<(), ConnError> {
        let d = match self.digests(&path).await {
            Ok(d) => d,
            Err(e) => return Ok(self.reply(path_error_reply(e)).await?),
        };
        if d.weak.len() != d.hashes.len() {
            return self.refuse(ErrorCode::BadRequest, format!("{path}: no weak checksums here")).await;
        }
        let Some(run) = chunk_run(d.weak.len(), first, count) else {
            return self.refuse(ErrorCode::BadRequest, past_end(&path, d.weak.len(), first)).await;
        };
        Ok(self.reply(Reply::WeakSums { first, sums: d.weak[run].to_vec() }).await?)
    }

    /// `Start`: a stream of a file's (or bundle's) blocks, checked against what it holds.
    async fn on_start(
        &mut self,
        stream: u32,
        path: String,
        block_size: u32,
        first: u64,
        last: u64,
        dir: Direction,
    ) -> Result<(), ConnError> {
        if block_size > self.shared.max_block_size {
            let max = self.shared.max_block_size;
            return self
                .refuse(ErrorCode::BadRequest, format!("block size {block_size} is over this server's limit {max}"))
                .await;
        }
        let (source, size) = if let Some(share) = self.shared.shares.get(&path) {
            let size = share.size();
            (Source::Share(share), size)
        } else if bundle::is_bundle_name(&path) {
            match self.shared.bundles.get(&path) {
                Some(b) => (Source::Bundle(b.clone()), b.size),
                None => return Ok(self.reply(bundles::unknown(&path)).await?),
            }
        } else {
            match self.open(&path) {
                Ok(f) => {
                    let size = f.metadata()?.len();
                    (Source::File(f), size)
                }
                Err(e) => {
                    self.reply(path_error_reply(e)).await?;
                    return Ok(());
                }
            }
        };
        if let Err(why) = check_start(size, block_size, first, last, dir) {
            return self.refuse(ErrorCode::BadRequest, format!("{path}: {why}")).await;
        }
        let served = self.served.path(&path);
        let a = Active { source, size, block_size, served, _counted: self.shared.metrics.stream() };
        self.shared.metrics.stream_started();
        match self.streams.start(stream, first, last, dir, a) {
            Ok(ended) => {
                if let Some(Stopped { stream, sent }) = ended {
                    self.reply(Reply::Stopped { stream, sent }).await?;
                }
                Ok(())
            }
            Err(full) => self.refuse(ErrorCode::BadRequest, full.to_string()).await,
        }
    }

    /// `Extend`: a running stream may go on to `last` (within the file).
    async fn on_extend(&mut self, stream: u32, last: u64) -> Result<(), ConnError> {
        let mut past = None;
        for s in self.streams.find_mut(stream) {
            let blocks = s.data.size.div_ceil(u64::from(s.data.block_size));
            if last >= blocks {
                past = Some(blocks);
            } else {
                s.cursor.set_last(last);
            }
        }
        match past {
            Some(blocks) => {
                let msg = format!("Extend to block {last}, but the file has {blocks} blocks");
                self.refuse(ErrorCode::BadRequest, msg).await
            }
            None => Ok(()),
        }
    }

    /// The digests of `path` as it is now (computed on first use). A
    /// bundle has none: its blocks come sealed.
    async fn digests(&mut self, path: &str) -> Result<Arc<Digests>, PathError> {
        if let Some(share) = self.shared.shares.get(path) {
            return Ok(share.digests.clone());
        }
        // A receiver's server: not offered yet (asked again), or never
        // (refused: the asker takes it from the mirrors at once).
        if self.shared.shares.is_only() {
            return Err(match self.shared.shares.settled() {
                true => PathError::Forbidden(path.to_string(), NOT_SHARED),
                false => PathError::NotFound(path.to_string()),
            });
        }
        if bundle::is_bundle_name(path) {
            return Err(PathError::Forbidden(path.to_string(), "a bundle has no digests (its blocks come sealed)"));
        }
        let file = self.open(path)?;
        let io = |source| PathError::Io { path: path.to_string(), source };
        let began = std::time::Instant::now();
        let (d, source) = self.shared.index.digests(file).await.map_err(io)?;
        self.shared.metrics.index_lookup(source, began.elapsed());
        Ok(d)
    }

    fn open(&mut self, path: &str) -> Result<Arc<File>, PathError> {
        if self.shared.shares.is_only() {
            return Err(PathError::NotFound(path.to_string()));
        }
        if let Some((p, f)) = &self.open {
            if p == path {
                return Ok(f.clone());
            }
        }
        let f = Arc::new(self.shared.root.open_file(path)?);
        self.open = Some((path.to_string(), f.clone()));
        Ok(f)
    }

    /// Sends the running stream's next block; a stream at its `last` with a
    /// `Start` waiting ends (`Stopped`) and the waiting one takes over.
    async fn step(&mut self) -> Result<(), ConnError> {
        let (stream, block) = match self.streams.step() {
            Next::Block { stream, block } => (stream, block),
            Next::Stopped(Stopped { stream, sent }) => return Ok(self.reply(Reply::Stopped { stream, sent }).await?),
            Next::Wait => return Ok(()),
        };
        let a = &self.streams.running().expect("it just sent a block").data;
        let offset = block * u64::from(a.block_size);
        let len = (a.size - offset).min(u64::from(a.block_size)) as usize;
        let block_size = a.block_size;
        let source = match &a.source {
            Source::Share(share) => match &share.bytes {
                ShareBytes::File(f) => Source::File(f.clone()),
                ShareBytes::Sealed(_) => Source::Share(share.clone()),
            },
            other => other.clone(),
        };
        self.served.sent(a.served, len as u64);
        self.shared.metrics.sent(self.peer, len as u64);
        if let (Some(limit), Some(tcp)) =
            (self.unsent.handle_sent(len as u64, std::time::Instant::now()), self.wr.plain())
        {
            // A limit that cannot be set leaves the one before: no harm.
            let _ = socket::limit_unsent(tcp, limit);
        }
        let read: ReadBlock = match source {
            Source::File(file) => {
                let mut header = [0u8; HEADER_LEN + BLOCK_PREFIX_LEN];
                put_block_header(&mut header, stream, block, len);
                self.shared.limiter.acquire(header.len() + len).await;
                let idle = self.shared.idle_timeout;
                socket::send_block(&mut self.wr, &header, &file, offset, len, idle, &mut self.copy).await?;
                return Ok(());
            }
            Source::Share(share) => Box::new(move |buf| share.read_exact_at(buf, offset).map(|()| vec![])),
            Source::Bundle(b) => Box::new(move |buf| {
                let unreadable = b.read_exact_at(buf, offset)?;
                if unreadable.is_empty() {
                    b.keep_seal(block_size, block, seal(buf));
                }
                Ok(unreadable)
            }),
        };
        // Many small files a block: read them into one buffer off the
        // runtime, and seal it there.
        const AT: usize = HEADER_LEN + SEALED_PREFIX_LEN;
        self.shared.limiter.acquire(AT + len).await;
        let read = tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; AT + len];
            let unreadable = read(&mut buf[AT..])?;
            let hash = seal(&buf[AT..]);
            put_sealed_block_header(&mut buf, stream, block, &hash, len);
            Ok::<_, io::Error>((buf, unreadable))
        })
        .await
        .map_err(io::Error::other)?;
        match read {
            Ok((buf, unreadable)) => {
                // Said before the block: the client skips those entries'
                // bytes in it.
                for u in unreadable {
                    self.reply(Reply::Unreadable { index: u.index, message: u.why }).await?;
                }
                socket::write_all_within(&mut self.wr, &buf, self.shared.idle_timeout).await?
            }
            // An entry that is not what the list says: the client learns
            // why and takes the blocks from other mirrors.
            Err(e) => return self.refuse(ErrorCode::Io, e.to_string()).await,
        }
        Ok(())
    }
}

/// Reads a block into the buffer given, saying which entries of it could
/// not be read (a bundle's).
type ReadBlock = Box<dyn FnOnce(&mut [u8]) -> io::Result<Vec<Unreadable>> + Send>;

/// Why a receiver refuses what it does not share.
/// Chunks `first..first + count` of a manifest of `n`, cut at its end;
/// `None` when `first` is past it (`Manifest` and `WeakSums` alike).
fn chunk_run(n: usize, first: u64, count: u32) -> Option<std::ops::Range<usize>> {
    let n = n as u64;
    (first <= n).then(|| first as usize..first.saturating_add(u64::from(count)).min(n) as usize)
}

fn past_end(path: &str, n: usize, first: u64) -> String {
    format!("{path}: manifest has {n} chunks, asked from chunk {first}")
}

const NOT_SHARED: &str = "this receiver moves another version or list (its copy or DEST differs), or cannot share it";

/// How long a connection with nothing to do stays open once the server
/// is draining.
const DRAINING_IDLE: Duration = Duration::from_secs(1);

fn path_error_reply(e: PathError) -> Reply {
    let code = match &e {
        PathError::Forbidden(..) => ErrorCode::Forbidden,
        PathError::NotFound(..) => ErrorCode::NotFound,
        PathError::NotAFile(..) => ErrorCode::NotAFile,
        PathError::Io { .. } => ErrorCode::Io,
    };
    Reply::Error { code, message: e.to_string() }
}
