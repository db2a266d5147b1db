//! The DDOps split rule, for every scheduler of this project: a busy
//! segment's unsent rest is cut where its two sides' weights (what each
//! side's producers have delivered, or their rates) say, so both sides
//! finish together (the paper's Eq. 2-3 and 7-8). `ddops::scheduler` cuts
//! blocks with it; `ddnet`'s plan cuts a message's bytes.

/// Of `unsent` items, how many go to the lower side: its share of the
/// total weight, rounded down (none when nothing has weight).
pub fn lower_share(unsent: u64, lower: u128, total: u128) -> u64 {
    if total == 0 {
        return 0;
    }
    (u128::from(unsent) * lower / total) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_rest_is_cut_by_weight() {
        assert_eq!(lower_share(100, 1, 4), 25);
        assert_eq!(lower_share(100, 3, 3), 100);
        assert_eq!(lower_share(100, 0, 0), 0);
        assert_eq!(lower_share(u64::MAX, u128::from(u64::MAX), u128::from(u64::MAX) * 2), u64::MAX / 2);
    }

    proptest! {
        #[test]
        fn the_lower_share_never_exceeds_the_rest_and_grows_with_its_weight(
            unsent in any::<u64>(), lower in 0u128..1 << 80, upper in 0u128..1 << 80,
        ) {
            let total = lower + upper;
            let s = lower_share(unsent, lower, total);
            prop_assert!(s <= unsent);
            prop_assert!(lower_share(unsent, lower + 1, total + 1) >= s);
        }
    }
}
