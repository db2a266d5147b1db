//! Byte sizes as people write them: `40MB`, `512KiB`, `1.5G`, `4096`.
//!
//! A single letter K/M/G/T is a power of 2, as curl, wget and aria2c read
//! `50M`; with a `B` (KB, MB, GB, TB) it is a power of 10, as storage
//! vendors write it; Ki/Mi/Gi/Ti (with or without `B`) are powers of 2.
//! Any case (`40mb` is `40MB`); a trailing `/s` for rates is optional, and
//! `bit` counts bits in powers of 10 (`400mbit` is 50 MB, as tc and the
//! link figures in the README write it; `bps` too).

use std::fmt;

/// A size string that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {input:?}: {why} (examples: 4096, 256KiB, 40MB, 1.5GiB, 400mbit)")]
pub struct SizeError {
    pub input: String,
    pub why: &'static str,
}

/// A rate limit in bytes a second (`20MB`, `16MiB/s`, `400mbit`); 0 is
/// no limit, as in curl's and aria2c's `--limit-rate 0`.
pub fn parse_rate(input: &str) -> Result<u64, String> {
    parse_size(input).map_err(|e| e.to_string())
}

/// A rate limit as [`parse_rate`] reads it: `None` for 0 (no limit).
pub fn rate_limit(r: u64) -> Option<u64> {
    (r > 0).then_some(r)
}

/// Parses a byte count such as `40MB`, `512KiB`, `1.5G` or `4096`.
pub fn parse_size(input: &str) -> Result<u64, SizeError> {
    let err = |why| SizeError { input: input.to_string(), why };
    let s = input.trim();
    let s = s.strip_suffix("/s").unwrap_or(s);
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(err("no number"));
    }
    let unit = unit.trim().to_ascii_lowercase();
    // Bits: `mbit`, `Gbit/s`, `100mbps`; bytes: anything else (`b` or `B`).
    let (unit, bits, with_b) = match unit.strip_suffix("bits").or_else(|| unit.strip_suffix("bit")) {
        Some(u) => (u, true, true),
        None => match unit.strip_suffix("bps") {
            Some(u) => (u, true, true),
            None => match unit.strip_suffix('b') {
                Some(u) => (u, false, true),
                None => (unit.as_str(), false, false),
            },
        },
    };
    let mult: u64 = match unit {
        "" => 1,
        // `50M` as curl, wget and aria2c read it; `50MB` and `50mbit` decimal.
        "k" if !with_b => 1 << 10,
        "m" if !with_b => 1 << 20,
        "g" if !with_b => 1 << 30,
        "t" if !with_b => 1 << 40,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => return Err(err("unknown unit")),
    };
    if bits {
        let value: f64 = num.parse().map_err(|_| err("not a number"))?;
        let bytes = value * mult as f64 / 8.0;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(err("too large"));
        }
        return Ok(bytes.round() as u64);
    }
    if let Ok(whole) = num.parse::<u64>() {
        return whole.checked_mul(mult).ok_or_else(|| err("too large"));
    }
    let value: f64 = num.parse().map_err(|_| err("not a number"))?;
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(bytes.round() as u64)
}

/// Formats a byte count for people: `1.50 GiB`, `512.0 KiB`, `17 B`.
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut v = self.0 as f64 / 1024.0;
        let mut i = 0;
        while v >= 1024.0 && i + 1 < UNITS.len() {
            v /= 1024.0;
            i += 1;
        }
        write!(f, "{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("40MB"), Ok(40_000_000));
        assert_eq!(parse_size("40M"), Ok(40 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1mbps"), Ok(125_000));
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("1Gi"), Ok(1 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("10kB/s"), Ok(10_000));
        assert_eq!(parse_size(" 2 MiB "), Ok(2 << 20));
    }

    #[test]
    fn any_case_and_bits() {
        assert_eq!(parse_size("40mb"), Ok(40_000_000));
        assert_eq!(parse_size("40Mb"), Ok(40_000_000));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("400mbit"), Ok(50_000_000));
        assert_eq!(parse_size("1Gbit/s"), Ok(125_000_000));
        assert_eq!(parse_size("100Mbps"), Ok(12_500_000));
        assert_eq!(parse_size("8bit"), Ok(1));
        assert_eq!(parse_rate("320mbit"), Ok(40_000_000));
    }

    #[test]
    fn rejects_nonsense() {
        assert!(parse_size("").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("12bitb").is_err());
        assert!(parse_size("1.2.3M").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
    }

    #[test]
    fn human() {
        assert_eq!(HumanBytes(17).to_string(), "17 B");
        assert_eq!(HumanBytes(1536).to_string(), "1.50 KiB");
        assert_eq!(HumanBytes(3 << 29).to_string(), "1.50 GiB");
    }
}
