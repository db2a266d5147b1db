//! `-L`/`--copy-links` and `--copy-unsafe-links`: the list's symlinks as
//! what they point to. The rule is [`ddtree::follow`]'s; here, what it
//! needs that the list does not hold is asked of a mirror (a walk of a
//! directory the lists hold, listing only the names wanted, or a walk of
//! a directory whole), and the links that still do not resolve are named.
//!
//! A mirror reads only what it listed itself, through no symlink: a link
//! followed is its referent's entry (the path the bytes are read from)
//! under the link's name below DEST.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;

use ddtree::follow::{self, Ask, Known, NoReferent};
use ddtree::list::{Entry, Kind};

use super::archiving::Archiving;
use super::mirrors::walk_on;
use super::report::Failure;
use crate::session::WalkAsk;
use crate::transfer::Progress;

/// Rounds of asking the mirrors (a link to a link elsewhere takes one
/// each) before the links still not resolved are named.
const ROUNDS: usize = 16;
/// Names one walk asks for (the protocol's rules, one left for `- *`).
const NAMES_A_WALK: usize = ddftp_proto::frame::MAX_WALK_RULES - 1;
/// Walks one run asks for referents: a list (a hostile mirror's) of
/// links each leading somewhere else cannot make it ask without end.
const WALKS: usize = 4096;

impl Archiving<'_> {
    /// `entries` (sorted by their name below DEST) as `(name, entry)`,
    /// sorted, with the symlinks `-L` or `--copy-unsafe-links` takes
    /// replaced by what they point to; the ones that cannot be are named
    /// and fail the run (exit 5, rsync's 23), DEST's copy under their
    /// names kept.
    pub(super) async fn follow_links(&self, entries: Vec<Entry>, progress: &mut dyn Progress) -> Vec<(Vec<u8>, Entry)> {
        let mut known = Known::default();
        known.add(entries.iter().cloned(), None);
        // A SRC its mirror walked with no rules is listed whole.
        for (i, src) in self.spec.srcs().enumerate() {
            if self.spec.list.is_none() && self.spec.walk_ask(i).rules.is_empty() {
                known.add([], Some(src.as_bytes()));
            }
        }
        let (mut links, mut rest) = (vec![], Vec::with_capacity(entries.len()));
        for e in entries {
            let Some(rel) = self.spec.rel_of(&e).map(<[u8]>::to_vec) else { continue };
            match e.kind {
                Kind::Link => links.push((rel, e)),
                _ => rest.push((rel, e)),
            }
        }
        let (mut round, mut walks) = (0, WALKS);
        let followed = loop {
            let f = follow::follow(links.clone(), &known, self.spec.follow);
            if f.ask.is_empty() || round == ROUNDS {
                break f;
            }
            round += 1;
            self.ask_mirrors(&mut known, f.ask, &mut walks, progress).await;
        };
        // Still waiting after the last round: not followed.
        let mut failed = followed.failed;
        failed.extend(followed.waiting.into_iter().map(|r| (r, NoReferent::Missing)));
        self.not_followed(&failed, progress);
        rest.extend(followed.out);
        // A name twice is the list's check's to refuse, as any.
        rest.sort_by(|a, b| a.0.cmp(&b.0));
        rest
    }

    /// Names each link not followed; the run is then incomplete (as
    /// rsync's, it deletes nothing) and what DEST has under its name stays.
    fn not_followed(&self, failed: &[(Vec<u8>, NoReferent)], progress: &mut dyn Progress) {
        for (rel, why) in failed {
            let shown = crate::progress::escaped(rel);
            match why {
                NoReferent::Missing => progress.warn(&format!("symlink has no referent: \"{shown}\"")),
                why => progress.warn(&format!("not following symlink \"{shown}\": {why}")),
            }
            let rel = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(rel));
            self.failed(&rel, why.to_string());
            self.listing.lock().expect("listing lock").kept.insert(rel);
        }
        if !failed.is_empty() {
            self.tally.lock().expect("tally lock").incomplete = true;
        }
    }

    /// Asks a mirror for what `asks` names, and tells `known` what came
    /// (and which names the mirror does not have).
    /// `walks`: how many more walks this run may ask for; past them what
    /// is asked counts as not there.
    async fn ask_mirrors(
        &self,
        known: &mut Known,
        asks: std::collections::BTreeSet<Ask>,
        walks: &mut usize,
        progress: &mut dyn Progress,
    ) {
        let mut names: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
        for ask in asks {
            match ask {
                Ask::Name(p) => {
                    let (dir, name) = match p.iter().rposition(|&c| c == b'/') {
                        Some(i) => (p[..i].to_vec(), p[i + 1..].to_vec()),
                        None => (vec![], p.clone()),
                    };
                    names.entry(dir).or_default().push(name);
                }
                Ask::Whole(dir) => {
                    let got = match take(walks) {
                        true => self.walk_one(&dir, vec![], progress).await,
                        false => None,
                    };
                    match got {
                        Some(entries) => known.add(entries, Some(&dir)),
                        None => known.absent(&dir),
                    }
                }
            }
        }
        for (dir, names) in names {
            for some in names.chunks(NAMES_A_WALK) {
                // The names and nothing else, nothing below them.
                let mut rules: Vec<(bool, String)> = some
                    .iter()
                    .filter_map(|n| Some((true, format!("/{}", ddtree::filter::quoted(std::str::from_utf8(n).ok()?)))))
                    .collect();
                rules.push((false, "*".into()));
                let got = match rules.len() > 1 && take(walks) {
                    true => self.walk_one(&dir, rules, progress).await.unwrap_or_default(),
                    false => vec![],
                };
                let have: std::collections::HashSet<Vec<u8>> =
                    got.iter().map(|e| follow::key(&e.path).to_vec()).collect();
                known.add(got, None);
                for n in some {
                    let p = if dir.is_empty() { n.clone() } else { [dir.as_slice(), b"/", n].concat() };
                    if !have.contains(&p) {
                        known.absent(&p);
                    }
                }
            }
        }
    }

    /// One walk of `dir` (below the mirrors' root) with `rules`, by the
    /// first mirror that answers; `None` if none does (or the path is not
    /// one a walk can be asked for).
    async fn walk_one(
        &self,
        dir: &[u8],
        rules: Vec<(bool, String)>,
        progress: &mut dyn Progress,
    ) -> Option<Vec<Entry>> {
        let path = match dir {
            b"" => ".",
            d => std::str::from_utf8(d).ok()?,
        };
        let ask = WalkAsk { rules, ..self.spec.walk_ask(0) };
        for ep in &self.spec.get.mirrors {
            progress.status(&format!("listing {path} on {ep} for a symlink's referent"));
            match walk_on(ep, path, &ask, self.spec.get.token.as_deref(), &mut |_| {}).await {
                Ok((entries, errors)) => {
                    for (p, why) in errors {
                        progress.warn(&format!("cannot copy {p}: {why}"));
                        let mut tally = self.tally.lock().expect("tally lock");
                        tally.incomplete = true;
                        tally.failures.push(Failure { path: p, why });
                    }
                    return Some(entries);
                }
                Err(e) => tracing::debug!("{ep}: walking {path} for a symlink's referent: {e}"),
            }
        }
        None
    }
}

/// One walk of the run's [`WALKS`], if one is left.
fn take(walks: &mut usize) -> bool {
    if *walks == 0 {
        return false;
    }
    *walks -= 1;
    if *walks == 0 {
        tracing::warn!("-L: {WALKS} walks asked for symlinks' referents; what more links need counts as not there");
    }
    true
}
