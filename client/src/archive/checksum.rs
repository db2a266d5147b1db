//! `--checksum`: files DEST already has with the listed size and mtime are
//! compared by content, the SHA-256 of DEST's copy against the mirrors'
//! (a mirror computes it on first use and keeps it in its digest index).
//! One that differs is moved again, as rsync `-c` does.
//!
//! Local files are hashed over the cores while a few sessions per mirror
//! ask for theirs. A file found different gets an mtime one second before
//! the listed one, so the quick check that follows (and a rerun, should
//! this one be interrupted) moves it; its old bytes stay until the new
//! ones are complete.

use std::collections::HashSet;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use ddftp_proto::manifest::hex;
use ddtree::list::{Kind, Time};
use sha2::{Digest, Sha256};

use super::current::{self, Held};
use super::{deep, listing, local, ArchiveError, ArchiveSpec, Item};
use crate::session::Session;
use crate::transfer::Progress;

/// Sessions asking one mirror for digests at once.
const PER_MIRROR: usize = 4;

/// Paths (below SRC) of the files whose content differs from the
/// mirrors'; under `--dry-run` nothing is touched, else each gets an mtime
/// that makes it move.
pub(super) async fn differing(
    spec: &ArchiveSpec,
    dest: &deep::Dest,
    items: &[Item],
    progress: &mut dyn Progress,
) -> Result<HashSet<PathBuf>, ArchiveError> {
    let (dest, window) = (dest.clone(), spec.modify_window);
    // Files DEST has with the listed size and mtime: what the quick check
    // would skip.
    let same: Vec<(PathBuf, Vec<u8>, Time)> = {
        let files: Vec<&Item> = items.iter().filter(|it| it.entry.kind == Kind::File).collect();
        let hit = listing::par_map(&files, |it| {
            let e = &it.entry;
            deep::symlink_metadata(&dest.join(&it.rel))
                .is_ok_and(|m| current::compare(&Held::from(&m), e, window).same_bytes())
        });
        files
            .iter()
            .zip(hit)
            .filter(|(_, h)| *h)
            .map(|(it, _)| (it.rel.clone(), it.entry.path.clone(), it.entry.mtime))
            .collect()
    };
    if same.is_empty() {
        return Ok(HashSet::new());
    }
    progress.status(&format!("--checksum: comparing the contents of {} files", same.len()));
    let rels: Arc<Vec<PathBuf>> = Arc::new(same.iter().map(|s| s.0.clone()).collect());
    let hashing = {
        let (dest, rels) = (dest.clone(), rels.clone());
        tokio::task::spawn_blocking(move || listing::par_map(&rels, |r| hash_file(&dest.join(r)).ok()))
    };
    // The mirrors' digests: the files dealt out over a few sessions each.
    let paths: Vec<String> = same.iter().map(|s| String::from_utf8_lossy(&s.1).into_owned()).collect();
    let lanes = spec.get.mirrors.len().max(1) * PER_MIRROR;
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes.min(paths.len()) {
        let mirror = spec.get.mirrors[lane % spec.get.mirrors.len()].clone();
        let token = spec.get.token.clone();
        let mine: Vec<(usize, String)> =
            paths.iter().enumerate().skip(lane).step_by(lanes).map(|(i, p)| (i, p.clone())).collect();
        tasks.spawn(async move {
            let route = mirror.route(None);
            let mut s = Session::open(&route, token.as_deref()).await.map_err(|e| format!("{mirror}: {e}"))?;
            let mut got = Vec::with_capacity(mine.len());
            for (i, p) in mine {
                let (_, d) = s.stat(&p).await.map_err(|e| format!("{mirror}: {p}: {e}"))?;
                got.push((i, d.sha256));
            }
            Ok::<_, String>(got)
        });
    }
    let mut theirs = vec![None; paths.len()];
    while let Some(r) = tasks.join_next().await {
        match r.expect("digest task") {
            Ok(got) => got.into_iter().for_each(|(i, h)| theirs[i] = Some(h)),
            Err(e) => progress.warn(&format!("--checksum: {e}: those files are compared by size and mtime only")),
        }
    }
    let ours = hashing.await.expect("hashing task");
    let mut differ = HashSet::new();
    for ((rel, _, mtime), (mine, theirs)) in same.iter().zip(ours.iter().zip(&theirs)) {
        if let (Some(a), Some(b)) = (mine, theirs) {
            if a != b {
                tracing::debug!(path = %rel.display(), ours = %hex(a), theirs = %hex(b), "content differs");
                if !spec.dry_run {
                    // Outside --modify-window, so the quick check moves it.
                    let before = Time { sec: mtime.sec - 1 - window.0.max(0), nsec: mtime.nsec };
                    let p = dest.join(rel);
                    deep::set_mtime(&p, before).map_err(local(&p))?;
                }
                differ.insert(rel.clone());
            }
        }
    }
    Ok(differ)
}

fn hash_file(p: &deep::Beneath) -> std::io::Result<[u8; 32]> {
    let mut f = deep::open(p, libc::O_RDONLY, 0)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(h.finalize().into());
        }
        h.update(&buf[..n]);
    }
}
