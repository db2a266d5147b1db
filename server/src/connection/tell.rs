//! `Tell`: a receiver sharing a file (`ddftp get --share`) tells another
//! which bytes of it its mirrors fetch of a third receiver's share, so
//! that the other reads them from it instead of from its own mirrors
//! (the mirrors then send them once). The connection does nothing else
//! until the client closes it.

use ddftp_proto::{Reply, Request};
use tokio::sync::mpsc;

use super::{Conn, ConnError};
use crate::share::Share;

impl Conn {
    /// `Tell` for `path`: it must be a file this server shares; the
    /// connection then tells ([`Conn::tell`]).
    pub(super) async fn on_tell(&mut self, path: String) -> Result<(), ConnError> {
        match self.shared.shares.get(&path) {
            Some(share) => {
                self.telling = Some(share);
                Ok(())
            }
            None => {
                let why = format!("{path}: not shared here (Tell asks a receiver running ddftp get --share)");
                self.refuse(ddftp_proto::ErrorCode::NotFound, why).await
            }
        }
    }

    /// Tells what was fetched so far, then each run as it comes, until the
    /// client closes (or asks anything else, which ends it), the server
    /// shuts down, or this receiver's copy is whole: its mirrors fetch
    /// nothing more, and a connection left open would keep it serving.
    pub(super) async fn tell(
        &mut self,
        share: std::sync::Arc<Share>,
        rx: &mut mpsc::Receiver<Result<Request, ConnError>>,
    ) -> Result<(), ConnError> {
        let (mut more, mut grew) = (share.watch_told(), share.watch());
        let mut sent = 0;
        loop {
            more.borrow_and_update();
            grew.borrow_and_update();
            for f in share.told(sent) {
                self.reply(Reply::Fetching { at: f.at, len: f.len, dir: f.dir }).await?;
                sent += 1;
            }
            if share.size() == 0 || share.has(0, share.size()) {
                return Ok(());
            }
            tokio::select! {
                r = more.changed() => if r.is_err() { return Ok(()) },
                r = grew.changed() => if r.is_err() { return Ok(()) },
                req = rx.recv() => match req {
                    None => return Ok(()),
                    Some(req) => {
                        let _ = req?;
                        let why = "nothing but Tell is asked on a connection that tells";
                        return self.refuse(ddftp_proto::ErrorCode::BadRequest, why.into()).await;
                    }
                },
                _ = self.phase.changed() => return Err(ConnError::ShuttingDown),
            }
        }
    }
}
