//! Every command's `--json`, on success and on failure, against the one
//! schema docs/json.md writes down (its tables are read here): the keys
//! documented and no others, each of its type, nested objects too; and
//! nothing but warnings and errors on stderr.

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::Value;

use crate::util::*;

/// One documented object: its keys (type, optional) and the sections it
/// takes every key of; and per key, the sections its elements (or its
/// object) follow.
#[derive(Default, Debug)]
struct Section {
    keys: BTreeMap<String, (String, bool)>,
    nested: BTreeMap<String, Vec<String>>,
    includes: Vec<String>,
}

/// The sections of docs/json.md, by heading.
fn schema() -> BTreeMap<String, Section> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/json.md")).unwrap();
    let links = |s: &str| -> Vec<String> {
        s.split('[').skip(1).filter_map(|p| p.split_once("](#")).map(|(name, _)| name.to_string()).collect()
    };
    let mut out: BTreeMap<String, Section> = BTreeMap::new();
    let mut at: Option<String> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ").or_else(|| line.strip_prefix("### ")) {
            let name = h.trim().trim_start_matches('`').trim_end_matches('`').to_string();
            out.entry(name.clone()).or_default();
            at = Some(name);
            continue;
        }
        let Some(s) = at.as_ref().and_then(|a| out.get_mut(a)) else { continue };
        if let Some(row) = line.strip_prefix("| `") {
            let cells: Vec<&str> = row.split(" | ").collect();
            let key = cells[0].trim_end_matches('`').to_string();
            let (ty, meaning) = (cells[1].trim().to_string(), cells.get(2).copied().unwrap_or(""));
            s.keys.insert(key.clone(), (ty, meaning.contains("*optional*")));
            let linked = links(meaning);
            if !linked.is_empty() {
                s.nested.insert(key, linked);
            }
        } else if ["every key of [", "the keys of ["].iter().any(|w| line.to_lowercase().contains(w)) {
            s.includes.extend(links(line));
        }
    }
    out
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn fits(ty: &str, v: &Value) -> bool {
    ty.split(" or ").any(|t| t == type_of(v) || (t == "number" && type_of(v) == "integer"))
}

/// Where `v` departs from section `name` (nothing: it follows it).
fn check(s: &BTreeMap<String, Section>, name: &str, v: &Value, at: &str) -> Vec<String> {
    let Some(sec) = s.get(name) else { return vec![format!("{at}: no section {name:?} in docs/json.md")] };
    let Value::Object(o) = v else { return vec![format!("{at}: not an object: {v}")] };
    let mut keys = BTreeMap::new();
    let mut nested = BTreeMap::new();
    for n in sec.includes.iter().map(String::as_str).chain([name]) {
        let Some(part) = s.get(n) else { return vec![format!("{at}: {name} includes {n}, which is not there")] };
        keys.extend(part.keys.iter().map(|(k, t)| (k.clone(), t.clone())));
        nested.extend(part.nested.iter().map(|(k, t)| (k.clone(), t.clone())));
    }
    let mut bad = vec![];
    for (k, x) in o {
        match keys.get(k) {
            None => bad.push(format!("{at}.{k}: not in docs/json.md's {name}")),
            Some((ty, _)) if !fits(ty, x) => bad.push(format!("{at}.{k}: {} where the doc says {ty}", type_of(x))),
            Some(_) => {}
        }
        let Some(follow) = nested.get(k).filter(|f| f.iter().all(|f| s.contains_key(f))) else { continue };
        let items: Vec<&Value> = match x {
            Value::Array(a) => a.iter().collect(),
            Value::Object(_) => vec![x],
            _ => vec![],
        };
        for (i, item) in items.into_iter().enumerate() {
            let tries: Vec<Vec<String>> = follow.iter().map(|f| check(s, f, item, &format!("{at}.{k}[{i}]"))).collect();
            if !tries.iter().any(Vec::is_empty) {
                bad.extend(tries.into_iter().flatten());
            }
        }
    }
    for (k, (_, optional)) in &keys {
        if !optional && !o.contains_key(k) {
            bad.push(format!("{at}.{k}: missing (docs/json.md's {name} has it)"));
        }
    }
    bad
}

/// The command's one object (`ls`: each line) against its sections, and
/// its stderr: warnings and errors only.
fn holds(s: &BTreeMap<String, Section>, what: &str, o: &Output, sections: &[&str]) {
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "{what}: nothing on stdout; stderr: {}", String::from_utf8_lossy(&o.stderr));
    if sections.len() == 1 && sections[0] != "ls" {
        assert_eq!(lines.len(), 1, "{what}: one object: {out}");
    }
    for (i, l) in lines.iter().enumerate() {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {l}"));
        let last = i + 1 == lines.len();
        let name = match sections {
            [one] => *one,
            [each, end] if last && o.status.code() != Some(0) => {
                let _ = each;
                end
            }
            [each, _] => each,
            _ => unreachable!(),
        };
        let bad = check(s, name, &v, what);
        assert!(bad.is_empty(), "{what} against {name}:\n{}\n{v}", bad.join("\n"));
        if last {
            assert_eq!(v["exit_code"].as_i64().map(|c| c as i32), if name == "ls" { None } else { o.status.code() });
        }
    }
    for l in String::from_utf8_lossy(&o.stderr).lines() {
        let told = l.starts_with("ddftp: warning: ") || l.starts_with("ddftp: error: ") || l.starts_with(' ');
        assert!(told || l.is_empty(), "{what}: with --json stderr has warnings and errors only: {l:?}");
    }
}

fn run(args: &[&str]) -> Output {
    std::process::Command::new(bin("ddftp")).args(args).output().unwrap()
}

#[test]
fn every_command_s_json_follows_the_documented_schema() {
    let s = schema();
    assert!(s.len() > 10 && s["get"].includes == ["transfer"], "docs/json.md read: {:?}", s.keys());
    let f = Fixture::new();
    random_file(&f.root().join("a.bin"), 1 << 20, 1);
    std::fs::create_dir_all(f.root().join("tree/sub")).unwrap();
    random_file(&f.root().join("tree/sub/f"), 5000, 2);
    std::os::unix::fs::symlink("sub/f", f.root().join("tree/l")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let dead = format!("127.0.0.1:{}", crate::util::nginx::free_port());
    let o = |n: &str| f.out(n).display().to_string();
    let cases: Vec<(&str, Vec<String>, Vec<&str>)> = vec![
        (
            "get",
            vec!["get", "a.bin", "-m", &m.addr, "-o", &o("a")].into_iter().map(String::from).collect(),
            vec!["get"],
        ),
        ("get, not found", sv(&["get", "gone", "-m", &m.addr, "-o", &o("g"), "--retries", "0"]), vec!["get failure"]),
        ("get, a bad flag", sv(&["get", "a.bin", "--nope"]), vec!["failure"]),
        (
            "get several",
            sv(&["get", "a.bin", "gone", "-m", &m.addr, "-d", &o("d"), "--retries", "0"]),
            vec!["get several"],
        ),
        ("get several, -o", sv(&["get", "a.bin", "gone", "-m", &m.addr, "-o", &o("x")]), vec!["failure"]),
        ("get --check", sv(&["get", "a.bin", "-m", &format!("{},{dead}", m.addr), "--check"]), vec!["get --check"]),
        ("archive", sv(&["archive", "tree", "-m", &m.addr, "--dest", &o("t")]), vec!["archive"]),
        (
            "archive, not found",
            sv(&["archive", "gone", "-m", &m.addr, "--dest", &o("t2"), "--retries", "0"]),
            vec!["archive failure"],
        ),
        ("walk", sv(&["walk", &f.root().display().to_string()]), vec!["walk"]),
        ("walk, not found", sv(&["walk", &o("nothing")]), vec!["failure"]),
        ("ls", sv(&["ls", &format!("{}:tree", m.addr)]), vec!["ls"]),
        ("ls, not found", sv(&["ls", &format!("{}:gone", m.addr)]), vec!["ls", "failure"]),
        ("simulate", sv(&["simulate", "--blocks", "200", "--speeds", "4,2"]), vec!["simulate"]),
        (
            "simulate --receivers",
            sv(&["simulate", "--blocks", "100", "--speeds", "4,2", "--receivers", "3", "--receiver-speeds", "5"]),
            vec!["simulate --receivers"],
        ),
        ("simulate, bad", sv(&["simulate", "--blocks", "100", "--speeds", "0"]), vec!["failure"]),
    ];
    for (what, mut args, sections) in cases {
        args.push("--json".into());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        holds(&s, what, &run(&a), &sections);
    }
}

fn sv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}
