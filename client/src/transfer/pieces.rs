//! Verification of pieces larger than a block. A Metalink may give piece
//! hashes over any length (256 MiB, 1 GiB); a block that large would be
//! that much memory in every slot. Blocks stay small, and a piece is
//! checked once all its blocks are in the file, read back a buffer at a
//! time on one thread. A piece that fails is fetched again: its blocks are
//! taken out of the completed set (and so out of the journal), and the
//! mirror that sent all of it, if one did, is dropped as corrupt.
//!
//! The running SHA-256 reads only verified pieces: a piece fetched again
//! is hashed once, as it finally is.

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;

use ddftp_proto::manifest::Hash;
use ddops::completed::Completed;

/// A piece checked: whether it is good, and its blocks' hashes if asked.
type CheckResult = (u64, io::Result<(bool, Vec<Hash>)>);

use super::*;

/// A piece that fails this often (fetched again each time, from mirrors
/// that each sent only part of it) ends the download.
const MAX_TRIES: u32 = 4;

/// No mirror is known for a block (it came from an earlier run).
const NOBODY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Some block is missing, or it failed and is being fetched again.
    Open,
    Checking,
    Good,
}

/// What a finished check means for the transfer.
pub(super) enum Checked {
    /// The piece is good; the verified prefix is now this many bytes (if it
    /// grew). A piece that failed before, from several mirrors, shows which
    /// blocks were wrong then: the mirrors that sent them (`liars`).
    Good { prefix: Option<u64>, liars: Vec<(usize, u64, u64)> },
    /// Blocks `lo..=hi` must be fetched again; `culprit` sent all of them.
    Bad { lo: u64, hi: u64, culprit: Option<usize> },
}

/// The pieces of one download and their checks.
pub(super) struct Pieces {
    manifest: Arc<Manifest>,
    /// Blocks in a piece.
    per: u64,
    blocks: u64,
    size: u64,
    state: Vec<State>,
    /// Pieces `0..good` are all good.
    good: u64,
    /// The mirror that sent each block.
    sender: Vec<u32>,
    tries: HashMap<u64, u32>,
    /// A piece that failed with blocks from several mirrors: each block's
    /// sender and hash then, to find the wrong ones once it is good.
    suspects: HashMap<u64, Vec<(u32, Hash)>>,
    checking: usize,
    to_checker: Option<std_mpsc::Sender<(u64, bool)>>,
    results: mpsc::UnboundedReceiver<CheckResult>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Pieces {
    /// Checks for `manifest`'s pieces (each a whole number of `block_size`
    /// blocks) over `file`.
    pub(super) fn new(manifest: Arc<Manifest>, block_size: u32, size: u64, file: Arc<dyn Store>) -> io::Result<Pieces> {
        let per = u64::from(manifest.chunk_size / block_size);
        let blocks = size.div_ceil(u64::from(block_size));
        let count = manifest.hashes.len();
        let (to_checker, jobs) = std_mpsc::channel::<(u64, bool)>();
        let (done, results) = mpsc::unbounded_channel();
        let m = manifest.clone();
        let worker = std::thread::Builder::new().name("ddftp-pieces".into()).spawn(move || {
            for (piece, by_block) in jobs {
                let mut hashes = vec![];
                let blocks = by_block.then_some((block_size, &mut hashes));
                let ok = m.verify_chunk_by(piece, size, blocks, |buf, at| file.read_exact_at(buf, at));
                if done.send((piece, ok.map(|ok| (ok, hashes)))).is_err() {
                    return;
                }
            }
        })?;
        Ok(Pieces {
            manifest,
            per,
            blocks,
            size,
            state: vec![State::Open; count],
            good: 0,
            sender: vec![NOBODY; blocks as usize],
            tries: HashMap::new(),
            suspects: HashMap::new(),
            checking: 0,
            to_checker: Some(to_checker),
            results,
            worker: Some(worker),
        })
    }

    /// Blocks in a piece (the last may have fewer).
    pub(super) fn per_piece(&self) -> u64 {
        self.per
    }

    /// Blocks of piece `p`, inclusive.
    pub(super) fn span(&self, p: u64) -> (u64, u64) {
        (p * self.per, ((p + 1) * self.per).min(self.blocks) - 1)
    }

    /// Blocks `lo..=hi` arrived from `mirror` (`None`: an earlier run's);
    /// every piece they make whole is checked.
    pub(super) fn arrived(&mut self, lo: u64, hi: u64, mirror: Option<usize>, completed: &Completed) {
        if self.blocks == 0 {
            return;
        }
        let hi = hi.min(self.blocks - 1);
        let who = mirror.map_or(NOBODY, |m| m as u32);
        for b in lo..=hi {
            self.sender[b as usize] = who;
        }
        for p in lo / self.per..=hi / self.per {
            let (a, z) = self.span(p);
            if self.state[p as usize] == State::Open && completed.holds(a, z) {
                self.state[p as usize] = State::Checking;
                self.checking += 1;
                // Blocks from several mirrors, or failed before: each
                // block's hash too, to tell which was wrong.
                let first = self.sender[a as usize];
                let mixed = self.sender[a as usize..=z as usize].iter().any(|&s| s != first);
                let by_block = mixed || self.suspects.contains_key(&p);
                if let Some(tx) = &self.to_checker {
                    let _ = tx.send((p, by_block));
                }
            }
        }
    }

    /// Every piece already whole (a resumed download's) is checked.
    pub(super) fn check_whole(&mut self, completed: &Completed) {
        for (a, b) in completed.ranges() {
            self.arrived(a, b, None, completed);
        }
    }

    /// No check is under way.
    pub(super) fn idle(&self) -> bool {
        self.checking == 0
    }

    /// The next check to finish (waits forever when none is under way).
    pub(super) async fn next(&mut self) -> CheckResult {
        match self.checking {
            0 => std::future::pending().await,
            _ => self.results.recv().await.unwrap_or((u64::MAX, Err(io::Error::other("the piece checker stopped")))),
        }
    }

    /// What piece `p`'s check (`ok`, and its blocks' hashes if asked) means.
    pub(super) fn checked(
        &mut self,
        p: u64,
        ok: bool,
        hashes: Vec<Hash>,
        path: &str,
    ) -> Result<Checked, TransferError> {
        self.checking -= 1;
        let (lo, hi) = self.span(p);
        if ok {
            self.state[p as usize] = State::Good;
            let before = self.good;
            while self.state.get(self.good as usize) == Some(&State::Good) {
                self.good += 1;
            }
            let bytes = (self.good * u64::from(self.manifest.chunk_size)).min(self.size);
            // Blocks whose bytes were other than now came from a liar.
            let mut liars: Vec<(usize, u64, u64)> = vec![];
            for (i, ((who, then), now)) in self.suspects.remove(&p).unwrap_or_default().iter().zip(&hashes).enumerate()
            {
                if then != now && *who != NOBODY {
                    let b = lo + i as u64;
                    match liars.iter_mut().find(|l| l.0 == *who as usize) {
                        Some(l) => l.2 = b,
                        None => liars.push((*who as usize, b, b)),
                    }
                }
            }
            return Ok(Checked::Good { prefix: (self.good > before).then_some(bytes), liars });
        }
        self.state[p as usize] = State::Open;
        let tries = self.tries.entry(p).or_default();
        *tries += 1;
        if *tries >= MAX_TRIES {
            return Err(TransferError::PieceKeepsFailing { path: path.to_string(), piece: p, tries: *tries });
        }
        let first = self.sender[lo as usize];
        let one = self.sender[lo as usize..=hi as usize].iter().all(|&s| s == first) && first != NOBODY;
        if !one && hashes.len() as u64 == hi - lo + 1 {
            let senders = self.sender[lo as usize..=hi as usize].iter().copied();
            self.suspects.insert(p, senders.zip(hashes).collect());
        }
        Ok(Checked::Bad { lo, hi, culprit: one.then_some(first as usize) })
    }
}

impl Drop for Pieces {
    fn drop(&mut self) {
        // The checker ends once its queue closes (after the check it is in).
        self.to_checker = None;
        self.results.close();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
