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
        "./usr/share/doc/ddftp/ddftpd.md",
    ] {
        assert!(list.lines().any(|l| l.ends_with(want)), "{want} missing from the package:\n{list}");
    }
    let conffiles = run(Command::new("dpkg-deb").args(["-I"]).arg(&deb).arg("conffiles")).stdout;
    assert_eq!(String::from_utf8(conffiles).unwrap().trim(), "/etc/ddftpd/ddftpd.toml");

    // lintian: no errors (warnings are listed, not failures).
    let o = Command::new("lintian").arg(&deb).output().expect("lintian (apt-get install lintian)");
    let report = String::from_utf8_lossy(&o.stdout);
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E:")).collect();
    assert!(errors.is_empty(), "lintian errors:\n{report}");

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

    // ddftpd started with the unit's command line, the unpacked binary and
    // config (flags appended for this machine win over the config's root,
    // index and listen); the unpacked ddftp gets a file from it.
    let exec_start = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
    let mut words = exec_start.split_whitespace().map(|w| match w {
        "/usr/bin/ddftpd" => exec.to_str().unwrap().to_string(),
        w if w.starts_with("/etc/") => root.join(&w[1..]).to_str().unwrap().to_string(),
        w => w.to_string(),
    });
    let mut cmd = Command::new(words.next().unwrap());
    cmd.args(words);
    let served = f.root();
    let data = random_file(&served.join("pkg.bin"), 5 << 20, 50);
    cmd.arg("--root").arg(&served).arg("--index").arg(f.out("index")).args(["--listen", "127.0.0.1:0"]);
    let m = Mirror::command(cmd, false);
    let out = f.out("pkg.bin");
    let o = Command::new(root.join("usr/bin/ddftp"))
        .args(["get", "pkg.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let v = run(Command::new(&exec).arg("--version"));
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), format!("ddftpd {}", env!("CARGO_PKG_VERSION")));
}
