//! The end-to-end tests: real `ddftpd` processes on 127.0.0.1 (and on
//! netbed's shaped links where a test needs them), the `ddftp` binary run
//! as a user runs it. One test binary, a module per area, so the suite
//! links once.

mod util;

mod archive;
mod archive_kinds;
mod archive_mpi;
mod archive_plan;
mod archive_rsync;
mod archive_sync;
mod delta;
mod fan_out;
mod fan_out_relay;
mod fan_out_tree;
mod get;
mod habits;
mod hardening;
mod hostile;
mod http;
mod http_sources;
mod https;
mod integrity;
mod many;
mod mpi;
mod nics;
mod operate;
mod package;
mod pipe;
mod private;
mod readme;
mod rerun;
mod resume;
mod retry;
mod rsync_cvs;
mod rsync_dests;
mod rsync_language;
mod rsync_limits;
mod rsync_links;
mod rsync_maps;
mod rsync_merge;
mod rsync_modifiers;
mod rsync_parts;
mod rsync_relative;
mod rsync_xattr_rules;
mod server_limits;
mod ssh;
mod ssh_late;
mod ssh_rsync;
mod stdout;
mod tls;
mod walk;
mod words;
