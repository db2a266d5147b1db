//! Hardening III, "Done when" 2, for `get` against a scripted hostile
//! mirror ([`FakeMirror`]): random lists of files whose names hold any
//! bytes a list or an argument can carry, each served honestly or with a
//! lie (a flipped block, bytes cut short, a `Stat` SHA-256 of other bytes,
//! a size larger than what is sent, or other bytes described consistently),
//! fetched as a `-i` list, as several PATHs and as a Metalink. Nothing
//! outside `-d` changes, no two files land under one final name, and a file
//! reported complete holds exactly what the mirror described and sent, and
//! what the list or Metalink named by checksum where it did.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use proptest::prelude::*;

use super::random_outputs::files;
use crate::util::fake_mirror::{FakeMirror, Script, Served};
use crate::util::*;

/// How the mirror serves one file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lie {
    Honest,
    /// One byte of one block flipped.
    FlipByte,
    /// Its last bytes never sent.
    Short,
    /// `Stat`'s SHA-256 is of other bytes (the manifest is right).
    Digest,
    /// `Stat` and manifest describe a longer file than is sent.
    Longer,
    /// Other bytes than the truth, described and sent alike: only a
    /// checksum from the list or Metalink can tell.
    Consistent,
}

impl Lie {
    /// Whether the mirror's own words betray it (no list checksum needed).
    fn self_betraying(self) -> bool {
        !matches!(self, Lie::Honest | Lie::Consistent)
    }
}

/// One listed file: its name, true bytes and how it is served.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    truth: Vec<u8>,
    lie: Lie,
    at: usize,
}

impl Entry {
    fn served(&self) -> Served {
        let mut sent = self.truth.clone();
        let at = self.at % sent.len().max(1);
        let mut claimed = sent.clone();
        let mut digest_lie = false;
        match self.lie {
            Lie::Honest => {}
            Lie::FlipByte => sent[at] ^= 0x20,
            Lie::Short => sent.truncate(at),
            Lie::Digest => digest_lie = true,
            Lie::Longer => claimed.extend_from_slice(b"more"),
            Lie::Consistent => {
                sent[at] ^= 0x20;
                claimed = sent.clone();
            }
        }
        Served { claimed, digest_lie, sent }
    }
}

/// Names with any character a list line or an argument can hold: escapes,
/// bidi controls, `..`, spaces, `%`, non-ASCII, directories.
fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}\\.bin",
        "[a-z]{1,3}/[a-z]{1,3}",
        "(\\.\\./)?[a-z\\x01-\\x09\\x0b-\\x1f\\x7f \u{202e}é%&<>\"'=#.-]{1,10}",
        Just("../x".to_string()),
        Just("same/s.bin".to_string()),
        Just("other/s.bin".to_string()),
    ]
}

fn any_entry() -> impl Strategy<Value = Entry> {
    let lie = prop_oneof![
        3 => Just(Lie::Honest),
        1 => Just(Lie::FlipByte),
        1 => Just(Lie::Short),
        1 => Just(Lie::Digest),
        1 => Just(Lie::Longer),
        1 => Just(Lie::Consistent),
    ];
    (any_name(), proptest::collection::vec(any::<u8>(), 1..20_000), lie, any::<usize>())
        .prop_map(|(name, truth, lie, at)| Entry { name, truth, lie, at })
}

struct World {
    f: Fixture,
    mirror: FakeMirror,
    /// The first entry of each name (the one the mirror serves).
    by_name: HashMap<String, Entry>,
}

impl World {
    /// Runs one command into a fresh -d; `names`: each file's name in the
    /// command's order; `checked`: whether the command gave each file's
    /// true SHA-256.
    fn check(&self, round: usize, args: &[String], names: &[String], checked: bool) -> Result<(), TestCaseError> {
        let d = self.f.out(&format!("d{round}"));
        let beside = self.f.out("beside");
        let before = files(&beside);
        let mut a: Vec<String> =
            ["get", "-d", d.to_str().unwrap(), "-j", "3", "--json", "--retries", "0"].map(String::from).to_vec();
        // The mirror first: a PATH may start with `-` (then `--` goes before the PATHs).
        a.extend(["-m".to_string(), self.mirror.addr.clone()]);
        a.extend(args.iter().cloned());
        let o = std::process::Command::new(bin("ddftp")).args(&a).output().unwrap();
        let code = o.status.code().unwrap_or(-1);
        let err = String::from_utf8_lossy(&o.stderr);
        prop_assert!([0, 1, 2, 3, 5].contains(&code), "exit {}: {}", code, err);
        prop_assert_eq!(files(&beside), before, "outside -d changed");
        if code == 2 {
            return Ok(());
        }
        let written = files(&d);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        // One file gets the one-file report; several, one report each.
        let reported = j["files"].as_array().cloned().unwrap_or_else(|| vec![j.clone()]);
        prop_assert_eq!(reported.len(), names.len(), "{}", j);
        let mut outputs = HashSet::new();
        for (file, name) in reported.iter().zip(names) {
            let Some(output) = file["output"].as_str().filter(|_| file["error"].is_null()) else { continue };
            prop_assert!(Path::new(output).starts_with(&d), "{} is outside -d", output);
            prop_assert!(outputs.insert(output.to_string()), "two files reported at {}", output);
            let e = &self.by_name[name];
            prop_assert!(!e.lie.self_betraying(), "{:?} ({:?}) reported complete at {}", name, e.lie, output);
            prop_assert!(!(checked && e.lie == Lie::Consistent), "{:?}: a checksum mismatch reported complete", name);
            let served = sha256_hex(&e.served().sent);
            prop_assert_eq!(written.get(Path::new(output)), Some(&served), "{:?} at {}", name, output);
            prop_assert_eq!(file["sha256"].as_str(), Some(served.as_str()), "{:?}", name);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn a_lying_mirror_gets_nothing_reported_complete_or_written_outside(
        entries in proptest::collection::vec(any_entry(), 1..7),
        sums in proptest::collection::vec(any::<bool>(), 7),
    ) {
        let f = Fixture::new();
        std::fs::create_dir_all(f.out("beside/deep")).unwrap();
        std::fs::write(f.out("beside/deep/keep.txt"), b"keep").unwrap();
        let mut by_name = HashMap::new();
        for e in &entries {
            by_name.entry(e.name.clone()).or_insert_with(|| e.clone());
        }
        let served = by_name.iter().map(|(n, e): (&String, &Entry)| (n.clone(), e.served())).collect();
        let mirror = FakeMirror::start(Script { files: served, ..Script::default() });
        let w = World { f, mirror, by_name };
        let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
        let truth = |n: &String| sha256_hex(&w.by_name[n].truth);

        // A -i list, each entry with or without its true checksum. (A name
        // a line cannot hold as one path is left out: aria2c's format takes
        // `#` for a comment, leading blanks for an option, tabs between
        // sources, and trims the ends.)
        let listable = |n: &&String| n.trim() == n.as_str() && !n.starts_with('#') && !n.contains('\t');
        let names: Vec<String> = names.iter().filter(listable).cloned().collect();
        let mut text = String::new();
        for (n, sum) in names.iter().zip(&sums) {
            text.push_str(&format!("{n}\n"));
            if *sum {
                text.push_str(&format!("  checksum=sha-256={}\n", truth(n)));
            }
        }
        let l = w.f.out("list");
        std::fs::write(&l, text).unwrap();
        w.check(0, &["-i".into(), l.to_str().unwrap().into()], &names, false)?;
        // The same, every entry with its checksum.
        let text: String = names.iter().map(|n| format!("{n}\n  checksum=sha-256={}\n", truth(n))).collect();
        std::fs::write(&l, text).unwrap();
        w.check(1, &["-i".into(), l.to_str().unwrap().into()], &names, true)?;
        // Several PATHs, after `--`: a name such as `-e` is a PATH there
        // (before it, an option, as for any command).
        let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
        let paths: Vec<String> = std::iter::once("--".to_string()).chain(names.iter().cloned()).collect();
        w.check(2, &paths, &names, false)?;
        // A Metalink with the true SHA-256 of each, served by the mirror.
        let xml: String = names
            .iter()
            .map(|n| {
                let esc = n.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
                let esc: String = esc.chars().map(|c| if c.is_control() { format!("&#{};", c as u32) } else { c.to_string() }).collect();
                format!("<file name=\"{esc}\"><hash type=\"sha-256\">{}</hash></file>", truth(n))
            })
            .collect();
        let m = w.f.out("m.meta4");
        std::fs::write(&m, format!("<?xml version=\"1.0\"?><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">{xml}</metalink>")).unwrap();
        w.check(3, &["--metalink".into(), m.to_str().unwrap().into()], &names, true)?;
    }
}
