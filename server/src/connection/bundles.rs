//! A connection's bundle requests: definitions taken in; and the seals of
//! a bundle's blocks (for receivers that take them from each other) or a
//! file's (for a client finding the pieces of a changed chunk it holds).

use std::io;

use ddftp_proto::packed;
use ddftp_proto::{ErrorCode, Reply};

use super::{Conn, ConnError};
use crate::bundle::{self, Bundle, DefineError};

impl Conn {
    /// `Bundle`: a piece of a bundle definition, within the uploads' budget.
    pub(super) async fn on_bundle_piece(&mut self, data: bytes::Bytes) -> Result<(), ConnError> {
        if self.upload.len() + data.len() > bundle::UPLOADS {
            let msg = format!("bundle definitions are limited to {} packed bytes", bundle::UPLOADS);
            return self.refuse(ErrorCode::BadRequest, msg).await;
        }
        // Every connection's uploads share one budget: refused, not
        // waited for, when it is spent (a definition is retried).
        let Ok(more) = self.shared.uploads.clone().try_acquire_many_owned(data.len() as u32) else {
            let msg = ddftp_proto::busy::message(
                "the server is taking in other bundle definitions",
                std::time::Duration::from_millis(500),
            );
            return self.refuse(ErrorCode::Busy, msg).await;
        };
        match &mut self.upload_permits {
            Some(p) => p.merge(more),
            None => self.upload_permits = Some(more),
        }
        self.upload.extend_from_slice(&data);
        Ok(())
    }

    /// `BundleEnd`: the definition made a bundle (one at a time), or why not.
    pub(super) async fn on_bundle_end(&mut self) -> Result<(), ConnError> {
        let packed = std::mem::take(&mut self.upload);
        let held = self.upload_permits.take();
        let shared = self.shared.clone();
        // One definition at a time becomes a bundle: its unpacked
        // list and entries are the largest transient memory here.
        let turn = self.shared.defining.clone().acquire_owned().await.map_err(io::Error::other)?;
        let defined = tokio::task::spawn_blocking(move || {
            let list = packed::unpack(&packed, bundle::MAX_DEFINITION);
            drop((packed, held));
            let b = list.map_err(DefineError::from).and_then(|list| Bundle::define(&shared.root, &list));
            drop(turn);
            b
        })
        .await
        .map_err(io::Error::other)?;
        match defined {
            Ok(b) => {
                let b = self.shared.bundles.insert(b);
                Ok(self.reply(Reply::Bundle { name: b.name.clone(), size: b.size }).await?)
            }
            Err(e) => Ok(self.reply(Reply::Error { code: ErrorCode::NotFound, message: e.to_string() }).await?),
        }
    }

    /// `Seals`: the seals of a run of a bundle's or a file's blocks, as
    /// this mirror reads them (never a receiver's: it would vouch for
    /// itself).
    pub(super) async fn on_seals(
        &mut self,
        path: String,
        block_size: u32,
        first: u64,
        count: u32,
    ) -> Result<(), ConnError> {
        if self.shared.shares.is_only() {
            let why = "a receiver does not vouch for blocks: ask a mirror for seals";
            return self.refuse(ErrorCode::Forbidden, why.into()).await;
        }
        if block_size > self.shared.max_block_size {
            let max = self.shared.max_block_size;
            return self
                .refuse(ErrorCode::BadRequest, format!("block size {block_size} is over this server's limit {max}"))
                .await;
        }
        let read = if bundle::is_bundle_name(&path) {
            let Some(b) = self.shared.bundles.get(&path) else {
                return Ok(self.reply(unknown(&path)).await?);
            };
            tokio::task::spawn_blocking(move || b.seals(block_size, first, count)).await
        } else {
            let f = match self.open(&path) {
                Ok(f) => f,
                Err(e) => return Ok(self.reply(super::path_error_reply(e)).await?),
            };
            tokio::task::spawn_blocking(move || crate::seals::of_file(&f, block_size, first, count)).await
        };
        let read = read.map_err(io::Error::other)?;
        match read {
            Ok(hashes) => Ok(self.reply(Reply::Manifest { first, hashes }).await?),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                self.refuse(ErrorCode::BadRequest, e.to_string()).await
            }
            Err(e) => Ok(self.reply(Reply::Error { code: ErrorCode::Io, message: e.to_string() }).await?),
        }
    }
}

pub(super) fn unknown(name: &str) -> Reply {
    let message = format!("{name}: no such bundle (define it again)");
    Reply::Error { code: ErrorCode::NotFound, message }
}
