//! Which requests may take a place in a room: a page load, or an API
//! client's request. A browser says what each request is for in its
//! `Sec-Fetch-*` fields, which no page can forge: another site's `<img>`,
//! `fetch()` or frame of the shop, a CORS preflight, a page's own
//! subresources are not someone arriving, and take no place (nor cost a
//! shard call). A client that sends neither `Sec-Fetch-Dest` nor
//! `Sec-Fetch-Site` is no browser (curl, a script, Node's `fetch`, which
//! sends `Sec-Fetch-Mode` alone) and joins like a page load; the join
//! limit is what holds it.

/// Whether a request with this method and these `Sec-Fetch-*` values
/// (`field(name)`, lower-case names) may join the room: never a preflight
/// (`OPTIONS`) nor a `HEAD` (a link checker's, a monitor's: no one reads
/// a page); from a browser, a top-level navigation only.
pub fn may_join(method: &str, field: impl Fn(&str) -> Option<String>) -> bool {
    if method.eq_ignore_ascii_case("OPTIONS") || method.eq_ignore_ascii_case("HEAD") {
        return false;
    }
    let said = |name: &str, value: &str| field(name).is_some_and(|v| v.eq_ignore_ascii_case(value));
    match (field("sec-fetch-dest"), field("sec-fetch-site")) {
        (Some(dest), _) => dest.eq_ignore_ascii_case("document"),
        (None, Some(_)) => said("sec-fetch-mode", "navigate"),
        (None, None) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joins(method: &str, fields: &[(&str, &str)]) -> bool {
        may_join(method, |name| {
            fields
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn page_loads_and_api_clients_join() {
        let navigation = [
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
            ("sec-fetch-site", "cross-site"),
        ];
        assert!(joins("GET", &navigation), "a link from another site");
        assert!(joins("POST", &navigation), "a form");
        assert!(joins("GET", &[]), "curl");
        assert!(joins("GET", &[("sec-fetch-mode", "cors")]), "Node's fetch");
        assert!(
            joins(
                "GET",
                &[("sec-fetch-mode", "navigate"), ("sec-fetch-site", "none")]
            ),
            "a browser that sends no Sec-Fetch-Dest"
        );
        assert!(joins("GET", &[("sec-fetch-dest", "Document")]));
    }

    #[test]
    fn preflights_subresources_and_frames_do_not() {
        let cross = |mode: &'static str, dest: &'static str| {
            [
                ("sec-fetch-mode", mode),
                ("sec-fetch-dest", dest),
                ("sec-fetch-site", "cross-site"),
            ]
        };
        assert!(!joins("OPTIONS", &[]));
        assert!(!joins("HEAD", &[]), "a link checker");
        assert!(!joins("head", &[("sec-fetch-dest", "document")]));
        assert!(!joins("options", &cross("cors", "empty")));
        assert!(!joins("GET", &cross("no-cors", "image")));
        assert!(!joins("GET", &cross("cors", "empty")));
        assert!(!joins("GET", &cross("navigate", "iframe")));
        assert!(!joins("GET", &cross("no-cors", "script")));
        assert!(!joins(
            "GET",
            &[
                ("sec-fetch-mode", "cors"),
                ("sec-fetch-site", "same-origin")
            ]
        ));
    }
}
