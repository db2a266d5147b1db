//! The command line. Every serving flag is optional here: a value missing
//! from the command line is taken from `--config FILE`, then from the
//! defaults ([`crate::config`] merges them), so the defaults named in the
//! help are applied there, not by clap.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use ddftpd::access::Cidr;

const EXAMPLES: &str = "\
Examples:
  ddftpd --root /srv/data
  ddftpd --root /srv/data --listen 10.0.0.5:7400 --allow 10.0.0.0/8 --token-file /etc/ddftpd/token
  ddftpd --config /etc/ddftpd/ddftpd.toml --metrics 127.0.0.1:9740
  ddftpd index /srv/data

Signals: SIGTERM/SIGINT stop accepting and let running transfers finish
within --grace; SIGHUP reloads the config file, --allow and the token file
and reopens --log-file.
Exit codes: 0 stopped by a signal, 1 could not serve (root, address, TLS
files, user), 2 bad command line or config file.
Docs: man ddftpd, /usr/share/doc/ddftp/ (docs/ddftpd.md in the source).";

/// ddftpd: serves the files under a root directory to ddftp clients
/// (the producer side of Dual-Direction Operations).
#[derive(Debug, Parser)]
#[command(name = "ddftpd", version, after_help = EXAMPLES)]
#[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
pub struct Flags {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Settings file (TOML; keys are the long flag names, e.g.
    /// `root = "/srv/data"`, `allow = ["10.0.0.0/8"]`). Flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory to serve; clients name files relative to it.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Directory of the digest index (default: outside the root, in
    /// $STATE_DIRECTORY/index/ under systemd, else ~/.cache/ddftpd/, one
    /// directory per root; ROOT/.ddftpd-index only if given, never served).
    /// Digests computed while serving are written there too.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Address to listen on, HOST[:PORT] or [IPv6]:PORT (repeatable; port 0
    /// picks a free one). Default: 0.0.0.0:7400.
    #[arg(long = "listen", value_name = "ADDR:PORT")]
    pub listen: Vec<String>,
    /// Cap on the total send rate, in bytes per second: 40MB (decimal),
    /// 512K or 512KiB (binary), 400mbit; 0: no cap.
    #[arg(long, value_name = "RATE", value_parser = ddftp_proto::units::parse_rate)]
    pub rate_limit: Option<u64>,
    /// Follow symlinks that stay inside the root (others are always refused).
    #[arg(long)]
    pub follow_symlinks: bool,
    /// Most connections open at once [default: 1024].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Most connections one client address may have open at once [default: 64].
    #[arg(long, value_name = "N")]
    pub max_per_client: Option<usize>,
    /// Run as this user (and its groups) once the listeners are bound and
    /// the root is open: start as root to bind a low port, serve as nobody.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Only clients from this network may connect: CIDR like 10.0.0.0/8 or
    /// an address (repeatable; default: everyone).
    #[arg(long, value_name = "CIDR", value_parser = Cidr::parse)]
    pub allow: Vec<Cidr>,
    /// Clients must prove they know the token in this file (challenge-response;
    /// the token never crosses the network).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Speak TLS 1.3 only, with this certificate chain (PEM); needs
    /// --tls-key. Clients connect with ddftps://HOST:PORT or --tls.
    #[arg(long, value_name = "CERT.pem")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "KEY.pem")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS. The
    /// subject of each client's certificate is in the access log.
    #[arg(long, value_name = "CA.pem")]
    pub client_ca: Option<PathBuf>,
    /// Close a connection that sends nothing for this many seconds while
    /// idle [default: 300].
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<u64>,
    /// On SIGTERM, let running transfers go on this long before closing
    /// them [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub grace: Option<u64>,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9740).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Rescan the whole root for files to index this often; 0: never (new
    /// files are indexed as they appear anyway, through inotify) [default: 600].
    #[arg(long, value_name = "SECONDS")]
    pub rescan: Option<u64>,
    /// Do not watch the root for new files with inotify (a tree of very
    /// many directories takes a watch each); the rescan still indexes them.
    #[arg(long)]
    pub no_watch: bool,
    /// Log lines as text or as JSON objects (one per line) [default: text].
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Append the log to this file instead of stderr (reopened on SIGHUP,
    /// for logrotate).
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// More log: -v debug, -vv trace (DDFTP_LOG, e.g. `ddftpd=debug`, wins).
    #[arg(short, long, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less log: -q warnings and errors only, -qq errors only.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compute the digests (SHA-256 and chunk manifest) of every file under
    /// DIR now, so no client waits for them later.
    Index {
        /// The root to index (the same DIR as `ddftpd --root DIR`).
        dir: PathBuf,
        /// Directory of the digest index (default: where `ddftpd --root DIR`
        /// keeps it, outside DIR).
        #[arg(long, value_name = "DIR")]
        index: Option<PathBuf>,
        /// Files hashed at once (default: one per core).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
    },
    /// Serve DIR to the one client that started this over ssh (`ddftp get
    /// -m ssh://HOST/DIR` runs it; rsync's `rsync --server` in spirit): on
    /// a free port, TLS with a certificate made for this session, a token
    /// made for it; the address, port, token and the certificate's SHA-256
    /// go to the client on standard output. Only connections that prove
    /// the token are served; it ends when standard input closes (the ssh
    /// session ended). Digests are kept in ~/.cache/ddftpd, never in DIR.
    Session {
        /// The directory to serve (relative to the home directory, as
        /// rsync's HOST:DIR; ~/ is the home directory too).
        dir: PathBuf,
        /// Follow symlinks that stay inside DIR (others are always refused).
        #[arg(long)]
        follow_symlinks: bool,
    },
    /// Print a man page (roff) or a shell completion script for ddftpd.
    #[command(hide = true)]
    Generate {
        #[arg(value_enum)]
        what: Generate,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Generate {
    Man,
    Bash,
    Zsh,
    Fish,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Flags::command().debug_assert();
    }
}
