//! The cheapest receivers this machine can run, for the CPU benchmark's
//! floor (`benches/cpu-floor.sh`): what any program spends to take a file
//! off loopback TCP into a file, with and without checking every block.
//! No runtime, no protocol: blocking sockets, one thread per connection,
//! an HTTP GET of a byte range from a server that sends with `sendfile`.
//!
//! ```text
//! receive_floor MODE CONNS SIZE OUT HOST:PORT[,HOST:PORT] PATH
//! ```
//!
//! MODE: `copy` (read each 256 KiB block into memory, `pwrite` it: curl's
//! two copies), `copy-verify` (the same, each block hashed with BLAKE3
//! before it is written: ddftp's checks at no other cost), `splice`
//! (socket to pipe to file: the page cache's copy only), `splice-verify`
//! (the same, each block hashed from a read-only mapping of OUT once it
//! landed: one copy fewer than curl, every block checked). CONNS 1 or 2:
//! with 2 the file's halves come over two connections (to the addresses
//! in turn) on two threads, their writes one at a time (a mutex; the file's
//! lock would be spun on otherwise). The digests are computed, not
//! compared: the floor is what the work costs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

const BLOCK: usize = 256 << 10;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Copy,
    CopyVerify,
    Splice,
    SpliceVerify,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 6 {
        fail("usage: receive_floor copy|copy-verify|splice|splice-verify 1|2 SIZE OUT HOST:PORT[,HOST:PORT] PATH");
    }
    let mode = match args[0].as_str() {
        "copy" => Mode::Copy,
        "copy-verify" => Mode::CopyVerify,
        "splice" => Mode::Splice,
        "splice-verify" => Mode::SpliceVerify,
        other => fail(&format!("unknown mode {other}")),
    };
    let conns: u64 = args[1].parse().unwrap_or_else(|_| fail("CONNS: 1 or 2"));
    let size: u64 = args[2].parse().unwrap_or_else(|_| fail("SIZE: bytes"));
    let addrs: Vec<&str> = args[4].split(',').collect();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&args[3])
        .unwrap_or_else(|e| fail(&format!("{}: {e}", args[3])));
    file.set_len(size).unwrap_or_else(|e| fail(&format!("set_len: {e}")));
    let map = (mode == Mode::SpliceVerify).then(|| Map::of(&file, size));
    let one_writer = Mutex::new(());
    let part = size.div_ceil(conns.max(1));
    std::thread::scope(|s| {
        for i in 0..conns {
            let from = i * part;
            let len = part.min(size - from);
            let addr = addrs[i as usize % addrs.len()];
            let (file, map, one_writer, path) = (&file, map.as_ref(), &one_writer, args[5].as_str());
            s.spawn(move || receive(mode, addr, path, from, len, file, map, one_writer));
        }
    });
}

fn fail(why: &str) -> ! {
    eprintln!("receive_floor: {why}");
    std::process::exit(1);
}

/// OUT mapped read-only: the blocks spliced into it are hashed from the
/// page cache itself.
struct Map {
    at: *const u8,
    len: usize,
}

// SAFETY: a read-only mapping; the threads read disjoint blocks of it.
unsafe impl Sync for Map {}

impl Map {
    fn of(file: &std::fs::File, size: u64) -> Map {
        let len = size as usize;
        // SAFETY: a fresh shared read-only mapping of the whole file.
        let at =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if at == libc::MAP_FAILED {
            fail(&format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Map { at: at.cast(), len }
    }

    fn block(&self, from: u64, len: usize) -> &[u8] {
        assert!(from as usize + len <= self.len);
        // SAFETY: within the mapping, which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.at.add(from as usize), len) }
    }
}

#[allow(clippy::too_many_arguments)]
fn receive(
    mode: Mode,
    addr: &str,
    path: &str,
    from: u64,
    len: u64,
    file: &std::fs::File,
    map: Option<&Map>,
    one_writer: &Mutex<()>,
) {
    let mut sock = TcpStream::connect(addr).unwrap_or_else(|e| fail(&format!("{addr}: {e}")));
    let request = format!(
        "GET /{path} HTTP/1.1\r\nHost: {addr}\r\nRange: bytes={from}-{}\r\nConnection: close\r\n\r\n",
        from + len - 1
    );
    sock.write_all(request.as_bytes()).unwrap_or_else(|e| fail(&format!("send: {e}")));
    skip_head(&mut sock);
    let mut buf = vec![0u8; BLOCK];
    let pipe = matches!(mode, Mode::Splice | Mode::SpliceVerify).then(Pipe::new);
    let mut at = from;
    while at < from + len {
        let n = BLOCK.min((from + len - at) as usize);
        match &pipe {
            None => {
                sock.read_exact(&mut buf[..n]).unwrap_or_else(|e| fail(&format!("receive: {e}")));
                if mode == Mode::CopyVerify {
                    std::hint::black_box(blake3::hash(&buf[..n]));
                }
                let _one = one_writer.lock().unwrap_or_else(|p| p.into_inner());
                file.write_all_at(&buf[..n], at).unwrap_or_else(|e| fail(&format!("write: {e}")));
            }
            Some(pipe) => {
                pipe.carry(&sock, file, at, n, one_writer);
                if let Some(map) = map {
                    std::hint::black_box(blake3::hash(map.block(at, n)));
                }
            }
        }
        at += n as u64;
    }
}

/// Reads the response's head one byte at a time (the body must not be
/// read into a buffer here).
fn skip_head(sock: &mut TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        sock.read_exact(&mut byte).unwrap_or_else(|e| fail(&format!("response: {e}")));
        head.push(byte[0]);
        if head.len() > 16 << 10 {
            fail("response head too long");
        }
    }
    if !head.starts_with(b"HTTP/1.1 206") {
        fail(&format!("not a range reply: {}", String::from_utf8_lossy(&head[..head.len().min(40)])));
    }
}

struct Pipe {
    rd: i32,
    wr: i32,
}

impl Pipe {
    fn new() -> Pipe {
        let mut fds = [0i32; 2];
        // SAFETY: two descriptors written into `fds`.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            fail(&format!("pipe: {}", std::io::Error::last_os_error()));
        }
        // A block at a time (the default 64 KiB would take four).
        // SAFETY: a pipe this process owns.
        unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, BLOCK as libc::c_int) };
        Pipe { rd: fds[0], wr: fds[1] }
    }

    /// `n` bytes from `sock` to `file` at `at`, through the pipe (into the
    /// file one writer at a time).
    fn carry(&self, sock: &TcpStream, file: &std::fs::File, at: u64, n: usize, one_writer: &Mutex<()>) {
        let mut done = 0;
        while done < n {
            // SAFETY: splice between descriptors this process owns.
            let got = unsafe {
                libc::splice(sock.as_raw_fd(), std::ptr::null_mut(), self.wr, std::ptr::null_mut(), n - done, 0)
            };
            if got <= 0 {
                fail(&format!("splice in: {}", std::io::Error::last_os_error()));
            }
            let mut out = 0;
            let _one = one_writer.lock().unwrap_or_else(|p| p.into_inner());
            while out < got {
                let mut off = (at + (done + out as usize) as u64) as libc::loff_t;
                // SAFETY: as above; `off` is ours.
                let put = unsafe {
                    libc::splice(self.rd, std::ptr::null_mut(), file.as_raw_fd(), &mut off, (got - out) as usize, 0)
                };
                if put <= 0 {
                    fail(&format!("splice out: {}", std::io::Error::last_os_error()));
                }
                out += put;
            }
            done += got as usize;
        }
    }
}
