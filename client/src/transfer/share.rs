//! Several receivers of one file (`get --share`, `--peers`): each serves
//! the blocks it has verified, and fetches its own share of the file from
//! the mirrors and the others' shares from them, block by block as they
//! arrive (the scheduler's [`Home`]s).
//!
//! A peer is a ddftpd producer of the same version of the file that holds
//! only its share: it never votes on the version (it must serve the one
//! the mirrors agreed on, or it is not used), its blocks are checked
//! against the mirrors' chunk manifest like any mirror's, one that lies or
//! stalls is dropped and its share taken by the mirrors, and one that is
//! lost is not asked again (it would rejoin as a helper of shares it does
//! not hold).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddftp_proto::frame::{SERVER_ID_LEN, TELL_VERSION};
use ddftp_proto::manifest::{FileDigest, Hash};
use ddftp_proto::ErrorCode;
use ddops::fan;
use ddops::scheduler::Home;

use super::{connect, Peer, Producer, Progress, Route, Session, SessionError, Version};

/// Where a receiver serves what it has verified: the server this command
/// runs beside its download.
pub trait Sharing: Send + Sync {
    /// The server's id, as its greeting says: how this receiver finds
    /// itself in the list of peers.
    fn server_id(&self) -> [u8; SERVER_ID_LEN];
    /// Serves the file `offer` describes (nothing of it verified yet).
    fn offer(&self, offer: Offer<'_>) -> std::io::Result<Arc<dyn Offered>>;
    /// Shares nothing: the other receivers, told so, do not wait for it.
    fn decline(&self);
}

/// A file being served as it is downloaded.
pub trait Offered: Send + Sync {
    /// Bytes `at..at + len` are verified and written.
    fn verified(&self, at: u64, len: u64);
    /// This receiver's mirrors fetch bytes `at..at + len` of another
    /// receiver's share, in `dir`'s order: the other receivers that asked
    /// (`Tell`) are told, and read them from here.
    fn fetching(&self, at: u64, len: u64, dir: ddftp_proto::Direction);
}

/// What a receiver serves, as the mirrors described it.
pub struct Offer<'a> {
    /// The file's path, or the bundle's name.
    pub path: &'a str,
    pub size: u64,
    pub bytes: Offering<'a>,
}

/// Where an offer's bytes are, and what vouches for them.
pub enum Offering<'a> {
    /// A file: its bytes in `file` (the part file it writes, a descriptor
    /// of its own: a name a local user could swap for a symlink is never
    /// opened again), checked against `hashes` by the other receivers.
    File { file: std::fs::File, mtime: (i64, u32), digest: FileDigest, hashes: &'a [Hash] },
    /// A bundle (`archive --share`): read back through the store the
    /// transfer writes (beneath DEST, never through a symlink), checked by
    /// the other receivers against the mirrors' seals.
    Sealed(Arc<dyn crate::store::Store>),
}

/// `get --share`: every receiver, this one included, in one order all of
/// them were given (it numbers the shares), and this one's server.
#[derive(Clone)]
pub struct Share {
    pub peers: Vec<Peer>,
    /// This receiver's place in `peers`, where known (its --share-listen
    /// address is listed, or its MPI rank); otherwise the entry whose
    /// server greets with this receiver's id.
    pub me: Option<usize>,
    pub sharing: Arc<dyn Sharing>,
    /// How long to wait for the other receivers to serve the file (they
    /// start at about the same time, each after probing the mirrors).
    pub wait: Duration,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share").field("peers", &self.peers).finish_non_exhaustive()
    }
}

/// The other receivers as producers, and the shares.
pub(super) struct Peers {
    /// Each peer's two producers (a virtual pair), and a third for what
    /// it tells its mirrors fetch (its relay; a peer of protocol 11 or
    /// later), and its name.
    pub slots: Vec<(String, Vec<Producer>)>,
    /// Per slot: the connection on which it tells what its mirrors fetch
    /// (`Tell`), if it speaks it.
    pub tells: Vec<Option<Session>>,
    /// Per share ([`fan::sources`]): which of `slots` works it, or this
    /// receiver's own (`None`), and its weight.
    pub shares: Vec<(Option<usize>, u64)>,
}

impl Peers {
    /// Adds the peers' producers to `slots` (each peer a mirror of its own
    /// in `mirrors`, by name) after this receiver's mirrors' and returns
    /// the scheduler's homes, and each telling peer's share and connection.
    pub fn join(self, slots: &mut Vec<(usize, Producer)>, mirrors: &mut Vec<String>) -> Joined {
        let first = slots.len();
        let homes = self.homes(first, first);
        let share_of = |k: usize| self.shares.iter().position(|&(s, _)| s == Some(k));
        let tells = self.tells.into_iter().enumerate().filter_map(|(k, t)| Some((share_of(k)?, t?))).collect();
        for (name, producers) in self.slots.into_iter().filter(|(_, ps)| !ps.is_empty()) {
            mirrors.push(name);
            slots.extend(producers.into_iter().map(|p| (mirrors.len() - 1, p)));
        }
        Joined { homes, tells }
    }

    /// The scheduler's homes, with this receiver's mirrors `mirror_slots`
    /// and the peers' producers numbered from `first`.
    pub fn homes(&self, mirror_slots: usize, first: usize) -> Vec<Home> {
        let mut at = vec![];
        let mut next = first;
        for (_, ps) in &self.slots {
            at.push((next..next + ps.len()).collect::<Vec<_>>());
            next += ps.len();
        }
        self.shares
            .iter()
            .map(|&(s, weight)| match s {
                None => Home { producers: (0..mirror_slots).collect(), only_here: false, weight, relay: None },
                Some(k) => {
                    let relay = at[k].get(2).copied();
                    Home { producers: at[k].iter().take(2).copied().collect(), only_here: true, weight, relay }
                }
            })
            .collect()
    }
}

/// The peers as the transfer takes them ([`Peers::join`]).
pub(super) struct Joined {
    pub homes: Vec<Home>,
    /// The share each telling peer fetches, and its `Tell` connection.
    pub tells: Vec<(usize, Session)>,
}

/// Why a peer is not used.
#[derive(Debug, thiserror::Error)]
pub(super) enum PeerError {
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("it serves another version ({got}), not the mirrors' ({want})")]
    OtherVersion { got: String, want: String },
    #[error("it answers with this receiver's own server id, and is not this receiver")]
    ClaimsOurId,
}

/// Why sharing cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    #[error("--peers must list this receiver too (its own --share-listen address): the list's order numbers the shares, the same on every receiver")]
    NotListed,
    #[error("{0}")]
    Listen(String),
}

/// What this receiver knows of its copy once the transfer is planned.
pub(super) struct Known<'a> {
    /// The part file being written (for errors).
    pub part: &'a Path,
    /// What the transfer writes into.
    pub store: &'a Arc<dyn crate::store::Store>,
    pub mtime: (i64, u32),
    /// The mirrors' chunk hashes (or a Metalink's pieces), if every block
    /// is checked against them before it is offered and the file moves
    /// whole to its name (only then is a file shared).
    pub hashes: Option<&'a [Hash]>,
    /// A bundle whose every block is checked against a seal (only then is
    /// a bundle shared).
    pub sealed: bool,
    /// Blocks held from an earlier run (inclusive ranges).
    pub done: &'a [(u64, u64)],
    pub block_size: u32,
}

/// `--share`: serves the file (or bundle) as it comes (what an earlier
/// run left included) and connects to the other receivers; `None` without
/// `--share`, or (said) for what cannot be shared.
pub(super) async fn start(
    spec: &super::GetSpec,
    version: &Version,
    at: Known<'_>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Option<(Arc<dyn Offered>, Peers)>, super::TransferError> {
    let Some(share) = &spec.share else { return Ok(None) };
    let out_err =
        |source| super::TransferError::Output { path: at.part.to_path_buf(), source, resume: super::Resume::Kept };
    let bytes = match (at.sealed, at.hashes, at.store.as_file()) {
        (true, ..) => Offering::Sealed(at.store.clone()),
        (false, Some(hashes), Some(file)) => {
            let file = file.try_clone().map_err(out_err)?;
            let (digest, hashes) = described(version, hashes);
            Offering::File { file, mtime: at.mtime, digest, hashes }
        }
        _ => {
            let w = "not sharing: only a file moved whole to its name whose every block is checked as it arrives (a chunk manifest from ddftpd mirrors, or a Metalink's pieces), or an archive's verified range, is shared";
            super::tell(progress, warnings, w.to_string());
            share.sharing.decline();
            return Ok(None);
        }
    };
    let offered = share.sharing.offer(Offer { path: &spec.path, size: version.size, bytes }).map_err(out_err)?;
    let bs = u64::from(at.block_size);
    for &(a, b) in at.done {
        offered.verified(a * bs, (b + 1 - a) * bs);
    }
    let peers = connect_peers(share, &spec.path, version, spec.token.clone(), progress, warnings).await?;
    Ok(Some((offered, peers)))
}

/// The hashes every block of a download is checked against before it is
/// offered to the other receivers (the mirrors' chunk manifest, or a
/// Metalink's pieces, those over a block once whole), if it is a file
/// moved whole to its name: only such a file is shared.
pub(super) fn checked_by<'a>(
    spec: &super::GetSpec,
    check: &'a super::slot::Check,
    pieces: Option<&'a Arc<crate::manifest::Manifest>>,
) -> Option<&'a [Hash]> {
    let whole = spec.store.is_none() && spec.stdout.is_none() && spec.range.is_none();
    match (check, pieces) {
        (super::slot::Check::Manifest(m), _) | (_, Some(m)) if whole => Some(&m.hashes[..]),
        _ => None,
    }
}

/// What a receiver's server says of the file it shares: the mirrors'
/// digest and chunk manifest where ddftpd mirrors gave them. From web
/// servers alone the hashes are a Metalink's pieces and there is no
/// ddftpd digest: the file is described as a bundle is (ddftpd's chunk
/// size, no digests, no manifest), the other receivers match it by size
/// and check each block against their own copy of the pieces.
fn described<'a>(version: &Version, hashes: &'a [Hash]) -> (FileDigest, &'a [Hash]) {
    match version.digest.chunk_size {
        0 => {
            let chunk_size = ddftp_proto::manifest::chunk_size(version.size);
            (FileDigest { chunk_size, sha256: [0; 32], manifest: [0; 32] }, &[])
        }
        _ => (version.digest, hashes),
    }
}

/// Connects to every peer (two connections each) once it serves the
/// file; finds this receiver among them by its server's id.
pub(super) async fn connect_peers(
    share: &Share,
    path: &str,
    version: &Version,
    token: Option<Arc<[u8]>>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Peers, ShareError> {
    let id = share.sharing.server_id();
    let deadline = Instant::now() + share.wait;
    let n = share.peers.len();
    let flat = n <= fan::FLAT;
    // Where this receiver's place is known, only the receivers it reads
    // from are asked; otherwise every one, to find it by its server's id.
    let mut asked = vec![share.me.is_none(); n];
    for from in share.me.into_iter().flat_map(|me| fan::sources(n, me)).filter_map(|s| s.from) {
        asked[from] = true;
    }
    let asks: Vec<_> = share
        .peers
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let (route, path, version, token) = (p.route(None), path.to_string(), *version, token.clone());
            // This receiver, when its place is known, is not asked.
            let (me, ask_it) = (share.me == Some(k), asked[k]);
            tokio::spawn(async move {
                match (me, ask_it) {
                    (true, _) => Some(Ok(None)),
                    (false, true) => Some(ask(route, &path, &version, token.as_deref(), (id, flat), deadline).await),
                    (false, false) => None,
                }
            })
        })
        .collect();
    let mut answers = vec![];
    let mut me = None;
    for (k, a) in asks.into_iter().enumerate() {
        let answer = match a.await.expect("peer task") {
            // Another entry answering with this receiver's id (a peer
            // replaying it) is not this receiver: its share comes from
            // the mirrors, and nobody stops the download with it.
            Some(Ok(None)) if me.is_some() || share.me.is_some_and(|m| m != k) => Some(Err(PeerError::ClaimsOurId)),
            Some(Ok(None)) => {
                me = Some(k);
                None
            }
            a => a,
        };
        answers.push(answer);
    }
    let me = me.ok_or(ShareError::NotListed)?;
    let mut peers = Peers { slots: vec![], tells: vec![], shares: vec![] };
    for source in fan::sources(n, me) {
        let Some(k) = source.from else {
            peers.shares.push((None, source.weight));
            continue;
        };
        let peer = &share.peers[k];
        let (producers, tells) = match answers[k].take() {
            Some(Ok(Some(ps))) => (ps.producers, ps.tells),
            Some(Err(e)) => {
                // Its share comes from the mirrors.
                super::tell(progress, warnings, format!("not using peer {peer}: {e}"));
                (vec![], None)
            }
            None | Some(Ok(None)) => (vec![], None),
        };
        peers.shares.push((Some(peers.slots.len()), source.weight));
        peers.slots.push((format!("peer {peer}"), producers));
        peers.tells.push(tells);
    }
    Ok(peers)
}

/// A peer's connections once it serves the file.
struct Asked {
    /// Its virtual pair, and its relay if it tells.
    producers: Vec<Producer>,
    /// The connection it tells on.
    tells: Option<Session>,
}

/// A peer's connections once it serves `version` of `path`; `None` if
/// it is this receiver. A peer of protocol 11 or later also tells what
/// its mirrors fetch of the others' shares (flat groups only: in trees
/// the mirrors never help another's share).
async fn ask(
    route: Route,
    path: &str,
    version: &Version,
    token: Option<&[u8]>,
    (me, flat): ([u8; SERVER_ID_LEN], bool),
    deadline: Instant,
) -> Result<Option<Asked>, PeerError> {
    let (session, got) = loop {
        match connect(&route, Some((path, false)), token).await {
            Ok((s, ..)) if s.server_id == me => return Ok(None),
            Ok((s, got, _)) => break (s, got),
            // Not serving it yet (still asking its mirrors), or not
            // listening yet: it starts at about the same time.
            Err(e) if Instant::now() < deadline && (e.is_transient() || not_yet_offered(&e)) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.into()),
        }
    };
    // A bundle, or a file from web servers alone, has no digests of
    // ddftpd's: the same name and size is the same range, and each block
    // is checked against the mirrors' seals or the Metalink's pieces.
    let sealed = version.digest.chunk_size == 0;
    match got {
        Some(v) if v == *version || (sealed && v.size == version.size) => {}
        other => {
            let got = other.map_or("no version".into(), |v| v.describe());
            return Err(PeerError::OtherVersion { got, want: version.describe() });
        }
    }
    let (second, ..) = connect(&route, None, token).await?;
    let told = match session.version >= TELL_VERSION && flat {
        true => super::told::ask(&route, path, token).await,
        false => None,
    };
    let mut producers = vec![Producer::Ddftpd(route.clone(), session), Producer::Ddftpd(route.clone(), second)];
    let tells = told.map(|(relay, tells)| {
        producers.push(Producer::Ddftpd(route, relay));
        tells
    });
    Ok(Some(Asked { producers, tells }))
}

fn not_yet_offered(e: &SessionError) -> bool {
    matches!(e, SessionError::Refused { code: ErrorCode::NotFound, .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_from_web_servers_alone_is_described_as_a_bundle_is_and_its_pieces_are_not_served() {
        let pieces = [[7u8; 32]; 3];
        let (d, h) = described(&Version::sealed(40 << 20), &pieces);
        assert_eq!(d.chunk_size, ddftp_proto::manifest::chunk_size(40 << 20));
        assert!(h.is_empty() && d.sha256 == [0; 32] && d.manifest == [0; 32]);
        let ddftpd =
            Version { size: 40 << 20, digest: FileDigest { chunk_size: 1 << 20, sha256: [1; 32], manifest: [2; 32] } };
        assert_eq!(described(&ddftpd, &pieces), (ddftpd.digest, &pieces[..]));
    }

    #[test]
    fn homes_give_this_receiver_s_share_to_its_mirrors_and_each_other_to_its_peer() {
        let peers = Peers {
            slots: vec![("a".into(), vec![]), ("b".into(), vec![])],
            tells: vec![None, None],
            shares: vec![(Some(0), 1), (None, 1), (Some(1), 1)],
        };
        // No producers in the slots: ids come from their counts (none).
        let homes = peers.homes(3, 3);
        assert_eq!(homes[1], Home { producers: vec![0, 1, 2], only_here: false, weight: 1, relay: None });
        assert!(homes[0].producers.is_empty() && homes[0].only_here);
        assert!(homes[2].producers.is_empty() && homes[2].only_here);
    }
}
