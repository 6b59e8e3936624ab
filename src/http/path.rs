//! The canonical form of a request path, which rules are matched against: the
//! broadest reading an origin might give it (unreserved escapes and `%2F`
//! decoded once, `;` parameters, empty and `.` segments dropped, `..`
//! resolved, then case and a trailing `/` per rule), so that no spelling of a
//! path skips its rule. The origin still gets the path as sent. The rules:
//! docs/configuration.md, "Paths".

use super::case::lowercase;

/// How a rule compares paths, beyond the canonical form every rule uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathOptions {
    /// `/API` and `/api` are the same path (the default).
    pub case_insensitive: bool,
    /// `/login/` and `/login` are the same path (the default).
    pub ignore_trailing_slash: bool,
}

impl Default for PathOptions {
    fn default() -> PathOptions {
        PathOptions {
            case_insensitive: true,
            ignore_trailing_slash: true,
        }
    }
}

/// A request's path in every form a rule may compare it in, computed once
/// per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPath {
    /// Canonical, with the client's case; no trailing `/` (except the root).
    bare: String,
    /// `bare` with a trailing `/`.
    slashed: String,
    /// `bare`, lower-cased.
    folded: String,
    /// `folded` with a trailing `/`.
    folded_slashed: String,
    /// Whether the client's path ended with `/`.
    trailing: bool,
}

/// One form of a request's path, as a rule with given options sees it:
/// what it is matched against and what a `path` key part holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathForm<'p> {
    /// Without a trailing `/` (the root is `/`).
    pub bare: &'p str,
    /// With one (the root is `/`).
    pub slashed: &'p str,
    /// Whether a `/` follows `bare`: the client sent one, or the rule
    /// ignores trailing slashes and the path may be read with one.
    pub slash: Slash,
}

/// Whether a path form ends with `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slash {
    Without,
    With,
    /// The rule ignores trailing slashes: the path matches a pattern if
    /// either reading does.
    Either,
}

impl RequestPath {
    pub fn new(raw: &str) -> RequestPath {
        let decoded = decode(raw);
        let mut segments: Vec<&str> = Vec::new();
        let mut trailing = false;
        for segment in decoded.split('/') {
            let segment = segment.split(';').next().unwrap_or("");
            trailing = matches!(segment, "" | "." | "..");
            match segment {
                "" | "." => {}
                ".." => {
                    segments.pop();
                }
                _ => segments.push(segment),
            }
        }
        let bare = format!("/{}", segments.join("/"));
        let with_slash = |path: &str| {
            if path.len() > 1 {
                format!("{path}/")
            } else {
                path.to_string()
            }
        };
        let folded = lowercase(&bare);
        RequestPath {
            slashed: with_slash(&bare),
            folded_slashed: with_slash(&folded),
            folded,
            trailing: trailing && bare.len() > 1,
            bare,
        }
    }

    /// The path as a rule with `options` sees it.
    pub fn form(&self, options: PathOptions) -> PathForm<'_> {
        let (bare, slashed) = if options.case_insensitive {
            (&self.folded, &self.folded_slashed)
        } else {
            (&self.bare, &self.slashed)
        };
        let slash = match (options.ignore_trailing_slash, self.trailing) {
            (true, _) if bare.len() > 1 => Slash::Either,
            (_, true) => Slash::With,
            _ => Slash::Without,
        };
        PathForm {
            bare,
            slashed,
            slash,
        }
    }
}

impl<'p> PathForm<'p> {
    /// The form as one string, for keys and logs: a trailing `/` only when
    /// the client sent one and the rule does not ignore it.
    pub fn text(&self) -> &'p str {
        match self.slash {
            Slash::With => self.slashed,
            Slash::Without | Slash::Either => self.bare,
        }
    }

    /// The spellings a pattern may match: either one when the rule ignores
    /// a trailing slash.
    pub fn readings(&self) -> impl Iterator<Item = &'p str> {
        let (first, second) = match self.slash {
            Slash::Without => (self.bare, None),
            Slash::With => (self.slashed, None),
            Slash::Either => (self.bare, Some(self.slashed)),
        };
        std::iter::once(first).chain(second)
    }
}

/// Decodes the escapes of unreserved characters and of `/`, normalises
/// the rest, in one pass.
fn decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len() + 1);
    if !raw.starts_with('/') {
        out.push('/');
    }
    let mut i = 0;
    while i < bytes.len() {
        match escape_at(bytes, i) {
            Some(b) if b == b'/' || is_unreserved(b) => {
                out.push(char::from(b));
                i += 3;
            }
            Some(b) => {
                out.push_str(&format!("%{b:02X}"));
                i += 3;
            }
            None if bytes[i] == b'%' => {
                out.push_str("%25");
                i += 1;
            }
            None => {
                // Copy up to the next escape: the input is valid UTF-8 and
                // `%` is ASCII, so this slice ends on a character boundary.
                let end = raw[i..].find('%').map_or(raw.len(), |at| i + at);
                out.push_str(&raw[i..end]);
                i = end;
            }
        }
    }
    out
}

/// The byte a well-formed `%XX` escape starting at `i` stands for; `None`
/// when no such escape starts there. Paths and queries decode escapes
/// alike; they differ in what they do with the rest.
pub(super) fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    match bytes.get(i..i + 3)? {
        [b'%', high, low] => Some((hex(*high)? << 4) | hex(*low)?),
        _ => None,
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(raw: &str) -> String {
        let path = RequestPath::new(raw);
        path.form(PathOptions {
            case_insensitive: false,
            ignore_trailing_slash: false,
        })
        .text()
        .to_string()
    }

    #[test]
    fn canonical_forms() {
        for (raw, expected) in [
            ("/api/hello", "/api/hello"),
            ("/%61pi/hello", "/api/hello"),
            ("/%41PI/hello", "/API/hello"),
            ("//api/hello", "/api/hello"),
            ("/api//hello", "/api/hello"),
            ("/api%2fhello", "/api/hello"),
            ("/api%2Fhello", "/api/hello"),
            ("/api/./hello", "/api/hello"),
            ("/api/x/../hello", "/api/hello"),
            ("/api/%2e%2e/api/hello", "/api/hello"),
            ("/../../api/hello", "/api/hello"),
            ("/api;jsessionid=1/hello", "/api/hello"),
            ("/api/hello;a=b", "/api/hello"),
            ("/api/hello/", "/api/hello/"),
            ("/api/hello/.", "/api/hello/"),
            ("/api/hello/x/..", "/api/hello/"),
            ("/", "/"),
            ("", "/"),
            ("//", "/"),
            ("/%2F", "/"),
            ("/a%20b", "/a%20b"),
            ("/a%3fb", "/a%3Fb"),
            ("/a%zzb", "/a%25zzb"),
            ("/a%", "/a%25"),
            ("/a%2", "/a%252"),
            ("/a%252Fb", "/a%252Fb"),
            ("/caf\u{e9}", "/caf\u{e9}"),
            ("/%7euser", "/~user"),
        ] {
            assert_eq!(canonical(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn rule_options_pick_the_form() {
        let path = RequestPath::new("/Login/");
        let default = path.form(PathOptions::default());
        assert_eq!((default.bare, default.slash), ("/login", Slash::Either));
        assert_eq!(default.text(), "/login");
        let strict = path.form(PathOptions {
            case_insensitive: false,
            ignore_trailing_slash: false,
        });
        assert_eq!((strict.bare, strict.slash), ("/Login", Slash::With));
        assert_eq!(strict.text(), "/Login/");
        let root = RequestPath::new("/");
        let root = root.form(PathOptions::default());
        assert_eq!((root.bare, root.slash), ("/", Slash::Without));
    }

    #[test]
    fn canonicalising_is_idempotent() {
        for raw in ["/A//b/./c/../%7e;x/", "/%2e%2E/x", "/a/b%2fc/", "/a%zz%25"] {
            let once = canonical(raw);
            assert_eq!(canonical(&once), once, "{raw:?}");
        }
    }
}
