//! `get` onto an older copy (delta): the chunks the old output shares with
//! the new version come from it, only the rest moves, the result is the
//! new version byte for byte, and the old copy is never damaged.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};

use crate::util::nginx::Nginx;
use crate::util::*;

const MIB: usize = 1 << 20;
const SIZE: usize = 64 * MIB;
/// ddftpd's chunk for a 64 MiB file (4,096 chunks).
const CHUNK: u64 = 16 * 1024;

fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut d = vec![0u8; n];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut d);
    d
}

/// Replaces the served file with `data` as an editor or rsync would (a new
/// file renamed over it).
fn publish(root: &Path, data: &[u8]) {
    std::fs::write(root.join("f.new"), data).unwrap();
    std::fs::rename(root.join("f.new"), root.join("f")).unwrap();
}

/// What the mirrors sent: in the transfer, and as pieces of changed
/// chunks before it.
fn moved(j: &serde_json::Value) -> u64 {
    let sent: u64 = j["producers"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    sent + j["piece_bytes"].as_u64().unwrap()
}

/// Two mirrors that served `old` (got into OUT `f`) and now serve `new`:
/// the fixture, the mirrors, their `-m` argument and OUT.
fn onto_old(old: &[u8], new: &[u8]) -> (Fixture, (Mirror, Mirror), String, std::path::PathBuf) {
    let f = Fixture::new();
    publish(&f.root(), old);
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let ms = mirrors_arg(&[&a, &b]);
    let out = f.out("f");
    ddftp(&["get", "f", "-m", &ms, "-o", out.to_str().unwrap(), "-q"], 0);
    publish(&f.root(), new);
    (f, (a, b), ms, out)
}

/// Gets `old`, then `new` onto it: the report of the second run, checked
/// byte for byte.
fn update(old: &[u8], new: &[u8], extra: &[&str]) -> serde_json::Value {
    let (_f, _mirrors, ms, out) = onto_old(old, new);
    let o = out.to_str().unwrap();
    let mut args = vec!["get", "f", "-m", &ms, "-o", o, "-q", "--json"];
    args.extend_from_slice(extra);
    let j = json(&ddftp(&args, 0));
    assert!(std::fs::read(&out).unwrap() == new, "the output is not the new version");
    assert_eq!(j["bytes"].as_u64(), Some(new.len() as u64));
    j
}

/// What moved is at most `changed` bytes plus one chunk for each of
/// `changes`, and the rest was matched in the old copy.
fn at_most(j: &serde_json::Value, changed: u64, changes: u64) {
    at_most_by(j, changed, changes, CHUNK);
}

/// The same with `spare` bytes more for each change.
fn at_most_by(j: &serde_json::Value, changed: u64, changes: u64, spare: u64) {
    let (m, matched) = (moved(j), j["matched_bytes"].as_u64().unwrap());
    assert!(m <= changed + changes * spare, "moved {m} bytes for {changed} changed in {changes} places");
    assert_eq!(m + matched, j["bytes"].as_u64().unwrap(), "moved + matched is the file");
}

/// A chunk an edit touched is cut into pieces (4 KiB for this file's
/// chunks of 16 KiB): only the pieces the edit touched move.
#[test]
fn delta_scattered_edits_move_only_the_pieces_they_touch() {
    let old = random(SIZE, 1);
    let mut new = old.clone();
    for k in 0..16 {
        // 4 KiB at odd places, some across a chunk boundary.
        let at = k * 4 * MIB + 13 * 1024 + k * 977;
        new[at..at + 4096].copy_from_slice(&random(4096, 100 + k as u64));
    }
    let j = update(&old, &new, &[]);
    at_most_by(&j, 16 * 4096, 16, 4096);
    assert!(j["piece_bytes"].as_u64().unwrap() > 0, "no piece was fetched: {j}");
}

#[test]
fn delta_data_inserted_at_the_start_moves_only_itself() {
    let old = random(SIZE, 2);
    let new = [random(MIB, 3), old.clone()].concat();
    at_most(&update(&old, &new, &[]), MIB as u64, 1);
}

#[test]
fn delta_data_removed_in_the_middle_moves_nothing_new() {
    let old = random(SIZE, 4);
    let new = [&old[..30 * MIB], &old[31 * MIB..]].concat();
    at_most(&update(&old, &new, &[]), 0, 1);
}

#[test]
fn delta_a_truncated_or_extended_file_moves_only_its_new_end() {
    let old = random(SIZE, 5);
    at_most(&update(&old, &old[..40 * MIB + 1000], &[]), 0, 1);
    let extended = [old.clone(), random(3 * MIB + 77, 6)].concat();
    at_most(&update(&old, &extended, &[]), 3 * MIB as u64 + 77, 1);
}

/// Bytes inserted and removed in numbers that are not whole chunks shift
/// everything after them: the mirror's weak checksums find it all again.
#[test]
fn delta_data_shifted_by_any_number_of_bytes_is_found_again() {
    let old = random(SIZE, 11);
    let new = [b"a short header".to_vec(), old[..20 * MIB].to_vec(), old[20 * MIB + 333..].to_vec()].concat();
    at_most(&update(&old, &new, &[]), 14, 2);
}

#[test]
fn delta_pieces_shuffled_are_found_where_they_went() {
    let old = random(SIZE, 7);
    let mut pieces: Vec<&[u8]> = old.chunks(MIB).collect();
    // A fixed shuffle: every piece moves.
    pieces.rotate_left(17);
    pieces.swap(3, 40);
    pieces.reverse();
    at_most(&update(&old, &pieces.concat(), &[]), 0, 1);
}

#[test]
fn delta_no_delta_fetches_the_whole_file_as_rsync_w_does() {
    let old = random(16 * MIB, 8);
    let mut new = old.clone();
    new[5] ^= 1;
    for flag in ["--no-delta", "-W"] {
        let j = update(&old, &new, &[flag]);
        assert_eq!((moved(&j), j["matched_bytes"].as_u64()), (new.len() as u64, Some(0)), "{flag}");
    }
}

/// An update killed half way leaves the old copy as it was; the next run
/// resumes it (the matched chunks are in its journal) and ends exact.
#[test]
fn delta_an_interrupted_update_leaves_the_old_copy_intact_and_resumes() {
    let old = random(SIZE, 9);
    // Half the file new: enough to move for a while at the limited rate.
    let new = [&old[..32 * MIB], &random(32 * MIB, 10)[..]].concat();
    let (f, _mirrors, ms, out) = onto_old(&old, &new);
    let o = out.to_str().unwrap();
    let mut run = Command::new(bin("ddftp"))
        .args(["get", "f", "-m", &ms, "-o", o, "-q", "--limit-rate", "8MB"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once part of the new half has arrived and been journaled
    // (under load the scan of the old copy can take longer than any fixed
    // wait): the part file holds some of the new half's (random, so
    // nonzero) bytes.
    let part = f.out("f.ddftp-part");
    let t = Instant::now();
    let arrived = || std::fs::read(&part).is_ok_and(|p| p.get(32 * MIB..).is_some_and(|h| h.iter().any(|&b| b != 0)));
    while !arrived() {
        assert!(t.elapsed() < Duration::from_secs(60), "none of the new half arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
    // And long enough for the journal to say so (about a third of the
    // new half at the limited rate).
    std::thread::sleep(Duration::from_millis(1500));
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(std::fs::read(&out).unwrap() == old, "the old copy changed while the update ran");
    let j = json(&ddftp(&["get", "f", "-m", &ms, "-o", o, "-q", "--json"], 0));
    assert!(std::fs::read(&out).unwrap() == new);
    assert!(moved(&j) < 32 * MIB as u64, "the resumed run moved {} bytes", moved(&j));
}

/// The old copy and a seed rewritten in place, again and again, while the
/// update reads them (a local file that lies about its blocks): whatever
/// the update read, the output is the new version byte for byte.
#[test]
fn delta_local_files_rewritten_while_they_are_read_never_land_a_wrong_byte() {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let old = random(SIZE, 21);
    let mut new = old.clone();
    for k in 0..16 {
        new[k * 4 * MIB + 12345..][..4096].copy_from_slice(&random(4096, 100 + k as u64));
    }
    let (f, _mirrors, ms, out) = onto_old(&old, &new);
    let o = out.to_str().unwrap();
    let seed = f.out("seed");
    std::fs::write(&seed, &old).unwrap();
    // Held open: once the update renames its result over the old copy, the
    // writer goes on with the old file, never the result.
    let liars = [
        std::fs::OpenOptions::new().write(true).open(&out).unwrap(),
        std::fs::OpenOptions::new().write(true).open(&seed).unwrap(),
    ];
    let stop = AtomicBool::new(false);
    let run = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let at = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % (SIZE as u64 - 65536);
                for l in &liars {
                    l.write_all_at(&random(65536, k), at).unwrap();
                }
                k += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let run = ddftp(&["get", "f", "-m", &ms, "-o", o, "-q", "--seed", seed.to_str().unwrap()], 0);
        stop.store(true, Ordering::Relaxed);
        run
    });
    assert!(run.status.success());
    assert!(std::fs::read(&out).unwrap() == new, "a byte the local files lied about landed");
}

/// `--seed FILE` (as zsync's -i): a local file elsewhere gives the chunks
/// it holds to a new OUT; a seed that cannot be read is said and left out.
#[test]
fn delta_a_seed_file_gives_its_chunks_to_a_new_output() {
    let f = Fixture::new();
    let old = random(16 * MIB, 12);
    let mut new = old.clone();
    new[3 * MIB..3 * MIB + 100].copy_from_slice(&[7u8; 100]);
    publish(&f.root(), &new);
    std::fs::write(f.out("seed"), &old).unwrap();
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let ms = mirrors_arg(&[&a, &b]);
    let out = f.out("new");
    let seed = f.out("seed");
    let args = ["get", "f", "-m", &ms, "-o", out.to_str().unwrap(), "-q", "--json"];
    let missing = f.out("no-such-seed");
    let run = ddftp(&[&args[..], &["--seed", missing.to_str().unwrap(), "--seed", seed.to_str().unwrap()]].concat(), 0);
    let j = json(&run);
    assert!(std::fs::read(&out).unwrap() == new);
    at_most(&j, 100, 1);
    assert!(String::from_utf8_lossy(&run.stderr).contains("no-such-seed"), "the missing seed is said");
    assert!(std::fs::read(&seed).unwrap() == old, "a seed is only read");
}

/// Every file of `a` is in `b` with the same bytes, and nothing more.
fn same_tree(a: &Path, b: &Path) {
    let out = Command::new("diff").arg("-r").arg(a).arg(b).output().unwrap();
    assert!(out.status.success(), "trees differ: {}", String::from_utf8_lossy(&out.stdout));
}

/// `archive` onto the tree it copied before: a changed file is updated
/// from its older version (the bytes that moved are the changes, plus a
/// chunk each), the others as usual; `-W` moves changed files whole.
#[test]
fn delta_archive_updates_changed_files_from_their_older_versions() {
    let f = Fixture::new();
    let tree = f.root().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    let big = random(SIZE, 20);
    std::fs::write(tree.join("big.bin"), &big).unwrap();
    let mid = random(2 * MIB, 21);
    std::fs::write(tree.join("sub/mid.bin"), &mid).unwrap();
    std::fs::write(tree.join("small.txt"), b"small\n").unwrap();
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let ms = mirrors_arg(&[&a, &b]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    ddftp(&["archive", "tree", "-m", &ms, "-d", d, "-q"], 0);
    // 1 MiB in front of the big file, 100 bytes changed in the middle one,
    // one file new; each written as a new file (a new mtime).
    std::thread::sleep(Duration::from_millis(1100));
    let new_big = [random(MIB, 22), big.clone()].concat();
    publish_as(&tree.join("big.bin"), &new_big);
    let mut new_mid = mid.clone();
    new_mid[MIB..MIB + 100].copy_from_slice(&[9u8; 100]);
    publish_as(&tree.join("sub/mid.bin"), &new_mid);
    std::fs::write(tree.join("sub/new.txt"), b"new\n").unwrap();
    let j = json(&ddftp(&["archive", "tree", "-m", &ms, "-d", d, "-q", "--json"], 0));
    same_tree(&tree, &dest);
    let (moved, matched) = (j["bytes"].as_u64().unwrap(), j["matched_bytes"].as_u64().unwrap());
    // Chunks: 16 KiB in the 64 MiB file, 4 KiB in the 2 MiB one.
    assert!(moved <= MIB as u64 + 16 * 1024 + 100 + 4096 + 4 + 100, "moved {moved}");
    assert!(matched >= (SIZE + 2 * MIB - 8 * 1024) as u64 - 100, "matched {matched}");
    // The same change again, whole.
    publish_as(&tree.join("big.bin"), &big);
    let j = json(&ddftp(&["archive", "tree", "-m", &ms, "-d", d, "-q", "--json", "-W"], 0));
    same_tree(&tree, &dest);
    assert_eq!((j["bytes"].as_u64(), j["matched_bytes"].as_u64()), (Some(SIZE as u64), Some(0)));
}

/// Replaces `path` with `data` as a new file renamed over it.
fn publish_as(path: &Path, data: &[u8]) {
    let tmp = path.with_extension("new-version");
    std::fs::write(&tmp, data).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `archive` onto an older tree, each file changed one of the ways `get`'s
/// tests change one: every file byte for byte, and what moved at most the
/// changed data plus a chunk for each change.
#[test]
fn delta_archive_moves_only_what_changed_in_each_pattern() {
    const N: usize = 24 * MIB;
    /// ddftpd's chunk for a 24 MiB file.
    const C: u64 = 8 * 1024;
    let f = Fixture::new();
    let tree = f.root().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let names = ["edits", "insert", "remove", "truncate", "extend", "shuffle"];
    let olds: Vec<Vec<u8>> = (0..names.len()).map(|i| random(N, 40 + i as u64)).collect();
    for (name, old) in names.iter().zip(&olds) {
        std::fs::write(tree.join(name), old).unwrap();
    }
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let ms = mirrors_arg(&[&a, &b]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    ddftp(&["archive", "tree", "-m", &ms, "-d", d, "-q"], 0);
    std::thread::sleep(Duration::from_millis(1100));
    let mut edited = olds[0].clone();
    for k in 0..16 {
        let at = k * MIB + 5 * 1024 + k * 977;
        edited[at..at + 4096].copy_from_slice(&random(4096, 60 + k as u64));
    }
    let mut pieces: Vec<&[u8]> = olds[5].chunks(MIB).collect();
    pieces.rotate_left(7);
    pieces.reverse();
    let news = [
        edited,
        [random(MIB, 61), olds[1].clone()].concat(),
        [&olds[2][..10 * MIB], &olds[2][11 * MIB..]].concat(),
        olds[3][..16 * MIB + 1000].to_vec(),
        [olds[4].clone(), random(3 * MIB + 77, 62)].concat(),
        pieces.concat(),
    ];
    for (name, new) in names.iter().zip(&news) {
        publish_as(&tree.join(name), new);
    }
    let j = json(&ddftp(&["archive", "tree", "-m", &ms, "-d", d, "-q", "--json"], 0));
    same_tree(&tree, &dest);
    let changed = (16 * 4096 + MIB + 3 * MIB + 77) as u64;
    let changes = 16 + 5;
    let moved = j["bytes"].as_u64().unwrap();
    assert!(moved <= changed + changes * C, "moved {moved} for {changed} changed in {changes} places: {j}");
    assert_eq!(j["matched_bytes"].as_u64().unwrap() + moved, news.iter().map(|n| n.len() as u64).sum::<u64>());
}

/// A ddftpd beside a web mirror gives the manifest and the weak checksums;
/// the web mirror moves its share of the rest with it, checked the same.
#[test]
fn delta_with_a_web_mirror_beside_a_ddftpd_moves_only_what_changed() {
    let f = Fixture::new();
    let old = random(SIZE, 30);
    publish(&f.root(), &old);
    let d = Mirror::start(&f.root(), &[]);
    let w = Nginx::serve(&f.root(), None);
    let ms = format!("{},{}", d.addr, w.url);
    let out = f.out("f");
    let o = out.to_str().unwrap();
    ddftp(&["get", "f", "-m", &ms, "-o", o, "-q"], 0);
    let new = [old.clone(), random(8 * MIB + 77, 31)].concat();
    publish(&f.root(), &new);
    let j = json(&ddftp(&["get", "f", "-m", &ms, "-o", o, "-q", "--json"], 0));
    assert!(std::fs::read(&out).unwrap() == new, "the output is not the new version");
    at_most(&j, 8 * MIB as u64 + 77, 1);
    let producers = j["producers"].as_array().unwrap();
    assert!(producers.len() == 2 && producers.iter().all(|p| p["bytes"].as_u64().unwrap() > 0), "{j}");
    assert_eq!(j["verified"], true, "{j}");
}
