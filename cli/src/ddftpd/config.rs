//! `--config FILE` and the flags, merged into the settings the server runs
//! with. The rule, in one place: a flag given on the command line wins;
//! otherwise the file's value; otherwise the default. A list flag
//! (`--listen`, `--allow`) given at all replaces the file's whole list; a
//! switch (`--follow-symlinks`, `--no-watch`) can be turned on by either. Relative paths
//! in the file are taken from the file's directory.

use std::path::{Path, PathBuf};

use ddftp_proto::DEFAULT_PORT;
use ddftpd::access::Cidr;
use serde::Deserialize;

use crate::flags::{Flags, LogFormat};

/// Why the settings are not usable (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("config file {0}: {1}")]
    Parse(PathBuf, String),
    #[error("{0}")]
    Invalid(String),
}

/// Every key of the file: its name, the flag it stands for, and its
/// value's form (for `man ddftpd`; a test holds it to the parser's keys).
pub const KEYS: &[(&str, &str, &str)] = &[
    ("root", "root", "\"DIR\""),
    ("index", "index", "\"DIR\""),
    ("listen", "listen", "[\"ADDR:PORT\", ...]"),
    ("rate-limit", "rate-limit", "\"RATE\" or BYTES"),
    ("follow-symlinks", "follow-symlinks", "true|false"),
    ("max-connections", "max-connections", "N"),
    ("max-per-client", "max-per-client", "N"),
    ("user", "user", "\"NAME\""),
    ("allow", "allow", "[\"CIDR\", ...]"),
    ("token-file", "token-file", "\"PATH\""),
    ("tls-cert", "tls-cert", "\"CERT.pem\""),
    ("tls-key", "tls-key", "\"KEY.pem\""),
    ("client-ca", "client-ca", "\"CA.pem\""),
    ("idle-timeout", "idle-timeout", "SECONDS"),
    ("grace", "grace", "SECONDS"),
    ("metrics", "metrics", "\"ADDR:PORT\""),
    ("rescan", "rescan", "SECONDS"),
    ("watch", "no-watch", "true|false"),
    ("log-format", "log-format", "\"text\"|\"json\""),
    ("log-file", "log-file", "\"PATH\""),
];

/// The file: every key is a long flag's name.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FileConfig {
    root: Option<PathBuf>,
    index: Option<PathBuf>,
    listen: Option<Vec<String>>,
    rate_limit: Option<Rate>,
    follow_symlinks: Option<bool>,
    max_connections: Option<usize>,
    max_per_client: Option<usize>,
    user: Option<String>,
    allow: Option<Vec<String>>,
    token_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    idle_timeout: Option<u64>,
    grace: Option<u64>,
    metrics: Option<String>,
    rescan: Option<u64>,
    watch: Option<bool>,
    log_format: Option<LogFormat>,
    log_file: Option<PathBuf>,
}

/// A rate as a number of bytes per second or a string like "40MB".
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Rate {
    Bytes(u64),
    Text(String),
}

/// What the server runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub root: PathBuf,
    pub index: Option<PathBuf>,
    pub listen: Vec<String>,
    pub rate_limit: Option<u64>,
    pub follow_symlinks: bool,
    pub max_connections: usize,
    pub max_per_client: usize,
    pub user: Option<String>,
    pub allow: Vec<Cidr>,
    pub token_file: Option<PathBuf>,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub client_ca: Option<PathBuf>,
    pub idle_timeout: u64,
    pub grace: u64,
    pub metrics: Option<String>,
    pub rescan: u64,
    pub watch: bool,
    pub log_format: LogFormat,
    pub log_file: Option<PathBuf>,
}

impl FileConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.to_path_buf(), e))?;
        let mut c = FileConfig::parse(&text).map_err(|e| ConfigError::Parse(path.to_path_buf(), e))?;
        c.anchor(path.parent().unwrap_or(Path::new(".")));
        Ok(c)
    }

    pub fn parse(text: &str) -> Result<FileConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())
    }

    /// Relative paths of the file as seen from `dir`, the file's directory.
    fn anchor(&mut self, dir: &Path) {
        for p in [
            &mut self.root,
            &mut self.index,
            &mut self.token_file,
            &mut self.tls_cert,
            &mut self.tls_key,
            &mut self.client_ca,
            &mut self.log_file,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
    }
}

/// The settings from `flags` over `file` over the defaults.
pub fn merge(flags: &Flags, file: FileConfig) -> Result<Settings, ConfigError> {
    let bad = ConfigError::Invalid;
    let root =
        flags.root.clone().or(file.root).ok_or_else(|| {
            bad("nothing to serve: give --root DIR (or `root = \"DIR\"` in the --config file)".into())
        })?;
    let rate_limit = match (flags.rate_limit, file.rate_limit) {
        (Some(r), _) => Some(r),
        (None, Some(Rate::Bytes(n))) => {
            Some(ddftp_proto::units::parse_rate(&n.to_string()).map_err(|e| bad(format!("config rate-limit: {e}")))?)
        }
        (None, Some(Rate::Text(t))) => {
            Some(ddftp_proto::units::parse_rate(&t).map_err(|e| bad(format!("config rate-limit: {e}")))?)
        }
        (None, None) => None,
    }
    .and_then(ddftp_proto::units::rate_limit);
    let allow = if flags.allow.is_empty() {
        let list = file.allow.unwrap_or_default();
        list.iter().map(|a| Cidr::parse(a)).collect::<Result<_, _>>().map_err(|e| bad(format!("config allow: {e}")))?
    } else {
        flags.allow.clone()
    };
    let listen = if flags.listen.is_empty() {
        file.listen.unwrap_or_else(|| vec![format!("0.0.0.0:{DEFAULT_PORT}")])
    } else {
        flags.listen.clone()
    };
    if listen.is_empty() {
        return Err(bad("no address to listen on: `listen` is empty in the config file".into()));
    }
    let tls = match (flags.tls_cert.clone().or(file.tls_cert), flags.tls_key.clone().or(file.tls_key)) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(_), None) => return Err(bad("--tls-cert needs --tls-key (the certificate's private key)".into())),
        (None, Some(_)) => return Err(bad("--tls-key needs --tls-cert".into())),
    };
    let client_ca = flags.client_ca.clone().or(file.client_ca);
    if client_ca.is_some() && tls.is_none() {
        return Err(bad("--client-ca needs --tls-cert and --tls-key (client certificates need TLS)".into()));
    }
    let s = Settings {
        root,
        index: flags.index.clone().or(file.index),
        listen,
        rate_limit,
        follow_symlinks: flags.follow_symlinks || file.follow_symlinks.unwrap_or(false),
        max_connections: flags.max_connections.or(file.max_connections).unwrap_or(1024).max(1),
        max_per_client: flags
            .max_per_client
            .or(file.max_per_client)
            .unwrap_or(ddftpd::server::DEFAULT_PER_CLIENT)
            .max(1),
        user: flags.user.clone().or(file.user),
        allow,
        token_file: flags.token_file.clone().or(file.token_file),
        tls,
        client_ca,
        idle_timeout: flags.idle_timeout.or(file.idle_timeout).unwrap_or(300).max(1),
        grace: flags.grace.or(file.grace).unwrap_or(30),
        metrics: flags.metrics.clone().or(file.metrics),
        rescan: flags.rescan.or(file.rescan).unwrap_or(600),
        watch: !flags.no_watch && file.watch.unwrap_or(true),
        log_format: flags.log_format.or(file.log_format).unwrap_or(LogFormat::Text),
        log_file: flags.log_file.clone().or(file.log_file),
    };
    check_ranges(&s)?;
    Ok(s)
}

/// The most connections, and the longest times, a server takes: past
/// them a count no longer fits its semaphore and a time no longer fits a
/// clock (both would panic once serving). The one check for the flags and
/// the file's keys alike.
pub const MAX_CONNECTIONS: usize = 1 << 20;
pub const MAX_SECONDS: u64 = 366 * 86_400;

fn check_ranges(s: &Settings) -> Result<(), ConfigError> {
    let bad = |what: &str, v: u64, max: u64| {
        ConfigError::Invalid(format!("{what} {v}: at most {max} (--{what} on the command line, {what} in the file)"))
    };
    for (what, v) in [("max-connections", s.max_connections), ("max-per-client", s.max_per_client)] {
        if v > MAX_CONNECTIONS {
            return Err(bad(what, v as u64, MAX_CONNECTIONS as u64));
        }
    }
    for (what, v) in [("idle-timeout", s.idle_timeout), ("grace", s.grace), ("rescan", s.rescan)] {
        if v > MAX_SECONDS {
            return Err(bad(what, v, MAX_SECONDS));
        }
    }
    Ok(())
}

/// The settings of this run: the flags over `--config`'s file, read now
/// (at start, and again on SIGHUP).
pub fn settings(flags: &Flags) -> Result<Settings, ConfigError> {
    let file = match &flags.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    merge(flags, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_keys_are_the_parser_s() {
        // serde names every field it takes when it meets one it does not.
        let e = FileConfig::parse("no-such-key = 1").unwrap_err();
        let expected = e.split("expected one of").nth(1).expect("the parser lists its keys");
        let mut parsed: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let mut documented: Vec<&str> = KEYS.iter().map(|k| k.0).collect();
        parsed.sort_unstable();
        documented.sort_unstable();
        assert_eq!(parsed, documented, "{e}");
    }
    use clap::Parser;
    use proptest::prelude::*;

    fn flags(args: &[&str]) -> Flags {
        Flags::try_parse_from(std::iter::once("ddftpd").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn a_flag_wins_over_the_file_which_wins_over_the_default() {
        let file = FileConfig::parse(
            r#"
            root = "/srv/a"
            listen = ["127.0.0.1:1", "127.0.0.1:2"]
            rate-limit = "40MB"
            allow = ["10.0.0.0/8"]
            grace = 5
            max-connections = 7
            "#,
        )
        .unwrap();
        let s = merge(&flags(&["--root", "/srv/b", "--grace", "9"]), file).unwrap();
        assert_eq!(s.root, PathBuf::from("/srv/b"), "the flag wins");
        assert_eq!(s.grace, 9);
        assert_eq!(s.listen, ["127.0.0.1:1", "127.0.0.1:2"], "the file's value without a flag");
        assert_eq!(s.rate_limit, Some(40_000_000));
        assert_eq!(s.max_connections, 7);
        assert_eq!(s.allow, [Cidr::parse("10.0.0.0/8").unwrap()]);
        assert_eq!(s.idle_timeout, 300, "the default without either");
        assert_eq!(s.max_per_client, ddftpd::server::DEFAULT_PER_CLIENT);
    }

    #[test]
    fn a_list_flag_replaces_the_files_list() {
        let file = FileConfig::parse("root = \"/r\"\nallow = [\"10.0.0.0/8\"]\nlisten = [\"127.0.0.1:1\"]").unwrap();
        let s = merge(&flags(&["--allow", "192.168.0.0/16", "--listen", "127.0.0.1:5"]), file).unwrap();
        assert_eq!(s.allow, [Cidr::parse("192.168.0.0/16").unwrap()]);
        assert_eq!(s.listen, ["127.0.0.1:5"]);
    }

    #[test]
    fn mistakes_in_the_file_are_named() {
        let e = FileConfig::parse("root = \"/r\"\nrate_limit = 5").unwrap_err();
        assert!(e.contains("rate_limit"), "an unknown key (the flag is rate-limit): {e}");
        let e = merge(&flags(&[]), FileConfig::parse("allow = [\"10.0.0.0/33\"]\nroot = \"/r\"").unwrap()).unwrap_err();
        assert!(e.to_string().contains("prefix"), "{e}");
        let e = merge(&flags(&[]), FileConfig::default()).unwrap_err();
        assert!(e.to_string().contains("--root"), "{e}");
        let e = merge(&flags(&["--root", "/r", "--tls-cert", "c.pem"]), FileConfig::default()).unwrap_err();
        assert!(e.to_string().contains("--tls-key"), "{e}");
    }

    #[test]
    fn relative_paths_in_the_file_are_from_its_directory() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ddftpd.toml");
        std::fs::write(&p, "root = \"data\"\ntoken-file = \"/etc/t\"").unwrap();
        let s = merge(&flags(&[]), FileConfig::load(&p).unwrap()).unwrap();
        assert_eq!(s.root, d.path().join("data"));
        assert_eq!(s.token_file, Some(PathBuf::from("/etc/t")));
    }

    proptest! {
        #[test]
        fn any_file_text_parses_or_errs_without_panicking(t in "\\PC{0,200}") {
            if let Ok(f) = FileConfig::parse(&t) {
                let _ = merge(&flags(&["--root", "/r"]), f);
            }
        }
    }
}
