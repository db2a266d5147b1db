//! A scripted `ddftpd` that serves any list and any bytes: a hostile
//! mirror for the hardening tests of `archive` (lists, bundles) and `get`
//! (files whose `Stat`, manifest and bytes may each lie). It speaks the protocol
//! through the proto crate's own codec (so it is what a real server says
//! on the wire), on 127.0.0.1, one thread a connection, until dropped.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ddftp_proto::frame::{seal, PROTOCOL_VERSION};
use ddftp_proto::packed::{self, Packer};
use ddftp_proto::{Direction, Reply, Request};

/// What the fake mirror serves.
#[derive(Clone, Default)]
pub struct Script {
    /// The walk's records (list format 2, without the header or NULs), in
    /// batches sent apart, with a pause before each batch after the first.
    pub walk: Vec<Vec<Vec<u8>>>,
    pub pause: Duration,
    /// The bytes of each path's range (a file's data, a symlink's target);
    /// a path not here serves `x` bytes of its listed size.
    pub content: HashMap<Vec<u8>, Vec<u8>>,
    /// What a `Stat` of any path not in `files` answers (size, digest);
    /// none: not found.
    pub stat: Option<(u64, ddftp_proto::FileDigest)>,
    /// Plain files by path, for `get`.
    pub files: HashMap<String, Served>,
    /// A lying receiver of a tree (`archive --peers`): `Start` on any
    /// bundle name sends `stat`'s size of these bytes, sealed (its own
    /// seals, which match what it sends).
    pub any_bundle: Option<u8>,
    /// The newest protocol it speaks, refusing a newer client as servers
    /// before protocol 9 did; none: this build's.
    pub speaks: Option<u16>,
}

/// A plain file as the fake mirror describes and sends it.
#[derive(Clone, Default)]
pub struct Served {
    /// The bytes its `Stat` (size, SHA-256) and manifest describe.
    pub claimed: Vec<u8>,
    /// Its `Stat` gives a SHA-256 of other bytes (the manifest still
    /// describes `claimed`).
    pub digest_lie: bool,
    /// The bytes its blocks carry.
    pub sent: Vec<u8>,
}

impl Served {
    /// What `Stat` answers, and the manifest.
    fn describe(&self) -> (ddftp_proto::FileDigest, Vec<ddftp_proto::manifest::Hash>) {
        use ddftp_proto::manifest as m;
        let chunk_size = m::chunk_size(self.claimed.len() as u64);
        let hashes: Vec<m::Hash> = self.claimed.chunks(chunk_size as usize).map(m::chunk_hash).collect();
        let mut sha256 = m::sha256(&self.claimed);
        if self.digest_lie {
            sha256[0] ^= 1;
        }
        (ddftp_proto::FileDigest { chunk_size, sha256, manifest: m::root(&hashes) }, hashes)
    }
}

impl Script {
    /// One batch of `records` (`T SIZE MODE MTIME ATTRS PATH`), `content` by path.
    pub fn new(records: &[&[u8]], content: &[(&[u8], &[u8])]) -> Script {
        Script {
            walk: vec![records.iter().map(|r| r.to_vec()).collect()],
            pause: Duration::ZERO,
            content: content.iter().map(|(p, c)| (p.to_vec(), c.to_vec())).collect(),
            ..Script::default()
        }
    }
}

/// The fake mirror, listening until dropped.
pub struct FakeMirror {
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl FakeMirror {
    pub fn start(script: Script) -> FakeMirror {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind fake mirror");
        let addr = l.local_addr().unwrap().to_string();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let script = Arc::new(script);
        let bundles: Bundles = Arc::default();
        std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                match l.accept() {
                    Ok((c, _)) => {
                        let (s, b) = (script.clone(), bundles.clone());
                        std::thread::spawn(move || {
                            c.set_nonblocking(false).unwrap();
                            let _ = serve(c, &s, &b);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeMirror { addr, stop }
    }
}

impl Drop for FakeMirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn send(c: &mut TcpStream, r: Reply) -> std::io::Result<()> {
    let mut b = BytesMut::new();
    r.encode(&mut b);
    c.write_all(&b)
}

/// Bundles registered, by number (`b0`, `b1`, ...), for every connection.
type Bundles = Arc<std::sync::Mutex<Vec<Arc<Vec<u8>>>>>;

fn serve(mut c: TcpStream, script: &Script, bundles: &Bundles) -> std::io::Result<()> {
    let mut buf = BytesMut::new();
    let mut def = Vec::new();
    let mut running: Option<(Stream, Arc<Vec<u8>>)> = None;
    loop {
        let req = loop {
            match Request::decode(&mut buf) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(_) => return Ok(()),
            }
            let mut chunk = [0u8; 65536];
            let n = c.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        match req {
            Request::Hello { version } => {
                let speaks = script.speaks.unwrap_or(PROTOCOL_VERSION);
                if version > speaks {
                    let message = format!("protocol version {version} not supported (server speaks {speaks})");
                    return send(&mut c, Reply::Error { code: ddftp_proto::ErrorCode::BadRequest, message });
                }
                let server_id = rand::random();
                send(&mut c, Reply::Hello { version, server_id, max_block_size: 1 << 20 })?;
            }
            Request::Walk { .. } | Request::WalkFiltered { .. } => {
                let mut p = Packer::new();
                for (i, batch) in script.walk.iter().enumerate() {
                    if i > 0 {
                        std::thread::sleep(script.pause);
                    }
                    let mut list = if i == 0 { b"#ddftp-list 2\0".to_vec() } else { vec![] };
                    for r in batch {
                        list.extend_from_slice(r);
                        list.push(0);
                    }
                    p.write(&list);
                    p.flush();
                    send(&mut c, Reply::ListData { data: Bytes::from(p.take()) })?;
                }
                send(&mut c, Reply::ListData { data: Bytes::from(p.finish()) })?;
                send(&mut c, Reply::ListEnd { errors: 0 })?;
            }
            Request::Stat { path, manifest } => match (script.files.get(&path), &script.stat) {
                (Some(f), _) => {
                    let (digest, hashes) = f.describe();
                    let size = f.claimed.len() as u64;
                    send(&mut c, Reply::Stat { size, mtime_secs: 0, mtime_nanos: 0, digest })?;
                    if manifest {
                        send_manifest(&mut c, &hashes, 0, u32::MAX)?;
                    }
                }
                (None, Some((size, digest))) => {
                    send(&mut c, Reply::Stat { size: *size, mtime_secs: 0, mtime_nanos: 0, digest: *digest })?
                }
                (None, None) => send(&mut c, Reply::Error { code: ddftp_proto::ErrorCode::NotFound, message: path })?,
            },
            Request::Manifest { path, first, count } => match script.files.get(&path) {
                Some(f) => send_manifest(&mut c, &f.describe().1, first, count)?,
                None => send(&mut c, Reply::Error { code: ddftp_proto::ErrorCode::NotFound, message: path })?,
            },
            Request::Bundle { data } => def.extend_from_slice(&data),
            Request::BundleEnd => {
                let list = packed::unpack(&std::mem::take(&mut def), 1 << 30).expect("a bundle definition");
                let mut range = vec![];
                for rec in list.split(|&b| b == 0).skip(1).filter(|r| !r.is_empty()) {
                    let fields: Vec<&[u8]> = rec.splitn(6, |&b| b == b' ').collect();
                    let size: usize = std::str::from_utf8(fields[1]).unwrap().parse().unwrap();
                    match script.content.get(fields[5]) {
                        Some(c) => range.extend_from_slice(c),
                        None => range.extend(std::iter::repeat_n(b'x', size)),
                    }
                }
                let name = {
                    let mut all = bundles.lock().unwrap();
                    all.push(Arc::new(range));
                    format!("b{}", all.len() - 1)
                };
                let size = bundles.lock().unwrap().last().unwrap().len() as u64;
                send(&mut c, Reply::Bundle { name, size })?;
            }
            Request::Start { stream, path, block_size, first, last, dir } => {
                if let Some((old, _)) = running.take() {
                    send(&mut c, Reply::Stopped { stream: old.id, sent: old.sent })?;
                }
                let n = path.strip_prefix('b').and_then(|n| n.parse::<usize>().ok());
                let lie = match (script.any_bundle, &script.stat) {
                    (Some(b), Some((size, _))) if path.starts_with("@bundle/") => {
                        Some(Arc::new(vec![b; *size as usize]))
                    }
                    _ => None,
                };
                let file = script.files.get(&path).map(|f| Arc::new(f.sent.clone()));
                let (file, lied) = match lie {
                    Some(l) => (None, Some(l)),
                    None => (file, None),
                };
                let sealed = file.is_none();
                match file.or(lied).or_else(|| n.and_then(|n| bundles.lock().unwrap().get(n).cloned())) {
                    Some(data) => {
                        let bs = block_size as u64;
                        let mut s = Stream { id: stream, bs, next: Some(first), last, dir, sent: 0, sealed };
                        s.pump(&mut c, &data)?;
                        running = Some((s, data));
                    }
                    None => send(&mut c, Reply::Error { code: ddftp_proto::ErrorCode::NotFound, message: path })?,
                }
            }
            Request::Extend { stream, last } => {
                if let Some((s, data)) = running.as_mut().filter(|(s, _)| s.id == stream) {
                    s.last = last;
                    s.pump(&mut c, data)?;
                }
            }
            Request::End { stream } => {
                let sent = running.take().filter(|(s, _)| s.id == stream).map_or(0, |(s, _)| s.sent);
                send(&mut c, Reply::Stopped { stream, sent })?;
            }
            _ => {}
        }
    }
}

/// `Manifest` replies for `hashes` from `first`, at most `count`, in
/// replies of at most the protocol's limit.
fn send_manifest(
    c: &mut TcpStream,
    hashes: &[ddftp_proto::manifest::Hash],
    first: u64,
    count: u32,
) -> std::io::Result<()> {
    let from = (first as usize).min(hashes.len());
    let to = from.saturating_add(count as usize).min(hashes.len());
    let most = ddftp_proto::manifest::MAX_MANIFEST_HASHES as usize;
    for (i, part) in hashes[from..to].chunks(most).enumerate() {
        send(c, Reply::Manifest { first: (from + i * most) as u64, hashes: part.to_vec() })?;
    }
    Ok(())
}

/// The stream being sent: blocks from `next` towards `last`, sealed (a
/// bundle's) or plain (a file's, checked against its manifest).
struct Stream {
    id: u32,
    bs: u64,
    next: Option<u64>,
    last: u64,
    dir: Direction,
    sent: u64,
    sealed: bool,
}

impl Stream {
    fn pump(&mut self, c: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
        while let Some(b) = self.next {
            let ahead = match self.dir {
                Direction::Increment => b <= self.last,
                Direction::Decrement => b >= self.last,
            };
            if !ahead {
                break;
            }
            let from = (b * self.bs).min(data.len() as u64) as usize;
            let to = ((b + 1) * self.bs).min(data.len() as u64) as usize;
            let payload = Bytes::copy_from_slice(&data[from..to]);
            match self.sealed {
                true => send(c, Reply::SealedBlock { stream: self.id, block: b, hash: seal(&payload), payload })?,
                false => send(c, Reply::Block { stream: self.id, block: b, payload })?,
            }
            self.sent += 1;
            self.next = match self.dir {
                Direction::Increment => Some(b + 1),
                Direction::Decrement => b.checked_sub(1),
            };
        }
        Ok(())
    }
}
