//! `--metrics-file F`: a batch job's final figures in the Prometheus text
//! format, for node_exporter's textfile collector. Written whatever the
//! outcome (the exit code is a figure), and written whole: to a temporary
//! file beside F, then renamed, so the collector never reads half of it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Exit;
use ddftp::archive::ArchiveReport;
use ddftp::transfer::TransferReport;

/// A page of gauges, each name's help and type written once.
#[derive(Debug, Default)]
pub struct Page {
    metrics: Vec<Gauge>,
}

/// One name: its help and its samples (labels as written, value).
#[derive(Debug)]
struct Gauge {
    name: String,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

impl Page {
    /// A page for one run of `command` (`get`, `archive`) that moved `what`.
    pub fn new(command: &str, what: &str, exit: Exit) -> Page {
        let mut p = Page::default();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let job = [("command", command), ("what", what)];
        p.gauge("exit_code", "Exit code of the last run (0: complete and verified).", &job, exit as i32 as f64);
        p.gauge("end_timestamp_seconds", "When the last run ended (Unix time).", &job, now.floor());
        p
    }

    /// One sample of `ddftp_NAME{labels}`.
    pub fn gauge(&mut self, name: &str, help: &'static str, labels: &[(&str, &str)], value: f64) {
        let name = format!("ddftp_{name}");
        let mut l = String::new();
        for (i, (k, v)) in labels.iter().enumerate() {
            let sep = if i == 0 { "{" } else { "," };
            // A URL's password never reaches the page (world-readable for
            // the collector).
            let _ = write!(l, "{sep}{k}=\"{}\"", escape(&ddftp::http::auth::hide_user_info(v)));
        }
        if !l.is_empty() {
            l.push('}');
        }
        match self.metrics.iter_mut().find(|g| g.name == name) {
            Some(g) => g.samples.push((l, value)),
            None => self.metrics.push(Gauge { name, help, samples: vec![(l, value)] }),
        }
    }

    pub fn render(&self) -> String {
        let mut o = String::new();
        for Gauge { name, help, samples } in &self.metrics {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, v) in samples {
                let _ = writeln!(o, "{name}{labels} {v}");
            }
        }
        o
    }

    /// Writes the page to `path` whole (temporary file, then rename).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let landing = ddtree::scratch::Landing::new(path);
        let mut f = landing.create()?;
        f.write_all(self.render().as_bytes())?;
        f.sync_all()?;
        drop(f);
        landing.land()
    }
}

/// Writes `page` to `path`; a failure is a warning (the data moved is not
/// less complete for it), named with the file.
pub fn write_or_warn(path: &Path, page: &Page) {
    if let Err(e) = page.write(path) {
        eprintln!("ddftp: warning: cannot write --metrics-file {}: {e}", path.display());
    }
}

/// A label value as the text format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The figures of a `get` (`r`: its report, when it completed).
pub fn get_page(path: &str, exit: Exit, r: Option<&TransferReport>) -> Page {
    let mut p = Page::new("get", path, exit);
    let Some(r) = r else { return p };
    let job = [("command", "get"), ("what", path)];
    p.gauge("seconds", "Length of the last run.", &job, r.seconds);
    p.gauge("bytes", "Bytes of the output moved in the last run.", &job, r.bytes as f64);
    p.gauge("reused_bytes", "Bytes of the output already there (resumed).", &job, r.reused_bytes as f64);
    p.gauge(
        "duplicate_bytes",
        "Bytes received twice (ranges overlapping where pairs met).",
        &job,
        r.duplicate_bytes as f64,
    );
    for m in &r.producers {
        let labels = [("command", "get"), ("what", path), ("mirror", m.mirror.as_str())];
        p.gauge("mirror_bytes", "Bytes each mirror delivered.", &labels, m.bytes as f64);
    }
    p
}

/// The figures of a `get` of several files (`what`: the list, or the
/// names), each file's own figures summed.
pub fn many_page(what: &str, exit: Exit, complete: usize, failed: usize, bytes: u64) -> Page {
    let mut p = Page::new("get", what, exit);
    let job = [("command", "get"), ("what", what)];
    p.gauge("bytes", "Bytes of the outputs moved in the last run.", &job, bytes as f64);
    p.gauge("files", "Files of the last run that are complete.", &job, complete as f64);
    p.gauge("failed_entries", "Files that could not be fetched (exit code 5).", &job, failed as f64);
    p
}

/// The figures of an `archive` (`r`: its report, when it ran to the end).
pub fn archive_page(src: &str, exit: Exit, r: Option<&ArchiveReport>) -> Page {
    let mut p = Page::new("archive", src, exit);
    let Some(r) = r else { return p };
    let job = [("command", "archive"), ("what", src)];
    p.gauge("seconds", "Length of the last run.", &job, r.seconds);
    p.gauge("bytes", "Bytes of regular files moved in the last run.", &job, r.bytes as f64);
    p.gauge("files", "Regular files in the tree, moved or skipped.", &job, r.files as f64);
    p.gauge("skipped_files", "Files skipped, already complete and correct.", &job, r.skipped_files as f64);
    p.gauge("skipped_bytes", "Bytes of the files skipped.", &job, r.skipped_bytes as f64);
    p.gauge("failed_entries", "Entries that could not be copied (exit code 5).", &job, r.failed.len() as f64);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_has_one_help_and_labels_are_escaped() {
        let mut p = Page::new("get", "a \"b\"\\c\n", Exit::Transfer);
        p.gauge("mirror_bytes", "x", &[("mirror", "m1")], 1.0);
        p.gauge("mirror_bytes", "x", &[("mirror", "m2")], 2.0);
        let page = p.render();
        assert_eq!(page.matches("# TYPE ddftp_mirror_bytes gauge").count(), 1);
        assert!(page.contains("ddftp_mirror_bytes{mirror=\"m2\"} 2\n"), "{page}");
        assert!(page.contains(r#"ddftp_exit_code{command="get",what="a \"b\"\\c\n"} 1"#), "{page}");
    }

    #[test]
    fn the_file_is_replaced_whole() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("ddftp.prom");
        std::fs::write(&f, "old").unwrap();
        Page::new("get", "x", Exit::Ok).write(&f).unwrap();
        assert!(std::fs::read_to_string(&f).unwrap().starts_with("# HELP ddftp_exit_code"));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left");
    }
}
