//! A stable sort for short lists: insertion, as std's stable sort does
//! below 20 elements anyway, without std's merge sort behind it, which the
//! wasm would carry once per element type (BENCHMARKS.md). Quadratic, so
//! only for lists a limit keeps short (a request's layers, a rule's minutes).

/// Sorts `items` by `key`, keeping the order of items with equal keys.
pub fn sort_by_key<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K) {
    for end in 1..items.len() {
        let mut at = end;
        while at > 0 && key(&items[at - 1]) > key(&items[at]) {
            items.swap(at - 1, at);
            at -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_keys_keep_their_order() {
        let mut items = [(true, 0), (false, 1), (true, 2), (false, 3)];
        sort_by_key(&mut items, |(refused, _)| !refused);
        assert_eq!(items, [(true, 0), (true, 2), (false, 1), (false, 3)]);
    }

    proptest! {
        /// The same order as std's stable sort, ties included.
        #[test]
        fn as_std_stable_sort(keys in prop::collection::vec(0u8..4, 0..12)) {
            let mut ours: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
            let mut std = ours.clone();
            sort_by_key(&mut ours, |(key, _)| *key);
            std.sort_by_key(|(key, _)| *key);
            prop_assert_eq!(ours, std);
        }
    }
}
