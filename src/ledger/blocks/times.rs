//! A block's admission times as one storage value: a report is written as
//! one row however many admissions it brings (issue 30: one row per block,
//! not one per admission), and read back exactly after a restart.
//!
//! The times are sorted and delta-encoded: the first as it is, each next as
//! its distance from the one before, every number a varint of 5 bits per
//! character in the base64url alphabet (the 6th bit says "more follows").
//! A block's admissions fall within one short lease, so a delta is 0 (the
//! same millisecond) or small: one or two characters per admission, and
//! text, which every SQLite binding stores as it is.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const MORE: u8 = 32;

/// `times` (any order) as one value; sorted on the way.
pub fn encode(times: &[u64]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let mut out = String::with_capacity(sorted.len() * 2 + 8);
    let mut previous = 0;
    for t in sorted {
        let mut n = t - previous;
        previous = t;
        loop {
            let low = (n & 31) as u8;
            n >>= 5;
            let more = if n > 0 { MORE } else { 0 };
            out.push(char::from(ALPHABET[usize::from(low | more)]));
            if n == 0 {
                break;
            }
        }
    }
    out
}

/// The sorted times `encode` wrote; `None` for a value it could not have
/// written (a foreign character, a number past `u64`, a cut-off varint).
pub fn decode(text: &str) -> Option<Vec<u64>> {
    let mut times = Vec::new();
    let mut at: u64 = 0;
    let mut n: u64 = 0;
    let mut shift = 0u32;
    let mut open = false;
    for byte in text.bytes() {
        let sextet = ALPHABET.iter().position(|&c| c == byte)? as u8;
        let low = u64::from(sextet & 31);
        open = sextet & MORE != 0;
        // Past u64, or a last chunk of zeros `encode` never writes (so
        // that each list has one value).
        let past = shift >= 64 || (shift > 0 && low >> (64 - shift) != 0);
        if past || (!open && shift > 0 && low == 0) {
            return None;
        }
        n |= low << shift;
        shift += 5;
        if !open {
            at = at.checked_add(n)?;
            times.push(at);
            n = 0;
            shift = 0;
        }
    }
    (!open).then_some(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_lease_of_times_costs_a_character_or_two_each() {
        let start = 1_700_000_000_000;
        let times: Vec<u64> = (0..100).map(|i| start + i * 7 / 3).collect();
        let text = encode(&times);
        assert!(text.len() <= 9 + 99, "{} characters", text.len());
        assert_eq!(decode(&text), Some(times));
        assert_eq!(encode(&[]), "");
        assert_eq!(decode(""), Some(vec![]));
    }

    #[test]
    fn values_it_could_not_have_written_are_refused() {
        assert_eq!(decode("A*"), None, "a foreign character");
        assert_eq!(decode("g"), None, "a varint cut off");
        assert_eq!(decode("gA"), None, "0 spelled with two characters");
        assert_eq!(decode(&"_".repeat(13)), None, "past u64");
        let max = encode(&[u64::MAX]);
        assert_eq!(decode(&max), Some(vec![u64::MAX]));
        assert_eq!(decode(&format!("{max}B")), None, "a sum past u64");
    }

    proptest! {
        #[test]
        fn times_read_back_exactly_and_sorted(
            mut times in prop::collection::vec(
                prop_oneof![0u64..5_000, 1_700_000_000_000u64..1_700_000_010_000, Just(u64::MAX)],
                0..300,
            ),
        ) {
            let text = encode(&times);
            times.sort_unstable();
            prop_assert_eq!(decode(&text), Some(times));
        }

        #[test]
        fn any_text_decodes_or_is_refused_without_panicking(text in "[A-Za-z0-9_*-]{0,40}") {
            if let Some(times) = decode(&text) {
                prop_assert_eq!(encode(&times), text);
            }
        }
    }
}
