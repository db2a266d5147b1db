//! Metalink files as RFC 5854's own examples and aria2's test suite write
//! them: every element the RFC allows, repeated where it may be, against a
//! real nginx and ddftpd.

use crate::util::nginx::Nginx;
use crate::util::*;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The SHA-1 pieces of `data` (the tests crate has SHA-256 only).
fn sha1_pieces(data: &[u8], len: usize) -> String {
    data.chunks(len)
        .map(|c| {
            let o = std::process::Command::new("sha1sum")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut ch| {
                    use std::io::Write;
                    ch.stdin.take().unwrap().write_all(c)?;
                    ch.wait_with_output()
                })
                .unwrap();
            format!("<hash>{}</hash>", String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap())
        })
        .collect()
}

fn sha256_pieces(data: &[u8], len: usize) -> String {
    use sha2::Digest;
    data.chunks(len).map(|c| format!("<hash>{}</hash>", hex(&sha2::Sha256::digest(c)))).collect()
}

#[test]
fn every_element_rfc_5854_and_aria2_write_is_read_and_the_files_verified() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("pub")).unwrap();
    let a = random_file(&f.root().join("pub/a.bin"), 3_000_000, 1);
    let b = random_file(&f.root().join("pub/b.bin"), 1_000_000, 2);
    let web = Nginx::serve(&f.root(), None);
    let m = Mirror::start(&f.root(), &["--index", f.out("idx").to_str().unwrap()]);
    let signature = "-----BEGIN PGP SIGNATURE-----\n\niEYEABECAAYFAkrxdXQACgkQ\n=eLo6\n-----END PGP SIGNATURE-----";
    let meta = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <generator>MetalinkEditor/2.0dev</generator>
  <origin dynamic="true">http://example.com/example.ext.meta4</origin>
  <published>2009-05-15T12:23:23Z</published>
  <updated>2010-05-01T12:15:02Z</updated>
  <file name="a.bin">
    <size>{}</size>
    <identity>Example</identity>
    <version>1.0</version>
    <language>en</language>
    <language>de</language>
    <os>Linux-x86</os>
    <os>Linux-x64</os>
    <description>A description of the example file for download.</description>
    <copyright>CC-BY</copyright>
    <logo>http://example.com/logo.png</logo>
    <publisher name="Company Name" url="http://www.company.example.com"/>
    <hash type="md5">80bc95fd391772fa61c91ed68567f098</hash>
    <hash type="sha-256">{}</hash>
    <pieces length="1048576" type="sha-1">{}</pieces>
    <url location="de" priority="1">ftp://ftp.example.com/example.ext</url>
    <url location="fr" priority="1">{}pub/a.bin</url>
    <url priority="2">ddftp://{}/pub/a.bin</url>
    <metaurl mediatype="torrent" priority="2">http://example.com/example.ext.torrent</metaurl>
    <metaurl mediatype="torrent" name="a.bin" priority="3">http://example.com/example2.torrent</metaurl>
    <signature mediatype="application/pgp-signature">{signature}</signature>
  </file>
  <file name="sub/dir/b.bin">
    <size>{}</size>
    <hash type="sha-1">80bc95fd391772fa61c91ed68567f0980bb45fd9</hash>
    <pieces length="262144" type="sha-1">{}</pieces>
    <pieces length="262144" type="sha-256">{}</pieces>
    <url location="fr" priority="1">{}pub/b.bin</url>
    <signature mediatype="application/pgp-signature">a signature</signature>
  </file>
</metalink>
"#,
        a.len(),
        sha256_hex(&a),
        sha1_pieces(&a, 1 << 20),
        web.url,
        m.addr,
        b.len(),
        sha1_pieces(&b, 262_144),
        sha256_pieces(&b, 262_144),
        web.url,
    );
    let file = f.out("x.meta4");
    std::fs::write(&file, meta).unwrap();
    let dir = f.out("d");
    let o = ddftp(&["get", "-M", file.to_str().unwrap(), "-d", dir.to_str().unwrap(), "--json"], 0);
    assert_eq!(std::fs::read(dir.join("a.bin")).unwrap(), a);
    // A name with directories lands in them, as aria2c puts it.
    assert_eq!(std::fs::read(dir.join("sub/dir/b.bin")).unwrap(), b);
    let j = json(&o);
    let checked: Vec<&str> =
        j["files"].as_array().unwrap().iter().map(|f| f["sha256_checked"].as_str().unwrap()).collect();
    assert_eq!(checked, ["metalink", "pieces"], "b.bin is checked piece by piece (sha-256 pieces chosen): {j}");
    assert_eq!(j["not_verified"], 0);
    let err = String::from_utf8_lossy(&o.stderr);
    for told in ["<language>", "<os>", "md5", "ftp://", "<metaurl>", "<signature>", "<origin>", "piece hashes (sha-1)"]
    {
        assert!(err.contains(told), "{told} not told: {err}");
    }
    // aria2's directory-traversal names are refused, never written.
    for name in ["/example1.ext", "../example3.ext", "dir/../example4.ext", "..", "."] {
        let bad = f.out("bad.meta4");
        let x = format!(
            "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"{name}\"><url>{}pub/b.bin</url></file></metalink>",
            web.url
        );
        std::fs::write(&bad, x).unwrap();
        let o = ddftp(&["get", "-M", bad.to_str().unwrap(), "-d", f.out("t").to_str().unwrap()], 2);
        assert!(String::from_utf8_lossy(&o.stderr).contains("plain relative path"), "{name}");
    }
}
