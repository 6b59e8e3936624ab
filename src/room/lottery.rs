//! The draw that turns a pre-queue into an order: join number `j` of `n`
//! becomes place `place(seed, n, j)`, a bijection of `[0, n)` chosen by a
//! seed drawn when the room opens. Nothing is stored per ticket: a shard
//! keeps only `n` and the seed, and anyone holding both computes a ticket's
//! place from its join number.
//!
//! The permutation is a balanced Feistel network on the smallest even
//! number of bits that holds `n`, walked in cycles until it lands below
//! `n` (the domain is under `4n`, so under four steps are expected). Every
//! Feistel network is a bijection whatever its round function, and cycle
//! walking keeps that on `[0, n)`; the round function only has to make the
//! order look random, so it is a 64-bit mixer keyed by the seed, not a
//! cipher: the seed is drawn at opening, after every join number is
//! handed out, so nobody can aim for a place.

/// Feistel rounds: with a good mixer, a handful make every output bit
/// depend on every input bit several times over.
const ROUNDS: u64 = 6;

/// The place of join number `j` among `n` pre-queue tickets; `None` when
/// `j` is not one of them.
pub fn place(seed: u64, n: u64, j: u64) -> Option<u64> {
    if j >= n {
        return None;
    }
    let half = half_bits(n);
    let mut x = j;
    loop {
        x = feistel(seed, half, x);
        if x < n {
            return Some(x);
        }
    }
}

/// Half the bits of the Feistel domain: the smallest `h` with `n <= 4^h`,
/// at least 1.
fn half_bits(n: u64) -> u32 {
    let bits = 64 - (n.saturating_sub(1)).leading_zeros();
    bits.div_ceil(2).max(1)
}

fn feistel(seed: u64, half: u32, x: u64) -> u64 {
    let mask = (1u64 << half) - 1;
    let (mut left, mut right) = (x >> half, x & mask);
    for round in 0..ROUNDS {
        let next = left ^ (mix(seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15), right) & mask);
        left = right;
        right = next;
    }
    (left << half) | right
}

/// splitmix64's finaliser over the key and the half-block.
fn mix(key: u64, value: u64) -> u64 {
    let mut z = key.wrapping_add(value.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_is_a_permutation() {
        for n in 0..300 {
            for seed in [0, 1, 42, u64::MAX] {
                let mut seen = vec![false; n as usize];
                for j in 0..n {
                    let p = place(seed, n, j).unwrap();
                    assert!(!seen[p as usize], "n={n} seed={seed}: place {p} twice");
                    seen[p as usize] = true;
                }
                assert_eq!(place(seed, n, n), None);
            }
        }
    }

    #[test]
    fn seeds_give_different_orders() {
        let order = |seed| (0..1000).map(|j| place(seed, 1000, j)).collect::<Vec<_>>();
        assert_ne!(order(1), order(2));
        let unmoved = (0..1000).filter(|&j| place(7, 1000, j) == Some(j)).count();
        assert!(unmoved < 10, "{unmoved} of 1000 kept their join number");
    }

    #[test]
    fn the_first_joiners_are_spread_over_the_order() {
        // The first tenth of the joiners should land all over the order,
        // not in its first tenth: their mean place is near the middle.
        let n = 10_000;
        let mean = (0..n / 10).map(|j| place(99, n, j).unwrap()).sum::<u64>() / (n / 10);
        assert!((4_000..6_000).contains(&mean), "mean place {mean}");
    }
}
