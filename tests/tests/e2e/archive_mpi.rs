//! `mpirun -n N ddftp archive` (built with `--features mpi`): the ranks
//! move one tree from two loopback mirrors into one DEST, equal to the
//! source in every kind of entry; `-n`/`--delete` say and do what one
//! process does; a rank killed mid-way fails the job naming it, and the
//! same command (with another N, or one process) finishes it without
//! moving a complete file again. Fails, saying so, where OpenMPI is not
//! installed (`.ci/run` installs it).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::archive_kinds::{awkward, rsync_left};
use crate::mpi::{have_mpirun, mpi_ddftp};
use crate::util::tree::{assert_equal, scan, Look};
use crate::util::*;

/// Files to spread over parts: some cut between parts (several blocks
/// each), many small.
fn bulk(dir: &Path, large: usize, large_size: usize, small: usize) {
    std::fs::create_dir_all(dir.join("small")).unwrap();
    for i in 0..large {
        random_file(&dir.join(format!("large-{i}")), large_size, 100 + i as u64);
    }
    for i in 0..small {
        let sub = dir.join(format!("small/{}", i % 13));
        std::fs::create_dir_all(&sub).unwrap();
        random_file(&sub.join(format!("f{i}")), (i * 7919) % 20_000, 1000 + i as u64);
    }
}

fn mpirun(n: usize, exe: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["-n", &n.to_string(), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"]).arg(exe).args(args);
    cmd.stdin(Stdio::null());
    cmd
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what} failed: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn three_ranks_copy_every_kind_of_entry_and_sync_as_one_process_does() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let root = is_root();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    awkward(&src, root);
    bulk(&src.join("bulk"), 6, 3 << 20, 600);
    std::fs::create_dir_all(src.join("bulk/empty/and-empty")).unwrap();
    let (m1, m2) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let mirrors = mirrors_arg(&[&m1, &m2]);
    let look = Look { owners: root, setid: root, devices: root };
    let dst = f.out("dst");
    let d = dst.to_str().unwrap();
    let base = ["archive", "src", "-d", d, "-m", &mirrors, "-X", "-H", "--block-size", "64KiB"];

    let out = ok(mpirun(3, &exe, &[&base[..], &["--json", "-q"]].concat()).output().unwrap(), "mpirun -n 3 archive");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object, from rank 0");
    let ranks = j["ranks"].as_array().unwrap_or_else(|| panic!("per-rank report: {j}"));
    assert_eq!(ranks.len(), 3, "{j}");
    for r in ranks {
        assert!(r["bytes"].as_u64().unwrap() > 0 && r["parts"].as_u64().unwrap() > 0, "every rank moved parts: {j}");
    }
    let moved: u64 = ranks.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert!(moved >= 18 << 20, "{j}");
    assert_eq!(j["hard_links"].as_u64(), Some(2), "{j}");
    assert_equal(&scan(&src, look), &scan(&dst, look));
    let left = rsync_left(&src, &dst);
    assert!(left.is_empty(), "rsync -aHAXSc finds differences: {left:#?}");
    assert!(!std::fs::read_dir(&dst).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with(".ddftp")));

    // A one-process copy beside it, then SRC changes and both are synced.
    let dst1 = f.out("dst1");
    let d1 = dst1.to_str().unwrap();
    let one = ["archive", "src", "-d", d1, "-m", &mirrors, "-X", "-H", "--block-size", "64KiB"];
    ddftp(&[&one[..], &["-q"]].concat(), 0);
    assert_equal(&scan(&dst1, look), &scan(&dst, look));
    random_file(&src.join("bulk/added"), 300_000, 7);
    std::fs::remove_file(src.join("bulk/large-2")).unwrap();
    std::fs::remove_file(src.join("plain/empty")).unwrap();
    random_file(&src.join("bulk/large-0"), 2 << 20, 8);
    std::fs::set_permissions(src.join("bulk/large-1"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // 4 KiB changed in a 3 MiB file (a new file renamed over it, in a later
    // second: size and mtime in seconds tell a change, as for rsync):
    // updated by delta, by the lead rank as by one process.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut edited = std::fs::read(src.join("bulk/large-3")).unwrap();
    edited[1 << 20..(1 << 20) + 4096].fill(7);
    std::fs::write(src.join("bulk/large-3.new"), &edited).unwrap();
    std::fs::rename(src.join("bulk/large-3.new"), src.join("bulk/large-3")).unwrap();
    let said = |o: Output| -> Vec<String> {
        let mut v: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect();
        v.sort();
        v
    };
    let dry_one = said(ddftp(&[&one[..], &["-n", "--delete"]].concat(), 0));
    let dry_ranks = said(ok(mpirun(3, &exe, &[&base[..], &["-n", "--delete"]].concat()).output().unwrap(), "-n"));
    assert_eq!(dry_ranks, dry_one, "a dry run under mpirun says what one process says");
    assert!(dry_one.iter().any(|l| l.contains("*deleting   bulk/large-2")), "{dry_one:#?}");

    let j1 = json(&ddftp(&[&one[..], &["--delete", "--json", "-q"]].concat(), 0));
    let out = mpirun(3, &exe, &[&base[..], &["--delete", "--json", "-q"]].concat()).output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&ok(out, "--delete").stdout).unwrap();
    for k in ["files", "skipped_files", "deleted", "dirs", "links", "modes_fixed", "matched_bytes"] {
        assert_eq!(j[k], j1[k], "{k}: ranks {j}\none process {j1}");
    }
    assert_eq!(j["deleted"].as_u64(), Some(2), "{j}");
    assert!(j["matched_bytes"].as_u64().unwrap() >= (3 << 20) - 8192, "{j}");
    assert_equal(&scan(&src, look), &scan(&dst, look));
    assert_equal(&scan(&dst1, look), &scan(&dst, look));
}

/// Starts `cmd` (an archive into `dest` under mpirun -n >= 2), kills rank
/// 1 once DEST holds some complete files, and returns mpirun's output.
fn kill_rank_1(mut cmd: Command, exe: &Path, dest: &Path, src: &Path) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let rank1 = loop {
        assert!(started.elapsed() < Duration::from_secs(60), "rank 1 never moved a file");
        if let Some(pid) = rank_pid(exe, 1, child.id() as i32) {
            if complete(src, dest).len() > 20 {
                break pid;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: a signal to a process of ours.
    assert_eq!(unsafe { libc::kill(rank1, libc::SIGKILL) }, 0);
    child.wait_with_output().unwrap()
}

/// The process running `exe` as MPI rank `rank` of the job `mpirun` (its
/// pid) started: another test's job runs the same binary at the same time.
fn rank_pid(exe: &Path, rank: usize, mpirun: i32) -> Option<i32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let is_exe = std::fs::read_link(e.path().join("exe")).is_ok_and(|p| p == exe);
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if is_exe && env.split(|&b| b == 0).any(|v| v == want.as_bytes()) && descends_from(pid, mpirun) {
            return Some(pid);
        }
    }
    None
}

/// Whether `ancestor` is `pid`'s parent, grandparent, ...
fn descends_from(mut pid: i32, ancestor: i32) -> bool {
    while pid > 1 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let parent = status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|v| v.trim().parse().ok());
        match parent {
            Some(p) if p == ancestor => return true,
            Some(p) => pid = p,
            None => return false,
        }
    }
    false
}

/// DEST's files that are complete (size, mode, mtime as the source's),
/// with their inode and ctime: a file moved again gets new ones.
fn complete(src: &Path, dest: &Path) -> BTreeMap<PathBuf, (u64, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(src.join(&rel)) else { continue };
        for e in rd.flatten() {
            let rel = rel.join(e.file_name());
            let s = e.metadata().unwrap();
            if s.is_dir() {
                stack.push(rel);
            } else if let Ok(m) = dest.join(&rel).symlink_metadata() {
                let same = m.is_file()
                    && (m.size(), m.mode(), m.mtime(), m.mtime_nsec())
                        == (s.size(), s.mode(), s.mtime(), s.mtime_nsec());
                if same {
                    out.insert(rel, (m.ino(), m.ctime(), m.ctime_nsec()));
                }
            }
        }
    }
    out
}

#[test]
fn a_killed_rank_fails_the_job_naming_it_and_a_rerun_moves_only_what_is_missing() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src, 16, 2 << 20, 1500);
    let files = 16 + 1500;
    let (m1, m2) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let mirrors = mirrors_arg(&[&m1, &m2]);
    // Killed at N = 3, finished at N = 2; killed at N = 3, finished by one process.
    for (i, again) in [Some(2), None].into_iter().enumerate() {
        let dst = f.out(&format!("dst{i}"));
        let d = dst.to_str().unwrap();
        let args = ["archive", "src", "-d", d, "-m", &mirrors, "--block-size", "64KiB"];
        let slow = [&args[..], &["--limit-rate", "6MB"]].concat();
        let out = kill_rank_1(mpirun(3, &exe, &slow), &exe, &dst, &src);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the job with a killed rank succeeded:\n{stderr}");
        assert!(stderr.contains("rank 1"), "the failure names the rank:\n{stderr}");
        let before = complete(&src, &dst);
        assert!(before.len() > 20 && before.len() < files, "killed mid-way: {} of {files} complete", before.len());

        let out = match again {
            Some(n) => ok(mpirun(n, &exe, &[&args[..], &["--json", "-q"]].concat()).output().unwrap(), "the rerun"),
            None => ddftp(&[&args[..], &["--json", "-q"]].concat(), 0),
        };
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["files"].as_u64(), Some(files as u64), "{j}");
        assert_eq!(j["skipped_files"].as_u64(), Some(before.len() as u64), "complete files are skipped: {j}");
        let after = complete(&src, &dst);
        assert_eq!(after.len(), files, "every file complete after the rerun");
        for (rel, was) in &before {
            assert_eq!(after.get(rel), Some(was), "{}: moved again though it was complete", rel.display());
        }
        let look = Look { owners: false, setid: false, devices: false };
        assert_equal(&scan(&src, look), &scan(&dst, look));
        let left: Vec<String> = std::fs::read_dir(&dst)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".ddftp"))
            .collect();
        assert!(left.is_empty(), "journals left in DEST: {left:?}");
    }
}

#[test]
fn files_one_mirror_cannot_read_are_asked_of_the_other_under_mpirun() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    need(is_root(), "root (a mirror run as nobody that cannot read some files)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    std::fs::set_permissions(f.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let src = f.root().join("src");
    bulk(&src, 4, 1 << 20, 200);
    // Spread through the range: whichever mirror serves a block, nobody's
    // meets some of them.
    for i in 0..30 {
        let p = src.join(format!("small/{}/secret-{i}", i % 13));
        random_file(&p, 50_000, 500 + i);
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let (nobody, root) = (Mirror::as_nobody(&f.root()), Mirror::start(&f.root(), &[]));
    let dst = f.out("dst");
    let mirrors = mirrors_arg(&[&nobody, &root]);
    let args = ["archive", "src", "-d", dst.to_str().unwrap(), "-m", &mirrors, "--block-size", "64KiB", "--json", "-q"];
    let out = ok(mpirun(3, &exe, &args).output().unwrap(), "mpirun -n 3 archive");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("asking the other mirrors"), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["failed"].as_array().map(Vec::len), Some(0), "{j}");
    let look = Look { owners: true, setid: true, devices: false };
    assert_equal(&scan(&src, look), &scan(&dst, look));
}

#[test]
fn a_rank_that_does_not_see_the_lead_s_dest_stops_the_job_before_it_writes() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    need(is_root(), "root (rank 1 gets a DEST of its own: a tmpfs in its own mount namespace)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src, 4, 2 << 20, 100);
    let m = Mirror::start(&f.root(), &[]);
    let dst = f.out("dst");
    std::fs::create_dir(&dst).unwrap();
    // Rank 1 runs in a mount namespace where DEST is another (empty) file
    // system, as on a node that does not mount the shared one.
    let wrapper = f.out("rank.sh");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then\n  \
         exec unshare --mount sh -c 'mount -t tmpfs none \"$0\" && exec \"$@\"' \"$DEST\" \"$@\"\nfi\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.args(["-n", "2", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-x", "DEST"])
        .env("DEST", &dst)
        .arg(&wrapper)
        .arg(&exe)
        .args(["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-q"])
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rank 1 (") && err.contains("does not see rank 0's DEST"), "{err}");
    // A rerun on one node completes the copy.
    ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-q"], 0);
    let look = Look { owners: true, setid: true, devices: false };
    assert_equal(&scan(&src, look), &scan(&dst, look));
}

/// `-L` under mpirun: a symlink (to a file, to a directory, to a file
/// outside SRC) is copied as what it points to, under its own name, by
/// every rank as by one process: the lead sends each entry's name below
/// DEST with the list (a followed link's entry is its referent's).
#[test]
fn ranks_follow_links_as_one_process_does() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src.join("real"), 3, 1 << 20, 40);
    random_file(&f.root().join("outside"), 300_000, 9);
    std::os::unix::fs::symlink("real/large-0", src.join("to-file")).unwrap();
    std::os::unix::fs::symlink("real/small", src.join("to-dir")).unwrap();
    std::os::unix::fs::symlink("../outside", src.join("to-outside")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let look = Look { owners: is_root(), setid: is_root(), devices: false };
    let (ranks, one) = (f.out("ranks"), f.out("one"));
    let args = |d: &Path| -> Vec<String> {
        let d = d.to_str().unwrap();
        ["archive", "src", "-d", d, "-m", &m.addr, "-a", "-L", "--block-size", "64KiB", "-q"].map(String::from).to_vec()
    };
    let a: Vec<String> = args(&ranks);
    ok(mpirun(2, &exe, &a.iter().map(String::as_str).collect::<Vec<_>>()).output().unwrap(), "mpirun -n 2 archive -L");
    let b: Vec<String> = args(&one);
    ddftp(&b.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    assert_equal(&scan(&one, look), &scan(&ranks, look));
    assert!(std::fs::symlink_metadata(ranks.join("to-dir")).unwrap().is_dir(), "the link's directory, copied");
    assert_eq!(std::fs::read(ranks.join("to-outside")).unwrap(), std::fs::read(f.root().join("outside")).unwrap());
    assert_eq!(std::fs::read(ranks.join("to-file")).unwrap(), std::fs::read(src.join("real/large-0")).unwrap());
}

/// `--link-dest` under mpirun: the lead links (or copies) what the basis
/// holds, the ranks move the rest; the snapshot is what one process
/// makes, its unchanged files the basis's own.
#[test]
fn ranks_snapshot_with_link_dest_as_one_process_does() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    let src = f.root().join("src");
    bulk(&src, 3, 1 << 20, 60);
    let m = Mirror::start(&f.root(), &[]);
    let snap = |d: &Path, n: usize| -> Vec<String> {
        let d = d.to_str().unwrap().to_string();
        let mut a =
            ["archive", "src", "-d", &d, "-m", &m.addr, "-a", "--block-size", "64KiB", "-q"].map(String::from).to_vec();
        if n > 0 {
            a.extend(["--link-dest".into(), "../s1".into()]);
        }
        a
    };
    let (s1, ranks, one) = (f.out("s1"), f.out("ranks"), f.out("one"));
    let a: Vec<String> = snap(&s1, 0);
    ddftp(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    // Another size: a rewrite within the same second is the same to the
    // quick check (and so to rsync).
    random_file(&src.join("large-1"), (1 << 20) + 1, 77);
    random_file(&src.join("new"), 5000, 78);
    let a: Vec<String> = snap(&ranks, 1);
    ok(mpirun(2, &exe, &a.iter().map(String::as_str).collect::<Vec<_>>()).output().unwrap(), "mpirun -n 2 --link-dest");
    let b: Vec<String> = snap(&one, 1);
    ddftp(&b.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    // The same entries and links (the unchanged files are the basis's,
    // so their link counts are not the source's).
    let look = Look { owners: is_root(), setid: is_root(), devices: false };
    assert_equal(&scan(&one, look), &scan(&ranks, look));
    for name in ["large-1", "new", "small/3/f3"] {
        assert!(std::fs::read(ranks.join(name)).unwrap() == std::fs::read(src.join(name)).unwrap(), "{name}");
    }
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(ino(&ranks.join("large-0")), ino(&s1.join("large-0")), "unchanged: the basis's file");
    assert_ne!(ino(&ranks.join("large-1")), ino(&s1.join("large-1")), "changed: moved");
}
