//! Where a download's expected SHA-256 can come from besides the mirrors'
//! own digests: a server's `Repr-Digest` (RFC 9530) or `Digest` (RFC 3230)
//! header, and a checksum file in the `sha256sum` form (`SHA256SUMS`).

use hyper::header::HeaderMap;

/// The whole file's SHA-256 (lowercase hex) a reply's headers give:
/// `Repr-Digest: sha-256=:BASE64:` first, else `Digest: SHA-256=BASE64`.
/// (`Content-Digest` is of the partial body, not the file: not used.)
pub fn digest_header(h: &HeaderMap) -> Option<String> {
    let field = |name: &str| h.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
    let repr = field("repr-digest");
    for member in repr.split(',') {
        if let Some((algo, value)) = member.trim().split_once('=') {
            let value = value.split(';').next().unwrap_or("").trim();
            if algo.trim() == "sha-256" {
                return value.strip_prefix(':').and_then(|v| v.strip_suffix(':')).and_then(sha256_b64);
            }
        }
    }
    let digest = field("digest");
    digest.split(',').find_map(|member| {
        let (algo, value) = member.trim().split_once('=')?;
        algo.trim().eq_ignore_ascii_case("sha-256").then(|| sha256_b64(value.trim())).flatten()
    })
}

/// A base64 SHA-256 as hex, if it is one.
fn sha256_b64(s: &str) -> Option<String> {
    let bytes = base64(s)?;
    (bytes.len() == 32).then(|| bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Standard base64 (padding optional).
fn base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Whether `s` is a SHA-256 in hex.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The SHA-256 a `sha256sum` listing (`HEX  NAME` or `HEX *NAME` lines, as
/// in `SHA256SUMS`) gives for the file named `name` (compared by its last
/// path component too, since listings name files as they lie beside it).
pub fn from_sums(listing: &str, name: &str) -> Option<String> {
    let base = name.rsplit('/').next().unwrap_or(name);
    listing.lines().find_map(|line| {
        let (hex, file) = line.trim_end().split_once(char::is_whitespace)?;
        let file = file.trim_start().trim_start_matches('*');
        let file = file.strip_prefix("./").unwrap_or(file);
        (is_sha256_hex(hex) && (file == name || file == base || file.rsplit('/').next() == Some(base)))
            .then(|| hex.to_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn digest_headers_give_the_files_sha256() {
        let mut h = HeaderMap::new();
        h.insert(
            "repr-digest",
            "sha-512=:AAAA:, sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:".parse().unwrap(),
        );
        assert_eq!(digest_header(&h).as_deref(), Some(HELLO));
        let mut h = HeaderMap::new();
        h.insert("digest", "SHA-256=LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=".parse().unwrap());
        assert_eq!(digest_header(&h).as_deref(), Some(HELLO));
        h.insert("digest", "md5=XUFAKrxLKna5cZ2REBfFkg==".parse().unwrap());
        assert_eq!(digest_header(&h), None);
    }

    #[test]
    fn a_sums_listing_names_the_file() {
        let l = format!("{}  other.iso\n{HELLO} *pub/debian.iso\n", "0".repeat(64));
        assert_eq!(from_sums(&l, "debian.iso").as_deref(), Some(HELLO));
        assert_eq!(from_sums(&l, "x/pub/debian.iso").as_deref(), Some(HELLO));
        assert_eq!(from_sums(&l, "missing.iso"), None);
    }
}
