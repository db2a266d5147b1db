//! `tokio_util::codec` adapters, so connections can use `FramedRead`.
//! All the rules live in [`crate::frame`]; these only pick the direction.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::frame::{ProtoError, Reply, Request};

/// Server side: decodes requests, encodes replies.
#[derive(Debug, Default)]
pub struct ServerCodec;

/// Client side: decodes replies, encodes requests.
#[derive(Debug, Default)]
pub struct ClientCodec;

/// I/O or protocol failure while framing.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Proto(#[from] ProtoError),
}

impl Decoder for ServerCodec {
    type Item = Request;
    type Error = CodecError;
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Request>, CodecError> {
        Ok(Request::decode(src)?)
    }
}

impl Encoder<Reply> for ServerCodec {
    type Error = CodecError;
    fn encode(&mut self, item: Reply, dst: &mut BytesMut) -> Result<(), CodecError> {
        item.encode(dst);
        Ok(())
    }
}

impl Decoder for ClientCodec {
    type Item = Reply;
    type Error = CodecError;
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Reply>, CodecError> {
        Ok(Reply::decode(src)?)
    }
}

impl Encoder<Request> for ClientCodec {
    type Error = CodecError;
    fn encode(&mut self, item: Request, dst: &mut BytesMut) -> Result<(), CodecError> {
        item.encode(dst);
        Ok(())
    }
}
