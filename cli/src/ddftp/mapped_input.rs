//! `send`'s standard input when it is a regular file: its pieces are
//! mapped, not read. The socket then copies them from the page cache
//! itself: one copy fewer than `read` then `send`. (`sendfile` spares the
//! socket's copy too, but its page-sized pieces cost the receiving end
//! more than they spare on loopback: `docs/data-path.md`.)
//!
//! A file that shrinks below a mapped piece would kill the process with
//! SIGBUS where this process touches the piece's bytes (the kernel's own
//! copies fail with EFAULT instead). So each piece is faulted in when it
//! is mapped (`MADV_POPULATE_READ`: an error for a piece past the file's
//! end, not a signal), a failed send is checked against the file's size,
//! and a SIGBUS while pieces are mapped ends `send` with its cause named
//! rather than a crash.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Once;

use bytes::Bytes;

/// Standard input as a file whose pieces are mapped.
pub struct Input {
    file: File,
    /// Where the next piece starts (standard input's offset follows).
    at: u64,
}

impl Input {
    /// Standard input, if it is a regular file open for reading (anything
    /// else is read as a stream).
    pub fn stdin() -> Option<Input> {
        use std::io::Seek;
        let mut file = File::from(io::stdin().as_fd().try_clone_to_owned().ok()?);
        // SAFETY: F_GETFL on a descriptor this process owns.
        let mode = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) } & libc::O_ACCMODE;
        if !(mode == libc::O_RDONLY || mode == libc::O_RDWR) || !file.metadata().ok()?.is_file() {
            return None;
        }
        // Where standard input stands: `(read 100 bytes; ddftp send) < f`
        // sends from byte 100, as reading would.
        let at = file.stream_position().ok()?;
        Some(Input { file, at })
    }

    /// The next piece, at most `max` bytes, or `None` at the file's end
    /// (its size asked again each time: a file that grows goes on, as
    /// `cat` reads to the end it finds; one now shorter than what was sent
    /// is an error, not a quiet end).
    pub fn next_piece(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        use std::io::Seek;
        let end = self.file.metadata()?.len();
        if end < self.at {
            return Err(shrank_error());
        }
        if self.at == end {
            return Ok(None);
        }
        let n = usize::try_from(end - self.at).unwrap_or(usize::MAX).min(max);
        let piece = map(&self.file, self.at, n)?;
        self.at += n as u64;
        // Standard input's offset past the piece (the descriptor is shared).
        self.file.seek(io::SeekFrom::Start(self.at))?;
        Ok(Some(piece))
    }

    fn shrank_at(&self, at: u64) -> bool {
        self.file.metadata().is_ok_and(|m| m.len() < at)
    }
}

/// Whether standard input is a file now shorter than where its offset
/// stands (past every piece mapped): why a send failed, if so (the
/// socket's copy of a vanished page fails with EFAULT, "Bad address").
pub fn stdin_shrank() -> bool {
    Input::stdin().is_some_and(|i| i.shrank_at(i.at))
}

/// The error of a file that shrank while it was sent.
pub fn shrank_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the input file shrank while it was sent (it was truncated or replaced in place)",
    )
}

/// `n` bytes of `file` from `at`, mapped and faulted in.
fn map(file: &File, at: u64, n: usize) -> io::Result<Bytes> {
    on_sigbus_say_shrank();
    // SAFETY: sysconf only reads.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let skip = (at % page) as usize;
    let from = libc::off_t::try_from(at - skip as u64).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let len = n + skip;
    // SAFETY: a fresh read-only shared mapping of an open file; the
    // kernel picks the address.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), from) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mapped = Mapped { p, len };
    // SAFETY: advice on the mapping just made.
    if unsafe { libc::madvise(p, len, libc::MADV_POPULATE_READ) } != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EFAULT) => shrank_error(),
            _ => e,
        });
    }
    Ok(Bytes::from_owner(mapped).slice(skip..))
}

/// A mapping, unmapped when the last `Bytes` of it goes.
struct Mapped {
    p: *mut libc::c_void,
    len: usize,
}

// SAFETY: read-only memory, unmapped once, by its owner's drop.
unsafe impl Send for Mapped {}
// SAFETY: as above; shared reads only.
unsafe impl Sync for Mapped {}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` mapped bytes, readable while `self` lives.
        unsafe { std::slice::from_raw_parts(self.p.cast(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping this owns, unmapped once.
        unsafe { libc::munmap(self.p, self.len) };
    }
}

/// Installs (once) the SIGBUS handler: the only file memory `send` maps
/// is its input's, so a SIGBUS says the input shrank under a mapping.
fn on_sigbus_say_shrank() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a handler that calls only async-signal-safe functions
        // (write, _exit); the sigaction struct is zeroed plain data.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigbus(_: libc::c_int) {
    const SAY: &[u8] =
        b"ddftp: error: the input file shrank while it was sent (it was truncated or replaced in place)\n";
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, SAY.as_ptr().cast(), SAY.len());
        libc::_exit(crate::Exit::Transfer as i32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pieces_are_the_files_bytes_from_any_offset_and_a_shrunk_file_is_an_error() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 31 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        // An offset off a page boundary, as a partly read input has.
        let mut input = Input { file: f.try_clone().unwrap(), at: 1234 };
        let mut got = vec![];
        while let Some(p) = input.next_piece(10_000).unwrap() {
            assert!(p.len() <= 10_000);
            got.extend_from_slice(&p);
        }
        assert_eq!(got, &data[1234..]);
        assert!(!input.shrank_at(input.at));
        // The file grows: the next piece is the new bytes.
        f.write_all(b"more").unwrap();
        assert_eq!(&input.next_piece(10_000).unwrap().unwrap()[..], b"more");
        // It shrinks: mapping past its end is an error, not a signal.
        let mut late = Input { file: f.try_clone().unwrap(), at: 40_000 };
        f.set_len(10_000).unwrap();
        assert!(input.shrank_at(input.at));
        assert_eq!(input.next_piece(10).unwrap_err().to_string(), shrank_error().to_string());
        assert_eq!(late.next_piece(10).unwrap_err().to_string(), shrank_error().to_string());
        assert_eq!(map(&f, 8192, 8192).unwrap_err().to_string(), shrank_error().to_string());
        late.at = 0;
        assert_eq!(&late.next_piece(100).unwrap().unwrap()[..], &data[..100]);
    }
}
