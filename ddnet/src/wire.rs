//! What one link carries. Every frame is a kind byte and fixed-size fields
//! (big-endian); a `Run` is followed by its `len` payload bytes. There is no
//! per-block header: a run is as large as the plan makes it (up to 512 KiB).
//! A run that is a whole message (most short ones) goes in a shorter
//! header, and shorter still while the message is under 64 KiB: 4 bytes
//! when its id is at most 255 past the last message id the link carried
//! (the same at both ends of a link: [`LinkIds`]), else 7 while ids fit 32
//! bits. Acks likewise (2 bytes, else 5): on a rate-limited link a short
//! message's round trip is its bytes, and a 1 KiB message with the ack
//! riding in front of it costs 6 bytes more than the message (22 in the
//! long forms), less than a plain 8-byte length in front of it.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

pub const MAGIC: &[u8; 5] = b"DDNET";
pub const VERSION: u16 = 6;
/// Largest message a peer may announce.
pub const MAX_MESSAGE: u64 = 1 << 30;
/// Largest run a peer may send.
pub const MAX_RUN: u32 = 16 << 20;

const K_HELLO: u8 = 1;
const K_RUN: u8 = 2;
const K_ACK: u8 = 3;
const K_CLOSE: u8 = 4;
const K_DELIVERED: u8 = 5;
const K_WHOLE: u8 = 6;
const K_WHOLE_SHORT: u8 = 7;
const K_ACK_SHORT: u8 = 8;
const K_WHOLE_NEXT: u8 = 9;
const K_ACK_NEXT: u8 = 10;

/// Bytes of a `Run` header, and of one that carries a whole message.
const RUN_HEADER: usize = 1 + 8 + 8 + 8 + 4;
const WHOLE_HEADER: usize = 1 + 8 + 4;
const WHOLE_SHORT_HEADER: usize = 1 + 4 + 2;
const WHOLE_NEXT_HEADER: usize = 1 + 1 + 2;
/// Bytes of a `Hello`.
pub const HELLO_LEN: usize = 1 + 5 + 2 + 8 + 4 + 4;

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
    /// The sender sent `count` messages in all and will send no more; it
    /// has delivered every message of the peer's below `delivered` (so the
    /// peer has its acks for those even if the link that carried some of
    /// them failed).
    Close {
        count: u64,
        delivered: u64,
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

/// The last message id a run was for, and the last acknowledged id, that
/// a link carried: the same at its two ends, so a frame for an id just
/// past them carries only the difference.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LinkIds {
    msg: u64,
    ack: u64,
}

impl LinkIds {
    /// Takes in a frame the link carried: one encoded, or one read whole.
    pub fn carried(&mut self, frame: &Frame) {
        match *frame {
            Frame::Run { msg, .. } => self.msg = msg,
            Frame::Ack { msg } => self.ack = msg,
            _ => {}
        }
    }
}

/// `id`'s difference from `last`, when it fits a byte.
fn step(last: u64, id: u64) -> Option<u8> {
    id.checked_sub(last).and_then(|d| u8::try_from(d).ok())
}

impl Frame {
    /// Appends the frame's header to `out`, for a link that carried `ids`
    /// (which then take the frame in).
    pub fn encode(&self, out: &mut Vec<u8>, ids: &mut LinkIds) {
        self.encode_after(out, ids);
        ids.carried(self);
    }

    fn encode_after(&self, out: &mut Vec<u8>, ids: &LinkIds) {
        match *self {
            Frame::Hello { session, index, count } => {
                out.push(K_HELLO);
                out.extend_from_slice(MAGIC);
                out.extend_from_slice(&VERSION.to_be_bytes());
                out.extend_from_slice(&session.to_be_bytes());
                out.extend_from_slice(&index.to_be_bytes());
                out.extend_from_slice(&count.to_be_bytes());
            }
            Frame::Run { msg, msg_len, offset: 0, len } if u64::from(len) == msg_len => {
                if let (Some(d), Ok(len)) = (step(ids.msg, msg), u16::try_from(len)) {
                    out.extend_from_slice(&[K_WHOLE_NEXT, d]);
                    out.extend_from_slice(&len.to_be_bytes());
                    return;
                }
                if let (Ok(msg), Ok(len)) = (u32::try_from(msg), u16::try_from(len)) {
                    out.push(K_WHOLE_SHORT);
                    out.extend_from_slice(&msg.to_be_bytes());
                    out.extend_from_slice(&len.to_be_bytes());
                    return;
                }
                out.push(K_WHOLE);
                out.extend_from_slice(&msg.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
            }
            Frame::Run { msg, msg_len, offset, len } => {
                out.push(K_RUN);
                out.extend_from_slice(&msg.to_be_bytes());
                out.extend_from_slice(&msg_len.to_be_bytes());
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
            }
            Frame::Ack { msg } => {
                if let Some(d) = step(ids.ack, msg) {
                    out.extend_from_slice(&[K_ACK_NEXT, d]);
                    return;
                }
                if let Ok(msg) = u32::try_from(msg) {
                    out.push(K_ACK_SHORT);
                    out.extend_from_slice(&msg.to_be_bytes());
                    return;
                }
                out.push(K_ACK);
                out.extend_from_slice(&msg.to_be_bytes());
            }
            Frame::Close { count, delivered } => {
                out.push(K_CLOSE);
                out.extend_from_slice(&count.to_be_bytes());
                out.extend_from_slice(&delivered.to_be_bytes());
            }
            Frame::Delivered { link, bytes, micros } => {
                out.push(K_DELIVERED);
                out.extend_from_slice(&link.to_be_bytes());
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(&micros.to_be_bytes());
            }
        }
    }

    /// The frame at the start of `buf`, on a link that carried `ids`, and
    /// its header's length (a run's payload follows); `None` until the
    /// whole header is there. The caller tells `ids` once it took the
    /// frame whole.
    pub fn parse(buf: &[u8], ids: &LinkIds) -> io::Result<Option<(Frame, usize)>> {
        let Some(&kind) = buf.first() else { return Ok(None) };
        let head = match kind {
            K_HELLO => HELLO_LEN,
            K_RUN => RUN_HEADER,
            K_WHOLE => WHOLE_HEADER,
            K_WHOLE_SHORT => WHOLE_SHORT_HEADER,
            K_WHOLE_NEXT => WHOLE_NEXT_HEADER,
            K_ACK_SHORT => 1 + 4,
            K_ACK_NEXT => 1 + 1,
            K_ACK => 1 + 8,
            K_CLOSE => 1 + 8 + 8,
            K_DELIVERED => 1 + 4 + 8 + 8,
            // A TLS alert or handshake record: the peer expects TLS.
            k @ (0x15 | 0x16) => {
                return Err(bad(&format!(
                    "unknown frame kind {k}: the peer speaks TLS (use --tls, or a plaintext receiver)"
                )))
            }
            k => return Err(bad(&format!("unknown frame kind {k}"))),
        };
        let Some(b) = buf.get(1..head) else { return Ok(None) };
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let frame = match kind {
            K_HELLO => {
                if &b[..5] != MAGIC {
                    return Err(bad("not a ddnet peer"));
                }
                let version = u16::from_be_bytes([b[5], b[6]]);
                if version != VERSION {
                    return Err(bad(&format!("protocol version {version}, this side speaks {VERSION}")));
                }
                Frame::Hello { session: u64_at(7), index: u32_at(15), count: u32_at(19) }
            }
            K_RUN => {
                let (msg_len, offset, len) = (u64_at(8), u64_at(16), u32_at(24));
                if msg_len > MAX_MESSAGE
                    || len > MAX_RUN
                    || offset.checked_add(u64::from(len)).is_none_or(|e| e > msg_len)
                {
                    return Err(bad("run out of bounds"));
                }
                Frame::Run { msg: u64_at(0), msg_len, offset, len }
            }
            K_WHOLE => {
                let len = u32_at(8);
                if len > MAX_RUN {
                    return Err(bad("run out of bounds"));
                }
                Frame::Run { msg: u64_at(0), msg_len: u64::from(len), offset: 0, len }
            }
            K_WHOLE_SHORT => {
                let len = u16::from_be_bytes([b[4], b[5]]);
                Frame::Run { msg: u64::from(u32_at(0)), msg_len: u64::from(len), offset: 0, len: u32::from(len) }
            }
            K_WHOLE_NEXT => {
                let len = u16::from_be_bytes([b[1], b[2]]);
                let msg = after(ids.msg, b[0])?;
                Frame::Run { msg, msg_len: u64::from(len), offset: 0, len: u32::from(len) }
            }
            K_ACK_NEXT => Frame::Ack { msg: after(ids.ack, b[0])? },
            K_ACK => Frame::Ack { msg: u64_at(0) },
            K_ACK_SHORT => Frame::Ack { msg: u64::from(u32_at(0)) },
            K_CLOSE => Frame::Close { count: u64_at(0), delivered: u64_at(8) },
            _ => Frame::Delivered { link: u32_at(0), bytes: u64_at(4), micros: u64_at(12) },
        };
        Ok(Some((frame, head)))
    }

    /// Reads a link's first frame, which must be `Hello` (and nothing after it).
    pub async fn read_hello(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Frame> {
        let mut b = [0u8; HELLO_LEN];
        r.read_exact(&mut b).await?;
        match Frame::parse(&b, &LinkIds::default())? {
            Some((f @ Frame::Hello { .. }, _)) => Ok(f),
            _ => Err(bad("a link must start with Hello")),
        }
    }
}

/// The id `d` past `last`.
fn after(last: u64, d: u8) -> io::Result<u64> {
    last.checked_add(u64::from(d)).ok_or_else(|| bad("message id past 64 bits"))
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("ddnet: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bad_runs_are_refused() {
        let frames = [
            Frame::Hello { session: 7, index: 1, count: 3 },
            Frame::Run { msg: 2, msg_len: 100, offset: 90, len: 10 },
            // Just past the link's last id: the shortest form.
            Frame::Run { msg: 3, msg_len: 100, offset: 0, len: 100 },
            Frame::Run { msg: 4, msg_len: 0, offset: 0, len: 0 },
            // Ids past 32 bits and whole runs past 16 take the long forms.
            Frame::Run { msg: 1 << 32, msg_len: 100, offset: 0, len: 100 },
            Frame::Run { msg: 5, msg_len: 1 << 16, offset: 0, len: 1 << 16 },
            // Behind the link's last id (a run sent again): 32 bits.
            Frame::Run { msg: 4, msg_len: 10, offset: 0, len: 10 },
            Frame::Ack { msg: 9 },
            Frame::Ack { msg: 9 },
            Frame::Ack { msg: u64::from(u32::MAX) + 1 },
            Frame::Ack { msg: 8 },
            Frame::Close { count: 4, delivered: 7 },
            Frame::Delivered { link: 1, bytes: 65536, micros: 1200 },
        ];
        let mut sent = LinkIds::default();
        let mut wire = vec![];
        let mut heads = vec![];
        for f in &frames {
            let before = wire.len();
            f.encode(&mut wire, &mut sent);
            heads.push(wire.len() - before);
        }
        assert_eq!(heads, [HELLO_LEN, 29, 4, 4, 13, 13, 7, 2, 2, 9, 5, 17, 21]);
        let mut read = LinkIds::default();
        let mut at = 0;
        for f in &frames {
            // A header cut short is not a frame yet.
            let (_, head) = Frame::parse(&wire[at..], &read).unwrap().unwrap();
            assert_eq!(Frame::parse(&wire[at..at + head - 1], &read).unwrap(), None);
            assert_eq!(Frame::parse(&wire[at..], &read).unwrap(), Some((*f, head)));
            read.carried(f);
            at += head;
        }
        assert_eq!(Frame::parse(&wire[at..], &read).unwrap(), None);
        assert_eq!(read, sent);
        let len = |f: Frame, ids: LinkIds| {
            let mut v = vec![];
            f.encode(&mut v, &mut ids.clone());
            v.len()
        };
        let whole = |msg| Frame::Run { msg, msg_len: 1024, offset: 0, len: 1024 };
        let zero = LinkIds::default();
        assert_eq!(len(whole(255), zero), 4);
        assert_eq!(len(whole(256), zero), 7);
        assert_eq!(len(whole(u64::from(u32::MAX)), zero), 7);
        assert_eq!(len(whole(1 << 32), zero), 13);
        assert_eq!(len(whole((1 << 32) + 255), LinkIds { msg: 1 << 32, ack: 0 }), 4);
        assert_eq!(len(Frame::Ack { msg: 256 }, zero), 5);
        assert_eq!(len(Frame::Ack { msg: 300 }, LinkIds { msg: 0, ack: 299 }), 2);
        assert_eq!(Frame::read_hello(&mut &wire[..]).await.unwrap(), frames[0]);
        assert!(Frame::read_hello(&mut &wire[HELLO_LEN..]).await.is_err());
        let mut bad = vec![];
        Frame::Run { msg: 0, msg_len: 100, offset: 95, len: 10 }.encode(&mut bad, &mut LinkIds::default());
        assert!(Frame::parse(&bad, &zero).is_err());
        let mut whole_too_long = vec![K_WHOLE];
        whole_too_long.extend_from_slice(&5u64.to_be_bytes());
        whole_too_long.extend_from_slice(&(MAX_RUN + 1).to_be_bytes());
        assert!(Frame::parse(&whole_too_long, &zero).is_err());
        // A difference that would take an id past 64 bits.
        let last = LinkIds { msg: u64::MAX - 1, ack: u64::MAX };
        assert!(Frame::parse(&[K_WHOLE_NEXT, 2, 0, 0], &last).is_err());
        assert!(Frame::parse(&[K_ACK_NEXT, 1], &last).is_err());
        assert!(Frame::parse(&[K_ACK_NEXT + 1], &zero).is_err());
    }
}
