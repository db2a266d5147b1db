//! One file onto several receivers (`get --peers ... --share-listen`):
//! every receiver serves what it has verified to the others, so the
//! mirrors send the file about once; a lying peer is dropped and a killed
//! one does not stop the rest. Real ddftpd mirrors (rate-limited, so that
//! the mirrors' uplinks are what is scarce, as on a cluster), real
//! receivers, each its own process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::fake_mirror::{FakeMirror, Script, Served};
use crate::util::*;

pub(crate) const SIZE: usize = 24 << 20;

/// Free loopback addresses for the receivers' servers, below the kernel's
/// ephemeral ports: a port the kernel picked is free again once its test
/// listener closes, and another receiver's outgoing connection could take
/// it before the receiver it was meant for listens on it.
pub(crate) fn free_addrs(n: usize) -> Vec<String> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let below: u16 = range.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(32768);
    let (lo, span) = (10_000u16, below.saturating_sub(10_000).max(1));
    let mut at = lo + (rand::random::<u16>() % span);
    let mut ls = vec![];
    for _ in 0..u32::from(span) {
        if ls.len() == n {
            break;
        }
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", at)) {
            ls.push(l);
        }
        at = if at + 1 >= lo + span { lo } else { at + 1 };
    }
    assert_eq!(ls.len(), n, "free ports below {below}");
    ls.iter().map(|l| l.local_addr().unwrap().to_string()).collect()
}

/// A receiver: `ddftp get big.bin` into `out`, serving on `listen`.
pub(crate) fn receiver(mirrors: &str, out: &Path, peers: &[String], listen: &str) -> Child {
    sharing(&["get", "big.bin", "-m", mirrors, "-o", out.to_str().unwrap()], peers, listen)
}

/// A receiver running `ddftp ARGS` among `peers`, serving on `listen`.
pub(crate) fn sharing(args: &[&str], peers: &[String], listen: &str) -> Child {
    Command::new(bin("ddftp"))
        .args(args)
        .args(["--peers", &peers.join(","), "--share-listen", listen, "--json", "-q", "--retries", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a receiver")
}

/// Waits for a receiver: its exit code, JSON report and stderr.
pub(crate) fn finish(c: Child) -> (Option<i32>, serde_json::Value, String) {
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, err)
}

/// Bytes a receiver took from its peers and from the mirrors.
fn from_peers_and_mirrors(v: &serde_json::Value) -> (u64, u64) {
    let mut got = (0, 0);
    for p in v["producers"].as_array().expect("producers in the report") {
        let b = p["bytes"].as_u64().unwrap();
        match p["mirror"].as_str().unwrap().starts_with("peer ") {
            true => got.0 += b,
            false => got.1 += b,
        }
    }
    got
}

/// Waits for receivers `c0, c1, ...` in `outs`: each exits 0 with an
/// exact copy of `data`, all of it from the mirrors and its peers, more
/// than a third from the peers.
pub(crate) fn each_exact_and_shared(kids: Vec<Child>, outs: &Path, data: &[u8]) {
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(outs.join(format!("c{i}"))).unwrap() == data, "receiver {i}'s copy differs");
        let (peers_bytes, mirror_bytes) = from_peers_and_mirrors(&v);
        let size = data.len() as u64;
        assert_eq!(peers_bytes + mirror_bytes, size, "receiver {i}: {v}");
        assert!(peers_bytes > size / 3, "receiver {i} took {peers_bytes} bytes from its peers: {v}");
    }
}

pub(crate) struct Setup {
    _f: Fixture,
    pub(crate) data: Vec<u8>,
    mirrors: Vec<Mirror>,
    pub(crate) outs: PathBuf,
}

pub(crate) fn setup() -> Setup {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), SIZE, 54);
    let extra = ["--rate-limit", "12MB", "--metrics", "127.0.0.1:0"];
    let mirrors = vec![Mirror::start(&f.root(), &extra), Mirror::start(&f.root(), &extra)];
    let outs = f.dir.path().join("outs");
    std::fs::create_dir(&outs).unwrap();
    Setup { _f: f, data, mirrors, outs }
}

impl Setup {
    pub(crate) fn mirrors(&self) -> String {
        mirrors_arg(&self.mirrors.iter().collect::<Vec<_>>())
    }

    /// Bytes the mirrors sent, all of them together.
    pub(crate) fn uploaded(&self) -> f64 {
        self.mirrors.iter().map(|m| metric(&scrape(m.metrics.as_ref().unwrap()), "ddftpd_sent_bytes_total")).sum()
    }
}

#[test]
fn three_receivers_get_exact_copies_and_the_mirrors_send_the_file_about_once() {
    let s = setup();
    let peers = free_addrs(3);
    let began = Instant::now();
    let kids: Vec<Child> =
        (0..3).map(|i| receiver(&s.mirrors(), &s.outs.join(format!("c{i}")), &peers, &peers[i])).collect();
    each_exact_and_shared(kids, &s.outs, &s.data);
    let copies = s.uploaded() / SIZE as f64;
    assert!(copies < 1.2, "the mirrors sent {copies:.2} copies of the file");
    // One copy at the mirrors' 24 MB/s is about a second; three apart
    // would be three.
    assert!(began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
}

/// Receivers beyond `ddops::fan::FLAT`: each share goes down a tree.
const MANY: usize = 66;
const SMALL: usize = 8 << 20;

/// Runs [`MANY`] receivers of an 8 MiB file from two mirrors (`extra`
/// their flags), killing receiver `kill` once it has part of the file;
/// checks every other copy and returns the mirrors' upload in copies and
/// how many receivers fetched from them.
fn many_receivers(extra: &[&str], kill: Option<usize>) -> (f64, usize) {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), SMALL, 66);
    // Every receiver is on 127.0.0.1: the mirrors take them all.
    let extra = [extra, &["--metrics", "127.0.0.1:0", "--max-per-client", "1000"]].concat();
    let mirrors = [Mirror::start(&f.root(), &extra), Mirror::start(&f.root(), &extra)];
    let outs = f.dir.path().join("outs");
    std::fs::create_dir(&outs).unwrap();
    let peers = free_addrs(MANY);
    let m = mirrors_arg(&mirrors.iter().collect::<Vec<_>>());
    let mut kids: Vec<Option<Child>> = (0..MANY)
        .map(|i| {
            let out = outs.join(format!("c{i}"));
            let args = ["get", "big.bin", "-m", &m, "-o", out.to_str().unwrap(), "--block-size", "16KiB"];
            Some(sharing(&args, &peers, &peers[i]))
        })
        .collect();
    if let Some(k) = kill {
        let part = outs.join(format!("c{k}.ddftp-part"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&part).map_or(0, |m| m.len()) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut dead = kids[k].take().unwrap();
        dead.kill().unwrap();
        dead.wait().unwrap();
    }
    let mut roots = 0;
    for (i, k) in kids.into_iter().enumerate().filter_map(|(i, k)| Some((i, k?))) {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(outs.join(format!("c{i}"))).unwrap() == data, "receiver {i}'s copy differs");
        let (from_peers, from_mirrors) = from_peers_and_mirrors(&v);
        assert_eq!(from_peers + from_mirrors, SMALL as u64, "receiver {i}: {v}");
        roots += usize::from(from_mirrors > 0);
        let producers = v["producers"].as_array().unwrap();
        let read_from = producers.iter().filter(|p| p["mirror"].as_str().unwrap().starts_with("peer ")).count();
        assert!(read_from <= 2 * 32, "receiver {i} read from {read_from} peer connections: {v}");
    }
    let sent: f64 =
        mirrors.iter().map(|m| metric(&scrape(m.metrics.as_ref().unwrap()), "ddftpd_sent_bytes_total")).sum();
    (sent / SMALL as f64, roots)
}

#[test]
fn beyond_64_receivers_each_share_goes_down_a_tree_and_every_copy_is_exact() {
    // 32 shares, each fetched from the mirrors by one receiver and passed
    // on down a tree (ddops::fan): no receiver reads from more than 32
    // others, and the mirrors send about one copy.
    let (copies, roots) = many_receivers(&[], None);
    assert_eq!(roots, 32, "receivers that fetched from the mirrors");
    assert!(copies < 1.2, "the mirrors sent {copies:.2} copies of the file");
}

#[test]
fn in_trees_a_receiver_killed_mid_way_does_not_stop_the_others() {
    // Receiver 40 passes share 8 (2/66 of the file) on to 32 others (half
    // of them): they take it from their mirrors instead, about one copy
    // more in all.
    let (copies, _) = many_receivers(&["--rate-limit", "2MB"], Some(40));
    // About 2. A parent slow to get its first blocks (the whole suite's
    // load on 2 cores) says it waits, so its children do not drop it and
    // fetch its share from the mirrors as well.
    assert!(copies < 3.0, "the mirrors sent {copies:.2} copies of the file");
}

/// A peer serving `data`'s digests with corrupt bytes (one in 4096
/// flipped), second in a list of three with two free addresses.
fn between_a_liar(data: &[u8]) -> (FakeMirror, Vec<String>) {
    let mut sent = data.to_vec();
    for b in sent.iter_mut().step_by(4096) {
        *b ^= 0x5a;
    }
    let liar = FakeMirror::start(Script {
        files: [("big.bin".to_string(), Served { claimed: data.to_vec(), digest_lie: false, sent })].into(),
        ..Script::default()
    });
    let mut peers = free_addrs(2);
    peers.insert(1, liar.addr.clone());
    (liar, peers)
}

#[test]
fn a_peer_that_sends_corrupt_blocks_is_dropped_and_every_copy_is_exact() {
    let s = setup();
    let (liar, peers) = between_a_liar(&s.data);
    let kids: Vec<Child> =
        [0, 2].iter().map(|&i| receiver(&s.mirrors(), &s.outs.join(format!("c{i}")), &peers, &peers[i])).collect();
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(s.outs.join(format!("c{}", [0, 2][i]))).unwrap() == s.data, "copy {i} differs");
        let said = v["warnings"].to_string();
        assert!(said.contains(&format!("dropping peer {}", liar.addr)) && said.contains("verif"), "{said}");
    }
}

#[test]
fn a_receiver_killed_mid_way_does_not_stop_the_others() {
    let s = setup();
    let peers = free_addrs(3);
    let mut kids: Vec<Option<Child>> =
        (0..3).map(|i| Some(receiver(&s.mirrors(), &s.outs.join(format!("c{i}")), &peers, &peers[i]))).collect();
    // Once receiver 1 has some of the file, it dies.
    let part = s.outs.join("c1.ddftp-part");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&part).map_or(0, |m| m.len()) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut dead = kids[1].take().unwrap();
    dead.kill().unwrap();
    dead.wait().unwrap();
    for i in [0, 2] {
        let (code, _, err) = finish(kids[i].take().unwrap());
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(s.outs.join(format!("c{i}"))).unwrap() == s.data, "receiver {i}'s copy differs");
    }
}

#[test]
fn a_receiver_not_in_its_own_peers_list_is_told_so() {
    let s = setup();
    let peers = free_addrs(3);
    let out = ddftp(
        &[
            "get",
            "big.bin",
            "-m",
            &s.mirrors(),
            "-o",
            s.outs.join("x").to_str().unwrap(),
            "--peers",
            &peers[..2].join(","),
        ]
        .iter()
        .copied()
        .chain(["--share-listen", &peers[2]])
        .collect::<Vec<_>>(),
        2,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--peers must list this receiver too"), "{err}");
}

#[test]
fn mpirun_share_puts_an_exact_copy_on_every_rank_and_rank_0_reports_them_all() {
    use crate::mpi::{have_mpirun, mpi_ddftp};
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let s = setup();
    // Every rank on this one machine: each writes its own copy.
    let get = format!(
        "exec {} get big.bin -m {} -o {}/c$OMPI_COMM_WORLD_RANK --share --json -q --retries 0",
        exe.display(),
        s.mirrors(),
        s.outs.display()
    );
    let v = mpirun_sharing(3, &get);
    for i in 0..3 {
        assert!(std::fs::read(s.outs.join(format!("c{i}"))).unwrap() == s.data, "rank {i}'s copy differs");
    }
    for r in v["receivers"].as_array().unwrap() {
        assert!(r["from_peers"].as_u64().unwrap() > SIZE as u64 / 3, "{v}");
        let moved = r["from_peers"].as_u64().unwrap() + r["from_mirrors"].as_u64().unwrap();
        assert_eq!(moved, SIZE as u64, "{v}");
    }
    let copies = s.uploaded() / SIZE as f64;
    assert!(copies < 1.2, "the mirrors sent {copies:.2} copies of the file");
    let said = v["mirror_copies"].as_f64().unwrap();
    assert!((said - copies).abs() < 0.1, "rank 0 says {said:.2} copies, the mirrors sent {copies:.2}");
}

/// Runs `sh -c CMD` on `n` ranks (each a receiver), checks that they all
/// succeed and that rank 0 alone reports, and returns its report (every
/// rank in it, each with exit code 0).
pub(crate) fn mpirun_sharing(n: usize, cmd: &str) -> serde_json::Value {
    let out = Command::new("mpirun")
        .args(["-n", &n.to_string(), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "sh", "-c", cmd])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mpirun: {:?}\n{stdout}\n{stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 1, "rank 0 alone reports: {stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let ranks = v["receivers"].as_array().unwrap();
    assert_eq!(ranks.len(), n, "{v}");
    assert!(ranks.iter().all(|r| r["exit"] == 0), "{v}");
    v
}

#[test]
fn receivers_with_certificates_share_over_tls_and_one_that_cannot_verify_them_uses_none() {
    let s = setup();
    let pki = crate::util::pki::Pki::new(&s.outs, "ddftp test CA");
    let cert = pki.issue("receiver", "IP:127.0.0.1", false);
    let other = crate::util::pki::Pki::new(&s.outs, "another CA");
    let peers = free_addrs(3);
    let kids: Vec<Child> = (0..3)
        .map(|i| {
            let out = s.outs.join(format!("c{i}"));
            let tls = ["--share-cert", cert.cert(), "--share-key", cert.key()];
            // Receiver 0 trusts another CA: it cannot verify the others.
            let ca = if i == 0 { other.ca() } else { pki.ca() };
            let args = ["get", "big.bin", "-m", &s.mirrors(), "-o", out.to_str().unwrap(), "--ca-file", ca];
            sharing(&[&args[..], &tls[..]].concat(), &peers, &peers[i])
        })
        .collect();
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(s.outs.join(format!("c{i}"))).unwrap() == s.data, "receiver {i}'s copy differs");
        let (from_peers, _) = from_peers_and_mirrors(&v);
        let said = v["warnings"].to_string();
        match i {
            0 => assert!(from_peers == 0 && said.contains("not using peer") && said.contains("certificate"), "{v}"),
            _ => assert!(from_peers > SIZE as u64 / 3, "receiver {i} took {from_peers} bytes from its peers: {v}"),
        }
    }
}

/// Bytes nginx's access log (combined format) says it sent, all of them.
fn logged_bytes(log: &Path) -> u64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| l.split('"').nth(2)?.split_whitespace().nth(1)?.parse::<u64>().ok()).sum()
}

/// Two rate-limited web servers of a random [`SIZE`]-byte `big.bin`, each
/// logging what it sends, and a Metalink of it (256 KiB pieces).
struct Web {
    f: Fixture,
    data: Vec<u8>,
    servers: Vec<crate::util::nginx::Nginx>,
    logs: PathBuf,
    meta4: PathBuf,
    outs: PathBuf,
}

fn web() -> Web {
    web_of(SIZE, 256 << 10)
}

/// Two web servers serving `size` random bytes, a Metalink of `piece`
/// byte pieces naming both.
fn web_of(size: usize, piece: usize) -> Web {
    use crate::util::nginx::Nginx;
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), size, 57);
    let logs = f.dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let servers: Vec<Nginx> = (0..2)
        .map(|i| {
            let log = format!("access_log {};", logs.join(format!("access{i}.log")).display());
            Nginx::start(&f.root(), Some("2m"), None, &log)
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(|s| format!("{}big.bin", s.url)).collect();
    let meta4 = f.out("big.meta4");
    std::fs::write(&meta4, crate::http_sources::meta4_in("big.bin", &data, &urls, piece)).unwrap();
    let outs = f.dir.path().join("outs");
    std::fs::create_dir(&outs).unwrap();
    Web { f, data, servers, logs, meta4, outs }
}

impl Web {
    /// Receiver `i` of the Metalink among `peers`.
    fn receiver(&self, i: usize, peers: &[String]) -> Child {
        let out = self.outs.join(format!("c{i}"));
        sharing(&["get", "--metalink", self.meta4.to_str().unwrap(), "-o", out.to_str().unwrap()], peers, &peers[i])
    }

    /// Copies of the file the web servers sent (their logs, once stopped).
    fn uploaded(self) -> f64 {
        let Web { f, servers, logs, data, .. } = self;
        drop(servers);
        let bytes: u64 = (0..2).map(|i| logged_bytes(&logs.join(format!("access{i}.log")))).sum();
        drop(f);
        bytes as f64 / data.len() as f64
    }
}

/// Three receivers of `w`'s Metalink: each copy exact and shared, the
/// web servers sending about one copy.
fn web_receivers_share(w: Web) {
    let peers = free_addrs(3);
    let kids: Vec<Child> = (0..3).map(|i| w.receiver(i, &peers)).collect();
    each_exact_and_shared(kids, &w.outs, &w.data);
    let copies = w.uploaded();
    assert!(copies < 1.2, "the web servers sent {copies:.2} copies of the file");
}

/// Receivers 0 and 2 of `w`'s Metalink, a lying peer between them: each
/// copy is exact and each receiver's warning about the liar says `why`.
fn web_receivers_drop_a_liar(w: &Web, why: &str) {
    let (liar, peers) = between_a_liar(&w.data);
    let kids: Vec<Child> = [0, 2].iter().map(|&i| w.receiver(i, &peers)).collect();
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(w.outs.join(format!("c{}", [0, 2][i]))).unwrap() == w.data, "copy {i} differs");
        let said = v["warnings"].to_string();
        assert!(said.contains(&format!("dropping peer {}", liar.addr)) && said.contains(why), "{said}");
    }
}

#[test]
fn from_web_servers_with_a_metalink_each_block_leaves_them_about_once_and_every_copy_is_exact() {
    web_receivers_share(web());
}

#[test]
fn from_web_servers_with_metalink_pieces_larger_than_a_block_each_piece_is_passed_on_once_checked() {
    // Pieces of 20 MiB (blocks stay at most 16 MiB, each piece checked
    // once whole): the shares are cut at pieces, a receiver passes a piece
    // on once it has checked it, and the web servers send about one copy.
    web_receivers_share(web_of(60 << 20, 20 << 20));
}

#[test]
fn from_web_servers_a_peer_lying_in_a_piece_larger_than_a_block_is_dropped() {
    web_receivers_drop_a_liar(&web_of(60 << 20, 20 << 20), "failed verification as one piece");
}

#[test]
fn from_web_servers_a_lying_peer_is_caught_by_the_metalink_pieces_and_without_pieces_nothing_is_shared() {
    let w = web();
    web_receivers_drop_a_liar(&w, "");
    // Plain URLs give nothing to check a peer's block against: each
    // receiver says so and fetches the whole file from the web servers.
    let peers = free_addrs(2);
    let url = format!("{}big.bin", w.servers[0].url);
    let kids: Vec<Child> = (0..2)
        .map(|i| sharing(&["get", &url, "-o", w.outs.join(format!("p{i}")).to_str().unwrap()], &peers, &peers[i]))
        .collect();
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert!(std::fs::read(w.outs.join(format!("p{i}"))).unwrap() == w.data, "plain copy {i} differs");
        assert!(v["warnings"].to_string().contains("not sharing: "), "{v}");
        assert_eq!(from_peers_and_mirrors(&v), (0, SIZE as u64));
    }
}

/// A stream `Start`ed on a receiver's server at block `first` of
/// big.bin (16 KiB blocks), speaking protocol `version`, once it serves
/// the file.
fn started_on_receiver(addr: &str, version: u16, first: u64) -> crate::hostile::Raw {
    use ddftp_proto::{Direction, Request};
    let (path, block_size, dir) = ("big.bin".to_string(), 16 << 10, Direction::Increment);
    asked_of_receiver(addr, version, Request::Start { stream: 1, path, block_size, first, last: first + 4, dir })
}

/// A connection to the receiver serving on `addr` (protocol `version`)
/// that asked `req` once it serves big.bin (asked again, on a new
/// connection, while it answers with an error), its first reply kept.
pub(crate) fn asked_of_receiver(addr: &str, version: u16, req: ddftp_proto::Request) -> crate::hostile::Raw {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if std::net::TcpStream::connect(addr).is_ok() {
            let mut r = crate::hostile::Raw::greeted_in(addr, version);
            r.send(std::slice::from_ref(&req));
            match r.reply_within(Duration::from_millis(1500)) {
                Some(ddftp_proto::Reply::Error { .. }) => {}
                other => return r.with_first(other),
            }
        }
        assert!(Instant::now() < deadline, "the receiver never served big.bin");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_receiver_says_a_stream_waits_for_a_block_it_has_not_verified_to_a_client_that_speaks_it() {
    // A receiver whose other peer never comes verifies nothing for a
    // while (it waits for that peer): a stream on its server waits, and
    // says so every second to a client of protocol 9, not to one of 8.
    use ddftp_proto::frame::WAITING_VERSION;
    use ddftp_proto::Reply;
    let s = setup();
    let peers = free_addrs(2);
    let mut recv = receiver(&s.mirrors(), &s.outs.join("c0"), &peers, &peers[0]);
    let mut old = started_on_receiver(&peers[0], WAITING_VERSION - 1, 1000);
    let mut new = started_on_receiver(&peers[0], WAITING_VERSION, 1000);
    // One read ahead, then four more, about a second apart.
    let mut at = vec![];
    for _ in 0..5 {
        match new.reply_within(Duration::from_secs(3)) {
            Some(Reply::Waiting { stream: 1 }) => at.push(Instant::now()),
            other => panic!("expected Waiting for stream 1, got {other:?}"),
        }
    }
    let apart = at[4] - at[1];
    assert!(apart >= Duration::from_secs(2), "three Waiting in {apart:?}: more often than once a second");
    assert_eq!(old.reply_within(Duration::from_millis(100)), None, "protocol 8 knows no Waiting");
    recv.kill().unwrap();
    recv.wait().unwrap();
}
