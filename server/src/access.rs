//! Who may connect: `--allow CIDR` (repeatable). No `--allow` means anyone.
//! IPv4-mapped IPv6 peers (`::ffff:a.b.c.d`) are matched as IPv4.

use std::net::IpAddr;

/// Why an `--allow` value is not a network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("{0:?}: not an IP address or CIDR")]
    NotAnAddress(String),
    #[error("{0:?}: prefix must be 0-{1}")]
    Prefix(String, u8),
}

/// A network: address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

impl Cidr {
    /// Parses `10.0.0.0/8`, `::1/128`, or a bare address (a single host).
    pub fn parse(s: &str) -> Result<Cidr, CidrError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.trim().parse().map_err(|_| CidrError::NotAnAddress(s.to_string()))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => {
                p.parse::<u8>().ok().filter(|&p| p <= max).ok_or_else(|| CidrError::Prefix(s.to_string(), max))?
            }
        };
        Ok(Cidr { net, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let bits = |a: &[u8]| a.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
        let (want, got, width) = match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (bits(&n.octets()), bits(&i.octets()), 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (bits(&n.octets()), bits(&i.octets()), 128),
            _ => return false,
        };
        let shift = width - u32::from(self.prefix);
        shift >= 128 || (want >> shift) == (got >> shift)
    }
}

/// Whether `ip` may connect under `allow` (empty: everyone).
pub fn allowed(allow: &[Cidr], ip: IpAddr) -> bool {
    allow.is_empty() || allow.iter().any(|c| c.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains(ip("10.1.2.3")) && !c.contains(ip("10.2.0.1")));
        assert!(c.contains(ip("::ffff:10.1.9.9")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(Cidr::parse("127.0.0.1").unwrap().contains(ip("127.0.0.1")));
        assert!(!Cidr::parse("127.0.0.1").unwrap().contains(ip("127.0.0.2")));
        assert!(Cidr::parse("::1/128").unwrap().contains(ip("::1")));
        assert!(!Cidr::parse("::1/128").unwrap().contains(ip("127.0.0.1")));
        assert!(allowed(&[], ip("1.2.3.4")));
        for bad in ["10.0.0.0/33", "x", "::1/129", "1.2.3.4/-1"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }
}
