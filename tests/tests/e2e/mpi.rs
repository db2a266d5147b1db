//! `mpirun -n 3 ddftp walk` (H-DRQS across ranks, built with `--features
//! mpi`) lists exactly what a one-process walk lists. Fails, saying so,
//! where OpenMPI is not installed (`.ci/run` installs it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

pub(crate) fn have_mpirun() -> bool {
    Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// `ddftp` built with the `mpi` feature, in its own target directory.
pub(crate) fn mpi_ddftp() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = workspace.join("target/mpi");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "ddftp-cli",
            "--features",
            "mpi",
            "--bin",
            "ddftp",
            "--target-dir",
        ])
        .arg(&target)
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "building ddftp --features mpi failed");
    target.join("release/ddftp")
}

/// NUL-terminated records after the header, as path → whole record.
fn records(data: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let body = data.strip_prefix(b"#ddftp-list 2\0".as_slice()).expect("list header");
    let mut map = BTreeMap::new();
    for rec in body.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let path = rec.splitn(6, |&b| b == b' ').nth(5).expect("path field").to_vec();
        assert!(map.insert(path, rec.to_vec()).is_none(), "an entry listed twice");
    }
    map
}

fn make_tree(root: &Path) {
    for i in 0..40 {
        let d = root.join(format!("d{i:02}/sub{}", i % 7));
        std::fs::create_dir_all(&d).unwrap();
        for j in 0..60 {
            std::fs::write(d.join(format!("f{j} x")), vec![b'x'; (i * j) % 97]).unwrap();
        }
    }
    let mut deep = root.join("deep");
    for i in 0..30 {
        deep.push(format!("level{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::os::unix::fs::symlink("d00", root.join("link-to-dir")).unwrap();
    std::fs::write(root.join("new\nline"), b"n").unwrap();
}

#[test]
fn three_ranks_list_exactly_what_one_process_lists() {
    need(have_mpirun(), "OpenMPI (apt-get install openmpi-bin libopenmpi-dev libclang-dev)");
    let exe = mpi_ddftp();
    let f = Fixture::new();
    let root = f.root();
    make_tree(&root);
    let one = ddftp(&["walk", root.to_str().unwrap(), "-o", "-", "-q"], 0);
    let want = records(&one.stdout);
    assert!(want.len() > 2400);
    let list = f.out("ranks.list");
    let out = Command::new("mpirun")
        .args(["-n", "3", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"])
        .arg(&exe)
        .args(["walk", root.to_str().unwrap(), "-t", "2", "--json", "-o", list.to_str().unwrap()])
        .output()
        .expect("run mpirun");
    assert!(
        out.status.success(),
        "mpirun failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got = BTreeMap::new();
    for rank in 0..3 {
        let part = std::fs::read(format!("{}.{rank}", list.display())).unwrap();
        for (k, v) in records(&part) {
            assert!(got.insert(k, v).is_none(), "an entry listed by two ranks");
        }
    }
    assert_eq!(got, want);
    // Rank 0 prints the job's totals, counted as one process counts them.
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object from rank 0");
    let solo = json(&ddftp(&["walk", root.to_str().unwrap(), "--json"], 0));
    for k in ["dirs", "files", "links", "bytes", "errors"] {
        assert_eq!(j[k], solo[k], "{k}");
    }
    assert_eq!(j["per_worker"].as_array().unwrap().len(), 3);
}
