//! Just enough DER to read an X.509 certificate's subject for a log line
//! (rustls verifies certificates; this only names who connected).

/// One TLV: (tag, contents, rest after it).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&first, mut b) = b.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// Short names of the attributes a subject usually has.
fn attribute(oid: &[u8]) -> Option<&'static str> {
    match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x0a] => Some("O"),
        [0x55, 0x04, 0x0b] => Some("OU"),
        _ => None,
    }
}

/// `CN=..., O=...` of a DER certificate's subject; None if it is not one.
pub fn subject(cert: &[u8]) -> Option<String> {
    let (SEQUENCE, cert, _) = tlv(cert)? else { return None };
    let (SEQUENCE, mut tbs, _) = tlv(cert)? else { return None };
    // [0] version, if present.
    if tbs.first() == Some(&0xa0) {
        tbs = tlv(tbs)?.2;
    }
    // serial, signature algorithm, issuer, validity, then the subject.
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (SEQUENCE, mut name, _) = tlv(tbs)? else { return None };
    let mut parts = vec![];
    while !name.is_empty() {
        let (SET, mut set, rest) = tlv(name)? else { return None };
        name = rest;
        while !set.is_empty() {
            let (SEQUENCE, atv, rest) = tlv(set)? else { return None };
            set = rest;
            let (OID, oid, value) = tlv(atv)? else { return None };
            let (_, value, _) = tlv(value)?;
            if let Some(key) = attribute(oid) {
                parts.push(format!("{key}={}", String::from_utf8_lossy(value)));
            }
        }
    }
    Some(parts.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn garbage_is_no_subject() {
        assert_eq!(super::subject(&[0x30, 0x03, 0x02, 0x01]), None);
        assert_eq!(super::subject(&[]), None);
    }
}
