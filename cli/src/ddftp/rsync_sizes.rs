//! rsync's `--max-size` and `--min-size` for `archive` (the rule is
//! [`ddftp::archive::leaving::Sizes`]).

use clap::Args;
use ddftp::archive::leaving::Sizes;

#[derive(Debug, Args)]
pub struct SizeFlags {
    /// Do not move a file larger than SIZE (rsync's: K, M, G are powers
    /// of 2, KB, MB, GB of 10, a fraction and a trailing +1 or -1 are
    /// taken: 1.5G-1). What DEST has under its name is left as it is.
    #[arg(long, value_name = "SIZE", value_parser = parse_rsync_size)]
    pub max_size: Option<u64>,
    /// Do not move a file smaller than SIZE (as --max-size reads it).
    #[arg(long, value_name = "SIZE", value_parser = parse_rsync_size)]
    pub min_size: Option<u64>,
}

impl SizeFlags {
    pub fn sizes(&self) -> Sizes {
        Sizes { max: self.max_size, min: self.min_size }
    }

    /// The flags given, as a push passes them to its remote end (in
    /// bytes: the remote end reads them the same whatever its version).
    pub fn flags(&self) -> impl Iterator<Item = String> {
        [("--max-size", self.max_size), ("--min-size", self.min_size)]
            .into_iter()
            .filter_map(|(flag, v)| v.map(|v| format!("{flag}={v}")))
    }
}

/// A size as rsync reads `--max-size`'s: ddftp's sizes (`1.5G`, `40MB`,
/// `512KiB`), and a trailing `+1` or `-1` moving it by one byte.
pub fn parse_rsync_size(s: &str) -> Result<u64, String> {
    let (body, by) = match (s.strip_suffix("+1"), s.strip_suffix("-1")) {
        (Some(b), _) if !b.is_empty() => (b, 1i8),
        (_, Some(b)) if !b.is_empty() => (b, -1),
        _ => (s, 0),
    };
    let n = ddftp_proto::units::parse_size(body).map_err(|e| e.to_string())?;
    match by {
        1 => n.checked_add(1).ok_or_else(|| format!("{s:?} is too large")),
        -1 => n.checked_sub(1).ok_or_else(|| format!("{s:?} is below 0")),
        _ => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_rsync_reads_them() {
        assert_eq!(parse_rsync_size("5000"), Ok(5000));
        assert_eq!(parse_rsync_size("4k"), Ok(4096));
        assert_eq!(parse_rsync_size("4KB"), Ok(4000));
        assert_eq!(parse_rsync_size("1.5k-1"), Ok(1535));
        assert_eq!(parse_rsync_size("1m+1"), Ok((1 << 20) + 1));
        assert_eq!(parse_rsync_size("0"), Ok(0));
        // As rsync, after a plain number too; a number ending in 1 is itself.
        assert_eq!(parse_rsync_size("21-1"), Ok(20));
        assert_eq!(parse_rsync_size("41"), Ok(41));
        for bad in ["", "-5", "-1", "+1", "1x", "k", "0-1"] {
            assert!(parse_rsync_size(bad).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_size_or_an_error(s in ".{0,16}") {
            let _ = parse_rsync_size(&s);
        }
    }
}
