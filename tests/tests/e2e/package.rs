//! The Debian package, built as a distributor builds it (`pkg/deb.sh`,
//! cargo-deb) from this run's release binaries: its contents, lintian,
//! the unit under `systemd-analyze verify`, every man page rendered by
//! `man -l`, the bash completion loaded and asked, and ddftpd started with
//! the unit's own command line from the unpacked package, serving a client.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Builds the package from the binaries the tests run; its path.
fn build_deb() -> PathBuf {
    let release = Path::new(WORKSPACE).join("target/release").canonicalize().unwrap();
    assert_eq!(
        bin_dir().canonicalize().unwrap(),
        release,
        "the package holds target/release's binaries: run the tests with --release"
    );
    let o = run(Command::new("bash").arg(Path::new(WORKSPACE).join("pkg/deb.sh")).arg("--no-build"));
    let out = String::from_utf8(o.stdout).unwrap();
    let deb = Path::new(WORKSPACE).join(out.lines().last().expect("deb.sh prints the package's path"));
    assert!(deb.exists(), "{}", deb.display());
    deb
}

#[test]
fn the_debian_package_installs_a_working_hardened_service() {
    let deb = build_deb();
    let f = Fixture::new();

    // What it holds.
    let list = String::from_utf8(run(Command::new("dpkg-deb").arg("-c").arg(&deb)).stdout).unwrap();
    for want in [
        "./usr/bin/ddftp",
        "./usr/bin/ddftpd",
        "./usr/lib/systemd/system/ddftpd.service",
        "./etc/ddftpd/ddftpd.toml",
        "./usr/share/man/man1/ddftp.1.gz",
        "./usr/share/man/man1/ddftp-get.1.gz",
        "./usr/share/man/man1/ddftp-archive.1.gz",
        "./usr/share/man/man1/ddftp-ls.1.gz",
        "./usr/share/man/man8/ddftpd.8.gz",
        "./usr/share/bash-completion/completions/ddftp",
        "./usr/share/bash-completion/completions/ddftpd",
        "./usr/share/zsh/vendor-completions/_ddftp",
        "./usr/share/fish/vendor_completions.d/ddftp.fish",
        "./usr/share/doc/ddftp/copyright",
        "./usr/share/doc/ddftp/README.md",
        "./usr/share/doc/ddftp/docs/ddftpd.md",
    ] {
        assert!(list.lines().any(|l| l.ends_with(want)), "{want} missing from the package:\n{list}");
    }
    let conffiles = run(Command::new("dpkg-deb").args(["-I"]).arg(&deb).arg("conffiles")).stdout;
    assert_eq!(String::from_utf8(conffiles).unwrap().trim(), "/etc/ddftpd/ddftpd.toml");

    // lintian: no error and no warning (those that cannot apply are
    // overridden in the package, each with why: pkg/lintian/ddftp).
    let o = Command::new("lintian").arg(&deb).output().expect("lintian (apt-get install lintian)");
    let report = String::from_utf8_lossy(&o.stdout);
    let told: Vec<&str> = report.lines().filter(|l| l.starts_with("E:") || l.starts_with("W:")).collect();
    assert!(told.is_empty(), "lintian:\n{report}");
    // The maintainer scripts: the systemd steps, and the served directory.
    let info = String::from_utf8(run(Command::new("dpkg-deb").arg("-I").arg(&deb)).stdout).unwrap();
    for script in ["postinst", "prerm", "postrm"] {
        assert!(info.contains(script), "no {script}: {info}");
    }

    // Unpacked as dpkg would install it.
    let root = f.out("installed");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    let unit_path = root.join("usr/lib/systemd/system/ddftpd.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    for hardening in [
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=\n",
        "ReadWritePaths=-/var/lib/ddftpd",
        "PrivateTmp=yes",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(unit.contains(hardening), "{hardening:?} missing from the unit:\n{unit}");
    }

    // systemd-analyze verify: the unit as shipped but for where the binary
    // is (not installed on this machine), its man page found in the package.
    let exec = root.join("usr/bin/ddftpd");
    let here = f.out("verify");
    std::fs::create_dir_all(&here).unwrap();
    let checked = here.join("ddftpd.service");
    std::fs::write(&checked, unit.replace("/usr/bin/ddftpd", exec.to_str().unwrap())).unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&checked)
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .expect("systemd-analyze (apt-get install systemd)");
    let said = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && said.trim().is_empty(), "systemd-analyze verify: {}\n{said}", o.status);

    // Every man page renders.
    let mut pages = 0;
    for sec in ["man1", "man8"] {
        for e in std::fs::read_dir(root.join("usr/share/man").join(sec)).unwrap() {
            let p = e.unwrap().path();
            let o = run(Command::new("man").arg("-l").arg(&p).env("MANWIDTH", "80"));
            let text = String::from_utf8_lossy(&o.stdout);
            let name = p.file_name().unwrap().to_str().unwrap().split('.').next().unwrap().to_string();
            assert!(text.contains("NAME") && text.contains(&name), "{}: {text}", p.display());
            pages += 1;
        }
    }
    assert!(pages >= 10, "{pages} man pages");

    // The bash completion loads and completes subcommands and flags.
    let complete = |words: &str| {
        let script = format!(
            "source {:?}\nCOMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n\
             _ddftp ddftp \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            root.join("usr/share/bash-completion/completions/ddftp")
        );
        let o = run(Command::new("bash").args(["--norc", "-c", &script]));
        String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(complete("ddftp g"), ["get"]);
    assert!(complete("ddftp ''").iter().any(|w| w == "archive"), "{:?}", complete("ddftp ''"));
    assert_eq!(complete("ddftp get --mir"), ["--mirrors"]);
    assert!(complete("ddftp ls -").iter().any(|w| w == "--json"), "{:?}", complete("ddftp ls -"));

    installed_as_shipped(&deb, &root, &unit);
    man_pages_say_what_an_operator_needs(&root);

    // ddftpd started with the unit's command line, the unpacked binary and
    // config (flags appended for this machine win over the config's root,
    // index and listen); the unpacked ddftp gets a file from it.
    let served = f.root();
    let data = random_file(&served.join("pkg.bin"), 5 << 20, 50);
    let m = serve_as_the_unit(&unit, &root, &served, &f.out("index"));
    unpacked_gets(&root, &m, "pkg.bin", &data, &f.out("pkg.bin"));
    let v = run(Command::new(&exec).arg("--version"));
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), format!("ddftpd {}", env!("CARGO_PKG_VERSION")));
}

/// `dpkg-deb -x` then the postinst (its systemd steps stubbed: no systemd
/// here) under DPKG_ROOT: the shipped config's root is made, and ddftpd
/// started with the unit's command line serves it (only the paths moved
/// under the unpacked tree, and a free port); README's links all lead to
/// files the package holds.
fn installed_as_shipped(deb: &Path, root: &Path, unit: &str) {
    let ctl = root.join("DEBIAN");
    run(Command::new("dpkg-deb").arg("-e").arg(deb).arg(&ctl));
    let stubs = root.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    for tool in ["deb-systemd-helper", "deb-systemd-invoke", "systemctl"] {
        let p = stubs.join(tool);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        run(Command::new("chmod").arg("755").arg(&p));
    }
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    run(Command::new("sh").arg(ctl.join("postinst")).arg("configure").env("DPKG_ROOT", root).env("PATH", &path));
    let config = std::fs::read_to_string(root.join("etc/ddftpd/ddftpd.toml")).unwrap();
    let served = config.lines().find_map(|l| l.strip_prefix("root = ")).expect("the config's root").trim_matches('"');
    let dir = root.join(served.trim_start_matches('/'));
    assert!(dir.is_dir(), "the postinst made the config's root {served}");
    let data = random_file(&dir.join("hello.bin"), 1 << 20, 51);
    let m = serve_as_the_unit(unit, root, &dir, &root.join("var/lib/ddftpd/index"));
    unpacked_gets(root, &m, "hello.bin", &data, &root.join("got.bin"));
    // README as installed: every relative link names a file in the package.
    let doc = root.join("usr/share/doc/ddftp");
    let readme = std::fs::read_to_string(doc.join("README.md")).unwrap();
    for link in readme.split("](").skip(1).filter_map(|l| l.split([')', '#']).next()) {
        if link.contains("://") || link.is_empty() {
            continue;
        }
        assert!(doc.join(link).exists(), "README links {link}, which the package does not hold");
    }
}

/// ddftpd started with the unit's command line as is, but for where things
/// are unpacked (every absolute path under `root`), serving `dir`.
fn serve_as_the_unit(unit: &str, root: &Path, dir: &Path, index: &Path) -> Mirror {
    let exec_start = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
    let mut words = exec_start.split_whitespace().map(|w| match w.strip_prefix('/') {
        Some(rest) => root.join(rest).display().to_string(),
        None => w.to_string(),
    });
    let mut cmd = Command::new(words.next().unwrap());
    cmd.args(words).arg("--root").arg(dir).arg("--index").arg(index).args(["--listen", "127.0.0.1:0"]);
    Mirror::command(cmd, false)
}

/// The unpacked ddftp gets `name` from `m` into `out`: exactly `data`.
fn unpacked_gets(root: &Path, m: &Mirror, name: &str, data: &[u8], out: &Path) {
    let o = Command::new(root.join("usr/bin/ddftp"))
        .args(["get", name, "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(out).unwrap(), data);
}

/// `man ddftpd` is enough to run the service: its sections, and every
/// key the config parser takes; the pages name no page that is not there.
fn man_pages_say_what_an_operator_needs(root: &Path) {
    let show = |page: &str| {
        let o = run(Command::new("man").arg("-l").arg(root.join(page)).env("MANWIDTH", "200"));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let d = show("usr/share/man/man8/ddftpd.8.gz");
    for section in ["SYNOPSIS", "CONFIGURATION", "FILES", "ENVIRONMENT", "SIGNALS", "EXIT STATUS", "EXAMPLES"] {
        assert!(d.lines().any(|l| l == section), "ddftpd(8) has no {section}:\n{d}");
    }
    assert!(d.contains("ddftpd - serve files") && !d.contains("EXTRA"), "{d}");
    assert!(d.contains("--config FILE"), "the synopsis names the arguments: {d}");
    // The parser's keys, as it names them for a key it does not know.
    let conf = root.join("probe.toml");
    std::fs::write(&conf, "no-such-key = 1\n").unwrap();
    let o = Command::new(root.join("usr/bin/ddftpd")).arg("--config").arg(&conf).output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    let keys: Vec<&str> = said.split("expected one of").nth(1).expect(&said).split('`').skip(1).step_by(2).collect();
    assert!(keys.len() > 15, "{said}");
    for k in keys {
        assert!(d.lines().any(|l| l.trim_start().starts_with(&format!("{k} = "))), "man ddftpd lacks the key {k}");
    }
    let top = show("usr/share/man/man1/ddftp.1.gz");
    assert!(!top.contains("ddftp-help") && !top.contains("EXTRA") && top.contains("EXIT STATUS"), "{top}");
    for page in std::fs::read_dir(root.join("usr/share/man/man1")).unwrap() {
        let text = show(page.unwrap().path().strip_prefix(root).unwrap().to_str().unwrap());
        for named in text.split_whitespace().filter_map(|w| w.strip_suffix("(1)")) {
            let named = named.trim_start_matches(|c: char| !c.is_alphanumeric());
            // The page's own title line (DDFTP-GET(1)) is upper case.
            if !named.starts_with("ddftp") {
                continue;
            }
            assert!(
                root.join(format!("usr/share/man/man1/{named}.1.gz")).exists(),
                "a page names {named}(1), which is not there"
            );
        }
    }
}
