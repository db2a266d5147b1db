//! A download onto an older output asks only for the hashes of the chunks
//! the output lacks ([`crate::delta::claim`]): it hashes the chunks it
//! holds itself, and the mirrors' root checks them all at once. A root
//! that disagrees (a claim was wrong) costs the whole manifest, as any
//! download fetches it.

use bytes::BytesMut;
use ddftp_proto::manifest::{chunk_count, Hash, MAX_MANIFEST_HASHES};
use ddftp_proto::{Reply, Request};
use ddnet::tls::Stream;

use crate::consensus::Version;
use crate::delta::{claim, Found};
use crate::manifest::{ChunkHash, Manifest};
use crate::session::{read_reply, send, unexpected, Session, SessionError, STAT_TIMEOUT};

use super::early_part::EarlyPart;
use super::producer::fetch_weak_sums;
use super::{seed, GetSpec, MirrorInfo, Progress};

/// The checked manifest, and what was found on the way.
pub(super) struct Claimed {
    pub(super) manifest: Manifest,
    /// Where the output holds each chunk.
    pub(super) found: Found,
    pub(super) weak: Vec<u32>,
    /// The part file, with the chunks found written in it already.
    pub(super) landed: Option<EarlyPart>,
}

/// The manifest from the output's chunks and the others' hashes, if a
/// mirror of protocol 8 gives weak checksums and the root agrees. The
/// chunks found are written into a new part file as they are found: from
/// the first with `eager` (the output differs from the new version in size
/// or time), else from the output's first difference on.
pub(super) async fn manifest(
    spec: &GetSpec,
    version: &Version,
    usable: &mut Vec<(MirrorInfo, Session)>,
    progress: &mut dyn Progress,
    eager: bool,
) -> Option<Claimed> {
    let out = seed::open_output(spec)?;
    let (size, digest) = (version.size, &version.digest);
    let weak = fetch_weak_sums(&spec.path, chunk_count(size, digest.chunk_size) as usize, usable, progress).await?;
    progress.status(&format!("looking for the new version's chunks in {}", out.name.display()));
    // A part file that cannot be made here is made (or said) as for any download.
    let landed = EarlyPart::create(&super::part_path(&spec.output)).ok();
    // Off the runtime: an archive runs several updates side by side in one
    // task, and a read and hash of the output would hold them all.
    let chunk = digest.chunk_size;
    let looked = tokio::task::spawn_blocking(move || {
        let into = landed.as_ref().map(|l| claim::Into { file: l.file(), from_start: eager });
        let claims = claim::claim(&out.file, out.len, (chunk, size), &weak, ChunkHash::Blake3, into);
        (claims, weak, landed, out.name)
    })
    .await;
    let Ok((claims, weak, mut landed, name)) = looked else { return None };
    let claims = match claims {
        Ok(c) => c,
        Err(e) => {
            tracing::info!("could not read {} to reuse its chunks: {e}", name.display());
            return None;
        }
    };
    let v8 = ddftp_proto::frame::WEAK_SUMS_VERSION;
    let (mirror, conn) = usable.iter_mut().find(|(_, c)| c.version >= v8)?;
    let runs = claims.missing();
    let asked = tokio::time::timeout(STAT_TIMEOUT, fetch_runs(&mut conn.sock, &spec.path, &runs)).await;
    let parts = match asked.unwrap_or(Err(SessionError::ManifestTimeout)) {
        Ok(p) => p,
        Err(e) => {
            let route = mirror.route.clone();
            progress.warn(&format!("dropping {route}: chunk hashes: {e}"));
            usable.retain(|(m, _)| m.route != route);
            return None;
        }
    };
    let mut hashes: Vec<Hash> = claims.hashes.iter().map(|h| h.unwrap_or_default()).collect();
    for ((first, _), part) in runs.iter().zip(parts) {
        hashes[*first as usize..][..part.len()].copy_from_slice(&part);
    }
    match Manifest::checked(hashes, size, digest) {
        Ok(manifest) => {
            if let Some(l) = &mut landed {
                l.chunks = claims.landed;
            }
            Some(Claimed { manifest, found: claims.found, weak, landed })
        }
        Err(_) => {
            tracing::info!("the chunks found in the output do not make the mirrors' root: fetching the whole manifest");
            None
        }
    }
}

/// The hashes of each run of chunks (first, count), all asked at once.
async fn fetch_runs(sock: &mut Stream, path: &str, runs: &[(u64, u32)]) -> Result<Vec<Vec<Hash>>, SessionError> {
    let most = u64::from(MAX_MANIFEST_HASHES);
    let mut out = BytesMut::new();
    for &(first, count) in runs {
        for k in 0..u64::from(count).div_ceil(most) {
            let c = (u64::from(count) - k * most).min(most) as u32;
            Request::Manifest { path: path.to_string(), first: first + k * most, count: c }.encode(&mut out);
        }
    }
    send(sock, &out).await?;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut parts = Vec::with_capacity(runs.len());
    for &(first, count) in runs {
        let mut part: Vec<Hash> = Vec::with_capacity(count as usize);
        while part.len() < count as usize {
            match read_reply(sock, &mut buf).await? {
                Reply::Manifest { first: f, hashes }
                    if f == first + part.len() as u64
                        && !hashes.is_empty()
                        && part.len() + hashes.len() <= count as usize =>
                {
                    part.extend_from_slice(&hashes)
                }
                Reply::Manifest { first, .. } => return Err(SessionError::ManifestOrder { first }),
                other => return Err(unexpected(other)),
            }
        }
        parts.push(part);
    }
    Ok(parts)
}
