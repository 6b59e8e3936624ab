//! What a room signs: its cookie, a ticket (room, shard, number, time
//! joined) while a visitor waits, a session pass once it is in; a
//! challenge's puzzle; and the `Sluice-Room-Pass` its origin receives.
//! All are signed with HMAC-SHA256 (`http::jwt::Hs256Key`, compared in
//! constant time), so the edge trusts them without asking anyone: an
//! admitted visitor's requests cost no object call until its session is
//! due for renewal.
//!
//! A value is `v1.<kind>.<room>.<fields>.<signature>`, every field digits
//! or a name of `A-Z a-z 0-9 - _`, so it needs no escaping in a cookie or
//! a header. The kind and the room's id are inside what is signed: a value
//! of another kind, of another room, or signed with another secret, is
//! nothing here.

use super::shard::Number;
use crate::http::base64url;
use crate::http::jwt::Hs256Key;

/// A waiting visitor's ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub shard: u32,
    pub number: Number,
    pub joined_ms: u64,
    /// The highest "now serving" this visitor has been shown: positions
    /// never go back up when a refresh reaches an isolate whose view of
    /// the shard is a moment older.
    pub seen: u64,
}

/// An admitted visitor's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub shard: u32,
    pub id: u64,
    pub expires_ms: u64,
    pub renewed_ms: u64,
}

/// A challenge's puzzle: a newcomer's page finds an answer that makes
/// SHA-256 of `<puzzle>.<answer>` start with `bits` zero bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Puzzle {
    pub bits: u32,
    pub issued_ms: u64,
    /// Random: names the puzzle once it is spent.
    pub id: u64,
}

/// What a room signed, once its signature is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    Ticket(Ticket),
    Session(Pass),
    Puzzle(Puzzle),
}

/// The longest cookie value read: Sluice's own are under 150 bytes.
const MAX_VALUE_BYTES: usize = 256;

/// Signs and reads the cookies of one room.
pub struct Signer<'a> {
    pub room: &'a str,
    pub key: &'a Hs256Key,
}

impl Signer<'_> {
    /// The value carrying `signed`.
    pub fn write(&self, signed: &Signed) -> String {
        let fields = match *signed {
            Signed::Ticket(t) => {
                let number = match t.number {
                    Number::Pre(j) => format!("j{j}"),
                    Number::Place(p) => format!("p{p}"),
                };
                format!(
                    "t.{}.{}.{number}.{}.{}",
                    self.room, t.shard, t.joined_ms, t.seen
                )
            }
            Signed::Session(p) => format!(
                "s.{}.{}.{}.{}.{}",
                self.room, p.shard, p.id, p.expires_ms, p.renewed_ms
            ),
            Signed::Puzzle(w) => format!("w.{}.{}.{}.{}", self.room, w.bits, w.issued_ms, w.id),
        };
        self.seal(format!("v1.{fields}"))
    }

    /// The `Sluice-Room-Pass` of session `pass`, for the origin:
    /// `v1.pass.<room>.<shard>-<id>.<expires_ms>.<signature>`
    /// (docs/http-api.md, "The room's pass").
    pub fn pass(&self, pass: &Pass) -> String {
        self.seal(format!(
            "v1.pass.{}.{}-{}.{}",
            self.room, pass.shard, pass.id, pass.expires_ms
        ))
    }

    /// `payload`, a dot, and its signature in base64url.
    fn seal(&self, payload: String) -> String {
        let signature = base64url::encode(&self.key.sign(payload.as_bytes()));
        format!("{payload}.{signature}")
    }

    /// What `value` holds, if it is a value of this room signed with this
    /// room's secret; `None` for anything altered, foreign or malformed.
    pub fn read(&self, value: &str) -> Option<Signed> {
        if value.len() > MAX_VALUE_BYTES {
            return None;
        }
        let (payload, signature) = value.rsplit_once('.')?;
        let signature = base64url::decode(signature)?;
        if !self.key.verifies(payload.as_bytes(), &signature) {
            return None;
        }
        let fields: Vec<&str> = payload.split('.').collect();
        let ["v1", kind, room, rest @ ..] = fields.as_slice() else {
            return None;
        };
        if *room != self.room {
            return None;
        }
        let shard = |text: &str| u32::try_from(number(text)?).ok();
        match (*kind, rest) {
            ("t", [s, a, b, c]) => {
                let ticket_number = match a.split_at_checked(1)? {
                    ("j", n) => Number::Pre(number(n)?),
                    ("p", n) => Number::Place(number(n)?),
                    _ => return None,
                };
                Some(Signed::Ticket(Ticket {
                    shard: shard(s)?,
                    number: ticket_number,
                    joined_ms: number(b)?,
                    seen: number(c)?,
                }))
            }
            ("s", [s, a, b, c]) => Some(Signed::Session(Pass {
                shard: shard(s)?,
                id: number(a)?,
                expires_ms: number(b)?,
                renewed_ms: number(c)?,
            })),
            ("w", [bits, issued, id]) => Some(Signed::Puzzle(Puzzle {
                bits: shard(bits)?,
                issued_ms: number(issued)?,
                id: number(id)?,
            })),
            _ => None,
        }
    }
}

/// Decimal digits only: no sign, no spaces, nothing `u64::from_str`
/// would also take.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The cookie's name for room `room`.
pub fn name(room: &str) -> String {
    format!("sluice_room_{room}")
}

/// The name of the cookie a solved challenge comes back in,
/// `<puzzle>.<answer>`, set by the page's script (or an API client).
pub fn work_name(room: &str) -> String {
    format!("sluice_work_{room}")
}

/// The values of every cookie named `name` in a `Cookie` field.
pub fn values<'h>(cookie_field: &'h str, name: &str) -> impl Iterator<Item = &'h str> + 'h {
    let name = name.to_string();
    cookie_field.split(';').filter_map(move |pair| {
        let (n, v) = pair.trim().split_once('=')?;
        (n == name).then(|| v.trim_matches('"'))
    })
}

/// A `Set-Cookie` value: readable by the server only, sent on the site's
/// own navigations, `Secure` over HTTPS. `max_age_s` 0 deletes it.
pub fn set_cookie(room: &str, value: &str, max_age_s: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{secure}",
        name(room)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str) -> Hs256Key {
        Hs256Key::new(secret.as_bytes())
    }

    const TICKET: Signed = Signed::Ticket(Ticket {
        shard: 3,
        number: Number::Place(1234),
        joined_ms: 1_764_583_200_000,
        seen: 1200,
    });

    #[test]
    fn what_is_written_is_read_back() {
        let k = key("a room secret of thirty-two chars!");
        let signer = Signer {
            room: "shop",
            key: &k,
        };
        let session = Signed::Session(Pass {
            shard: 0,
            id: 7,
            expires_ms: 9_000,
            renewed_ms: 8_000,
        });
        let pre = Signed::Ticket(Ticket {
            shard: 1,
            number: Number::Pre(0),
            joined_ms: 1,
            seen: 0,
        });
        let puzzle = Signed::Puzzle(Puzzle {
            bits: 18,
            issued_ms: 1_764_583_200_000,
            id: u64::MAX,
        });
        for signed in [TICKET, session, pre, puzzle] {
            let value = signer.write(&signed);
            assert!(value.len() < 150, "{value}");
            assert!(value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)));
            assert_eq!(signer.read(&value), Some(signed));
        }
    }

    #[test]
    fn altered_foreign_and_malformed_cookies_are_nothing() {
        let k = key("a room secret of thirty-two chars!");
        let signer = Signer {
            room: "shop",
            key: &k,
        };
        let value = signer.write(&TICKET);
        // Every single-character change, anywhere.
        for i in 0..value.len() {
            for c in ['0', '9', 'a', 'Z', '.', '-'] {
                let mut bytes = value.clone().into_bytes();
                if bytes[i] == c as u8 {
                    continue;
                }
                bytes[i] = c as u8;
                let altered = String::from_utf8(bytes).unwrap();
                assert_eq!(signer.read(&altered), None, "{altered}");
            }
        }
        let other_key = key("another secret, also thirty-two!!");
        let other_secret = Signer {
            room: "shop",
            key: &other_key,
        };
        assert_eq!(other_secret.read(&value), None);
        let other_room = Signer {
            room: "shoes",
            key: &k,
        };
        assert_eq!(other_room.read(&value), None);
        assert_eq!(signer.read(&other_room.write(&TICKET)), None);
        for junk in ["", ".", "v1", "v1.t.shop.3.p1.2.3", &"a".repeat(300)] {
            assert_eq!(signer.read(junk), None, "{junk:?}");
        }
        // Well signed but not of the format: nothing either.
        let signed = |payload: &str| {
            format!(
                "{payload}.{}",
                base64url::encode(&k.sign(payload.as_bytes()))
            )
        };
        for payload in [
            "v2.t.shop.3.p1.2.3",
            "v1.x.shop.3.p1.2.3",
            "v1.t.shop.3.q1.2.3",
            "v1.t.shop.+3.p1.2.3",
            "v1.t.shop.3.p1.2",
            "v1.s.shop.99999999999.1.2.3",
            "v1.t.shop.3.p.2.3",
            "v1.s.shop.3.1.2.3.4",
            "v1.w.shop.18.1.2.3",
            "v1.w.shop.99999999999.1.2",
            "v1.pass.shop.3-1.2",
        ] {
            assert_eq!(signer.read(&signed(payload)), None, "{payload}");
        }
        assert!(signer.read(&signed("v1.s.shop.3.1.2.3")).is_some());
    }

    #[test]
    fn the_pass_is_signed_for_the_origin_and_is_no_cookie() {
        let k = key("a room secret of thirty-two chars!");
        let signer = Signer {
            room: "shop",
            key: &k,
        };
        let pass = signer.pass(&Pass {
            shard: 3,
            id: 17,
            expires_ms: 1_767_225_600_000,
            renewed_ms: 1,
        });
        let (payload, signature) = pass.rsplit_once('.').unwrap();
        assert_eq!(payload, "v1.pass.shop.3-17.1767225600000");
        assert_eq!(
            base64url::decode(signature).unwrap(),
            k.sign(payload.as_bytes())
        );
        assert_eq!(signer.read(&pass), None, "a pass is not a cookie");
    }

    #[test]
    fn the_cookie_field_is_searched_by_name() {
        let field = "a=1; sluice_room_shop=first; sluice_room_shopx=no;sluice_room_shop=\"second\"";
        assert_eq!(
            values(field, &name("shop")).collect::<Vec<_>>(),
            ["first", "second"]
        );
        assert_eq!(values("", "x").count(), 0);
    }

    #[test]
    fn set_cookie_says_what_a_browser_needs() {
        assert_eq!(
            set_cookie("shop", "v", 60, true),
            "sluice_room_shop=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure"
        );
        assert!(!set_cookie("shop", "", 0, false).contains("Secure"));
    }
}
