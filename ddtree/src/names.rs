//! User and group names by id and ids by name (`getpwuid_r` and kin),
//! looked up once each: a tree has few owners and many entries.

use std::collections::HashMap;
use std::ffi::{CStr, CString};

/// Lookups made so far, both ways.
#[derive(Debug, Default)]
pub struct Names {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
    uids: HashMap<Vec<u8>, Option<u32>>,
    gids: HashMap<Vec<u8>, Option<u32>>,
}

impl Names {
    /// The name of user `uid` (empty if it has none here).
    pub fn user(&mut self, uid: u32) -> Vec<u8> {
        self.users.entry(uid).or_insert_with(|| user_name(uid).unwrap_or_default()).clone()
    }

    /// The name of group `gid` (empty if it has none here).
    pub fn group(&mut self, gid: u32) -> Vec<u8> {
        self.groups.entry(gid).or_insert_with(|| group_name(gid).unwrap_or_default()).clone()
    }

    /// The id user `name` has here, if any.
    pub fn uid(&mut self, name: &[u8]) -> Option<u32> {
        *self.uids.entry(name.to_vec()).or_insert_with(|| uid_of(name))
    }

    /// The id group `name` has here, if any.
    pub fn gid(&mut self, name: &[u8]) -> Option<u32> {
        *self.gids.entry(name.to_vec()).or_insert_with(|| gid_of(name))
    }
}

/// Buffer for the `*_r` calls' strings.
const BUF: usize = 16 << 10;

fn user_name(uid: u32) -> Option<Vec<u8>> {
    let mut buf = vec![0 as libc::c_char; BUF];
    // SAFETY: plain data filled by the call, pointing into `buf`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out = std::ptr::null_mut();
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    // SAFETY: on success `pw_name` is a C string in `buf`.
    (r == 0 && !out.is_null()).then(|| unsafe { CStr::from_ptr(pw.pw_name) }.to_bytes().to_vec())
}

fn group_name(gid: u32) -> Option<Vec<u8>> {
    let mut buf = vec![0 as libc::c_char; BUF];
    // SAFETY: as for users.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out = std::ptr::null_mut();
    let r = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    (r == 0 && !out.is_null()).then(|| unsafe { CStr::from_ptr(gr.gr_name) }.to_bytes().to_vec())
}

fn uid_of(name: &[u8]) -> Option<u32> {
    let name = CString::new(name).ok().filter(|n| !n.is_empty())?;
    let mut buf = vec![0 as libc::c_char; BUF];
    // SAFETY: as above.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out = std::ptr::null_mut();
    let r = unsafe { libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    (r == 0 && !out.is_null()).then_some(pw.pw_uid)
}

fn gid_of(name: &[u8]) -> Option<u32> {
    let name = CString::new(name).ok().filter(|n| !n.is_empty())?;
    let mut buf = vec![0 as libc::c_char; BUF];
    // SAFETY: as above.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out = std::ptr::null_mut();
    let r = unsafe { libc::getgrnam_r(name.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    (r == 0 && !out.is_null()).then_some(gr.gr_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_root_both_ways() {
        let mut n = Names::default();
        assert_eq!(n.user(0), b"root");
        assert_eq!(n.uid(b"root"), Some(0));
        assert_eq!(n.gid(b"root"), Some(0));
        assert_eq!(n.uid(b"no-such-user-here"), None);
        assert_eq!(n.uid(b""), None);
    }
}
