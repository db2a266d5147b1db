//! `man ddftpd`: enough to run the service. The options come from the
//! command line's own definition (clap), every config key with the help
//! of the flag it stands for ([`crate::config::KEYS`]), and the sections an
//! operator looks for: FILES, ENVIRONMENT, SIGNALS, EXIT STATUS, EXAMPLES.

use std::io::Write;

use clap::CommandFactory;

use crate::flags::Flags;

/// Text for roff: a leading `.` or `'` cannot start a request, `\` and `-`
/// are themselves.
fn esc(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    match s.starts_with(['.', '\'']) {
        true => format!("\\&{s}"),
        false => s,
    }
}

/// A paragraph of plain text (one roff line per source line).
fn para(o: &mut String, text: &str) {
    o.push_str(".PP\n");
    for l in text.lines() {
        o.push_str(&esc(l.trim()));
        o.push('\n');
    }
}

/// A tagged paragraph: `tag` in bold, then its text.
fn item(o: &mut String, tag: &str, text: &str) {
    o.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", esc(tag), esc(text)));
}

/// The help a flag shows, one line.
fn help_of(cmd: &clap::Command, long: &str) -> String {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_long_help().or(a.get_help()))
        .map(|h| h.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The page, in roff.
pub fn render(out: &mut dyn Write) -> std::io::Result<()> {
    let cmd = Flags::command();
    let man = clap_mangen::Man::new(cmd.clone()).section("8").title("DDFTPD");
    let mut head = vec![];
    man.render_title(&mut head)?;
    out.write_all(&head)?;
    let mut o = String::new();
    o.push_str(
        ".SH NAME\nddftpd \\- serve files to ddftp clients (the producer side of Dual\\-Direction Operations)\n",
    );
    o.push_str(".SH SYNOPSIS\n");
    o.push_str(".B ddftpd\n[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-\\-root\\fR \\fIDIR\\fR] [\\fB\\-\\-listen\\fR \\fIADDR:PORT\\fR]... [\\fIOPTIONS\\fR]\n.br\n");
    o.push_str(".B ddftpd index\n\\fIDIR\\fR [\\fB\\-\\-index\\fR \\fIDIR\\fR] [\\fB\\-\\-jobs\\fR \\fIN\\fR]\n.br\n");
    o.push_str(".B ddftpd session\n\\fIDIR\\fR\n");
    o.push_str(".SH DESCRIPTION\n");
    para(
        &mut o,
        "ddftpd serves the files under a root directory to ddftp clients: on a client's Start it streams the \
         blocks of a range, increasing or decreasing, within what the client granted, so that two mirrors \
         can work one range from both ends (ddftp get, ddftp archive). It also answers the file's size, \
         SHA-256 and chunk manifest, which it computes once per version of a file and keeps in its index.",
    );
    para(
        &mut o,
        "Paths are confined to the root: absolute paths, .., and symlinks are refused (--follow-symlinks \
         allows those that stay inside). The root is never written to; the digest index lives outside it.",
    );
    // clap's own section, with its heading.
    let mut opts = vec![];
    clap_mangen::Man::new(cmd.clone()).render_options_section(&mut opts)?;
    o.push_str(&String::from_utf8_lossy(&opts));
    o.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_long_about().or(sub.get_about()).map(|a| a.to_string()).unwrap_or_default();
        item(&mut o, &format!("ddftpd {}", sub.get_name()), &about.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    o.push_str(".SH CONFIGURATION\n");
    para(
        &mut o,
        "--config FILE reads settings from a TOML file (the package's is /etc/ddftpd/ddftpd.toml). \
         Each key is a long flag's name and takes the flag's value; a flag given on the command line wins \
         over the file, a list flag (--listen, --allow) replaces the file's whole list. Relative paths are \
         taken from the file's directory. An unknown key, or a value a flag would refuse, is an error \
         (exit 2; at SIGHUP the old settings stay). The keys:",
    );
    for (key, flag, kind) in crate::config::KEYS {
        let help = match flag.strip_prefix("no-") {
            // `watch = false` is `--no-watch`.
            Some(_) => format!("false is --{flag}: {}", help_of(&cmd, flag)),
            None => help_of(&cmd, flag),
        };
        item(&mut o, &format!("{key} = {kind}"), &help);
    }
    for (title, items) in
        [("FILES", FILES), ("ENVIRONMENT", ENVIRONMENT), ("SIGNALS", SIGNALS), ("EXIT STATUS", EXIT_STATUS)]
    {
        o.push_str(&format!(".SH {title}\n"));
        for (tag, what) in items {
            item(&mut o, tag, what);
        }
    }
    o.push_str(".SH EXAMPLES\n");
    for (what, example) in EXAMPLES {
        o.push_str(&format!(".PP\n{}\n.PP\n.RS\n.nf\n{}\n.fi\n.RE\n", esc(what), esc(example)));
    }
    o.push_str(".SH SEE ALSO\n\\fBddftp\\fR(1), \\fBddftp\\-get\\fR(1), \\fBddftp\\-archive\\fR(1), \\fBsystemd.exec\\fR(5); /usr/share/doc/ddftp/docs/ddftpd.md\n");
    o.push_str(&format!(".SH VERSION\n{}\n", env!("CARGO_PKG_VERSION")));
    out.write_all(o.as_bytes())
}

const FILES: &[(&str, &str)] = &[
    ("/etc/ddftpd/ddftpd.toml", "The package's settings file (a conffile), read by the unit's --config."),
    ("/srv/ddftp", "The directory the package's settings serve (made empty at installation)."),
    ("/var/lib/ddftpd/index", "The digest index under the package's unit (its StateDirectory; index in the settings)."),
    (
        "~/.cache/ddftpd/HASH",
        "The digest index when no --index is given and ddftpd runs outside systemd (HASH names the root).",
    ),
    (
        "/usr/lib/systemd/system/ddftpd.service",
        "The hardened unit: a dynamic user, the file system read-only but the index.",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    ("DDFTP_LOG", "A tracing filter that overrides -v and -q, e.g. ddftpd=debug,ddftpd::access=off."),
    ("STATE_DIRECTORY", "Set by systemd for StateDirectory=: the index goes to its index/ without --index."),
    ("XDG_CACHE_HOME, HOME", "Where the index goes without --index outside systemd (XDG_CACHE_HOME, else ~/.cache)."),
    (
        "JOURNAL_STREAM",
        "Set by systemd: when it names stderr, text lines go without a timestamp and with <N> priorities.",
    ),
    ("SSH_CONNECTION", "ddftpd session: the address family it listens on (the ssh server's address)."),
];

const SIGNALS: &[(&str, &str)] = &[
    (
        "SIGTERM, SIGINT",
        "Stop accepting; connections with a stream running go on for up to --grace seconds (default 30), \
         then are told the server is shutting down at a block boundary and closed; exit 0.",
    ),
    (
        "SIGHUP",
        "Read the config file and the token file again: allow, the token and rate-limit apply to new \
         connections (others need a restart); reopen --log-file (logrotate's postrotate). A file that no \
         longer parses is logged and the old settings stay.",
    ),
];

const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Stopped by SIGTERM or SIGINT, after draining; ddftpd index: every file indexed."),
    (
        "1",
        "Could not serve: the root, an address to bind, TLS files, --user, --log-file, the token file; \
         ddftpd index: some file could not be indexed.",
    ),
    ("2", "A bad command line or config file (the message names the flag or key); restarting will not help."),
];

const EXAMPLES: &[(&str, &str)] = &[
    ("Serve a directory on every address, port 7400:", "ddftpd --root /srv/data"),
    (
        "Only to one network, clients proving a shared token:",
        "openssl rand -hex 32 > /etc/ddftpd/token\nddftpd --root /srv/data --allow 10.0.0.0/8 --token-file /etc/ddftpd/token",
    ),
    ("As the package's service, with Prometheus metrics:", "ddftpd --config /etc/ddftpd/ddftpd.toml --metrics 127.0.0.1:9740"),
    ("Index a tree ahead of time, so no client waits for digests:", "ddftpd index /srv/data"),
    ("A client getting a file from two mirrors:", "ddftp get data/big.iso -m mirror1,mirror2 -o big.iso"),
];
