//! Hardening III, items 4 and 21: strangers cannot end a `recv`. Under a
//! 1,024-descriptor limit, 5,000 connections (idle, or greeting with a
//! session of their own) opened before and while a stream moves: the
//! stream completes byte-exact, and a refused stranger is named.

use std::io::Write;
use std::net::TcpStream;

use super::*;

/// `n` connections to `addr`: every other one sends a stranger's `Hello`
/// (a random session of 64 links); all held until dropped. Connections
/// the receiver refuses or drops are not retried.
fn strangers(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut held = vec![];
    for i in 0..n {
        let Ok(mut s) = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(2)) else { continue };
        if i % 2 == 0 {
            let mut hello = vec![1u8];
            hello.extend_from_slice(b"DDNET");
            hello.extend_from_slice(&ddnet::wire::VERSION.to_be_bytes());
            hello.extend_from_slice(&rand::random::<u64>().to_be_bytes());
            hello.extend_from_slice(&0u32.to_be_bytes());
            hello.extend_from_slice(&64u32.to_be_bytes());
            let _ = s.write_all(&hello);
        }
        held.push(s);
    }
    held
}

fn raise_own_descriptor_limit() {
    let want = libc::rlimit { rlim_cur: 20_000, rlim_max: 20_000 };
    // SAFETY: setrlimit with a valid struct; the test needs room for 5,000 sockets.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0;
    need(ok, "room for 5,000 sockets in the test (root, or a hard limit of 20,000 descriptors)");
}

#[test]
fn item04_recv_under_5000_hostile_connections_completes_its_stream() {
    raise_own_descriptor_limit();
    let f = Fixture::new();
    let data = random_file(&f.out("src"), 48 << 20, 4);
    let out = f.out("dst");
    let (mut recv, links, mut err) = receiving(Command::new("sh").arg("-c").arg(format!(
        "ulimit -n 1024 && exec {} recv --listen 127.0.0.1:0,127.0.0.2:0 > {}",
        bin("ddftp").display(),
        out.display()
    )));
    // Read as it comes: a pipe nobody reads would hold recv up.
    let said = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    let first = links.split(',').next().unwrap().to_string();
    // Before the sender: 2,500 strangers.
    let before = strangers(&first, 2500);
    let send = Command::new("sh")
        .arg("-c")
        // Half, a pause while the strangers come, the rest.
        .arg(format!(
            "{{ head -c {half} {src}; sleep 3; tail -c +{next} {src}; }} | {} send --links {links}",
            bin("ddftp").display(),
            half = 24 << 20,
            next = (24 << 20) + 1,
            src = f.out("src").display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While it moves: 2,500 more, on the other link's address too.
    let second = links.split(',').nth(1).unwrap().to_string();
    let during = [strangers(&first, 1250), strangers(&second, 1250)];
    let sent = send.wait_with_output().unwrap();
    assert!(sent.status.success(), "send: {}", String::from_utf8_lossy(&sent.stderr));
    let status = recv.wait().unwrap();
    let rest = said.join().unwrap();
    assert!(status.success(), "recv: {status:?}\n{}", &rest[rest.len().saturating_sub(2000)..]);
    assert!(std::fs::read(&out).unwrap() == data, "the stream arrived byte-exact");
    // Item 21: a stranger refused during the stream is named, and a flood
    // of them is counted, not logged one line each.
    assert!(rest.contains("another session refused") && rest.contains("127.0.0."), "{}", &rest[..rest.len().min(2000)]);
    let lines = rest.matches("another session refused").count();
    assert!(lines <= 3 + 13, "{lines} lines for the strangers:\n{}", &rest[..rest.len().min(2000)]);
    drop((before, during));
}
