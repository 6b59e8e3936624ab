//! A room's optional challenge (`challenge = { work = <bits> }`): before a
//! newcomer takes a place, its page finds an answer that makes SHA-256 of
//! `<puzzle>.<answer>` start with `bits` zero bits (about `2^bits`
//! hashes), and sends it back in a cookie. Checking one costs one hash.
//! It makes each place cost a client CPU time (BENCHMARKS.md measures a
//! phone-like browser), which a farm of addresses pays per place.
//!
//! A puzzle is signed by the room (so no client makes its own), names its
//! room and bits, and lasts [`PUZZLE_TTL_MS`]. It is spent once: the first
//! join that brings it is counted in a key object of its own (a limit of
//! one for twice its lifetime, so that no clock between isolates revives
//! it), and a copy after that is refused like any key over its limit.

use sha2::{Digest, Sha256};

use super::cookie::{Puzzle, Signed, Signer};
use crate::limit::{Policy, Spec};
use crate::objects::name::{ObjectName, Scope};

/// How long a puzzle may be answered after it was handed out: a slow
/// phone's solve and the page's reload, with room to spare.
pub const PUZZLE_TTL_MS: u64 = 5 * 60_000;

/// The layer name under which spent puzzles are counted:
/// `rule:<room>.challenge:<id>`.
const SPENT: &str = "challenge";

/// The page's solver: finds the answer, sets the cookie, loads the page
/// again. Its hash is in the page's Content-Security-Policy.
pub const SCRIPT: &str = include_str!("challenge.js");

/// A puzzle for a newcomer of `signer`'s room, handed out at `now`.
pub fn issue(signer: &Signer, bits: u32, now: u64, id: u64) -> String {
    signer.write(&Signed::Puzzle(Puzzle {
        bits,
        issued_ms: now,
        id,
    }))
}

/// The puzzle `answered` (a work cookie's value, `<puzzle>.<answer>`)
/// solves, if it is this room's, asks for at least `bits`, is still
/// good at `now`, and the answer holds.
pub fn solved(signer: &Signer, bits: u32, answered: &str, now: u64) -> Option<Puzzle> {
    let (puzzle, answer) = answered.rsplit_once('.')?;
    if answer.is_empty() || answer.len() > 20 || !answer.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let Signed::Puzzle(read) = signer.read(puzzle)? else {
        return None;
    };
    let live = now < read.issued_ms.saturating_add(PUZZLE_TTL_MS);
    let digest = Sha256::digest(answered.as_bytes());
    (live && read.bits >= bits && zero_bits(&digest) >= read.bits).then_some(read)
}

/// Leading zero bits of `digest`.
fn zero_bits(digest: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in digest {
        bits += byte.leading_zeros();
        if *byte != 0 {
            break;
        }
    }
    bits
}

/// The key object that counts puzzle `id` of room `room` as spent, and
/// the policy it is counted under: once in twice a puzzle's lifetime.
pub fn spent(room: &str, id: u64) -> (ObjectName, Vec<(String, Spec)>) {
    let scope = Scope::rule(room, Some(SPENT));
    let policy = Policy::clamped(1, 2 * PUZZLE_TTL_MS);
    let name = format!("{}.{SPENT}", room);
    (
        scope.object(&id.to_string()),
        vec![(name, Spec::SlidingLog(policy))],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::jwt::Hs256Key;

    const NOW: u64 = 1_800_000_000_000;

    fn key() -> Hs256Key {
        Hs256Key::new(b"a room secret of thirty-two chars!")
    }

    /// The first answer to `puzzle` with `bits`, found as the page finds
    /// it: counting up from 0.
    fn solve(puzzle: &str, bits: u32) -> String {
        (0u64..)
            .map(|n| format!("{puzzle}.{n}"))
            .find(|a| zero_bits(&Sha256::digest(a.as_bytes())) >= bits)
            .unwrap()
    }

    #[test]
    fn an_answer_is_checked_with_one_hash() {
        let k = key();
        let signer = Signer {
            room: "shop",
            key: &k,
        };
        let puzzle = issue(&signer, 8, NOW, 42);
        let answered = solve(&puzzle, 8);
        let read = solved(&signer, 8, &answered, NOW + 1).expect("solved");
        assert_eq!((read.id, read.bits, read.issued_ms), (42, 8, NOW));
        assert_eq!(
            solved(&signer, 8, &answered, NOW + PUZZLE_TTL_MS - 1),
            Some(read)
        );
        assert_eq!(
            solved(&signer, 8, &answered, NOW + PUZZLE_TTL_MS),
            None,
            "expired"
        );
        assert_eq!(
            solved(&signer, 9, &answered, NOW),
            None,
            "fewer bits than the room asks now"
        );
        let other_room = Signer {
            room: "shoes",
            key: &k,
        };
        assert_eq!(solved(&other_room, 8, &answered, NOW), None);
    }

    #[test]
    fn a_wrong_answer_or_a_forged_puzzle_solves_nothing() {
        let k = key();
        let signer = Signer {
            room: "shop",
            key: &k,
        };
        let puzzle = issue(&signer, 12, NOW, 7);
        let answered = solve(&puzzle, 12);
        let answer: u64 = answered.rsplit_once('.').unwrap().1.parse().unwrap();
        let near: Vec<String> = (answer.saturating_sub(40)..answer)
            .map(|n| format!("{puzzle}.{n}"))
            .collect();
        assert!(near.iter().all(|a| solved(&signer, 12, a, NOW).is_none()));
        // A puzzle of fewer bits, signed by someone else.
        let forger = Hs256Key::new(b"not the room's secret, thirty-two!");
        let forged = issue(
            &Signer {
                room: "shop",
                key: &forger,
            },
            1,
            NOW,
            7,
        );
        assert_eq!(solved(&signer, 1, &solve(&forged, 1), NOW), None);
        for junk in [
            "",
            ".",
            "x.1",
            &format!("{puzzle}."),
            &format!("{puzzle}.-1"),
            &format!("{puzzle}.1e3"),
            &puzzle,
        ] {
            assert_eq!(solved(&signer, 1, junk, NOW), None, "{junk}");
        }
        // A ticket is no puzzle, however its hash reads.
        let ticket = signer.write(&Signed::Ticket(crate::room::cookie::Ticket {
            shard: 0,
            number: crate::room::shard::Number::Place(1),
            joined_ms: NOW,
            seen: 0,
        }));
        assert_eq!(solved(&signer, 1, &solve(&ticket, 1), NOW), None);
    }

    #[test]
    fn zero_bits_are_counted_across_bytes() {
        assert_eq!(zero_bits(&[0x80]), 0);
        assert_eq!(zero_bits(&[0x01, 0xff]), 7);
        assert_eq!(zero_bits(&[0, 0, 0x20]), 18);
        assert_eq!(zero_bits(&[0, 0]), 16);
    }

    #[test]
    fn a_spent_puzzle_has_an_object_of_its_own() {
        let (object, policies) = spent("shop", 99);
        assert_eq!(object.as_str(), "rule:shop.challenge:99");
        assert_eq!(policies[0].0, "shop.challenge");
        assert_eq!(
            (policies[0].1.limit(), policies[0].1.window_ms()),
            (1, 2 * PUZZLE_TTL_MS)
        );
    }
}
