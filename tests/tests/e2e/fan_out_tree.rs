//! One tree onto several receivers (`archive --peers ... --share-listen`,
//! `mpirun ... archive --share`): each receiver moves the whole list as
//! one range and serves the blocks it has verified to the others, who
//! check each against the mirrors' seals (a receiver's own vouch for
//! nothing). Real ddftpd mirrors (rate-limited: their uplinks are what is
//! scarce), real receivers, each its own process.

use std::path::Path;
use std::process::Child;

use crate::archive_kinds::{awkward, rsync_left};
use crate::fan_out::{finish, free_addrs, mpirun_sharing, sharing};
use crate::util::fake_mirror::{FakeMirror, Script};
use crate::util::tree::{assert_equal, scan, Look};
use crate::util::*;

/// A receiver: `ddftp archive src` into `dest`, serving on `listen`.
fn receiver(mirrors: &str, dest: &Path, peers: &[String], listen: &str) -> Child {
    sharing(&["archive", "src", "-m", mirrors, "-X", "-H", "-d", dest.to_str().unwrap()], peers, listen)
}

/// Large files beside the awkward tree: most of the range, so that what
/// the receivers pass on shows.
fn bulk(src: &Path) {
    std::fs::create_dir_all(src.join("bulk")).unwrap();
    for i in 0..3 {
        random_file(&src.join(format!("bulk/large-{i}")), 6 << 20, 100 + i);
    }
}

/// Whether `dest` holds `bulk`'s files as `src` does.
fn assert_bulk_copied(src: &Path, dest: &Path) {
    for n in 0..3 {
        let name = format!("bulk/large-{n}");
        let same = std::fs::read(dest.join(&name)).unwrap() == std::fs::read(src.join(&name)).unwrap();
        assert!(same, "{}: {name} differs", dest.display());
    }
}

/// The awkward tree with large files beside it (every kind of entry the
/// running user can make), served by two mirrors.
struct Tree {
    f: Fixture,
    src: std::path::PathBuf,
    root: bool,
    ms: Vec<Mirror>,
}

fn tree() -> Tree {
    let root = is_root();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    awkward(&src, root);
    bulk(&src);
    let ms = mirrors(&f);
    Tree { f, src, root, ms }
}

fn mirrors(f: &Fixture) -> Vec<Mirror> {
    let extra = ["--rate-limit", "12MB", "--metrics", "127.0.0.1:0"];
    vec![Mirror::start(&f.root(), &extra), Mirror::start(&f.root(), &extra)]
}

/// Bytes the mirrors sent, all of them together.
fn uploaded(ms: &[Mirror]) -> f64 {
    ms.iter().map(|m| metric(&scrape(m.metrics.as_ref().unwrap()), "ddftpd_sent_bytes_total")).sum()
}

#[test]
fn three_receivers_of_a_tree_each_get_it_whole_and_take_most_of_it_from_each_other() {
    let Tree { f, src, root, ms } = tree();
    let peers = free_addrs(3);
    let m = mirrors_arg(&ms.iter().collect::<Vec<_>>());
    let dests: Vec<_> = (0..3).map(|i| f.out(&format!("d{i}"))).collect();
    let kids: Vec<Child> = (0..3).map(|i| receiver(&m, &dests[i], &peers, &peers[i])).collect();
    let look = Look { owners: root, setid: root, devices: root };
    let mut moved = 0;
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert_equal(&scan(&src, look), &scan(&dests[i], look));
        let left = rsync_left(&src, &dests[i]);
        assert!(left.is_empty(), "receiver {i}: rsync -aHAXSc finds differences: {left:#?}");
        let t = &v["transfer"];
        let (bytes, from_peers) = (t["bytes"].as_u64().unwrap(), t["from_peers"].as_u64().unwrap());
        assert!(from_peers > bytes / 3, "receiver {i} took {from_peers} of {bytes} bytes from its peers: {v}");
        moved = bytes;
    }
    // Each block leaves the mirrors about once; three receivers fetching
    // apart would make it three.
    let copies = uploaded(&ms) / moved as f64;
    assert!(copies < 1.5, "the mirrors sent {copies:.2} copies of the range");
}

#[test]
fn a_receiver_that_sends_a_corrupt_tree_is_dropped_and_every_copy_is_exact() {
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src);
    let size = 3 * (6 << 20);
    let ms = mirrors(&f);
    // It seals what it sends: only the mirrors' seals show the lie.
    let digest = ddftp_proto::FileDigest {
        chunk_size: ddftp_proto::manifest::chunk_size(size),
        sha256: [0; 32],
        manifest: [0; 32],
    };
    let liar = FakeMirror::start(Script { stat: Some((size, digest)), any_bundle: Some(0x5a), ..Script::default() });
    let mut peers = free_addrs(2);
    peers.insert(1, liar.addr.clone());
    let m = mirrors_arg(&ms.iter().collect::<Vec<_>>());
    let kids: Vec<(usize, Child)> =
        [0, 2].iter().map(|&i| (i, receiver(&m, &f.out(&format!("d{i}")), &peers, &peers[i]))).collect();
    for (i, k) in kids {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        assert_bulk_copied(&src, &f.out(&format!("d{i}")));
        let said = v["transfer"]["warnings"].to_string();
        assert!(said.contains(&format!("peer {}", liar.addr)) && said.contains("verif"), "receiver {i}: {said} {v}");
    }
}

#[test]
fn mpirun_share_puts_the_tree_on_every_rank_and_rank_0_reports_them_all() {
    use crate::mpi::{have_mpirun, mpi_ddftp};
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let Tree { f, src, root, ms } = tree();
    let outs = f.out("outs");
    std::fs::create_dir(&outs).unwrap();
    // Every rank on this one machine: each writes its own DEST.
    let archive = format!(
        "exec {} archive src -m {} -X -H -d {}/d$OMPI_COMM_WORLD_RANK --share --json -q --retries 0",
        exe.display(),
        mirrors_arg(&ms.iter().collect::<Vec<_>>()),
        outs.display()
    );
    let v = mpirun_sharing(3, &archive);
    let look = Look { owners: root, setid: root, devices: root };
    for i in 0..3 {
        let dest = outs.join(format!("d{i}"));
        assert_equal(&scan(&src, look), &scan(&dest, look));
        let left = rsync_left(&src, &dest);
        assert!(left.is_empty(), "rank {i}: rsync -aHAXSc finds differences: {left:#?}");
    }
    for r in v["receivers"].as_array().unwrap() {
        assert!(r["from_peers"].as_u64().unwrap() > 0, "{v}");
    }
    let copies = uploaded(&ms) / v["bytes"].as_u64().unwrap() as f64;
    assert!(copies < 1.5, "the mirrors sent {copies:.2} copies of the range");
}

#[test]
fn a_receiver_whose_dest_differs_is_not_waited_for() {
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src);
    let ms = mirrors(&f);
    let m = mirrors_arg(&ms.iter().collect::<Vec<_>>());
    // Receiver 1's DEST holds the tree but one file: its list is another.
    let d1 = f.out("d1");
    ddftp(&["archive", "src", "-m", &m, "-d", d1.to_str().unwrap(), "-q"], 0);
    std::fs::remove_file(d1.join("bulk/large-1")).unwrap();
    let peers = free_addrs(2);
    let began = std::time::Instant::now();
    let kids = [receiver(&m, &f.out("d0"), &peers, &peers[0]), receiver(&m, &d1, &peers, &peers[1])];
    for (i, k) in kids.into_iter().enumerate() {
        let (code, v, err) = finish(k);
        assert_eq!(code, Some(0), "receiver {i}: {err}");
        let said = v["transfer"]["warnings"].to_string();
        assert!(said.contains("not using peer") && said.contains("another version or list"), "receiver {i}: {said}");
    }
    for d in ["d0", "d1"] {
        assert_bulk_copied(&src, &f.out(d));
    }
    // Told at once, not after the 30 s a peer that is still starting gets.
    assert!(began.elapsed() < std::time::Duration::from_secs(20), "{:?}", began.elapsed());
}
