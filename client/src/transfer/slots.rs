//! Starting a producer's slot task: a ddftpd connection's, an HTTP
//! mirror's (ranges), or one that ignores Range (one body from byte 0).

use super::http_slot::run_http_slot;
use super::producer::Producer;
use super::slot::{run_slot, Event, SlotCtx};
use super::whole_slot::run_whole_slot;
use super::*;

/// Starts `producer`'s slot task as `slot`; its round trip so far. A
/// ddftpd slot's connection goes back to `pool` when the transfer
/// completes.
pub(super) fn spawn_slot(
    producer: Producer,
    tasks: &mut tokio::task::JoinSet<()>,
    slot: ProducerId,
    ctx: &Arc<SlotCtx>,
    rx: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
    pool: Option<&Arc<crate::pool::Pool>>,
) -> (Duration, tokio::task::AbortHandle) {
    match producer {
        Producer::Ddftpd(route, conn) => {
            let mirror = route.mirror().into();
            let Session { sock, rtt, server_id, max_block_size, version, .. } = conn;
            let (ctx, pool) = (ctx.clone(), pool.cloned());
            let task = tasks.spawn(async move {
                let back = run_slot(slot, mirror, sock, ctx, rx, events).await;
                if let (Some(pool), Some((sock, left))) = (pool, back) {
                    pool.put(route, Session { sock, rtt, server_id, max_block_size, version, mtime: None }, left);
                }
            });
            (rtt, task)
        }
        Producer::Http(m, rtt) if m.whole_only => (rtt, tasks.spawn(run_whole_slot(slot, m, ctx.clone(), rx, events))),
        Producer::Http(m, rtt) => (rtt, tasks.spawn(run_http_slot(slot, m, ctx.clone(), rx, events))),
    }
}
