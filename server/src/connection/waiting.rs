//! A stream of a file a receiver shares (`ddftp get --share`) whose next
//! block is not verified yet: the connection waits for it, still reading
//! the client's requests (an `End` or `Extend` must not wait behind it),
//! and says every second that it waits (`Waiting`, to a client that
//! speaks it), so that the receivers below one whose own source is slow
//! do not take it for stalled.

use std::time::{Duration, Instant};

use ddftp_proto::frame::WAITING_VERSION;
use ddftp_proto::{Reply, Request};
use tokio::sync::{mpsc, watch};

use super::{Conn, ConnError, Source};

/// How often a waiting stream says so: well inside a client's stall
/// timeout (5 s unless set).
const WAITING_EVERY: Duration = Duration::from_secs(1);

impl Conn {
    /// The running stream's next block is a shared file's that is not
    /// verified yet: what to watch for it.
    pub(super) fn not_yet_verified(&self) -> Option<watch::Receiver<u64>> {
        let s = self.streams.running()?;
        let Source::Share(share) = &s.data.source else { return None };
        let block = s.cursor.peek()?;
        let grew = share.watch();
        let at = block * u64::from(s.data.block_size);
        let len = (s.data.size - at).min(u64::from(s.data.block_size));
        (!share.has(at, len)).then_some(grew)
    }

    /// Waits until more of the share is verified, a request comes, the
    /// server's phase changes or it is time to say it waits; `true` if
    /// the client went away.
    pub(super) async fn wait_for_block(
        &mut self,
        mut grew: watch::Receiver<u64>,
        rx: &mut mpsc::Receiver<Result<Request, ConnError>>,
    ) -> Result<bool, ConnError> {
        let idle = self.shared.idle_timeout;
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        tokio::select! {
            r = tokio::time::timeout(idle, rx.recv()) => match r {
                Err(_) => return Err(ConnError::Idle(idle)),
                Ok(None) => return Ok(true),
                Ok(Some(req)) => self.on_request(req?).await?,
            },
            _ = grew.changed() => {}
            _ = self.phase.changed() => {}
            _ = tokio::time::sleep_until((since + WAITING_EVERY).into()) => self.say_waiting().await?,
        }
        Ok(false)
    }

    /// Tells the client the running stream waits for its next block (a
    /// client older than `Waiting` is told nothing).
    async fn say_waiting(&mut self) -> std::io::Result<()> {
        self.waiting_since = Some(Instant::now());
        let Some(stream) = self.streams.running().map(|s| s.id) else { return Ok(()) };
        match self.version >= WAITING_VERSION {
            true => self.reply(Reply::Waiting { stream }).await,
            false => Ok(()),
        }
    }
}
