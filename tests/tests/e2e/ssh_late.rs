//! ssh mirrors that answer at different times, against a real OpenSSH
//! server on 127.0.0.1: a command begins with the first that answers and
//! each other one joins the running transfer when its remote ddftpd
//! answers (`get` and `archive`); one that has not answered when the
//! command is done is given up at once, not waited for.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::util::sshd::{gone, Sshd};
use crate::util::*;

/// A remote ddftpd that starts `delay` late when it serves a directory
/// whose name holds "slow" (a far host's login, as seen from here).
fn slow_ddftpd(dir: &Path, delay: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let w = dir.join("slow-ddftpd");
    let script =
        format!("#!/bin/sh\ncase \"$*\" in *slow*) sleep {delay};; esac\nexec '{}' \"$@\"\n", bin("ddftpd").display());
    std::fs::write(&w, script).unwrap();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
    w
}

fn flags(sshd: &Sshd, remote: &Path) -> Vec<String> {
    vec!["-e".into(), sshd.rsh(), "--remote-ddftpd".into(), remote.display().to_string()]
}

/// (bytes, joined_bytes) of the mirror whose name holds `part`, in a
/// transfer's JSON report.
fn sent_by(transfer: &serde_json::Value, part: &str) -> (u64, u64) {
    let ps = transfer["producers"].as_array().expect("producers");
    let of: Vec<_> = ps.iter().filter(|p| p["mirror"].as_str().unwrap_or_default().contains(part)).collect();
    let sum = |k: &str| of.iter().map(|p| p[k].as_u64().unwrap_or(0)).sum();
    (sum("bytes"), sum("joined_bytes"))
}

/// Two mirror directories, "quick" and "slow", each with the same file
/// `f.bin` of `size` bytes; the file's bytes.
fn quick_and_slow(f: &Fixture, size: usize, seed: u64) -> (PathBuf, PathBuf, Vec<u8>) {
    let (quick, slow) = (f.root().join("quick"), f.root().join("slow"));
    std::fs::create_dir_all(&quick).unwrap();
    std::fs::create_dir_all(&slow).unwrap();
    let data = random_file(&quick.join("f.bin"), size, seed);
    std::fs::copy(quick.join("f.bin"), slow.join("f.bin")).unwrap();
    (quick, slow, data)
}

/// `ddftp get f.bin` from `mirrors` (ssh URLs) into `out`, the remote
/// ddftpd `remote`, with `extra` flags; `--json`.
fn get(sshd: &Sshd, mirrors: [&Path; 2], remote: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut v =
        vec!["get".into(), "f.bin".into(), "-m".into(), format!("{},{}", sshd.url(mirrors[0]), sshd.url(mirrors[1]))];
    v.extend(flags(sshd, remote));
    v.extend(["-o".into(), out.display().to_string(), "--json".into(), "-q".into()]);
    v.extend(extra.iter().map(|s| s.to_string()));
    ddftp(&v.iter().map(String::as_str).collect::<Vec<_>>(), 0)
}

#[test]
fn get_begins_with_the_first_ssh_mirror_to_answer_and_a_slow_one_joins() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (quick, slow, data) = quick_and_slow(&f, 24 << 20, 71);
    let remote = slow_ddftpd(&f.root(), "2");
    let out = f.out("got");
    // About 6 s at this rate: the slow mirror answers a third of the way in.
    let run = get(&sshd, [&slow, &quick], &remote, &out, &["--limit-rate", "4MiB"]);
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    let j = json(&run);
    let (q, _) = sent_by(&j, "/quick");
    let (s, s_joined) = sent_by(&j, "/slow");
    assert!(s > 0 && s_joined == s, "the slow mirror joined the running transfer: {j}");
    assert!(q > s * 13 / 10, "the quick mirror worked alone until the slow one answered ({q} vs {s})");
    assert_eq!(gone(&quick), Vec::<String>::new());
    assert_eq!(gone(&slow), Vec::<String>::new());
}

#[test]
fn an_ssh_mirror_that_has_not_answered_when_the_get_is_done_is_not_waited_for() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (quick, slow, data) = quick_and_slow(&f, 4 << 20, 72);
    let remote = slow_ddftpd(&f.root(), "30");
    let out = f.out("got");
    let began = Instant::now();
    let run = get(&sshd, [&quick, &slow], &remote, &out, &[]);
    let took = began.elapsed();
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    assert!(took < Duration::from_secs(15), "the command waited for the silent mirror: {took:?}");
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(!said.contains("slow"), "a mirror given up because the work was done is no failure: {said}");
    assert_eq!(sent_by(&json(&run), "/slow"), (0, 0));
    assert_eq!(gone(&quick), Vec::<String>::new());
}

#[test]
fn archive_begins_with_the_first_ssh_mirror_to_answer_and_a_slow_one_joins() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (quick, slow) = (f.root().join("quick"), f.root().join("slow"));
    for (i, d) in ["a", "b/c", "b/d"].iter().enumerate() {
        std::fs::create_dir_all(quick.join("tree").join(d)).unwrap();
        for k in 0..8 {
            random_file(&quick.join("tree").join(d).join(format!("f{k}")), 1 << 20, 80 + (i * 8 + k) as u64);
        }
    }
    let cp = std::process::Command::new("cp").arg("-a").arg(&quick).arg(&slow).status().unwrap();
    assert!(cp.success());
    let remote = slow_ddftpd(&f.root(), "2");
    let dest = f.out("dest");
    let mut v = vec!["archive".into(), "tree".into(), "-m".into(), format!("{},{}", sshd.url(&slow), sshd.url(&quick))];
    v.extend(flags(&sshd, &remote));
    v.extend(["--dest".into(), dest.display().to_string(), "--json".into(), "-q".into()]);
    v.extend(["--limit-rate".into(), "4MiB".into()]);
    let run = ddftp(&v.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    let diff = std::process::Command::new("diff").arg("-r").arg(quick.join("tree")).arg(&dest).output().unwrap();
    assert!(diff.status.success(), "DEST differs: {}", String::from_utf8_lossy(&diff.stdout));
    let j = json(&run);
    let (q, _) = sent_by(&j["transfer"], "/quick");
    let (s, s_joined) = sent_by(&j["transfer"], "/slow");
    assert!(s > 0 && s_joined == s, "the slow mirror registered the bundle and joined: {j}");
    assert!(q > s * 13 / 10, "the quick mirror worked alone until the slow one answered ({q} vs {s})");
    assert_eq!(gone(&slow), Vec::<String>::new());
}

#[test]
fn a_late_ssh_mirror_serving_another_version_is_not_used() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (quick, slow, data) = quick_and_slow(&f, 24 << 20, 73);
    // The slow host's copy differs in one byte, same size.
    let mut other = data.clone();
    other[5 << 20] ^= 1;
    std::fs::write(slow.join("f.bin"), &other).unwrap();
    let remote = slow_ddftpd(&f.root(), "1");
    let out = f.out("got");
    let run = get(&sshd, [&quick, &slow], &remote, &out, &["--limit-rate", "8MiB"]);
    assert!(std::fs::read(&out).unwrap() == data, "the output is the version the transfer began with");
    assert_eq!(sent_by(&json(&run), "/slow"), (0, 0), "the other version sent nothing");
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(said.contains("/slow") && said.contains("another version"), "said why: {said}");
    assert_eq!(gone(&slow), Vec::<String>::new());
}
