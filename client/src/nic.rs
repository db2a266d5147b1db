//! `--nic IFACE`: an interface's addresses, so users can name NICs instead
//! of looking up their addresses.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `--nic` names no address.
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    #[error("listing interfaces: {0}")]
    List(std::io::Error),
    #[error("no network interface named {0:?}")]
    NoSuchInterface(String),
    #[error("interface {0:?} has no usable address")]
    NoAddress(String),
}

/// The addresses of interface `name`, IPv4 first; an error if it has none
/// or does not exist.
pub fn addresses(name: &str) -> Result<Vec<IpAddr>, NicError> {
    let mut out = vec![];
    let mut seen_iface = false;
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we only read and then free.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(NicError::List(std::io::Error::last_os_error()));
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        if unsafe { CStr::from_ptr(ifa.ifa_name) }.to_bytes() != name.as_bytes() {
            continue;
        }
        seen_iface = true;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its real type.
        match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
            libc::AF_INET => {
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))));
            }
            libc::AF_INET6 => {
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                // Link-local addresses need a scope id a bind cannot carry here.
                if ip.segments()[0] & 0xffc0 != 0xfe80 {
                    out.push(IpAddr::V6(ip));
                }
            }
            _ => {}
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out.sort_by_key(|a| a.is_ipv6());
    match (seen_iface, out.is_empty()) {
        (false, _) => Err(NicError::NoSuchInterface(name.to_string())),
        (true, true) => Err(NicError::NoAddress(name.to_string())),
        (true, false) => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_127_0_0_1() {
        assert_eq!(addresses("lo").unwrap()[0], IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(matches!(addresses("no-such-nic0"), Err(NicError::NoSuchInterface(_))));
    }
}
