//! Lower-casing as `str::to_lowercase` does it (every character's Unicode
//! mapping, and `Σ` as `ς` at the end of a word), from tables about a
//! tenth of the size of std's: std's own (one row per character, 1 434
//! rows, and its code) were 18 KB of the 400 KB wasm. Case-insensitive
//! rules fold a request's path and their patterns' text with it.
//!
//! The tables are derived from the toolchain's std by the tests below,
//! which compare every character, in every context the end-of-word rule
//! reads, with `str::to_lowercase`; a toolchain with newer Unicode data
//! fails them and they print the tables to paste.

/// `text` lower-cased, exactly as `text.to_lowercase()`.
pub fn lowercase(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut folded = String::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        match c {
            // Unicode's Final_Sigma, as std reads it.
            'Σ' => {
                let word_final = cased_past_ignorable(text[..at].chars().rev())
                    && !cased_past_ignorable(text[at + 'Σ'.len_utf8()..].chars());
                folded.push(if word_final { 'ς' } else { 'σ' });
            }
            // The one character whose lower case is two.
            '\u{130}' => folded.push_str("i\u{307}"),
            _ => folded.push(lower(c)),
        }
    }
    folded
}

/// Marks a run of [`LOWER`] in which every second character maps.
const EVERY_SECOND: u32 = 1 << 31;

/// A character's one-character lower case.
fn lower(c: char) -> char {
    let code = c as u32;
    let after = LOWER.partition_point(|&(first, _, _)| first & !EVERY_SECOND <= code);
    let Some(&(first, last, delta)) = after.checked_sub(1).map(|run| &LOWER[run]) else {
        return c;
    };
    let start = first & !EVERY_SECOND;
    let maps = code <= last && (first & EVERY_SECOND == 0 || (code - start).is_multiple_of(2));
    if !maps {
        return c;
    }
    code.checked_add_signed(delta)
        .and_then(char::from_u32)
        .unwrap_or(c)
}

/// Whether the first character of `chars` that is not case-ignorable is
/// cased (std's `case_ignorable_then_cased`).
fn cased_past_ignorable(chars: impl Iterator<Item = char>) -> bool {
    for c in chars {
        match class(c) {
            Some(false) => continue,
            Some(true) => return true,
            None => return false,
        }
    }
    false
}

/// What the end-of-word rule makes of `c`: `Some(true)` cased,
/// `Some(false)` case-ignorable, `None` neither. A scan of the 615 runs,
/// read only beside a `Σ` in text that is not ASCII: the config's patterns,
/// never a request's path, which the runtime hands over percent-encoded.
fn class(c: char) -> Option<bool> {
    let code = c as u32;
    let mut next = 0;
    for &(gap, rest) in CLASSES {
        let first = next + (u32::from(rest >> 11) << 16 | u32::from(gap));
        let last = first + u32::from((rest >> 1) & 0x3ff);
        if code < first {
            return None;
        }
        if code <= last {
            return Some(rest & 1 == 1);
        }
        next = last + 1;
    }
    None
}

/// Runs of characters with a one-character lower case at the same
/// distance: (first, with [`EVERY_SECOND`] if only every second character
/// from it maps; last; distance).
#[rustfmt::skip]
const LOWER: &[(u32, u32, i32)] = &[
    (0x41, 0x5a, 32), (0xc0, 0xd6, 32), (0xd8, 0xde, 32), (0x80000100, 0x12e, 1),
    (0x80000132, 0x136, 1), (0x80000139, 0x147, 1), (0x8000014a, 0x176, 1), (0x178, 0x178, -121),
    (0x80000179, 0x17d, 1), (0x181, 0x181, 210), (0x80000182, 0x184, 1), (0x186, 0x186, 206),
    (0x187, 0x187, 1), (0x189, 0x18a, 205), (0x18b, 0x18b, 1), (0x18e, 0x18e, 79),
    (0x18f, 0x18f, 202), (0x190, 0x190, 203), (0x191, 0x191, 1), (0x193, 0x193, 205),
    (0x194, 0x194, 207), (0x196, 0x196, 211), (0x197, 0x197, 209), (0x198, 0x198, 1),
    (0x19c, 0x19c, 211), (0x19d, 0x19d, 213), (0x19f, 0x19f, 214), (0x800001a0, 0x1a4, 1),
    (0x1a6, 0x1a6, 218), (0x1a7, 0x1a7, 1), (0x1a9, 0x1a9, 218), (0x1ac, 0x1ac, 1),
    (0x1ae, 0x1ae, 218), (0x1af, 0x1af, 1), (0x1b1, 0x1b2, 217), (0x800001b3, 0x1b5, 1),
    (0x1b7, 0x1b7, 219), (0x1b8, 0x1b8, 1), (0x1bc, 0x1bc, 1), (0x1c4, 0x1c4, 2), (0x1c5, 0x1c5, 1),
    (0x1c7, 0x1c7, 2), (0x1c8, 0x1c8, 1), (0x1ca, 0x1ca, 2), (0x800001cb, 0x1db, 1),
    (0x800001de, 0x1ee, 1), (0x1f1, 0x1f1, 2), (0x800001f2, 0x1f4, 1), (0x1f6, 0x1f6, -97),
    (0x1f7, 0x1f7, -56), (0x800001f8, 0x21e, 1), (0x220, 0x220, -130), (0x80000222, 0x232, 1),
    (0x23a, 0x23a, 10795), (0x23b, 0x23b, 1), (0x23d, 0x23d, -163), (0x23e, 0x23e, 10792),
    (0x241, 0x241, 1), (0x243, 0x243, -195), (0x244, 0x244, 69), (0x245, 0x245, 71),
    (0x80000246, 0x24e, 1), (0x80000370, 0x372, 1), (0x376, 0x376, 1), (0x37f, 0x37f, 116),
    (0x386, 0x386, 38), (0x388, 0x38a, 37), (0x38c, 0x38c, 64), (0x38e, 0x38f, 63),
    (0x391, 0x3a1, 32), (0x3a3, 0x3ab, 32), (0x3cf, 0x3cf, 8), (0x800003d8, 0x3ee, 1),
    (0x3f4, 0x3f4, -60), (0x3f7, 0x3f7, 1), (0x3f9, 0x3f9, -7), (0x3fa, 0x3fa, 1),
    (0x3fd, 0x3ff, -130), (0x400, 0x40f, 80), (0x410, 0x42f, 32), (0x80000460, 0x480, 1),
    (0x8000048a, 0x4be, 1), (0x4c0, 0x4c0, 15), (0x800004c1, 0x4cd, 1), (0x800004d0, 0x52e, 1),
    (0x531, 0x556, 48), (0x10a0, 0x10c5, 7264), (0x10c7, 0x10c7, 7264), (0x10cd, 0x10cd, 7264),
    (0x13a0, 0x13ef, 38864), (0x13f0, 0x13f5, 8), (0x1c89, 0x1c89, 1), (0x1c90, 0x1cba, -3008),
    (0x1cbd, 0x1cbf, -3008), (0x80001e00, 0x1e94, 1), (0x1e9e, 0x1e9e, -7615),
    (0x80001ea0, 0x1efe, 1), (0x1f08, 0x1f0f, -8), (0x1f18, 0x1f1d, -8), (0x1f28, 0x1f2f, -8),
    (0x1f38, 0x1f3f, -8), (0x1f48, 0x1f4d, -8), (0x80001f59, 0x1f5f, -8), (0x1f68, 0x1f6f, -8),
    (0x1f88, 0x1f8f, -8), (0x1f98, 0x1f9f, -8), (0x1fa8, 0x1faf, -8), (0x1fb8, 0x1fb9, -8),
    (0x1fba, 0x1fbb, -74), (0x1fbc, 0x1fbc, -9), (0x1fc8, 0x1fcb, -86), (0x1fcc, 0x1fcc, -9),
    (0x1fd8, 0x1fd9, -8), (0x1fda, 0x1fdb, -100), (0x1fe8, 0x1fe9, -8), (0x1fea, 0x1feb, -112),
    (0x1fec, 0x1fec, -7), (0x1ff8, 0x1ff9, -128), (0x1ffa, 0x1ffb, -126), (0x1ffc, 0x1ffc, -9),
    (0x2126, 0x2126, -7517), (0x212a, 0x212a, -8383), (0x212b, 0x212b, -8262), (0x2132, 0x2132, 28),
    (0x2160, 0x216f, 16), (0x2183, 0x2183, 1), (0x24b6, 0x24cf, 26), (0x2c00, 0x2c2f, 48),
    (0x2c60, 0x2c60, 1), (0x2c62, 0x2c62, -10743), (0x2c63, 0x2c63, -3814),
    (0x2c64, 0x2c64, -10727), (0x80002c67, 0x2c6b, 1), (0x2c6d, 0x2c6d, -10780),
    (0x2c6e, 0x2c6e, -10749), (0x2c6f, 0x2c6f, -10783), (0x2c70, 0x2c70, -10782),
    (0x2c72, 0x2c72, 1), (0x2c75, 0x2c75, 1), (0x2c7e, 0x2c7f, -10815), (0x80002c80, 0x2ce2, 1),
    (0x80002ceb, 0x2ced, 1), (0x2cf2, 0x2cf2, 1), (0x8000a640, 0xa66c, 1), (0x8000a680, 0xa69a, 1),
    (0x8000a722, 0xa72e, 1), (0x8000a732, 0xa76e, 1), (0x8000a779, 0xa77b, 1),
    (0xa77d, 0xa77d, -35332), (0x8000a77e, 0xa786, 1), (0xa78b, 0xa78b, 1),
    (0xa78d, 0xa78d, -42280), (0x8000a790, 0xa792, 1), (0x8000a796, 0xa7a8, 1),
    (0xa7aa, 0xa7aa, -42308), (0xa7ab, 0xa7ab, -42319), (0xa7ac, 0xa7ac, -42315),
    (0xa7ad, 0xa7ad, -42305), (0xa7ae, 0xa7ae, -42308), (0xa7b0, 0xa7b0, -42258),
    (0xa7b1, 0xa7b1, -42282), (0xa7b2, 0xa7b2, -42261), (0xa7b3, 0xa7b3, 928),
    (0x8000a7b4, 0xa7c2, 1), (0xa7c4, 0xa7c4, -48), (0xa7c5, 0xa7c5, -42307),
    (0xa7c6, 0xa7c6, -35384), (0x8000a7c7, 0xa7c9, 1), (0xa7cb, 0xa7cb, -42343),
    (0x8000a7cc, 0xa7da, 1), (0xa7dc, 0xa7dc, -42561), (0xa7f5, 0xa7f5, 1), (0xff21, 0xff3a, 32),
    (0x10400, 0x10427, 40), (0x104b0, 0x104d3, 40), (0x10570, 0x1057a, 39), (0x1057c, 0x1058a, 39),
    (0x1058c, 0x10592, 39), (0x10594, 0x10595, 39), (0x10c80, 0x10cb2, 64), (0x10d50, 0x10d65, 32),
    (0x118a0, 0x118bf, 32), (0x16e40, 0x16e5f, 32), (0x16ea0, 0x16eb8, 27), (0x1e900, 0x1e921, 34),
];

/// Runs of characters the end-of-word rule reads, in order, each as its
/// distance from the end of the run before (the low 16 bits, then bits 11
/// up of the second number), its length less one (bits 1 to 10) and
/// whether they are cased (bit 0; otherwise case-ignorable, and skipped).
/// Small numbers, which the wasm's gzip packs better than code points.
#[rustfmt::skip]
const CLASSES: &[(u16, u16)] = &[
    (39, 0x0), (6, 0x0), (11, 0x0), (6, 0x33), (3, 0x0), (1, 0x0), (0, 0x33), (45, 0x0), (1, 0x1),
    (2, 0x0), (1, 0x0), (4, 0x0), (0, 0x1), (1, 0x2), (1, 0x1), (5, 0x2d), (1, 0x3d), (1, 0x185),
    (1, 0x7), (4, 0x19f), (2, 0x33), (0, 0x17e), (0, 0x7), (0, 0x2), (0, 0x3), (2, 0x0), (0, 0x5),
    (1, 0x1), (4, 0x2), (0, 0x1), (0, 0x0), (0, 0x5), (1, 0x1), (1, 0x27), (1, 0xa5), (1, 0x115),
    (1, 0xc), (0, 0x14b), (1, 0x4b), (2, 0x0), (5, 0x0), (0, 0x51), (8, 0x58), (1, 0x0), (1, 0x2),
    (1, 0x2), (1, 0x0), (44, 0x0), (11, 0xa), (10, 0x14), (1, 0x0), (35, 0x0), (10, 0x28),
    (16, 0x0), (101, 0xe), (1, 0x12), (1, 0x6), (33, 0x0), (1, 0x0), (30, 0x34), (91, 0x14),
    (58, 0x14), (4, 0x0), (2, 0x0), (24, 0x2e), (43, 0x4), (44, 0x0), (7, 0x2), (5, 0x10),
    (41, 0x72), (55, 0x0), (1, 0x0), (4, 0xe), (4, 0x0), (3, 0xc), (10, 0x2), (13, 0x0), (15, 0x0),
    (58, 0x0), (4, 0x6), (8, 0x0), (20, 0x2), (26, 0x0), (2, 0x2), (57, 0x0), (4, 0x2), (4, 0x2),
    (2, 0x4), (3, 0x0), (30, 0x2), (3, 0x0), (11, 0x2), (57, 0x0), (4, 0x8), (1, 0x2), (4, 0x0),
    (20, 0x2), (22, 0xa), (1, 0x0), (58, 0x0), (2, 0x0), (1, 0x6), (8, 0x0), (7, 0x2), (11, 0x2),
    (30, 0x0), (61, 0x0), (12, 0x0), (50, 0x0), (3, 0x0), (55, 0x0), (1, 0x4), (5, 0x4), (1, 0x6),
    (7, 0x2), (11, 0x2), (29, 0x0), (58, 0x0), (2, 0x0), (6, 0x0), (5, 0x2), (20, 0x2), (28, 0x2),
    (57, 0x2), (4, 0x6), (8, 0x0), (20, 0x2), (29, 0x0), (72, 0x0), (7, 0x4), (1, 0x0), (90, 0x0),
    (2, 0xc), (11, 0x10), (98, 0x0), (2, 0x10), (9, 0x0), (1, 0xc), (73, 0x2), (27, 0x0), (1, 0x0),
    (1, 0x0), (55, 0x1a), (1, 0x8), (1, 0x2), (5, 0x14), (1, 0x46), (9, 0x0), (102, 0x6), (1, 0xa),
    (1, 0x2), (2, 0x2), (25, 0x2), (4, 0x4), (16, 0x6), (13, 0x0), (2, 0x2), (6, 0x0), (15, 0x0),
    (2, 0x4b), (1, 0x1), (5, 0x1), (2, 0x55), (1, 0x0), (0, 0x5), (605, 0x4), (64, 0xab), (2, 0xb),
    (788, 0x4), (29, 0x2), (30, 0x2), (30, 0x2), (64, 0x2), (1, 0xc), (8, 0x0), (2, 0x14), (3, 0x0),
    (5, 0x0), (45, 0x8), (51, 0x0), (65, 0x2), (34, 0x0), (118, 0x4), (4, 0x2), (9, 0x0), (6, 0x4),
    (219, 0x2), (2, 0x0), (58, 0x0), (1, 0xc), (1, 0x0), (1, 0x0), (2, 0xe), (6, 0x12), (2, 0x0),
    (39, 0x0), (8, 0x5a), (2, 0x16), (20, 0x6), (48, 0x0), (1, 0x8), (1, 0x0), (5, 0x0), (40, 0x10),
    (12, 0x2), (32, 0x6), (2, 0x2), (1, 0x4), (56, 0x0), (1, 0x2), (3, 0x0), (1, 0x4), (58, 0xe),
    (2, 0x2), (64, 0xa), (2, 0x15), (5, 0x55), (2, 0x5), (16, 0x4), (1, 0x18), (1, 0xc), (4, 0x0),
    (6, 0x0), (3, 0x2), (6, 0x57), (0, 0x7c), (0, 0x19), (0, 0x0), (0, 0x43), (0, 0xc8), (0, 0x22b),
    (2, 0xb), (2, 0x4b), (2, 0xb), (2, 0xf), (1, 0x1), (1, 0x1), (1, 0x1), (1, 0x3d), (2, 0x69),
    (1, 0xd), (0, 0x0), (0, 0x1), (0, 0x4), (0, 0x5), (1, 0xd), (0, 0x4), (0, 0x7), (2, 0xb),
    (1, 0x4), (0, 0x19), (0, 0x4), (2, 0x5), (1, 0xd), (0, 0x2), (12, 0x8), (8, 0x2), (10, 0x0),
    (2, 0x0), (2, 0x8), (49, 0x8), (1, 0x12), (1, 0x0), (13, 0x0), (16, 0x18), (51, 0x40),
    (17, 0x1), (4, 0x1), (2, 0x13), (1, 0x1), (3, 0x9), (6, 0x1), (1, 0x1), (1, 0x1), (1, 0x7),
    (1, 0xb), (4, 0x1), (2, 0x7), (5, 0x9), (4, 0x1), (17, 0x3f), (3, 0x3), (817, 0x67),
    (1814, 0xf7), (0, 0x2), (0, 0xcd), (6, 0x7), (0, 0x4), (0, 0x3), (12, 0x4b), (1, 0x1), (5, 0x1),
    (65, 0x0), (15, 0x0), (96, 0x3e), (47, 0x0), (469, 0x0), (36, 0x6), (3, 0x8), (5, 0x0),
    (93, 0xa), (93, 0x4), (28438, 0x0), (1250, 0xa), (270, 0x0), (51, 0x5b), (1, 0x6), (1, 0x12),
    (1, 0x0), (0, 0x37), (0, 0x6), (80, 0x2), (14, 0x42), (0, 0x9b), (0, 0x0), (0, 0x2d), (0, 0x4),
    (0, 0x7), (1, 0x99), (20, 0x6), (0, 0x3), (1, 0x2), (0, 0x1), (7, 0x0), (3, 0x0), (4, 0x0),
    (25, 0x2), (5, 0x0), (151, 0x2), (26, 0x22), (13, 0x0), (38, 0xe), (25, 0x14), (46, 0x4),
    (48, 0x0), (2, 0x6), (2, 0x2), (17, 0x0), (21, 0x2), (66, 0xa), (2, 0x2), (2, 0x2), (12, 0x0),
    (8, 0x0), (35, 0x0), (11, 0x0), (51, 0x0), (1, 0x4), (2, 0x2), (5, 0x2), (1, 0x0), (27, 0x0),
    (14, 0x2), (5, 0x2), (1, 0x0), (57, 0x55), (0, 0x8), (0, 0x11), (0, 0x4), (4, 0x9f), (37, 0x0),
    (2, 0x0), (4, 0x0), (20242, 0xd), (12, 0x9), (6, 0x0), (147, 0x20), (573, 0x1e), (3, 0x0),
    (12, 0x1e), (34, 0x0), (2, 0x0), (169, 0x0), (7, 0x0), (6, 0x0), (11, 0x0), (6, 0x33), (3, 0x0),
    (1, 0x0), (0, 0x33), (21, 0x0), (45, 0x2), (67, 0x0), (21, 0x4), (513, 0x0), (226, 0x0),
    (149, 0x8), (133, 0x9f), (96, 0x47), (4, 0x47), (116, 0x15), (1, 0x1d), (1, 0xd), (1, 0x3),
    (1, 0x15), (1, 0x1d), (1, 0xd), (1, 0x3), (451, 0xa), (1, 0x52), (1, 0x10), (582, 0x4),
    (1, 0x2), (5, 0x6), (40, 0x4), (4, 0x0), (165, 0x2), (409, 0x65), (13, 0x65), (49, 0x6),
    (38, 0x0), (1, 0x2b), (3, 0x8), (1, 0x0), (0, 0x2b), (293, 0x2), (24, 0x0), (52, 0xa),
    (70, 0x14), (49, 0x6), (123, 0x0), (54, 0x1c), (41, 0x0), (2, 0x2), (10, 0x4), (49, 0x6),
    (2, 0x2), (2, 0x0), (4, 0x0), (10, 0x0), (50, 0x4), (36, 0x8), (1, 0xe), (62, 0x0), (12, 0x2),
    (52, 0x10), (10, 0x6), (2, 0x0), (95, 0x4), (2, 0x0), (1, 0x2), (6, 0x0), (2, 0x0), (157, 0x0),
    (3, 0xe), (21, 0x2), (57, 0x2), (3, 0x0), (37, 0xc), (3, 0x8), (70, 0xa), (13, 0x0), (1, 0x0),
    (1, 0x0), (14, 0x2), (85, 0xe), (2, 0x4), (1, 0x0), (23, 0x0), (84, 0xa), (1, 0x0), (4, 0x2),
    (1, 0x2), (238, 0x6), (6, 0x2), (1, 0x2), (27, 0x2), (85, 0xe), (2, 0x0), (1, 0x2), (106, 0x0),
    (1, 0x0), (2, 0xa), (1, 0x0), (101, 0x0), (1, 0x0), (2, 0x6), (1, 0x8), (259, 0x10), (1, 0x2),
    (101, 0x7f), (91, 0x2), (1, 0x0), (4, 0x0), (144, 0x6), (2, 0x2), (4, 0x0), (32, 0x12),
    (40, 0xa), (2, 0x6), (8, 0x0), (9, 0xa), (2, 0x4), (46, 0x18), (1, 0x2), (198, 0x0), (1, 0x4),
    (1, 0x0), (201, 0xc), (1, 0xa), (1, 0x0), (82, 0x2a), (2, 0xc), (1, 0x2), (1, 0x2), (122, 0xa),
    (3, 0x0), (1, 0x2), (1, 0xc), (1, 0x0), (72, 0x2), (3, 0x0), (1, 0x0), (65, 0x0), (281, 0x2),
    (11, 0x2), (52, 0x8), (5, 0x0), (1, 0x0), (23, 0x0), (5333, 0x20), (6, 0x1c), (11464, 0x16),
    (3, 0x4), (2496, 0x8), (59, 0xc), (9, 0x6), (508, 0x4), (40, 0x2), (211, 0x7f), (32, 0x31),
    (2, 0x31), (123, 0x0), (63, 0x20), (64, 0x2), (1, 0x2), (13, 0x2), (16380, 0x6), (1, 0xc),
    (1, 0x2), (3230, 0x2), (1, 0x6), (4700, 0x5a), (2, 0x2c), (544, 0x4), (9, 0x1e), (2, 0xc),
    (30, 0x6), (148, 0x4), (443, 0xa9), (1, 0x8d), (1, 0x3), (2, 0x1), (2, 0x3), (2, 0x7),
    (1, 0x17), (1, 0x1), (1, 0xd), (1, 0x81), (1, 0x7), (2, 0xf), (1, 0xd), (1, 0x37), (1, 0x7),
    (1, 0x9), (1, 0x1), (3, 0xd), (1, 0x2a7), (2, 0x31), (1, 0x31), (1, 0x3d), (1, 0x31), (1, 0x3d),
    (1, 0x31), (1, 0x3d), (1, 0x31), (1, 0x3d), (1, 0x31), (1, 0xf), (564, 0x6c), (4, 0x62),
    (8, 0x0), (14, 0x0), (22, 0x8), (1, 0x1c), (1104, 0x13), (1, 0x27), (6, 0xb), (213, 0xc),
    (1, 0x20), (2, 0xc), (1, 0x2), (1, 0x8), (5, 0x7a), (33, 0x0), (160, 0x1a), (368, 0x0),
    (61, 0x6), (507, 0x8), (254, 0x2), (243, 0x0), (2, 0x0), (7, 0x2), (5, 0x0), (9, 0x0),
    (464, 0xc), (41, 0x87), (0, 0xe), (2020, 0x33), (6, 0x33), (6, 0x33), (625, 0x8),
    (3073, 0x6000), (30, 0xbe), (128, 0x1de),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn every_char() -> impl Iterator<Item = char> {
        (0..=char::MAX as u32).filter_map(char::from_u32)
    }

    /// [`LOWER`] as std's mappings give it.
    fn std_lower_runs() -> Vec<(u32, u32, i32)> {
        let mut runs: Vec<(u32, u32, i32)> = Vec::new();
        for c in every_char() {
            let mut lower = c.to_lowercase();
            let (Some(one), None) = (lower.next(), lower.next()) else {
                assert_eq!(c, '\u{130}', "a second character with a lower case of two");
                continue;
            };
            if one == c {
                continue;
            }
            let (code, delta) = (c as u32, one as i32 - c as i32);
            if let Some((first, last, run_delta)) = runs.last_mut() {
                let stride = if *first & EVERY_SECOND != 0 { 2 } else { 1 };
                let single = (*first & !EVERY_SECOND) == *last;
                if *run_delta == delta && (code - *last == stride || single && code - *last == 2) {
                    if single && code - *last == 2 {
                        *first |= EVERY_SECOND;
                    }
                    *last = code;
                    continue;
                }
            }
            runs.push((code, code, delta));
        }
        runs
    }

    /// [`class`] of `c` as std's `to_lowercase` shows it.
    fn std_class(c: char) -> Option<bool> {
        let ends_final = |text: String| text.to_lowercase().ends_with('ς');
        if ends_final(format!("{c}Σ")) {
            Some(true)
        } else if ends_final(format!("A{c}Σ")) {
            Some(false)
        } else {
            None
        }
    }

    /// [`CLASSES`] as std's properties give it.
    fn std_classes() -> Vec<(u16, u16)> {
        let mut runs: Vec<(u32, u32, bool)> = Vec::new();
        for c in every_char() {
            let Some(cased) = std_class(c) else { continue };
            let code = c as u32;
            match runs.last_mut() {
                Some((first, last, run_cased))
                    if *run_cased == cased && *last + 1 == code && code - *first < 1024 =>
                {
                    *last = code
                }
                _ => runs.push((code, code, cased)),
            }
        }
        let mut next = 0;
        let mut encoded = Vec::new();
        for (first, last, cased) in runs {
            let gap = first - next;
            assert!(gap >> 16 < 32, "a gap too wide for the encoding");
            let rest = (gap >> 16) << 11 | (last - first) << 1 | u32::from(cased);
            encoded.push((gap as u16, rest as u16));
            next = last + 1;
        }
        encoded
    }

    #[test]
    fn tables_are_the_toolchains() {
        let lower = std_lower_runs();
        let classes = std_classes();
        let lower_text: Vec<String> = lower
            .iter()
            .map(|(first, last, delta)| format!("({first:#x}, {last:#x}, {delta}),"))
            .collect();
        let classes_text: Vec<String> = classes
            .iter()
            .map(|(gap, rest)| format!("({gap}, {rest:#x}),"))
            .collect();
        assert!(
            LOWER == lower.as_slice() && CLASSES == classes.as_slice(),
            "the tables differ from this toolchain's std; paste these:\nLOWER:\n{}\nCLASSES:\n{}",
            lower_text.join(" "),
            classes_text.join(" ")
        );
    }

    #[test]
    fn every_character_as_std() {
        for c in every_char() {
            let text = c.to_string();
            assert_eq!(lowercase(&text), text.to_lowercase(), "{c:?}");
        }
    }

    #[test]
    fn every_character_read_beside_a_sigma_as_std() {
        for c in every_char() {
            assert_eq!(class(c), std_class(c), "{c:?}");
        }
    }

    /// The end-of-word rule on both sides of a `Σ`, with a character of
    /// each class (cased, case-ignorable, neither) from the first blocks.
    #[test]
    fn a_sigma_beside_each_class_as_std() {
        for c in every_char().take_while(|&c| c < '\u{2000}') {
            for text in [
                format!("{c}Σ"),
                format!("A{c}Σ"),
                format!("AΣ{c}"),
                format!("AΣ{c}A"),
            ] {
                assert_eq!(lowercase(&text), text.to_lowercase(), "{text:?}");
            }
        }
    }

    proptest! {
        /// Words of sigmas, cased, case-ignorable and other characters,
        /// ASCII or not, fold as std folds them.
        #[test]
        fn any_text_as_std(text in "[AaΣσςİKK\u{2126}Ǆǅ'.:\u{300}\u{345}ʰ\u{ad} 0-9/ÄäΑΩ\u{1e9e}\u{10400}-]{0,12}") {
            prop_assert_eq!(lowercase(&text), text.to_lowercase());
        }
    }
}
