//! The room's cookie: a ticket (room, shard, number, time joined) while a
//! visitor waits, a session pass once it is in. Both are signed with
//! HMAC-SHA256 under the room's secret (`http::jwt::Hs256Key`, compared in
//! constant time), so the edge trusts them without asking anyone: an
//! admitted visitor's requests cost no object call until its session is
//! due for renewal.
//!
//! A value is `v1.<kind>.<room>.<shard>.<a>.<b>.<c>.<signature>`, every
//! field digits or a name of `A-Z a-z 0-9 - _`, so it needs no escaping in
//! a cookie. The room's id is inside what is signed: a cookie of another
//! room, or signed with another secret, is no cookie here.

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

/// What a room's cookie holds, once its signature is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    Ticket(Ticket),
    Session(Pass),
}

/// The longest cookie value read: Sluice's own are under 150 bytes.
const MAX_VALUE_BYTES: usize = 256;

/// Signs and reads the cookies of one room.
pub struct Signer<'a> {
    pub room: &'a str,
    pub key: &'a Hs256Key,
}

impl Signer<'_> {
    /// The cookie value carrying `signed`.
    pub fn write(&self, signed: &Signed) -> String {
        let payload = match *signed {
            Signed::Ticket(t) => {
                let number = match t.number {
                    Number::Pre(j) => format!("j{j}"),
                    Number::Place(p) => format!("p{p}"),
                };
                format!(
                    "v1.t.{}.{}.{number}.{}.{}",
                    self.room, t.shard, t.joined_ms, t.seen
                )
            }
            Signed::Session(p) => format!(
                "v1.s.{}.{}.{}.{}.{}",
                self.room, p.shard, p.id, p.expires_ms, p.renewed_ms
            ),
        };
        let signature = base64url::encode(&self.key.sign(payload.as_bytes()));
        format!("{payload}.{signature}")
    }

    /// What `value` holds, if it is a cookie of this room signed with this
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
        let [version, kind, room, shard, a, b, c] = fields.as_slice() else {
            return None;
        };
        if *version != "v1" || *room != self.room {
            return None;
        }
        let shard = u32::try_from(number(shard)?).ok()?;
        match *kind {
            "t" => {
                let ticket_number = match a.split_at_checked(1)? {
                    ("j", n) => Number::Pre(number(n)?),
                    ("p", n) => Number::Place(number(n)?),
                    _ => return None,
                };
                Some(Signed::Ticket(Ticket {
                    shard,
                    number: ticket_number,
                    joined_ms: number(b)?,
                    seen: number(c)?,
                }))
            }
            "s" => Some(Signed::Session(Pass {
                shard,
                id: number(a)?,
                expires_ms: number(b)?,
                renewed_ms: number(c)?,
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
        for signed in [TICKET, session, pre] {
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
        ] {
            assert_eq!(signer.read(&signed(payload)), None, "{payload}");
        }
        assert!(signer.read(&signed("v1.s.shop.3.1.2.3")).is_some());
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
