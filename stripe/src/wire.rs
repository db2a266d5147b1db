//! What one link carries. Every frame is a kind byte and fixed-size fields
//! (big-endian); a `Run` is followed by its `len` payload bytes. There is no
//! per-block header: a run is as large as the plan makes it (up to 512 KiB).

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

pub const MAGIC: &[u8; 5] = b"DDNET";
pub const VERSION: u16 = 2;
/// Largest message a peer may announce.
pub const MAX_MESSAGE: u64 = 1 << 30;
/// Largest run a peer may send.
pub const MAX_RUN: u32 = 16 << 20;

const K_HELLO: u8 = 1;
const K_RUN: u8 = 2;
const K_ACK: u8 = 3;
const K_CLOSE: u8 = 4;
const K_DELIVERED: u8 = 5;

/// Bytes of a `Run` header.
pub const RUN_HEADER: usize = 1 + 8 + 8 + 8 + 4;

/// One frame (a run's payload follows its header on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// First frame on a link: which session it belongs to, and how many
    /// links the session has.
    Hello {
        session: u64,
        index: u32,
        count: u32,
    },
    Run {
        msg: u64,
        msg_len: u64,
        offset: u64,
        len: u32,
    },
    /// Message `msg` arrived whole.
    Ack {
        msg: u64,
    },
    /// The sender sent `count` messages in all and will send no more.
    Close {
        count: u64,
    },
    /// What the receiver saw of one link's part of a message that arrived
    /// while no other was arriving: `bytes` in `micros` from the message's
    /// first run (on any link) to this link's last. The sender's rate for
    /// the link: what it really delivered, token-bucket bursts and all.
    Delivered {
        link: u32,
        bytes: u64,
        micros: u64,
    },
}

impl Frame {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Frame::Hello { session, index, count } => {
                out.push(K_HELLO);
                out.extend_from_slice(MAGIC);
                out.extend_from_slice(&VERSION.to_be_bytes());
                out.extend_from_slice(&session.to_be_bytes());
                out.extend_from_slice(&index.to_be_bytes());
                out.extend_from_slice(&count.to_be_bytes());
            }
            Frame::Run { msg, msg_len, offset, len } => {
                out.push(K_RUN);
                out.extend_from_slice(&msg.to_be_bytes());
                out.extend_from_slice(&msg_len.to_be_bytes());
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
            }
            Frame::Ack { msg } => {
                out.push(K_ACK);
                out.extend_from_slice(&msg.to_be_bytes());
            }
            Frame::Close { count } => {
                out.push(K_CLOSE);
                out.extend_from_slice(&count.to_be_bytes());
            }
            Frame::Delivered { link, bytes, micros } => {
                out.push(K_DELIVERED);
                out.extend_from_slice(&link.to_be_bytes());
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(&micros.to_be_bytes());
            }
        }
    }

    /// Reads one frame header; `Ok(None)` on a clean end of stream.
    pub async fn read(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Frame>> {
        let mut kind = [0u8; 1];
        if r.read(&mut kind).await? == 0 {
            return Ok(None);
        }
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ddnet: {why}"));
        Ok(Some(match kind[0] {
            K_HELLO => {
                let mut magic = [0u8; 5];
                r.read_exact(&mut magic).await?;
                if &magic != MAGIC {
                    return Err(bad("not a ddnet peer"));
                }
                let version = r.read_u16().await?;
                if version != VERSION {
                    return Err(bad(&format!("protocol version {version}, this side speaks {VERSION}")));
                }
                Frame::Hello { session: r.read_u64().await?, index: r.read_u32().await?, count: r.read_u32().await? }
            }
            K_RUN => {
                let f = Frame::Run {
                    msg: r.read_u64().await?,
                    msg_len: r.read_u64().await?,
                    offset: r.read_u64().await?,
                    len: r.read_u32().await?,
                };
                let Frame::Run { msg_len, offset, len, .. } = f else { unreachable!() };
                if msg_len > MAX_MESSAGE
                    || len > MAX_RUN
                    || offset.checked_add(u64::from(len)).is_none_or(|e| e > msg_len)
                {
                    return Err(bad("run out of bounds"));
                }
                f
            }
            K_ACK => Frame::Ack { msg: r.read_u64().await? },
            K_CLOSE => Frame::Close { count: r.read_u64().await? },
            K_DELIVERED => {
                Frame::Delivered { link: r.read_u32().await?, bytes: r.read_u64().await?, micros: r.read_u64().await? }
            }
            k => return Err(bad(&format!("unknown frame kind {k}"))),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bad_runs_are_refused() {
        let frames = [
            Frame::Hello { session: 7, index: 1, count: 3 },
            Frame::Run { msg: 2, msg_len: 100, offset: 90, len: 10 },
            Frame::Ack { msg: 9 },
            Frame::Close { count: 4 },
            Frame::Delivered { link: 1, bytes: 65536, micros: 1200 },
        ];
        let mut wire = vec![];
        for f in &frames {
            f.encode(&mut wire);
        }
        let mut r = &wire[..];
        for f in &frames {
            assert_eq!(Frame::read(&mut r).await.unwrap(), Some(*f));
        }
        assert_eq!(Frame::read(&mut r).await.unwrap(), None);
        let mut bad = vec![];
        Frame::Run { msg: 0, msg_len: 100, offset: 95, len: 10 }.encode(&mut bad);
        assert!(Frame::read(&mut &bad[..]).await.is_err());
        assert!(Frame::read(&mut &[9u8][..]).await.is_err());
    }
}
