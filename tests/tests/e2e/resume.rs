//! Interrupted downloads resume from the journal, and nothing incomplete is
//! ever passed off as the output.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

const SIZE: usize = 16 * 1024 * 1024;

fn spawn_get(mirrors: &str, out: &Path, extra: &[&str]) -> Child {
    Command::new(bin("ddftp"))
        .args(["get", "f", "--mirrors", mirrors, "-o", out.to_str().unwrap(), "--quiet", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn journal(out: &Path) -> std::path::PathBuf {
    out.with_file_name(format!("{}.ddftp-journal", out.file_name().unwrap().to_str().unwrap()))
}

fn part(out: &Path) -> std::path::PathBuf {
    out.with_file_name(format!("{}.ddftp-part", out.file_name().unwrap().to_str().unwrap()))
}

/// Bytes the journal says are done (0 while it cannot be read).
fn journaled(out: &Path) -> u64 {
    let Ok(text) = std::fs::read(journal(out)) else { return 0 };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return 0 };
    let j = &v["journal"];
    let bs = j["block_size"].as_u64().unwrap();
    let size = j["size"].as_u64().unwrap();
    j["done"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ((r[1].as_u64().unwrap() + 1) * bs).min(size) - r[0].as_u64().unwrap() * bs)
        .sum()
}

fn wait_for_journal(out: &Path, at_least: u64) {
    let t = Instant::now();
    while journaled(out) < at_least {
        assert!(t.elapsed() < Duration::from_secs(20), "journal never reached {at_least} bytes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn moved(j: &serde_json::Value) -> u64 {
    j["producers"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).sum()
}

#[test]
fn killed_client_resumes_with_only_the_missing_bytes() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), SIZE, 30);
    let a = Mirror::with_rate(&f.root(), "5MB");
    let b = Mirror::with_rate(&f.root(), "3MB");
    let ms = mirrors_arg(&[&a, &b]);
    let o = f.out("f");
    let mut first = spawn_get(&ms, &o, &[]);
    wait_for_journal(&o, SIZE as u64 / 2);
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    assert!(!o.exists(), "no output while incomplete");
    assert!(part(&o).exists() && journal(&o).exists());

    let out = ddftp(&["get", "f", "--mirrors", &ms, "-o", o.to_str().unwrap(), "--quiet", "--json"], 0);
    let j = json(&out);
    assert!(std::fs::read(&o).unwrap() == data, "resumed output differs from the source");
    let (moved, reused) = (moved(&j), j["reused_bytes"].as_u64().unwrap());
    assert!(moved <= SIZE as u64 * 55 / 100, "rerun moved {moved} of {SIZE} bytes");
    assert_eq!(moved + reused, SIZE as u64);
    assert!(!part(&o).exists() && !journal(&o).exists(), "resume files are cleaned up");
}

#[test]
fn damaged_journal_is_refused_and_restart_starts_over() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), SIZE, 31);
    let a = Mirror::with_rate(&f.root(), "8MB");
    let o = f.out("f");
    let mut first = spawn_get(&a.addr, &o, &[]);
    wait_for_journal(&o, SIZE as u64 / 4);
    first.kill().unwrap();
    first.wait().unwrap();
    let text = std::fs::read_to_string(journal(&o)).unwrap();
    std::fs::write(journal(&o), text.replacen("\"done\":[[", "\"done\":[[1", 1)).unwrap();
    let out = ddftp(&["get", "f", "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "--quiet"], 3);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("damaged") && err.contains("--restart"), "{err}");
    assert!(!o.exists());
    ddftp(&["get", "f", "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "--quiet", "--restart"], 0);
    assert!(std::fs::read(&o).unwrap() == data);
}

#[test]
fn ctrl_c_keeps_the_data_for_the_next_run() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), SIZE, 32);
    let a = Mirror::with_rate(&f.root(), "8MB");
    let o = f.out("f");
    let first = spawn_get(&a.addr, &o, &[]);
    wait_for_journal(&o, SIZE as u64 / 4);
    assert!(Command::new("kill").args(["-INT", &first.id().to_string()]).status().unwrap().success());
    let res = first.wait_with_output().unwrap();
    assert_eq!(res.status.code(), Some(130), "{}", String::from_utf8_lossy(&res.stderr));
    assert!(String::from_utf8_lossy(&res.stderr).contains("run the same command again"));
    assert!(!o.exists());
    let j = json(&ddftp(&["get", "f", "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "--quiet", "--json"], 0));
    assert!(j["reused_bytes"].as_u64().unwrap() >= SIZE as u64 / 4);
    assert!(std::fs::read(&o).unwrap() == data);
}

#[test]
fn all_mirrors_gone_keeps_resume_data() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), SIZE, 33);
    let mut a = Mirror::with_rate(&f.root(), "8MB");
    let o = f.out("f");
    let first = spawn_get(&a.addr, &o, &["--retries", "1", "--retry-wait", "0.5"]);
    wait_for_journal(&o, SIZE as u64 / 4);
    a.kill();
    let res = first.wait_with_output().unwrap();
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("every mirror failed") && err.contains("run the same command again"), "{err}");
    assert!(!o.exists() && part(&o).exists());
    let b = Mirror::start(&f.root(), &[]);
    ddftp(&["get", "f", "--mirrors", &b.addr, "-o", o.to_str().unwrap(), "--quiet"], 0);
    assert!(std::fs::read(&o).unwrap() == data);
}

#[test]
fn killed_and_stalled_mirrors_cost_less_than_half_again_the_survivors_time() {
    const BIG: usize = 256 * 1024 * 1024;
    const RATE: f64 = 30e6;
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), BIG, 34);
    let mut ms: Vec<Mirror> = (0..4).map(|_| Mirror::with_rate(&f.root(), "30MB")).collect();
    let o = f.out("f");
    let t0 = Instant::now();
    let child = spawn_get(&mirrors_arg(&ms.iter().collect::<Vec<_>>()), &o, &["--stall-timeout", "1"]);
    wait_for_journal(&o, BIG as u64 * 30 / 100);
    ms[0].kill();
    wait_for_journal(&o, BIG as u64 * 50 / 100);
    let stalled = ms[1].child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &stalled]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed().as_secs_f64();
    let _ = Command::new("kill").args(["-CONT", &stalled]).status();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&o).unwrap() == data);
    let survivors_alone = BIG as f64 / (2.0 * RATE);
    assert!(took <= 1.5 * survivors_alone, "took {took:.2} s; the survivors alone need {survivors_alone:.2} s");
}
