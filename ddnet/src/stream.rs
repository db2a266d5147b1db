//! A byte stream over a striped channel: [`StripedWriter`] (AsyncWrite)
//! gathers writes into messages of up to [`CHUNK`] bytes, [`StripedReader`]
//! (AsyncRead) reads them back. Shutting the writer down closes the channel
//! and waits until the peer has everything; the reader then sees EOF.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::Striped;

/// Bytes gathered into one message (a write call may add more).
pub const CHUNK: usize = 4 << 20;

type Pending<T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send>>;

/// The sending half of a byte stream.
pub struct StripedWriter {
    ch: Arc<Striped>,
    buf: BytesMut,
    sending: Option<Pending<()>>,
    closing: Option<Pending<()>>,
}

impl StripedWriter {
    pub fn new(ch: Arc<Striped>) -> Self {
        StripedWriter { ch, buf: BytesMut::new(), sending: None, closing: None }
    }

    /// Finishes the message in flight, if any.
    fn poll_sending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(f) = &mut self.sending {
            let r = std::task::ready!(f.as_mut().poll(cx));
            self.sending = None;
            r?;
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(&mut self) {
        let msg = self.buf.split().freeze();
        let ch = self.ch.clone();
        self.sending = Some(Box::pin(async move { ch.send(msg).await }));
    }
}

impl AsyncWrite for StripedWriter {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_sending(cx))?;
        let n = data.len().min(CHUNK.saturating_sub(self.buf.len()).max(1));
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.start_send();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_sending(cx))?;
        if !self.buf.is_empty() {
            self.start_send();
            std::task::ready!(self.poll_sending(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        if self.closing.is_none() {
            let ch = self.ch.clone();
            self.closing = Some(Box::pin(async move { ch.close().await }));
        }
        self.closing.as_mut().expect("set").as_mut().poll(cx)
    }
}

/// The receiving half of a byte stream.
pub struct StripedReader {
    ch: Arc<Striped>,
    current: Bytes,
    receiving: Option<Pending<Option<Bytes>>>,
    eof: bool,
}

impl StripedReader {
    pub fn new(ch: Arc<Striped>) -> Self {
        StripedReader { ch, current: Bytes::new(), receiving: None, eof: false }
    }
}

impl AsyncRead for StripedReader {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        while self.current.is_empty() && !self.eof {
            if self.receiving.is_none() {
                let ch = self.ch.clone();
                self.receiving = Some(Box::pin(async move { ch.recv().await }));
            }
            let r = std::task::ready!(self.receiving.as_mut().expect("set").as_mut().poll(cx));
            self.receiving = None;
            match r? {
                Some(b) => self.current = b,
                None => self.eof = true,
            }
        }
        let n = self.current.len().min(out.remaining());
        out.put_slice(&self.current[..n]);
        self.current.advance(n);
        Poll::Ready(Ok(()))
    }
}
