//! Where each receiver of a file many receive at once (`get --share`,
//! `--peers`) takes each share of it from: the one rule the client and
//! the simulator use.
//!
//! Up to [`FLAT`] receivers, the file is cut into one share per receiver:
//! each fetches its own share from the mirrors and every other share from
//! the receiver that fetches it (every receiver reads from every other).
//! With many more that cannot reach the bound: a receiver passes on only
//! its own share, so its uplink sends it N - 1 times, which takes the
//! whole bound by itself, and it cannot start before the mirrors have
//! given every other receiver its first block (docs/fan-out.md). So
//! beyond [`FLAT`] the file is cut into [`FAN`] shares, each sent down a
//! tree of its own (as SplitStream stripes a broadcast): share k's root
//! (receiver k) fetches it from the mirrors, every other receiver reads it
//! from its parent in tree k, which passes blocks on as it verifies them.
//! A receiver is inside one tree only (share `me % FAN`'s) and a leaf of
//! the others, a share is as big as the number of receivers inside its
//! tree, and those split the rest evenly as children: every uplink sends
//! about one copy of the file, a block reaches the last receiver after
//! two or three hops, and the mirrors feed only the roots (each block
//! leaves them about once). In trees the mirrors of a receiver only stand
//! in for a lost parent: they never help one that sends (its subtree would
//! take those blocks from the mirrors again).

/// Up to this many receivers, every receiver reads from every other (in
/// the model that is as fast as trees up to about 100, and faster below).
pub const FLAT: usize = 64;
/// Beyond [`FLAT`], how many shares (trees) a file is cut into: about how
/// many receivers each receiver passes its share on to. Fewer make deeper
/// trees, and every hop adds a block's time on a thin connection; more
/// make thinner connections.
pub const FAN: usize = 32;

/// Where one receiver takes one share of the file from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// `None` where this receiver is the share's root (its own mirrors
    /// fetch it), else the receiver whose copy it reads.
    pub from: Option<usize>,
    /// How big the share is against the others: how many receivers pass
    /// it on. Each of them sends it to an equal part of the rest, so with
    /// shares in proportion every uplink sends about one copy.
    pub weight: u64,
}

/// Where receiver `me` of `n` takes each share from, in the shares' order
/// (`shares(n)` of them).
pub fn sources(n: usize, me: usize) -> Vec<Source> {
    (0..shares(n)).map(|k| Source { from: parent(n, k, me), weight: inside(n, k) as u64 }).collect()
}

/// How many shares `n` receivers cut a file into.
pub fn shares(n: usize) -> usize {
    match n <= FLAT {
        true => n.max(1),
        false => FAN,
    }
}

/// How many receivers pass share `k` on: its root and the others numbered
/// for it (`j % shares == k`).
fn inside(n: usize, k: usize) -> usize {
    (n.max(1) - 1 - k.min(n.max(1) - 1)) / shares(n) + 1
}

/// Receiver `me`'s parent in share `k`'s tree, `None` at its root. The
/// tree is laid out breadth first over: the root `k`, the other receivers
/// that pass it on, then all the others ([`order`]); each of the first
/// `inside` takes the next equal part of the rest as its children.
fn parent(n: usize, k: usize, me: usize) -> Option<usize> {
    let m = shares(n);
    if me == k || me >= n || k >= m {
        return None;
    }
    let c = inside(n, k);
    let at = place(m, c, k, me);
    // Parent p takes `base` children, the first `extra` one more.
    let (base, extra) = ((n - 1) / c, (n - 1) % c);
    let child = at - 1;
    let p = match child < extra * (base + 1) {
        true => child / (base + 1),
        false => extra + (child - extra * (base + 1)) / base.max(1),
    };
    Some(order(m, c, k, p))
}

/// Which receiver is at place `at` of share `k`'s tree (of `m` shares, `c`
/// receivers inside it): `k`, then `k + m`, `k + 2m`, ..., then every
/// other receiver in increasing order.
fn order(m: usize, c: usize, k: usize, at: usize) -> usize {
    if at < c {
        return k + at * m;
    }
    // The (at - c)th number not k modulo m: m - 1 of them in every m.
    let (i, per) = (at - c, m - 1);
    let (block, r) = (i / per.max(1), i % per.max(1));
    block * m + if r < k { r } else { r + 1 }
}

/// Where receiver `me` is in share `k`'s [`order`].
fn place(m: usize, c: usize, k: usize, me: usize) -> usize {
    if me % m == k {
        return (me - k) / m;
    }
    let before = if me <= k { 0 } else { (me - k - 1) / m + 1 };
    c + me - before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_to_flat_receivers_each_share_comes_from_the_receiver_that_fetches_it() {
        for n in 1..=FLAT {
            for me in 0..n {
                let want: Vec<Source> = (0..n).map(|k| Source { from: (k != me).then_some(k), weight: 1 }).collect();
                assert_eq!(sources(n, me), want, "n {n} me {me}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_tree_s_order_is_the_root_those_inside_then_the_rest(n in 65usize..3000, k in 0usize..32) {
            let m = shares(n);
            let c = inside(n, k);
            let want: Vec<usize> = std::iter::once(k)
                .chain((0..n).filter(|&j| j != k && j % m == k))
                .chain((0..n).filter(|&j| j % m != k))
                .collect();
            for (at, &j) in want.iter().enumerate() {
                proptest::prop_assert_eq!(order(m, c, k, at), j);
                proptest::prop_assert_eq!(place(m, c, k, j), at);
            }
        }
    }

    #[test]
    fn beyond_flat_every_share_weighs_more_than_one() {
        // What `Scheduler::with_homes` tells trees by.
        for n in [FLAT + 1, 100, 1000, 100_000] {
            assert!((0..shares(n)).all(|k| inside(n, k) >= 2), "n {n}");
        }
    }

    #[test]
    fn every_share_reaches_every_receiver_from_its_root_in_few_hops() {
        for n in [FLAT + 1, 2 * FLAT + 3, 1000] {
            for k in 0..shares(n) {
                for me in 0..n {
                    let (mut at, mut hops) = (me, 0);
                    while let Some(p) = parent(n, k, at) {
                        at = p;
                        hops += 1;
                        assert!(hops <= 3, "n {n} share {k} receiver {me}: a cycle or too deep");
                    }
                    assert_eq!(at, k, "n {n}: share {k}'s tree is rooted at receiver {k}");
                }
            }
        }
    }

    #[test]
    fn each_receiver_passes_on_about_one_copy_of_the_file() {
        for n in [FLAT + 1, 100, 1000] {
            let m = shares(n);
            let whole: u64 = (0..m).map(|k| inside(n, k) as u64).sum();
            assert_eq!(whole, n as u64, "every receiver passes one share on");
            let mut sent = vec![0.0; n];
            for k in 0..m {
                let size = inside(n, k) as f64 / whole as f64;
                for j in 0..n {
                    if let Some(p) = parent(n, k, j) {
                        sent[p] += size;
                    }
                }
            }
            let most = sent.iter().copied().fold(0.0, f64::max);
            // The rest over the ones that pass it on, rounded up to whole
            // receivers: at most one receiver's worth of a share more.
            assert!(most <= 1.0 + 1.0 / FAN as f64, "n {n}: a receiver sends {most:.3} copies");
        }
    }
}
