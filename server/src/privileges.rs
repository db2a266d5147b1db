//! `ddftpd --user NAME`: give up root once the listeners are bound and the
//! root directory is open. Groups first (the user's, from the group
//! database), then the group id, then the user id: afterwards neither the
//! real, effective nor saved ids are root's, so nothing can take it back.

use std::ffi::CString;
use std::io;

/// Why the switch failed.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("no such user")]
    NoSuchUser,
    #[error("switching to it needs root (running as uid {0})")]
    NotRoot(u32),
    #[error("{0}: {1}")]
    Call(&'static str, io::Error),
}

/// Becomes `name` (all threads: glibc applies set*id to every thread).
pub fn become_user(name: &str) -> Result<(), UserError> {
    let c = CString::new(name).map_err(|_| UserError::NoSuchUser)?;
    // SAFETY: getpwnam returns null or a pointer to a static record, read
    // at once, before any other call that may reuse it.
    let (uid, gid) = unsafe {
        let pw = libc::getpwnam(c.as_ptr());
        if pw.is_null() {
            return Err(UserError::NoSuchUser);
        }
        ((*pw).pw_uid, (*pw).pw_gid)
    };
    // SAFETY: plain system calls on ids.
    let now = unsafe { libc::geteuid() };
    if now == uid && unsafe { libc::getuid() } == uid {
        return Ok(());
    }
    if now != 0 {
        return Err(UserError::NotRoot(now));
    }
    let check =
        |what, r: libc::c_int| if r == 0 { Ok(()) } else { Err(UserError::Call(what, io::Error::last_os_error())) };
    // SAFETY: `c` is a valid C string; the ids come from the user database.
    unsafe {
        check("initgroups", libc::initgroups(c.as_ptr(), gid))?;
        check("setresgid", libc::setresgid(gid, gid, gid))?;
        check("setresuid", libc::setresuid(uid, uid, uid))?;
    }
    // A process that could regain root here would be a bug in the above.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(UserError::Call("dropping root", io::Error::other("root could be regained")));
    }
    Ok(())
}
