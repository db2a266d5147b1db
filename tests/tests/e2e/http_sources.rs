//! How HTTP downloads are named and checked: `get URL URL`, Metalink with
//! piece hashes, `--checksum-url`, `Repr-Digest`, redirects, a transient 503.

use std::sync::Arc;

use crate::util::nginx::{BadServer, Misbehave, Nginx};
use crate::util::*;

const PIECE: usize = 256 << 10;

/// A Metalink 4 of `data` named `name` at `urls`, with SHA-256 pieces.
fn meta4(name: &str, data: &[u8], urls: &[String]) -> String {
    meta4_in(name, data, urls, PIECE)
}

/// The same with pieces of `piece` bytes.
pub(crate) fn meta4_in(name: &str, data: &[u8], urls: &[String], piece: usize) -> String {
    let pieces: String =
        data.chunks(piece).map(|p| format!("<hash>{}</hash>", sha256_hex(p))).collect::<Vec<_>>().join("\n");
    let urls: String = urls.iter().enumerate().map(|(i, u)| format!("<url priority=\"{}\">{u}</url>", i + 1)).collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n\
         <generator>tests/1</generator>\n\
         <file name=\"{name}\"><size>{}</size><hash type=\"sha-256\">{}</hash>\n\
         <description>what it is</description><metaurl mediatype=\"torrent\">http://t.example/x.torrent</metaurl>\n\
         <pieces length=\"{piece}\" type=\"sha-256\">{pieces}</pieces>\n{urls}</file></metalink>\n",
        data.len(),
        sha256_hex(data)
    )
}

#[test]
fn the_aria2_form_takes_the_files_urls_and_names_the_output_after_them() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("a b.bin"), 3 << 20, 21);
    let (s1, s2) = (Nginx::serve(&f.root(), None), Nginx::serve(&f.root(), Some("4m")));
    let work = tempfile::tempdir().unwrap();
    let urls = [format!("{}a%20b.bin", s1.url), format!("{}a%20b.bin", s2.url)];
    let o = std::process::Command::new(bin("ddftp"))
        .args(["get", &urls[0], &urls[1], "--json", "-q"])
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(work.path().join("a b.bin")).unwrap(), data);
    // A directory URL there is refused: which file would it be?
    ddftp(&["get", &urls[0], &s2.url], 2);
}

#[test]
fn a_metalink_verifies_every_piece_and_a_corrupted_copy_is_caught_and_refetched() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.iso"), 8 << 20, 22);
    // The third mirror's copy has one flipped byte in every other piece.
    let bad_root = tempfile::tempdir().unwrap();
    let mut bad = data.clone();
    for p in (0..bad.len()).step_by(2 * PIECE) {
        bad[p + 1000] ^= 0x40;
    }
    std::fs::write(bad_root.path().join("f.iso"), &bad).unwrap();
    // Same mtime as the good copy: written a second later, the liar would
    // be dropped by the vote (Last-Modified) before any piece is checked.
    let same = std::process::Command::new("touch")
        .arg("-r")
        .arg(f.root().join("f.iso"))
        .arg(bad_root.path().join("f.iso"))
        .status();
    assert!(same.is_ok_and(|s| s.success()));
    let good = [Nginx::serve(&f.root(), Some("3m")), Nginx::serve(&f.root(), Some("3m"))];
    let liar = Nginx::serve(bad_root.path(), None);
    let urls = [format!("{}f.iso", liar.url), format!("{}f.iso", good[0].url), format!("{}f.iso", good[1].url)];
    let m = f.out("f.meta4");
    std::fs::write(&m, meta4("f.iso", &data, &urls)).unwrap();
    let out = f.out("o.iso");
    let j = json(&ddftp(&["get", "--metalink", m.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json", "-q"], 0));
    assert_eq!(std::fs::read(&out).unwrap(), data, "every bad piece re-fetched from the good mirrors");
    assert_eq!(j["sha256_checked"], "metalink");
    // What it holds and ddftp does not use is said; what only describes is not.
    let warnings = j["warnings"].to_string();
    assert!(warnings.contains("Metalink: <metaurl>"), "{j}");
    assert!(!warnings.contains("description") && !warnings.contains("generator"), "{j}");
    assert_eq!(j["verified"], true);
    let w = j["warnings"].to_string();
    assert!(w.contains(&urls[0]) && w.contains("verif"), "the liar is named: {w}");
    // The Metalink's whole-file hash is checked too: a wrong one fails (3).
    std::fs::write(&m, meta4("f.iso", &data, &urls[1..]).replace(&sha256_hex(&data), &"0".repeat(64))).unwrap();
    let o = ddftp(&["get", "--metalink", m.to_str().unwrap(), "-o", f.out("o2").to_str().unwrap()], 3);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Metalink"), "{}", String::from_utf8_lossy(&o.stderr));
    // Not a Metalink: a usage error naming it.
    std::fs::write(&m, "<html/>").unwrap();
    let o = ddftp(&["get", "--metalink", m.to_str().unwrap()], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Metalink 4"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `ddftp ARGS` to its end; its exit code, output and the most memory
/// it held (VmHWM, read until it exits).
fn ddftp_peak(args: &[&str]) -> (Option<i32>, String, String, u64) {
    let mut child = std::process::Command::new(bin("ddftp"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = [
        std::thread::spawn(move || std::io::read_to_string(&mut out).unwrap()),
        std::thread::spawn(move || std::io::read_to_string(&mut err).unwrap()),
    ];
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_memory(child.id()));
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let code = child.wait().unwrap().code();
    let [o, e] = readers.map(|r| r.join().unwrap());
    (code, o, e, peak)
}

#[test]
fn pieces_larger_than_a_block_cost_no_memory_and_a_bad_one_is_fetched_again() {
    const BIG: usize = 64 << 20;
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.iso"), 2 * BIG + (8 << 20), 23);
    let good = Nginx::serve(&f.root(), None);
    let bad_root = tempfile::tempdir().unwrap();
    let mut bad = data.clone();
    for p in (0..bad.len()).step_by(BIG) {
        bad[p + 4321] ^= 0x08;
    }
    std::fs::write(bad_root.path().join("big.iso"), &bad).unwrap();
    drop(bad);
    let liar = Nginx::serve(bad_root.path(), None);
    let m = f.out("big.meta4");
    let out = f.out("big.out");
    let args = ["get", "--metalink", m.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json", "-q"];

    // Two honest mirrors: blocks stay small whatever the pieces are.
    let urls = [format!("{}big.iso", good.url), format!("{}big.iso", good.url)];
    std::fs::write(&m, meta4_in("big.iso", &data, &urls, BIG)).unwrap();
    let (code, stdout, stderr, peak) = ddftp_peak(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(std::fs::read(&out).unwrap() == data);
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(j["block_size"].as_u64().unwrap() <= 16 << 20, "{j}");
    assert_eq!(j["verified"], true);
    assert!(peak < 48 << 20, "{} MiB resident for 64 MiB pieces", peak >> 20);

    // A mirror whose every piece has a flipped byte: its pieces fail once
    // whole and are fetched again from the honest one.
    std::fs::remove_file(&out).unwrap();
    let urls = [format!("{}big.iso", liar.url), format!("{}big.iso", good.url)];
    std::fs::write(&m, meta4_in("big.iso", &data, &urls, BIG)).unwrap();
    let (code, stdout, stderr, _) = ddftp_peak(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(std::fs::read(&out).unwrap() == data, "every bad piece fetched again");
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let w = j["warnings"].to_string();
    assert!(w.contains(&urls[0]) && w.contains("failed verification"), "the liar is named: {w}");
}

#[test]
fn a_checksum_listing_or_a_repr_digest_header_checks_the_download() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 2 << 20, 23);
    let sums = format!("{}  other.bin\n{}  f.bin\n", "1".repeat(64), sha256_hex(&data));
    std::fs::write(f.root().join("SHA256SUMS"), sums).unwrap();
    std::fs::write(f.root().join("WRONGSUMS"), format!("{}  f.bin\n", "2".repeat(64))).unwrap();
    let s = Nginx::serve(&f.root(), None);
    let out = f.out("o.bin");
    let o = out.to_str().unwrap();
    let sums_url = format!("{}SHA256SUMS", s.url);
    let j =
        json(&ddftp(&["get", "f.bin", "--mirrors", &s.url, "-o", o, "--checksum-url", &sums_url, "--json", "-q"], 0));
    assert_eq!(j["sha256_checked"], "checksum_url");
    let wrong = format!("{}WRONGSUMS", s.url);
    ddftp(&["get", "f.bin", "--mirrors", &s.url, "-o", o, "--checksum-url", &wrong, "-q", "--restart"], 3);
    let missing = format!("{}nothere", s.url);
    ddftp(&["get", "f.bin", "--mirrors", &s.url, "-o", o, "--checksum-url", &missing, "-q", "--restart"], 3);
    // A server that sends Repr-Digest: checked against it.
    let data = Arc::new(data);
    let honest = BadServer::start(data.clone(), Misbehave::Never);
    let j = json(&ddftp(&["get", "f.bin", "--mirrors", &honest.url, "-o", o, "--json", "-q", "--restart"], 0));
    assert_eq!(j["sha256_checked"], "digest_header");
    let lying = BadServer::start(data.clone(), Misbehave::WrongDigest);
    ddftp(&["get", "f.bin", "--mirrors", &lying.url, "-o", o, "-q", "--restart"], 3);
    // Beside a ddftpd mirror, a header does not outvote it: the server
    // whose Repr-Digest is not the ddftpd copy's is dropped.
    let d = Mirror::start(&f.root(), &[]);
    let mirrors = format!("{},{}", d.addr, lying.url);
    let j = json(&ddftp(&["get", "f.bin", "--mirrors", &mirrors, "-o", o, "--json", "-q", "--restart"], 0));
    assert_eq!(std::fs::read(&out).unwrap(), *data);
    assert_eq!(j["sha256_checked"], "mirrors");
    assert!(j["warnings"].to_string().contains("Repr-Digest"), "{j}");
}

#[test]
fn redirects_are_followed_a_transient_503_is_asked_again_and_closing_servers_work() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 4 << 20, 24);
    let target = Nginx::serve(&f.root(), None);
    let redirect =
        format!("location = /old/f.bin {{ return 301 {}f.bin; }} location = /loop {{ return 302 /loop; }}", target.url);
    let r = Nginx::start(&f.root(), None, None, &redirect);
    let out = f.out("o.bin");
    let o = out.to_str().unwrap();
    let j = json(&ddftp(&["get", &format!("{}old/f.bin", r.url), "-o", o, "--json", "-q"], 0));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert!(j["producers"][0]["mirror"].as_str().unwrap().starts_with(&target.url), "{j}");
    let e = ddftp(&["get", &format!("{}loop", r.url), "-o", o, "-q"], 1);
    assert!(String::from_utf8_lossy(&e.stderr).contains("redirects"), "{}", String::from_utf8_lossy(&e.stderr));
    // 503s saying `Retry-After: 1` for half a second: asked again after
    // that second, by the one retry policy, and it rejoins.
    let big = random_file(&f.root().join("big.bin"), 40 << 20, 25);
    let flaky = BadServer::start(Arc::new(big.clone()), Misbehave::UnavailableAWhile);
    let t = std::time::Instant::now();
    let j = json(&ddftp(&["get", "f.bin", "--mirrors", &flaky.url, "-o", o, "--json", "-q", "--restart"], 0));
    assert!(std::fs::read(&out).unwrap() == big);
    let w = j["warnings"].to_string();
    assert!(w.contains("(retry in 1 s)") && w.contains("asking again in 1.0 s"), "{j}");
    assert!(t.elapsed() >= std::time::Duration::from_secs(1), "the server's wait is kept");
    assert!(j["producers"].as_array().unwrap().iter().any(|p| p["joined_bytes"].as_u64() > Some(0)), "{j}");
    // A server that closes the connection after each reply (no pipelining):
    // one request a connection, and no warning, as nothing went wrong.
    let closing = BadServer::start(Arc::new(data.clone()), Misbehave::OneReplyPerConnection);
    let j = json(&ddftp(&["get", "f.bin", "--mirrors", &closing.url, "-o", o, "--json", "-q", "--restart"], 0));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert_eq!(j["warnings"].as_array().unwrap().len(), 0, "{j}");
}

/// A server that ignores Range (nginx with `max_ranges 0`) is an
/// increment-only producer: alone a plain download; beside a Range
/// server they meet, each sending its part.
#[test]
fn a_server_that_ignores_range_sends_from_the_start_alone_or_beside_others() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 24 << 20, 48);
    let plain = Nginx::start(&f.root(), Some("6m"), None, "max_ranges 0;");
    let ranged = Nginx::start(&f.root(), Some("6m"), None, "");
    let out = f.out("alone.bin");
    let url = |n: &Nginx| format!("{}f.bin", n.url);
    let args = |urls: &[String], out: &std::path::Path| {
        let mut a: Vec<String> = vec!["get".into()];
        a.extend(urls.iter().cloned());
        a.extend(["-o".into(), out.to_str().unwrap().into(), "--json".into(), "-q".into()]);
        a
    };
    let run = |a: Vec<String>| json(&ddftp(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0));
    let j = run(args(&[url(&plain)], &out));
    assert!(std::fs::read(&out).unwrap() == data, "{j}");
    let out = f.out("both.bin");
    let j = run(args(&[url(&plain), url(&ranged)], &out));
    assert!(std::fs::read(&out).unwrap() == data, "{j}");
    // nginx paces each request, and the Range server's are many: it is
    // the faster; the other still sends from the start until they meet.
    let bytes: Vec<u64> = j["producers"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).collect();
    assert!(bytes.len() == 2 && bytes.iter().all(|&b| b >= 1 << 20), "both send their part: {j}");
}
