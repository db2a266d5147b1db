//! Shared-token authentication by challenge-response, so the token never
//! crosses the wire: the server sends a random nonce in `Challenge`, the
//! client answers `Auth` with HMAC-SHA256(token, nonce || context), and the
//! server compares in constant time.

use sha2::{Digest, Sha256};

/// Bytes in a challenge nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes in a response MAC.
pub const MAC_LEN: usize = 32;
/// Binds the MAC to this protocol, so it is useless anywhere else.
const CONTEXT: &[u8] = b"ddftp-auth-v1";

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.map(|x| x ^ b);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// The client's answer to a challenge.
pub fn respond(token: &[u8], nonce: &[u8; NONCE_LEN]) -> [u8; MAC_LEN] {
    let mut msg = nonce.to_vec();
    msg.extend_from_slice(CONTEXT);
    hmac_sha256(token, &msg)
}

/// The server's check of an answer, in time independent of where it differs.
pub fn verify(token: &[u8], nonce: &[u8; NONCE_LEN], mac: &[u8; MAC_LEN]) -> bool {
    let want = respond(token, nonce);
    want.iter().zip(mac).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn rfc4231_vectors() {
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn verify_accepts_only_the_right_token() {
        let nonce = [7u8; NONCE_LEN];
        let mac = respond(b"secret", &nonce);
        assert!(verify(b"secret", &nonce, &mac));
        assert!(!verify(b"secreT", &nonce, &mac));
        assert!(!verify(b"secret", &[8u8; NONCE_LEN], &mac));
    }
}
