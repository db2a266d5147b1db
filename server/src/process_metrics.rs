//! The standard `process_*` metrics every Prometheus client library
//! exports (CPU, memory, descriptors, start time; read from `/proc/self`)
//! and `ddftpd_build_info`, the version as a label: what an operator's
//! dashboards and alerts expect of any exporter.

use std::fmt::Write;

/// The page's `process_*` and `ddftpd_build_info` families.
pub fn render() -> String {
    let mut o = String::with_capacity(1024);
    let c = |o: &mut String, name: &str, help: &str, kind: &str, v: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    };
    // SAFETY: sysconf reads a constant.
    let (tick, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    if let Some(s) = stat() {
        let ticks = |i: usize| s.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let tick = tick.max(1) as f64;
        c(
            &mut o,
            "process_cpu_seconds_total",
            "User and system CPU time spent, seconds.",
            "counter",
            (ticks(11) + ticks(12)) / tick,
        );
        c(&mut o, "process_virtual_memory_bytes", "Virtual memory size, bytes.", "gauge", ticks(20));
        c(
            &mut o,
            "process_resident_memory_bytes",
            "Resident memory size, bytes.",
            "gauge",
            ticks(21) * page.max(1) as f64,
        );
        if let Some(boot) = boot_time() {
            c(
                &mut o,
                "process_start_time_seconds",
                "Start time since the epoch, seconds.",
                "gauge",
                boot + ticks(19) / tick,
            );
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        c(&mut o, "process_open_fds", "Open file descriptors.", "gauge", fds.count().saturating_sub(1) as f64);
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        c(&mut o, "process_max_fds", "Most open file descriptors allowed.", "gauge", lim.rlim_cur as f64);
    }
    let _ = writeln!(
        o,
        "# HELP ddftpd_build_info The running ddftpd's version (the value is 1).\n# TYPE ddftpd_build_info gauge\n\
         ddftpd_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    o
}

/// `/proc/self/stat`'s fields after the command name (field 3 first), which
/// may hold spaces and parentheses: read from after its last `)`.
fn stat() -> Option<Vec<String>> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(String::from).collect())
}

/// The boot time, seconds since the epoch (`/proc/stat`'s `btime`).
fn boot_time() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    s.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_families_are_there_with_numbers() {
        // Some CPU time to count (a clock tick is 10 ms).
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let page = super::render();
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"] {
            let line = page.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{page}"));
            let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(v > 0.0, "{line}");
        }
        assert!(page.contains("process_open_fds ") && page.contains("ddftpd_build_info{version=\""), "{page}");
    }
}
