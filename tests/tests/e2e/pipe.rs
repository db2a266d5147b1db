//! `tar c | ddftp send --links ...` on one side, `ddftp recv --listen ... |
//! tar x` on the other: the tree arrives intact over several links.

use std::process::{Command, Stdio};

use crate::util::*;

#[test]
fn tar_through_three_links() {
    let f = Fixture::new();
    let src = f.root();
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    random_file(&src.join("a/big"), 20_000_000, 41);
    random_file(&src.join("a/b/small"), 1234, 42);
    std::fs::write(src.join("empty"), b"").unwrap();
    let dst = f.dir.path().join("dst");
    std::fs::create_dir(&dst).unwrap();

    let (mut recv, links, _err) = receiving(Command::new("sh").arg("-c").arg(format!(
        "{} recv --listen 127.0.0.1:0,127.0.0.2:0,127.0.0.3:0 | tar x -C {}",
        bin("ddftp").display(),
        dst.display()
    )));
    assert_eq!(links.split(',').count(), 3);

    let send = Command::new("sh")
        .arg("-c")
        .arg(format!("tar c -C {} . | {} send --links {links}", src.display(), bin("ddftp").display()))
        .output()
        .unwrap();
    assert!(send.status.success(), "send: {}", String::from_utf8_lossy(&send.stderr));
    let summary = String::from_utf8_lossy(&send.stderr);
    assert!(summary.contains("over 3 links"), "{summary}");
    assert!(recv.wait().unwrap().success(), "recv | tar x failed");
    for p in ["a/big", "a/b/small", "empty"] {
        assert_eq!(std::fs::read(dst.join(p)).unwrap(), std::fs::read(src.join(p)).unwrap(), "{p}");
    }
}

#[test]
fn send_with_no_receiver_fails_clearly() {
    // Port 1 on loopback: nobody listens.
    let out =
        Command::new(bin("ddftp")).args(["send", "--links", "127.0.0.1:1"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A link lost mid-stream (its connection cut) is connected again by
/// `send` and taken back by `recv`; it carries its part again, the
/// output is byte-exact and both ends say so.
#[test]
fn a_lost_link_comes_back() {
    lost_link_comes_back(false);
}

/// The same over TLS: the link's new connection does its own handshake.
#[test]
fn a_lost_link_comes_back_over_tls() {
    lost_link_comes_back(true);
}

fn lost_link_comes_back(tls: bool) {
    let f = Fixture::new();
    let pki = crate::util::pki::Pki::new(f.dir.path(), "ddftp test CA");
    let srv = pki.issue("receiver", "IP:127.0.0.1,IP:127.0.0.2", false);
    let (recv_tls, send_tls) = match tls {
        true => (
            format!("--tls-cert '{}' --tls-key '{}'", srv.cert(), srv.key()),
            vec!["--tls".to_string(), "--ca-file".to_string(), pki.ca().to_string()],
        ),
        false => (String::new(), vec![]),
    };
    let input = f.root().join("in");
    let data = random_file(&input, 48 << 20, 43);
    let out = f.out("got");
    let (mut recv, links, mut recv_err) = receiving(Command::new("sh").arg("-c").arg(format!(
        "{} recv --listen 127.0.0.1:0,127.0.0.2:0 {recv_tls} > {}",
        bin("ddftp").display(),
        out.display()
    )));
    let addrs: Vec<std::net::SocketAddr> = links.split(',').map(|a| a.parse().unwrap()).collect();
    // Link 2 goes through a forwarder that cuts its first connection
    // after 512 KB. The input goes in 1 MiB at a time until the cut (and
    // at least 16 MiB), then pauses 1.5 s, so the link is back (connected
    // again within 0.1 s) while there is more to carry, however slowly
    // the forwarder got to the cut on a busy machine.
    const CUT: u64 = 512_000;
    let via = std::sync::Arc::new(cut::cut_first(addrs[1], CUT, std::time::Duration::ZERO));
    let mut sender = Command::new(bin("ddftp"))
        .args(["send", "--links", &format!("{},{}", addrs[0], via.at)])
        .args(&send_tls)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = sender.stdin.take().unwrap();
    let (feed, cut) = (data.clone(), via.clone());
    let feeder = std::thread::spawn(move || {
        let mut at = 0;
        for piece in feed.chunks(1 << 20) {
            if at >= 16 << 20 && cut.back() {
                break;
            }
            std::io::Write::write_all(&mut stdin, piece).unwrap();
            at += piece.len();
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::io::Write::write_all(&mut stdin, &feed[at..]).unwrap();
    });
    let send = sender.wait_with_output().unwrap();
    feeder.join().unwrap();
    let said = String::from_utf8_lossy(&send.stderr);
    assert!(send.status.success(), "send: {said}");
    assert!(said.contains("connecting it again every 0.1 s") && said.contains("is back"), "{said}");
    assert!(said.contains("came back once") && said.contains("sent again"), "{said}");
    assert!(recv.wait().unwrap().success(), "recv failed");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut recv_err, &mut rest).unwrap();
    assert!(rest.contains("came back once"), "{rest}");
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    // The link carried its part after it came back (more than its
    // greeting and acknowledgements).
    assert!(via.carried_after() > 64 << 10, "{} bytes after the cut; {said}", via.carried_after());
}

/// Every link lost for 3 s (their ports refuse connections meanwhile):
/// the stream waits, both ends, the links come back and it goes on;
/// with `--retries 0` the sender fails instead, with the reason.
#[test]
fn every_link_lost_for_3_s_and_back() {
    let f = Fixture::new();
    let input = f.root().join("in");
    let data = random_file(&input, 32 << 20, 44);
    let out = f.out("got");
    // The sender's output, how long it took, and whether the receiver
    // ended well (it is stopped if the sender failed).
    let run = |retries: &str| {
        let (mut recv, links, _err) = receiving(Command::new("sh").arg("-c").arg(format!(
            "exec {} recv --listen 127.0.0.1:0,127.0.0.2:0 > {}",
            bin("ddftp").display(),
            out.display()
        )));
        let down = std::time::Duration::from_secs(3);
        let via: Vec<String> =
            links.split(',').map(|a| cut::cut_first(a.parse().unwrap(), 2_000_000, down).at.to_string()).collect();
        let t = std::time::Instant::now();
        let send = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "(head -c 8388608 {in}; sleep 0.5; tail -c +8388609 {in}) | {} send --links {} --retry-wait 0.5 --retries {retries}",
                bin("ddftp").display(),
                via.join(","),
                in = input.display()
            ))
            .output()
            .unwrap();
        let took = t.elapsed();
        if !send.status.success() {
            let _ = recv.kill();
        }
        (send, took, recv.wait().unwrap().success())
    };
    let (send, took, received) = run("8");
    let said = String::from_utf8_lossy(&send.stderr);
    assert!(send.status.success() && received, "send: {said}");
    assert!(took >= std::time::Duration::from_secs(3), "it waited out the outage: {took:?}");
    assert_eq!(said.matches("came back once").count(), 2, "{said}");
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    let (send, _, _) = run("0");
    let said = String::from_utf8_lossy(&send.stderr);
    assert_eq!(send.status.code(), Some(1), "{said}");
    assert!(said.contains("every link was lost and none came back"), "{said}");
}

/// A file on standard input is sent from where its offset stands (a
/// command before `send` read its head), a piece mapped at a time, over
/// plain links and over TLS (which encrypts from the mapping); its offset
/// is left at the file's end, as reading it would leave it.
#[test]
fn a_file_on_stdin_goes_from_its_offset_plain_and_over_tls() {
    let f = Fixture::new();
    let pki = crate::util::pki::Pki::new(f.dir.path(), "ddftp test CA");
    let srv = pki.issue("receiver", "IP:127.0.0.1,IP:127.0.0.2", false);
    let input = f.root().join("in");
    let data = random_file(&input, (9 << 20) + 123, 45);
    for tls in [false, true] {
        let (recv_tls, send_tls) = match tls {
            true => (
                format!("--tls-cert '{}' --tls-key '{}'", srv.cert(), srv.key()),
                format!("--tls --ca-file '{}'", pki.ca()),
            ),
            false => (String::new(), String::new()),
        };
        let out = f.out(&format!("got-{tls}"));
        let (mut recv, links, _err) = receiving(Command::new("sh").arg("-c").arg(format!(
            "exec {} recv --listen 127.0.0.1:0,127.0.0.2:0 {recv_tls} > {}",
            bin("ddftp").display(),
            out.display()
        )));
        let send = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{{ dd bs=1000 count=1 of=/dev/null 2>/dev/null; {} send --links {links} {send_tls} -q && echo sent && cat | wc -c; }} < '{}'",
                bin("ddftp").display(),
                input.display()
            ))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&send.stdout);
        assert!(send.status.success(), "tls {tls}: {said} {}", String::from_utf8_lossy(&send.stderr));
        assert_eq!(said.split_whitespace().collect::<Vec<_>>(), ["sent", "0"], "tls {tls}: left after send");
        assert!(recv.wait().unwrap().success(), "tls {tls}: recv failed");
        assert!(std::fs::read(&out).unwrap() == data[1000..], "tls {tls}: the output differs");
    }
}

/// A file on standard input cut short while it is sent (the receiver's
/// output held up, so the sender waits mid-file): `send` fails with that
/// cause named, not a crash (its pieces are mapped) and not a quiet end.
#[test]
fn a_file_on_stdin_cut_short_while_it_is_sent_fails_with_the_cause() {
    let f = Fixture::new();
    let input = f.root().join("in");
    random_file(&input, 128 << 20, 46);
    let (mut recv, links, _err) = receiving(
        Command::new("sh")
            .arg("-c")
            .arg(format!("{} recv --listen 127.0.0.1:0 | {{ sleep 3; cat > /dev/null; }}", bin("ddftp").display())),
    );
    let cut = input.clone();
    let cutter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::OpenOptions::new().write(true).open(&cut).unwrap().set_len(10 << 20).unwrap();
    });
    let send = Command::new(bin("ddftp"))
        .args(["send", "--links", &links, "-q"])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    cutter.join().unwrap();
    let said = String::from_utf8_lossy(&send.stderr);
    assert_eq!(send.status.code(), Some(1), "{said}");
    assert!(said.contains("the input file shrank while it was sent"), "{said}");
    let _ = recv.kill();
    let _ = recv.wait();
}
