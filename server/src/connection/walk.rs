//! A walk for a client: the tree under a directory of the root, streamed
//! as a packed list while the walk goes on, then what it could not read.

use super::*;

/// Errors of a walk told one by one; past them only counted.
const WALK_ERRORS_TOLD: usize = 500;

impl Conn {
    /// Streams a walk of `path` (a directory under the root) as `ListData`
    /// pieces, then `ListEnd`. Paths in the list are relative to the root;
    /// what `prune` excludes (paths below `path`) is neither listed nor read;
    /// `extra` says what is listed beyond stat (xattrs, owners' names).
    pub(super) async fn walk(
        &mut self,
        path: String,
        prune: Option<Arc<ddtree::filter::Filter>>,
        extra: ddtree::walk::Extra,
    ) -> Result<(), ConnError> {
        let dir = match self.shared.root.resolve(&path) {
            Ok(d) if d.is_dir() => d,
            Ok(_) => {
                let message = format!("{path:?} is not a directory");
                return Ok(self.reply(Reply::Error { code: ErrorCode::NotAFile, message }).await?);
            }
            Err(e) => return Ok(self.reply(path_error_reply(e)).await?),
        };
        let label = match dir.strip_prefix(self.shared.root.dir()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.as_os_str().as_encoded_bytes().to_vec(),
            Err(_) => return self.refuse(ErrorCode::Forbidden, format!("{path:?} is outside the root")).await,
        };
        // Each walk takes threads and a few MiB of batches in flight: a
        // few at a time, whatever the number of clients.
        let turn = self.shared.walks.clone().acquire_owned().await.map_err(io::Error::other)?;
        // What the walk could not read, told before its end (the first
        // few hundred; `ListEnd` counts them all).
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let told = errors.clone();
        // A server showing only some of its root lists only that.
        let within = self.shared.root.only().map(|only| {
            let (only, base) = (only.clone(), dir.strip_prefix(self.shared.root.dir()).unwrap_or(&dir).to_path_buf());
            ddtree::walk::Within(Arc::new(move |rel: &std::path::Path| only.allows(&base.join(rel))))
        });
        let opts = ddtree::walk::Options {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            label: Some(label),
            skip: vec![self.shared.index.dir().to_path_buf()],
            prune,
            within,
            on_error: Some(ddtree::walk::OnError(Arc::new(move |path: &[u8], why: &str| {
                let mut kept = told.lock().expect("walk errors lock");
                if kept.len() < WALK_ERRORS_TOLD {
                    kept.push((String::from_utf8_lossy(path).into_owned(), why.to_string()));
                }
            }))),
            extra,
        };
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(4);
        let out = ddtree::walk::Output::List(Box::new(ChannelWriter { tx }));
        // The writer (and with it the channel) is dropped when the walk ends.
        let walker = tokio::task::spawn_blocking(move || {
            let r = ddtree::walk::walk_with(&dir, &opts, out).map(|(r, _)| r);
            drop(turn);
            r
        });
        let mut packer = packed::Packer::new();
        while let Some(chunk) = rx.recv().await {
            packer.write(&chunk);
            // Nothing more waiting: what is packed so far goes now (a
            // partial block), not once a whole block of 64 KiB is full.
            if rx.is_empty() {
                packer.flush();
            }
            self.list_data(&packer.take()).await?;
        }
        self.list_data(&packer.finish()).await?;
        let result = walker.await.map_err(io::Error::other)?;
        let errors = std::mem::take(&mut *errors.lock().expect("walk errors lock"));
        for (path, message) in errors {
            self.reply(Reply::WalkError { path, message }).await?;
        }
        match result {
            Ok(report) => Ok(self.reply(Reply::ListEnd { errors: report.totals.errors }).await?),
            Err(e) => Ok(self.reply(Reply::Error { code: ErrorCode::Io, message: e.to_string() }).await?),
        }
    }

    /// Packed list bytes as `ListData` replies.
    async fn list_data(&mut self, packed: &[u8]) -> Result<(), ConnError> {
        for piece in packed.chunks(MAX_LIST_CHUNK) {
            self.reply(Reply::ListData { data: bytes::Bytes::copy_from_slice(piece) }).await?;
        }
        Ok(())
    }
}

/// Hands a walk's list, a batch at a time, from its threads to the connection.
struct ChannelWriter {
    tx: mpsc::Sender<Vec<u8>>,
}

impl io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx.blocking_send(buf.to_vec()).map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
