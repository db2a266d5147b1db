//! Hardening III, "Done when" 2, for `get`: random `-i` lists (names and
//! `out=`/`dir=` of any bytes: `..`, absolute paths, escapes, newlines,
//! one output named twice), random PATH lists with colliding base names,
//! and Metalinks of random names: nothing outside `-d` changes, no two
//! files of one command land under one final name, and every file
//! reported complete holds its source's bytes. (Random lists for `archive`,
//! with `--delete` and `--backup-dir`: `hostile_mirror::random_lists`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::util::nginx::Nginx;
use crate::util::*;

/// The files the mirrors serve, and their bytes.
const SERVED: [(&str, usize); 5] =
    [("a.bin", 3000), ("d1/s.bin", 70_000), ("d2/s.bin", 300_000), ("d1/t.bin", 10), ("e\u{1b}[1mx.bin", 900)];

/// Every regular file below `at`, by path, with its bytes' SHA-256.
pub(super) fn files(at: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![at.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let m = e.path().symlink_metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            } else {
                out.insert(e.path(), sha256_hex(&std::fs::read(e.path()).unwrap_or_default()));
            }
        }
    }
    out
}

struct World {
    f: Fixture,
    mirror: Mirror,
    web: Nginx,
    sources: BTreeMap<String, String>,
}

impl World {
    fn new() -> World {
        let f = Fixture::new();
        let mut sources = BTreeMap::new();
        for (i, (name, size)) in SERVED.iter().enumerate() {
            let p = f.root().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            sources.insert(name.to_string(), sha256_hex(&random_file(&p, *size, 700 + i as u64)));
        }
        // What lies beside -d: never touched.
        std::fs::create_dir_all(f.out("beside/deep")).unwrap();
        std::fs::write(f.out("beside/deep/keep.txt"), b"keep").unwrap();
        // (Its index kept outside the root, so the root is what is served, unchanged.)
        let index = f.out("index");
        let mirror = Mirror::start(&f.root(), &["--index", index.to_str().unwrap()]);
        let web = Nginx::serve(&f.root(), None);
        World { f, mirror, web, sources }
    }

    /// Runs one command into a fresh -d and checks the three properties;
    /// `names`: the source of each file, in the command's order.
    fn check(&self, round: usize, args: &[String], names: &[String]) -> Result<(), TestCaseError> {
        let d = self.f.out(&format!("d{round}"));
        let outside_before = (files(&self.f.out("beside")), files(&self.f.root()));
        let mut a: Vec<&str> = vec!["get", "-d", d.to_str().unwrap(), "-j", "3", "--json", "--retries", "0"];
        a.extend(args.iter().map(String::as_str));
        let o = std::process::Command::new(bin("ddftp")).args(&a).output().unwrap();
        let code = o.status.code().unwrap_or(-1);
        prop_assert!([0, 1, 2, 5, 7].contains(&code), "exit {}: {}", code, String::from_utf8_lossy(&o.stderr));
        prop_assert_eq!((files(&self.f.out("beside")), files(&self.f.root())), outside_before, "outside -d changed");
        let written = files(&d);
        for p in written.keys() {
            prop_assert!(p.starts_with(&d), "{} is outside -d", p.display());
        }
        if code == 2 {
            return Ok(());
        }
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut outputs = std::collections::HashSet::new();
        for (file, name) in j["files"].as_array().unwrap().iter().zip(names) {
            // A failed file says where it was going: only the complete are checked.
            let Some(output) = file["output"].as_str().filter(|_| file["error"].is_null()) else { continue };
            prop_assert!(outputs.insert(output.to_string()), "two files reported at {}", output);
            let path = file["path"].as_str().unwrap();
            let want = self.sources.get(name);
            let got = written.get(Path::new(output));
            prop_assert!(want.is_some() && got == want, "{} reported complete at {} but holds {:?}", path, output, got);
        }
        Ok(())
    }
}

fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a.bin".to_string()),
        Just("d1/s.bin".to_string()),
        Just("d2/s.bin".to_string()),
        Just("d1/t.bin".to_string()),
        Just("e\u{1b}[1mx.bin".to_string()),
        Just("missing.bin".to_string()),
        Just("../root/a.bin".to_string()),
    ]
}

fn any_out() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just("same.bin"),
        Just("../beside/deep/keep.txt"),
        Just("/etc/evil.bin"),
        Just("x/../../beside/up.bin"),
        Just("sub/o.bin"),
        Just("\u{1b}]0;T\u{7}.bin"),
        Just("n\u{b}l.bin"),
        Just("s.bin"),
    ])
    .prop_map(|o| o.map(String::from))
}

fn any_dir() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![Just("sub"), Just("../beside"), Just("/tmp"), Just("a/./b"), Just("d1")])
        .prop_map(|o| o.map(String::from))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn no_list_writes_outside_or_two_files_under_one_name(
        list in proptest::collection::vec((any_name(), any_out(), any_dir(), any::<bool>()), 1..7),
        paths in proptest::collection::vec(any_name(), 2..6),
        meta in proptest::collection::vec(any_name(), 2..5),
    ) {
        let w = World::new();
        // A -i list: paths on the ddftpd mirror or URLs on the web one.
        let mut text = String::new();
        for (name, out, dir, url) in &list {
            match url {
                true => text.push_str(&format!("{}{name}\n", w.web.url)),
                false => text.push_str(&format!("{name}\n")),
            }
            if let Some(o) = out {
                text.push_str(&format!("  out={o}\n"));
            }
            if let Some(d) = dir {
                text.push_str(&format!("  dir={d}\n"));
            }
        }
        let l = w.f.out("list");
        std::fs::write(&l, text).unwrap();
        let names: Vec<String> = list.iter().map(|(n, ..)| n.clone()).collect();
        w.check(0, &["-i".into(), l.to_str().unwrap().into(), "-m".into(), w.mirror.addr.clone()], &names)?;
        // Several PATHs with colliding base names.
        let mut a = paths.clone();
        a.extend(["-m".to_string(), w.mirror.addr.clone()]);
        w.check(1, &a, &paths)?;
        // A Metalink of those names.
        let file = |name: &String| {
            let sha = w.sources.get(name).cloned().unwrap_or_else(|| "00".repeat(32));
            let name_xml = name.replace('&', "&amp;").replace('<', "&lt;").replace('\u{1b}', "&#27;");
            let url = name.replace('\u{1b}', "%1B").replace('[', "%5B");
            format!("<file name=\"{name_xml}\"><hash type=\"sha-256\">{sha}</hash><url>{}{url}</url></file>", w.web.url)
        };
        let m = w.f.out("m.meta4");
        let xml: String = meta.iter().map(file).collect();
        std::fs::write(&m, format!("<?xml version=\"1.0\"?><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">{xml}</metalink>")).unwrap();
        w.check(2, &["--metalink".into(), m.to_str().unwrap().into()], &meta)?;
    }
}
