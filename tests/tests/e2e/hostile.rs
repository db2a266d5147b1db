//! A server facing bad clients: it answers with an error or closes the
//! connection, never crashes, and keeps serving everyone else.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use crate::util::*;
use bytes::BytesMut;
use ddftp_proto::frame::{seal, MAX_BUNDLE_CHUNK, PROTOCOL_VERSION};
use ddftp_proto::packed;
use ddftp_proto::{Direction, ErrorCode, Reply, Request};

/// A raw protocol client.
pub(crate) struct Raw {
    sock: TcpStream,
    buf: BytesMut,
    /// A reply read ahead ([`Raw::with_first`]), given next.
    ahead: Option<Reply>,
}

impl Raw {
    pub(crate) fn connect(addr: &str) -> Raw {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { sock, buf: BytesMut::new(), ahead: None }
    }

    fn greeted(addr: &str) -> Raw {
        Raw::greeted_in(addr, PROTOCOL_VERSION)
    }

    /// Connected and greeted, speaking protocol `version`.
    pub(crate) fn greeted_in(addr: &str, version: u16) -> Raw {
        let mut r = Raw::connect(addr);
        r.send(&[Request::Hello { version }]);
        assert!(matches!(r.reply(), Some(Reply::Hello { .. })));
        r
    }

    pub(crate) fn send(&mut self, reqs: &[Request]) {
        let mut out = BytesMut::new();
        for r in reqs {
            r.encode(&mut out);
        }
        // A server that refused us may have closed already; the replies
        // (or their absence) are what the tests check.
        let _ = self.sock.write_all(&out);
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let _ = self.sock.write_all(bytes);
    }

    /// The next reply, or `None` once the server has closed the connection
    /// (or sent nothing for 10 s).
    pub(crate) fn reply(&mut self) -> Option<Reply> {
        if let Some(r) = self.ahead.take() {
            return Some(r);
        }
        loop {
            if let Some(r) = Reply::decode(&mut self.buf).expect("server sends valid frames") {
                return Some(r);
            }
            let mut chunk = [0u8; 65536];
            match self.sock.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// This client with `first` as its next reply (one read ahead).
    pub(crate) fn with_first(mut self, first: Option<Reply>) -> Raw {
        self.ahead = first;
        self
    }

    /// The next reply within `d`, or `None`.
    pub(crate) fn reply_within(&mut self, d: Duration) -> Option<Reply> {
        self.sock.set_read_timeout(Some(d)).unwrap();
        let r = self.reply();
        self.sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        r
    }

    /// Reads until the server closes; returns the error replies seen.
    fn errors_until_closed(&mut self) -> Vec<ErrorCode> {
        let mut errs = vec![];
        while let Some(r) = self.reply() {
            if let Reply::Error { code, .. } = r {
                errs.push(code);
            }
        }
        errs
    }
}

fn start_download(f: &Fixture, m: &Mirror) -> std::process::Child {
    let o = f.out("good");
    std::process::Command::new(bin("ddftp"))
        .args(["get", "big", "--mirrors", &m.addr, "-o", o.to_str().unwrap(), "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn bad_clients_are_refused_while_a_good_download_completes() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big"), 6 * 1024 * 1024, 20);
    random_file(&f.root().join("small"), 1000, 21);
    let m = Mirror::start(&f.root(), &["--rate-limit", "6MB", "--idle-timeout", "1"]);
    let good = start_download(&f, &m);

    // Garbage instead of a frame.
    let mut r = Raw::connect(&m.addr);
    r.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest]);

    // A huge length: refused before anything is buffered.
    let mut r = Raw::greeted(&m.addr);
    r.send_raw(&[0x02, 0xff, 0xff, 0xff, 0xf0]);
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest]);

    // Requests before Hello.
    let mut r = Raw::connect(&m.addr);
    r.send(&[Request::Stat { path: "small".into(), manifest: false }]);
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest]);

    // Blocks out of range, and the largest u64 ("negative" as i64).
    for (first, last, dir) in
        [(2, 2, Direction::Increment), (0, u64::MAX, Direction::Increment), (u64::MAX, 0, Direction::Decrement)]
    {
        let mut r = Raw::greeted(&m.addr);
        r.send(&[Request::Start { stream: 1, path: "small".into(), block_size: 512, first, last, dir }]);
        assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest], "{first}..{last}");
    }

    // An Extend past the end of the file.
    let mut r = Raw::greeted(&m.addr);
    r.send(&[
        Request::Start {
            stream: 1,
            path: "big".into(),
            block_size: 4096,
            first: 0,
            last: 0,
            dir: Direction::Increment,
        },
        Request::Extend { stream: 1, last: 1 << 40 },
    ]);
    let errs = r.errors_until_closed();
    assert_eq!(errs, vec![ErrorCode::BadRequest]);

    // A block size over the server's limit.
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Start {
        stream: 1,
        path: "big".into(),
        block_size: 32 << 20,
        first: 0,
        last: 0,
        dir: Direction::Increment,
    }]);
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest]);

    // Nothing at all: closed after the idle timeout.
    let t = Instant::now();
    let mut r = Raw::connect(&m.addr);
    assert!(r.reply().is_none());
    assert!(t.elapsed() >= Duration::from_millis(900) && t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());

    let out = good.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(f.out("good")).unwrap() == data);
    // The server is still alive and serving.
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Stat { path: "small".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Stat { size: 1000, .. })));
}

#[test]
fn paths_outside_the_root_are_refused() {
    let f = Fixture::new();
    random_file(&f.dir.path().join("secret"), 100, 22);
    random_file(&f.root().join("inside"), 100, 23);
    std::os::unix::fs::symlink(f.dir.path().join("secret"), f.root().join("escape")).unwrap();
    std::os::unix::fs::symlink(f.root().join("inside"), f.root().join("alias")).unwrap();
    let strict = Mirror::start(&f.root(), &[]);
    let follow = Mirror::start(&f.root(), &["--follow-symlinks"]);
    for path in ["../secret", "/etc/passwd", "inside/../../secret", "inside\0", "escape", "alias"] {
        let mut r = Raw::greeted(&strict.addr);
        r.send(&[Request::Stat { path: path.into(), manifest: false }]);
        match r.reply() {
            Some(Reply::Error { code: ErrorCode::Forbidden, .. }) => {}
            other => panic!("{path:?}: {other:?}"),
        }
    }
    let mut r = Raw::greeted(&follow.addr);
    r.send(&[
        Request::Stat { path: "alias".into(), manifest: false },
        Request::Stat { path: "escape".into(), manifest: false },
    ]);
    assert!(matches!(r.reply(), Some(Reply::Stat { size: 100, .. })), "a symlink inside the root is followed");
    assert!(matches!(r.reply(), Some(Reply::Error { code: ErrorCode::Forbidden, .. })), "one leaving it is not");
    // A FIFO is not a file: refused at once, not waited on (a blocking open
    // would hold a server thread until some writer came).
    assert!(std::process::Command::new("mkfifo").arg(f.root().join("pipe")).status().unwrap().success());
    let mut r = Raw::greeted(&strict.addr);
    r.send(&[Request::Stat { path: "pipe".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Error { code: ErrorCode::NotAFile, .. })), "a FIFO");
}

#[test]
fn only_allowed_networks_may_connect() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 100_000, 24);
    let closed = Mirror::start(&f.root(), &["--allow", "10.0.0.0/8", "--allow", "::1/128"]);
    let open = Mirror::start(&f.root(), &["--allow", "127.0.0.0/8"]);
    let o = f.out("f");
    let res = ddftp(&["get", "f", "--mirrors", &closed.addr, "-o", o.to_str().unwrap()], 1);
    assert!(String::from_utf8_lossy(&res.stderr).contains("not allowed"), "{}", String::from_utf8_lossy(&res.stderr));
    assert!(!o.exists());
    ddftp(&["get", "f", "--mirrors", &open.addr, "-o", o.to_str().unwrap(), "-q"], 0);
    assert!(std::fs::read(&o).unwrap() == data);
}

#[test]
fn token_is_proved_not_sent() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 300_000, 25);
    let good = f.dir.path().join("token");
    let bad = f.dir.path().join("wrong");
    std::fs::write(&good, "s3cret-token\n").unwrap();
    std::fs::write(&bad, "not-it\n").unwrap();
    let m = Mirror::start(&f.root(), &["--token-file", good.to_str().unwrap()]);
    let o = f.out("f");
    ddftp(
        &["get", "f", "--mirrors", &m.addr, "-o", o.to_str().unwrap(), "-q", "--token-file", good.to_str().unwrap()],
        0,
    );
    assert!(std::fs::read(&o).unwrap() == data);
    let o2 = f.out("g");
    let res = ddftp(
        &["get", "f", "--mirrors", &m.addr, "-o", o2.to_str().unwrap(), "--token-file", bad.to_str().unwrap()],
        1,
    );
    assert!(String::from_utf8_lossy(&res.stderr).contains("wrong token"), "{}", String::from_utf8_lossy(&res.stderr));
    let res = ddftp(&["get", "f", "--mirrors", &m.addr, "-o", o2.to_str().unwrap()], 1);
    assert!(String::from_utf8_lossy(&res.stderr).contains("requires a token"));
    assert!(!o2.exists());
    // Skipping the challenge gets nothing.
    let mut r = Raw::connect(&m.addr);
    r.send(&[Request::Hello { version: PROTOCOL_VERSION }, Request::Stat { path: "f".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Challenge { .. })));
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::Forbidden]);
}

/// A stream paused at its `last` waits for its client's next grant
/// within `--idle-timeout` and resumes; past it, the client is taken as
/// gone (frozen, say) and the connection closed like any idle one, so it
/// holds no slot (Hardening II, item 8).
#[test]
fn a_paused_stream_resumes_within_the_idle_timeout_and_is_closed_after_it() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 4096, 26);
    let m = Mirror::start(&f.root(), &["--idle-timeout", "2"]);
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Start {
        stream: 9,
        path: "f".into(),
        block_size: 1024,
        first: 0,
        last: 0,
        dir: Direction::Increment,
    }]);
    assert!(matches!(r.reply(), Some(Reply::Block { stream: 9, block: 0, .. })));
    std::thread::sleep(Duration::from_millis(1000));
    r.send(&[Request::Extend { stream: 9, last: 1 }]);
    assert!(matches!(r.reply(), Some(Reply::Block { stream: 9, block: 1, .. })));
    r.send(&[Request::End { stream: 9 }]);
    assert!(matches!(r.reply(), Some(Reply::Stopped { stream: 9, sent: 2 })));
    // End racing a running stream stops it at once, and the server lives on.
    r.send(&[
        Request::Start { stream: 10, path: "f".into(), block_size: 1024, first: 3, last: 0, dir: Direction::Decrement },
        Request::End { stream: 10 },
    ]);
    match r.reply() {
        Some(Reply::Stopped { stream: 10, .. }) => {}
        Some(Reply::Block { stream: 10, .. }) => loop {
            match r.reply() {
                Some(Reply::Block { stream: 10, .. }) => {}
                Some(Reply::Stopped { stream: 10, .. }) => break,
                other => panic!("{other:?}"),
            }
        },
        other => panic!("{other:?}"),
    }
    r.send(&[Request::Stat { path: "f".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Stat { size: 4096, .. })));
    // Paused again, and the client says nothing past the timeout: closed.
    r.send(&[Request::Start {
        stream: 11,
        path: "f".into(),
        block_size: 1024,
        first: 0,
        last: 0,
        dir: Direction::Increment,
    }]);
    assert!(matches!(r.reply(), Some(Reply::Block { stream: 11, block: 0, .. })));
    let t = Instant::now();
    r.errors_until_closed();
    assert!(t.elapsed() < Duration::from_secs(8), "a paused stream held its connection for {:?}", t.elapsed());
    // And the server serves the next client.
    let mut again = Raw::greeted(&m.addr);
    again.send(&[Request::Stat { path: "f".into(), manifest: false }]);
    assert!(matches!(again.reply(), Some(Reply::Stat { size: 4096, .. })));
}

/// A producer reassigned twice in a row: two `Start`s arrive together
/// behind a stream paused at its `last`. The paused one ends and both new
/// ones are served in order (the server used to refuse the second: a race
/// that failed real downloads near their end).
#[test]
fn two_starts_behind_a_paused_stream_are_both_served() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 8192, 27);
    let m = Mirror::start(&f.root(), &[]);
    let mut r = Raw::greeted(&m.addr);
    let start = |stream, first, last| Request::Start {
        stream,
        path: "f".into(),
        block_size: 1024,
        first,
        last,
        dir: Direction::Increment,
    };
    r.send(&[start(1, 0, 0)]);
    assert!(matches!(r.reply(), Some(Reply::Block { stream: 1, block: 0, .. })));
    r.send(&[start(2, 1, 2), start(3, 3, 3)]);
    let mut got = vec![];
    while got.len() < 5 {
        match r.reply() {
            Some(Reply::Stopped { stream, sent }) => got.push(format!("stopped {stream} {sent}")),
            Some(Reply::Block { stream, block, .. }) => got.push(format!("block {stream} {block}")),
            other => panic!("after {got:?}: {other:?}"),
        }
    }
    assert_eq!(got, ["stopped 1 1", "block 2 1", "block 2 2", "stopped 2 2", "block 3 3"]);
}

/// Random request sequences over real connections: the server may refuse
/// and close, but it never panics and keeps answering new clients.
#[test]
fn random_request_sequences_never_break_the_server() {
    use rand::{Rng, SeedableRng};
    let f = Fixture::new();
    // Large enough that a stream is still sending when the next request lands.
    const SIZE: u64 = 4 << 20;
    random_file(&f.root().join("f"), SIZE as usize, 27);
    let log = f.dir.path().join("ddftpd.log");
    let m = Mirror::logged(&f.root(), &["--idle-timeout", "2"], &log);
    let mut rng = rand::rngs::StdRng::seed_from_u64(28);
    let num = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..6) {
        0..=2 => rng.gen_range(0..SIZE / 512),
        3 => u64::MAX - rng.gen_range(0..3),
        4 => 1 << rng.gen_range(0..64),
        _ => rng.gen(),
    };
    for _ in 0..150 {
        let mut r = Raw::greeted(&m.addr);
        r.sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        for _ in 0..rng.gen_range(1..10) {
            let stream = rng.gen_range(0..3);
            let dir = if rng.gen() { Direction::Increment } else { Direction::Decrement };
            let req = match rng.gen_range(0..10) {
                0..=3 => Request::Start {
                    stream,
                    path: if rng.gen_range(0..8) == 0 { "nope".into() } else { "f".into() },
                    block_size: [512, 1024, 4096][rng.gen_range(0..3)],
                    first: num(&mut rng),
                    last: num(&mut rng),
                    dir,
                },
                4..=6 => Request::Extend { stream, last: num(&mut rng) },
                7 | 8 => Request::End { stream },
                _ => Request::Stat { path: "f".into(), manifest: false },
            };
            if rng.gen_range(0..30) == 0 {
                r.send_raw(&[rng.gen(), rng.gen(), 0, 0, rng.gen()]);
            }
            let racing_end = matches!(req, Request::Start { .. }) && rng.gen_range(0..3) == 0;
            r.send(&[req]);
            if racing_end {
                r.send(&[Request::End { stream }]);
            }
        }
        // Read whatever comes until the server goes quiet or closes.
        while r.reply().is_some() {}
    }
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Stat { path: "f".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Stat { size: SIZE, .. })));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("panicked"), "the server panicked:\n{text}");
}

#[test]
fn bundles_and_walks_stay_inside_the_root() {
    let f = Fixture::new();
    random_file(&f.dir.path().join("secret"), 100, 24);
    std::fs::create_dir(f.root().join("d")).unwrap();
    random_file(&f.root().join("d/ok"), 100, 25);
    std::os::unix::fs::symlink(f.dir.path(), f.root().join("outside-dir")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let bundle = |entries: &[u8]| {
        let mut r = Raw::greeted(&m.addr);
        let def = packed::pack(&[b"#ddftp-list 1\0".as_slice(), entries].concat());
        r.send(&[Request::Bundle { data: def.into() }, Request::BundleEnd]);
        r.reply()
    };
    // Paths that could leave the root, or reach the index: refused at once.
    for (entry, why) in [
        (&b"f 100 644 0.000000000 ../secret\0"[..], "'..'"),
        (b"f 100 644 0.000000000 /etc/passwd\0", "absolute"),
        (b"f 100 644 0.000000000 .ddftpd-index/x\0", "index"),
        (b"f 100 644 nonsense\0", "record 1"),
    ] {
        match bundle(entry) {
            Some(Reply::Error { message, .. }) => assert!(message.contains(why), "{entry:?}: {message}"),
            other => panic!("{entry:?}: {other:?}"),
        }
    }
    // Entries are checked as they are read: through a symlinked directory,
    // or not what the list says, the bundle is registered but no block
    // (`Start`) is served. A bundle has no digests (`Stat`) at all.
    let served = |entries: &[u8], request: Request| {
        let Some(Reply::Bundle { name, .. }) = bundle(entries) else { panic!("{entries:?} not registered") };
        let mut r = Raw::greeted(&m.addr);
        r.send(&[match request {
            Request::Stat { manifest, .. } => Request::Stat { path: name, manifest },
            Request::Start { stream, block_size, first, last, dir, .. } => {
                Request::Start { stream, path: name, block_size, first, last, dir }
            }
            other => other,
        }]);
        r.reply()
    };
    let stat = Request::Stat { path: String::new(), manifest: true };
    let start = Request::Start {
        stream: 1,
        path: String::new(),
        block_size: 512,
        first: 0,
        last: 0,
        dir: Direction::Increment,
    };
    // A FIFO where the list says a file: refused, not waited on.
    assert!(std::process::Command::new("mkfifo").arg(f.root().join("d/pipe")).status().unwrap().success());
    let ok = std::fs::metadata(f.root().join("d/ok")).unwrap();
    let listed = |size: u64, sec: i64, nsec: i64| format!("f {size} 644 {sec}.{nsec:09} d/ok\0").into_bytes();
    let (sec, nsec) = (ok.mtime(), ok.mtime_nsec());
    for (entry, why) in [
        (b"f 100 644 0.000000000 outside-dir/secret\0".to_vec(), "symlink"),
        (listed(999, sec, nsec), "999 bytes"),
        (listed(100, sec - 1, nsec), "listed with mtime"),
        (listed(100, sec, (nsec + 1) % 1_000_000_000), "listed with mtime"),
        (b"f 4 644 0.000000000 d/pipe\0".to_vec(), "Fifo"),
    ] {
        for (request, why) in [(stat.clone(), "no digests"), (start.clone(), why)] {
            match served(&entry, request) {
                Some(Reply::Error { message, .. }) => assert!(message.contains(why), "{entry:?}: {message}"),
                other => panic!("{entry:?}: {other:?}"),
            }
        }
    }
    // What the list says: served, each block sealed with its bytes' hash.
    match served(&listed(100, sec, nsec), start.clone()) {
        Some(Reply::SealedBlock { stream: 1, block: 0, hash, payload }) => {
            assert_eq!(&payload[..], &std::fs::read(f.root().join("d/ok")).unwrap()[..]);
            assert_eq!(hash, seal(&payload));
        }
        other => panic!("d/ok as listed: {other:?}"),
    }
    // A directory swapped for a symlink after the bundle was registered.
    let Some(Reply::Bundle { name, .. }) = bundle(b"f 100 644 0.000000000 d/ok\0") else { panic!("d/ok") };
    std::fs::rename(f.root().join("d"), f.root().join("d.real")).unwrap();
    std::os::unix::fs::symlink(f.root().join("d.real"), f.root().join("d")).unwrap();
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Start { stream: 1, path: name, block_size: 512, first: 0, last: 0, dir: Direction::Increment }]);
    match r.reply() {
        Some(Reply::Error { message, .. }) => assert!(message.contains("symlink"), "{message}"),
        other => panic!("a swapped-in symlink was followed: {other:?}"),
    }
    std::fs::remove_file(f.root().join("d")).unwrap();
    std::fs::rename(f.root().join("d.real"), f.root().join("d")).unwrap();
    assert!(matches!(bundle(b"f 100 644 0.000000000 d/ok\0"), Some(Reply::Bundle { size: 100, .. })));
    // A definition that is not packed, or unpacks past the limit: refused.
    for def in
        [b"#ddftp-list 1\0f 100 644 0.000000000 d/ok\0".to_vec(), packed::pack(&vec![b'x'; packed::MAX_LIST + 1])]
    {
        let mut r = Raw::greeted(&m.addr);
        let mut pieces: Vec<Request> =
            def.chunks(MAX_BUNDLE_CHUNK).map(|p| Request::Bundle { data: p.to_vec().into() }).collect();
        pieces.push(Request::BundleEnd);
        r.send(&pieces);
        match r.reply() {
            Some(Reply::Error { message, .. }) => assert!(message.contains("packed list"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
    for path in ["..", "/", "outside-dir", "d/ok"] {
        let mut r = Raw::greeted(&m.addr);
        r.send(&[Request::Walk { path: path.into() }]);
        assert!(matches!(r.reply(), Some(Reply::Error { .. })), "Walk {path:?} must be refused");
    }
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::Walk { path: ".".into() }]);
    let mut list = Vec::new();
    loop {
        match r.reply() {
            Some(Reply::ListData { data }) => list.extend_from_slice(&data),
            Some(Reply::ListEnd { errors: 0 }) => break,
            other => panic!("walk: {other:?}"),
        }
    }
    let list = packed::unpack(&list, packed::MAX_LIST).unwrap();
    let text = String::from_utf8_lossy(&list);
    assert!(text.contains(" ./d/ok\0") && text.contains(" ./outside-dir\0"), "{text:?}");
    assert!(!text.contains("secret") && !text.contains(".ddftpd-index"), "{text:?}");
}

/// Hardening II, item 10: guesses at a token are throttled per address.
/// Twenty wrong proofs as fast as the connections go: only the first few
/// are checked (each puts the address in a penalty twice as long as the
/// last); the others are told to wait, unchecked. The right token still
/// works once the penalty has passed.
#[test]
fn wrong_token_proofs_are_throttled_per_address() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 1000, 26);
    let good = f.dir.path().join("token");
    std::fs::write(&good, "a-long-random-token-0123456789\n").unwrap();
    let m = Mirror::start(&f.root(), &["--token-file", good.to_str().unwrap()]);
    let (mut checked, mut held) = (0, 0);
    let started = Instant::now();
    for _ in 0..20 {
        let mut r = Raw::connect(&m.addr);
        r.send(&[Request::Hello { version: PROTOCOL_VERSION }]);
        let Some(Reply::Challenge { .. }) = r.reply() else { panic!("no challenge") };
        r.send(&[Request::Auth { mac: [7; ddftp_proto::auth::MAC_LEN] }]);
        match r.reply() {
            Some(Reply::Error { message, .. }) if message.contains("too many wrong tokens") => held += 1,
            Some(Reply::Error { message, .. }) if message.contains("wrong token") => checked += 1,
            other => panic!("{other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(checked <= 6 && held >= 14, "{checked} proofs checked, {held} held back");
    std::thread::sleep(Duration::from_secs(2));
    let o = f.out("f");
    let args =
        ["get", "f", "--mirrors", &m.addr, "-o", o.to_str().unwrap(), "-q", "--token-file", good.to_str().unwrap()];
    // The penalty may still run a little: asked again until it has.
    let t = Instant::now();
    while std::process::Command::new(bin("ddftp")).args(args).status().unwrap().code() != Some(0) {
        assert!(t.elapsed() < Duration::from_secs(60), "the right token never got through");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A client of protocol 7 (before `WeakSums`) is answered in 7 and served;
/// one older than 7 is refused, a newer one answered in this server's; a file's weak checksums come one
/// per chunk of its manifest, its seals one per block.
#[test]
fn an_older_client_is_served_in_its_version_and_weak_sums_come_per_chunk() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 1 << 20, 27);
    let m = Mirror::start(&f.root(), &[]);
    let mut r = Raw::connect(&m.addr);
    r.send(&[Request::Hello { version: 7 }, Request::Stat { path: "f".into(), manifest: false }]);
    assert!(matches!(r.reply(), Some(Reply::Hello { version: 7, .. })));
    assert!(matches!(r.reply(), Some(Reply::Stat { size, .. }) if size == 1 << 20));
    let mut r = Raw::connect(&m.addr);
    r.send(&[Request::Hello { version: 6 }]);
    assert_eq!(r.errors_until_closed(), vec![ErrorCode::BadRequest]);
    // A newer client is answered in this server's version (it speaks it too).
    let mut r = Raw::connect(&m.addr);
    r.send(&[Request::Hello { version: PROTOCOL_VERSION + 1 }]);
    assert!(matches!(r.reply(), Some(Reply::Hello { version: PROTOCOL_VERSION, .. })));
    let mut r = Raw::greeted(&m.addr);
    r.send(&[Request::WeakSums { path: "f".into(), first: 0, count: 4096 }]);
    let chunk = ddftp_proto::manifest::chunk_size(data.len() as u64) as usize;
    let want: Vec<u32> = data.chunks(chunk).map(ddftp_proto::rolling::weak).collect();
    match r.reply() {
        Some(Reply::WeakSums { first: 0, sums }) => assert_eq!(sums, want),
        other => panic!("{other:?}"),
    }
    // A file's seals (pieces of changed chunks): its blocks' BLAKE3; none
    // past its end, none of a file outside the root.
    r.send(&[Request::Seals { path: "f".into(), block_size: 4096, first: 3, count: 5 }]);
    let want: Vec<[u8; 32]> = data.chunks(4096).skip(3).take(5).map(ddftp_proto::frame::seal).collect();
    match r.reply() {
        Some(Reply::Manifest { first: 3, hashes }) => assert_eq!(hashes, want),
        other => panic!("{other:?}"),
    }
    r.send(&[Request::Seals { path: "f".into(), block_size: 4096, first: 256, count: 1 }]);
    assert!(matches!(r.reply(), Some(Reply::Error { code: ErrorCode::BadRequest, .. })));
    // A path out of the root is a malformed request: the connection ends.
    for path in ["../f", "/etc/passwd"] {
        let mut r = Raw::greeted(&m.addr);
        r.send(&[Request::Seals { path: path.into(), block_size: 4096, first: 0, count: 1 }]);
        let got = r.reply();
        assert!(matches!(got, None | Some(Reply::Error { .. })), "{path}: {got:?}");
    }
}
