//! The per-client-address connection cap: one host (a crowd of processes
//! on it, or a loop gone wrong) cannot take every connection slot. A slot
//! is held by a [`Held`] and given back when it is dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Connections open per client address, and the most allowed.
#[derive(Debug)]
pub struct PerClient {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection of an address, counted until dropped.
#[derive(Debug)]
pub struct Held {
    of: Arc<PerClient>,
    ip: IpAddr,
}

impl PerClient {
    pub fn new(max: usize) -> Arc<PerClient> {
        Arc::new(PerClient { max: max.max(1), open: Mutex::default() })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// A slot for one more connection from `ip`, unless it has the most.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Held> {
        let mut open = self.open.lock().expect("not poisoned");
        let n = open.entry(ip).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Held { of: self.clone(), ip })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.of.open.lock().expect("not poisoned");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                // Addresses come and go: the map holds only those connected.
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_at_most_max_and_slots_come_back() {
        let p = PerClient::new(2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let (x, y) = (p.admit(a).unwrap(), p.admit(a).unwrap());
        assert!(p.admit(a).is_none(), "a third from the same address");
        let _z = p.admit(b).expect("another address is not affected");
        drop(x);
        let _w = p.admit(a).expect("a slot came back");
        drop(y);
        assert_eq!(p.open.lock().unwrap().get(&a), Some(&1));
    }
}
