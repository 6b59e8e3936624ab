//! The path and query of a request's URL, sliced from the string the runtime
//! hands over, already parsed and serialised by WHATWG rules: what
//! `url::Url::path` and `query` would give, without linking the `url` crate's
//! parser (BENCHMARKS.md).

use super::path::escape_at;

/// The path, still percent-encoded: everything from the first `/` after
/// the host up to the query or fragment (a serialised URL with a host
/// always has a path, `/` at least, and escapes `?` and `#` inside it).
pub fn path(url: &str) -> &str {
    // A scan of the bytes, not `find("://")`: a `&str` pattern sets up a
    // two-way searcher on every call (BENCHMARKS.md).
    let after_scheme = url
        .as_bytes()
        .windows(3)
        .position(|w| w == b"://")
        .map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    let path = rest.find('/').map_or("/", |start| &rest[start..]);
    path.find(['?', '#']).map_or(path, |end| &path[..end])
}

/// The scheme (`https`) and the host with its port, if any
/// (`api.example.com`, `127.0.0.1:8787`), of a serialised URL; `None`
/// for one without `://`.
pub fn scheme_and_host(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((scheme, &rest[..end])).filter(|(scheme, host)| !scheme.is_empty() && !host.is_empty())
}

/// The URL without its fragment.
fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

/// The query, without its `?`; `None` when the URL has no `?`.
pub fn query(url: &str) -> Option<&str> {
    without_fragment(url)
        .split_once('?')
        .map(|(_, query)| query)
}

/// The first value of `name` in the query, decoded as a form
/// (`application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte,
/// a malformed escape kept as written, invalid UTF-8 replaced), as
/// `url::Url::query_pairs` decodes it.
pub fn param(url: &str, name: &str) -> Option<String> {
    pairs(url)
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

/// Every `name=value` pair of the query in order, each decoded as
/// [`param`] decodes it; a pair without `=` has an empty value.
pub fn pairs(url: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query(url)
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .map(|(key, value)| (form_decode(key), form_decode(value)))
}

fn form_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], escape_at(bytes, i)) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (byte, None) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_lies_between_the_host_and_the_query() {
        assert_eq!(path("https://h/a/b?x=1"), "/a/b");
        assert_eq!(path("https://h/a%2Fb%3F#top"), "/a%2Fb%3F");
        assert_eq!(path("https://h"), "/");
        assert_eq!(path("https://h?x=1"), "/");
        assert_eq!(
            path("http://127.0.0.1:8787/_sluice/v1/limit"),
            "/_sluice/v1/limit"
        );
    }

    proptest::proptest! {
        /// The byte scan finds the scheme's end where `find("://")` does,
        /// in any string, multi-byte characters and repeats included.
        #[test]
        fn the_scheme_ends_where_find_says(url in "[a-z:/é?#]{0,12}(://)?[a-z:/é?#]{0,12}") {
            let after_scheme = url.find("://").map_or(0, |i| i + 3);
            let rest = &url[after_scheme..];
            let expected = rest.find('/').map_or("/", |start| &rest[start..]);
            let expected = expected.find(['?', '#']).map_or(expected, |end| &expected[..end]);
            proptest::prop_assert_eq!(path(&url), expected);
        }
    }

    #[test]
    fn scheme_and_host_come_before_the_path() {
        assert_eq!(
            scheme_and_host("https://api.example.com/a?b"),
            Some(("https", "api.example.com"))
        );
        assert_eq!(
            scheme_and_host("http://127.0.0.1:8787?x"),
            Some(("http", "127.0.0.1:8787"))
        );
        assert_eq!(
            scheme_and_host("http://[2001:db8::1]:80#f"),
            Some(("http", "[2001:db8::1]:80"))
        );
        assert_eq!(scheme_and_host("/relative"), None);
        assert_eq!(scheme_and_host("https:///x"), None);
    }

    #[test]
    fn query_stops_at_the_fragment() {
        assert_eq!(query("https://h/p?a=1&b=2#f?g"), Some("a=1&b=2"));
        assert_eq!(query("https://h/p?"), Some(""));
        assert_eq!(query("https://h/p#f?g"), None);
        assert_eq!(query("https://h/p"), None);
    }

    #[test]
    fn param_decodes_as_a_form() {
        let url = "https://h/p?key=a%20b+c&&flag&key=second&k%65y2=%E2%82%AC";
        assert_eq!(param(url, "key").as_deref(), Some("a b c"));
        assert_eq!(param(url, "flag").as_deref(), Some(""));
        assert_eq!(param(url, "key2").as_deref(), Some("€"));
        assert_eq!(param(url, "missing"), None);
        assert_eq!(param("https://h/p", "key"), None);
        let all: Vec<(String, String)> = pairs(url).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(all[2], ("key".into(), "second".into()));
        assert_eq!(pairs("https://h/p").count(), 0);
    }

    #[test]
    fn malformed_escapes_are_kept_and_bad_utf8_replaced() {
        assert_eq!(param("https://h/?k=100%", "k").as_deref(), Some("100%"));
        assert_eq!(param("https://h/?k=%zz1", "k").as_deref(), Some("%zz1"));
        assert_eq!(param("https://h/?k=%FF", "k").as_deref(), Some("\u{FFFD}"));
        assert_eq!(
            param("https://h/?since=%2B5", "since").as_deref(),
            Some("+5")
        );
    }
}
