//! The waiting page: Sluice's own HTML, or JSON for a client that asks
//! for it. The page needs no JavaScript (it refreshes itself with
//! `<meta http-equiv="refresh">`), reads on a phone, and is sent under a
//! policy that allows its one inline style, by hash, and nothing else.
//! Everything it shows is a number Sluice computed, the opening time the
//! operator configured, or the reason the operator gave for pausing or
//! closing the room (escaped): no text from the request is ever rendered.
//! A closed room has a page of its own, which does not refresh; a room
//! with a challenge, one whose only script (allowed by its hash) solves
//! the puzzle.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::challenge::SCRIPT;
use crate::http::base64url;
use crate::http::time::rfc3339;

/// Where a waiting visitor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// In line: `position` 1 is next; `drawn` when the place came from
    /// the pre-queue's draw rather than the order of arrival.
    InLine {
        position: u64,
        wait_s: u64,
        drawn: bool,
    },
    /// In the pre-queue, before the room opens.
    BeforeOpening { opens_at_ms: u64, opens_in_s: u64 },
}

const STYLE: &str = "\
:root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--ink:#14171c;--soft:#4a5361;--line:#d5dae1;--accent:#0b57d0}\
@media (prefers-color-scheme:dark){:root{--bg:#101318;--card:#191d24;--ink:#eef1f5;--soft:#aeb6c2;--line:#323945;--accent:#8ab4f8}}\
*{box-sizing:border-box}\
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;padding:1.25rem;background:var(--bg);color:var(--ink);font:1.125rem/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif}\
main{width:100%;max-width:34rem;background:var(--card);border:1px solid var(--line);border-radius:.75rem;padding:2rem 1.5rem}\
h1{margin:0 0 .5rem;font-size:1.75rem;line-height:1.2}\
p{margin:.75rem 0;color:var(--soft)}\
dl{display:grid;grid-template-columns:1fr 1fr;gap:.75rem;margin:1.5rem 0}\
dl div{border:1px solid var(--line);border-radius:.5rem;padding:.75rem 1rem}\
dt{font-size:.875rem;color:var(--soft)}\
dd{margin:.25rem 0 0;font-size:1.75rem;font-weight:700;color:var(--accent);font-variant-numeric:tabular-nums}\
dd.when{font-size:1.25rem;line-height:1.3}\
p.note{color:var(--ink);border-left:.25rem solid var(--accent);padding-left:.75rem}\
@media (max-width:30rem){dl{grid-template-columns:1fr}main{padding:1.5rem 1.25rem}}\
";

/// The page's Content-Security-Policy: its one style by hash, nothing
/// else from anywhere, no framing, no forms.
pub fn policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        format!("default-src 'none'; style-src {}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'", hashed(STYLE))
    })
}

/// The challenge page's: the same, and its one script by hash.
pub fn challenge_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        policy().replacen(
            "; base-uri",
            &format!("; script-src {}; base-uri", hashed(SCRIPT)),
            1,
        )
    })
}

/// `'sha256-…'` of `text`, in standard base64 as CSP wants it.
fn hashed(text: &str) -> String {
    let hash = base64url::encode(&Sha256::digest(text.as_bytes()))
        .replace('-', "+")
        .replace('_', "/");
    format!("'sha256-{hash}='")
}

/// How often a page refreshes: every `refresh_s`, or before the opening a
/// tenth of the time left when that is longer (at most 5 minutes), so a
/// pre-queue days away costs few refreshes and one near its opening
/// misses nothing.
pub fn refresh_s(standing: Standing, refresh_s: u64) -> u64 {
    match standing {
        Standing::BeforeOpening { opens_in_s, .. } => {
            (opens_in_s / 10).clamp(refresh_s, refresh_s.max(300))
        }
        Standing::InLine { .. } => refresh_s,
    }
}

/// The page, refreshing itself every `refresh_s` seconds; `paused` is the
/// operator's reason while the room is paused.
pub fn html(standing: Standing, refresh_s: u64, paused: Option<&str>) -> String {
    let (title, lead, figures) = match standing {
        Standing::InLine {
            position,
            wait_s,
            drawn,
        } => (
            "You are in line",
            if drawn {
                "Many people want in right now, so they are let in a few at a time, in the order the draw at opening gave them."
            } else {
                "Many people want in right now, so they are let in a few at a time, in the order they arrived."
            },
            [
                ("Your place in line", grouped(position), ""),
                ("Estimated wait", wait(wait_s), ""),
            ],
        ),
        Standing::BeforeOpening {
            opens_at_ms,
            opens_in_s,
        } => (
            "Opening soon",
            "When it opens, everyone waiting here is put in line in a random order, a fair draw: arriving earlier gives no better place.",
            [
                ("Opens at", opening(opens_at_ms), " class=\"when\""),
                ("Opens in", wait(opens_in_s), ""),
            ],
        ),
    };
    let figures: String = figures
        .iter()
        .map(|(name, value, class)| format!("<div><dt>{name}</dt><dd{class}>{value}</dd></div>"))
        .collect();
    let note = paused.map_or_else(String::new, |reason| {
        format!(
            "<p class=\"note\"><strong>Entry is paused.</strong> Nobody is let in until it resumes; you keep your place in line.{}</p>\n",
            because(reason)
        )
    });
    document(
        title,
        &format!("<meta http-equiv=\"refresh\" content=\"{refresh_s}\">\n"),
        &format!(
            "<p>{lead}</p>\n{note}<dl>{figures}</dl>\n\
<p>This page refreshes itself every {every}. Keep it open: when your turn comes, you are let in without doing anything.</p>\n",
            every = seconds(refresh_s),
        ),
    )
}

/// The page of a closed room: it says so, with the operator's reason, and
/// does not refresh (there is nothing to wait for).
pub fn closed_html(reason: &str) -> String {
    document(
        "Closed",
        "",
        &format!(
            "<p>Entry has closed: nobody more is let in.</p>\n<p class=\"note\">{}</p>\n",
            if reason.is_empty() {
                "Closed by the organiser.".to_string()
            } else {
                escape(reason)
            }
        ),
    )
}

/// The challenge's page: its script finds the answer to `puzzle` and
/// loads the page again with it in the cookie `cookie`.
pub fn challenge_html(puzzle: &str, bits: u32, cookie: &str) -> String {
    document(
        "One moment",
        "",
        &format!(
            "<p>Before you join the line, your browser does a short calculation. It takes a few seconds, and costs anyone who runs many browsers at once far more than it costs you.</p>\n\
<p id=\"work\" data-puzzle=\"{puzzle}\" data-work=\"{bits}\" data-cookie=\"{cookie}\">Working…</p>\n\
<noscript><p class=\"note\">This needs JavaScript: turn it on and load the page again.</p></noscript>\n\
<script>{SCRIPT}</script>\n"
        ),
    )
}

/// A page of Sluice's own around `body`, under [`policy`].
fn document(title: &str, head: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
{head}<meta name=\"robots\" content=\"noindex\">\n\
<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
<h1>{title}</h1>\n{body}</main>\n</body>\n</html>\n"
    )
}

/// ` Why: <reason>`, escaped, or nothing for no reason.
fn because(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" Why: {}", escape(reason))
    }
}

/// Text as HTML text: the operator's reason is the only text on the page
/// that Sluice did not write.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The JSON answer: `{"state": "waiting", "position", "wait_s",
/// "refresh_s"}`, or before opening `{"state": "pre-queue", "opens_at",
/// "opens_in_s", "wait_s", "refresh_s"}`; while paused, with `"paused":
/// true` and the operator's `"reason"`.
///
/// Written with `format!`: every value is a number, or a timestamp of
/// digits and `-:.TZ`, so nothing needs escaping but the reason, written
/// as a JSON string ([`crate::json::Write`]).
pub fn json(standing: Standing, refresh_s: u64, paused: Option<&str>) -> String {
    let body = match standing {
        Standing::InLine {
            position, wait_s, ..
        } => format!(
            r#"{{"state":"waiting","position":{position},"wait_s":{wait_s},"refresh_s":{refresh_s}}}"#
        ),
        Standing::BeforeOpening {
            opens_at_ms,
            opens_in_s,
        } => format!(
            r#"{{"state":"pre-queue","opens_at":"{}","opens_in_s":{opens_in_s},"wait_s":{opens_in_s},"refresh_s":{refresh_s}}}"#,
            rfc3339(opens_at_ms)
        ),
    };
    match paused {
        None => body,
        Some(reason) => format!(
            r#"{},"paused":true,"reason":{}}}"#,
            body.strip_suffix('}').unwrap_or(&body),
            crate::json::to_string(reason)
        ),
    }
}

/// The challenge as JSON: `{"state": "challenge", "puzzle", "work",
/// "cookie"}`, the puzzle and cookie name being Sluice's own characters.
pub fn challenge_json(puzzle: &str, bits: u32, cookie: &str) -> String {
    format!(r#"{{"state":"challenge","puzzle":"{puzzle}","work":{bits},"cookie":"{cookie}"}}"#)
}

/// Whether a client asked for JSON: its `Accept` names a JSON type and
/// not HTML (browsers name HTML, and get the page).
pub fn wants_json(accept: Option<&str>) -> bool {
    let Some(accept) = accept.map(str::to_ascii_lowercase) else {
        return false;
    };
    (accept.contains("application/json") || accept.contains("+json"))
        && !accept.contains("text/html")
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An estimate, rounded as a person would say it.
fn wait(s: u64) -> String {
    match s {
        0..=59 => "under a minute".into(),
        60..=3_599 => {
            let minutes = s.div_ceil(60);
            format!("{minutes} min")
        }
        _ => {
            let minutes = s.div_ceil(60);
            match minutes % 60 {
                0 => format!("{} h", minutes / 60),
                m => format!("{} h {m} min", minutes / 60),
            }
        }
    }
}

fn seconds(s: u64) -> String {
    match s {
        1 => "second".into(),
        s if s % 60 == 0 && s >= 120 => format!("{} minutes", s / 60),
        60 => "minute".into(),
        s => format!("{s} seconds"),
    }
}

/// `2026-12-01T10:00:00.000Z` as `1 Dec 2026, 10:00 UTC`.
fn opening(ms: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let text = rfc3339(ms);
    let field = |range: std::ops::Range<usize>| text.get(range).unwrap_or_default();
    let month = field(5..7).parse::<usize>().unwrap_or(1);
    let day = field(8..10).trim_start_matches('0');
    let month = MONTHS.get(month.wrapping_sub(1)).copied().unwrap_or("Jan");
    format!("{day} {month} {}, {} UTC", field(0..4), field(11..16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_shows_the_numbers_and_refreshes_itself() {
        let page = html(
            Standing::InLine {
                position: 12_345,
                wait_s: 250,
                drawn: false,
            },
            20,
            None,
        );
        assert!(page.contains("<meta http-equiv=\"refresh\" content=\"20\">"));
        assert!(page.contains("<dd>12,345</dd>"));
        assert!(page.contains("<dd>5 min</dd>"));
        assert!(page.contains("every 20 seconds"));
        assert!(!page.contains("<script"));
    }

    #[test]
    fn before_opening_the_page_says_when() {
        let page = html(
            Standing::BeforeOpening {
                opens_at_ms: 1_796_119_200_000,
                opens_in_s: 7_500,
            },
            60,
            None,
        );
        assert!(page.contains("<dd class=\"when\">1 Dec 2026, 10:00 UTC</dd>"));
        assert!(page.contains("<dd>2 h 5 min</dd>"));
        assert!(page.contains("every minute"));
    }

    #[test]
    fn json_answers() {
        let read = |text: String| serde_json::from_str::<serde_json::Value>(&text).unwrap();
        let line = Standing::InLine {
            position: 3,
            wait_s: 40,
            drawn: false,
        };
        assert_eq!(
            read(json(line, 20, None)),
            serde_json::json!({"state": "waiting", "position": 3, "wait_s": 40, "refresh_s": 20})
        );
        let before = Standing::BeforeOpening {
            opens_at_ms: 1_796_119_200_000,
            opens_in_s: 5,
        };
        assert_eq!(
            read(json(before, 20, None)),
            serde_json::json!({"state": "pre-queue", "opens_at": "2026-12-01T10:00:00.000Z",
                               "opens_in_s": 5, "wait_s": 5, "refresh_s": 20})
        );
    }

    #[test]
    fn a_paused_room_says_so_with_the_reason_escaped() {
        let line = Standing::InLine {
            position: 7,
            wait_s: 70,
            drawn: false,
        };
        let page = html(line, 20, Some("<b>stock</b> & \"count\""));
        assert!(page.contains("<strong>Entry is paused.</strong>"));
        assert!(page.contains("Why: &lt;b&gt;stock&lt;/b&gt; &amp; &quot;count&quot;"));
        assert!(!page.contains("<b>"));
        assert!(page.contains("<dd>7</dd>"), "the place is kept and shown");
        assert!(page.contains("content=\"20\""), "it keeps refreshing");
        assert!(!html(line, 20, Some("")).contains("Why:"));
        assert!(!html(line, 20, None).contains("paused"));
        let body: serde_json::Value =
            serde_json::from_str(&json(line, 20, Some("a \"quote\"\n"))).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"state": "waiting", "position": 7, "wait_s": 70, "refresh_s": 20,
                               "paused": true, "reason": "a \"quote\"\n"})
        );
    }

    #[test]
    fn a_closed_room_has_a_page_that_does_not_refresh() {
        let page = closed_html("Sold <out>");
        assert!(page.contains("<title>Closed</title>"));
        assert!(page.contains("Sold &lt;out&gt;"));
        assert!(!page.contains("http-equiv"));
        assert!(page.contains(&format!("<style>{STYLE}</style>")));
        assert!(!page.contains("<script"));
        assert!(closed_html("").contains("Closed by the organiser."));
    }

    #[test]
    fn the_policy_allows_exactly_the_style() {
        // The hash in standard base64, as CSP wants it, of the style as
        // the page sends it.
        let policy = policy();
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"));
        let hash = policy
            .split("'sha256-")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap();
        assert_eq!(hash.len(), 44);
        assert!(hash.ends_with('='));
        assert!(!hash.contains(['-', '_']));
        assert!(html(
            Standing::InLine {
                position: 1,
                wait_s: 0,
                drawn: false
            },
            5,
            None
        )
        .contains(&format!("<style>{STYLE}</style>")));
    }

    #[test]
    fn json_for_those_who_ask_for_it() {
        assert!(wants_json(Some("application/json")));
        assert!(wants_json(Some("Application/JSON; q=1")));
        assert!(wants_json(Some("application/problem+json")));
        assert!(!wants_json(None));
        assert!(!wants_json(Some("*/*")));
        assert!(!wants_json(Some(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(!wants_json(Some("text/html, application/json")));
    }

    #[test]
    fn the_draw_s_order_is_not_called_the_order_of_arrival() {
        let line = |drawn| Standing::InLine {
            position: 3,
            wait_s: 60,
            drawn,
        };
        assert!(html(line(false), 20, None).contains("in the order they arrived"));
        let drawn = html(line(true), 20, None);
        assert!(!drawn.contains("arrived"), "{drawn}");
        assert!(drawn.contains("the draw at opening"));
    }

    #[test]
    fn a_far_opening_refreshes_slowly_and_a_near_one_as_configured() {
        let before = |opens_in_s| Standing::BeforeOpening {
            opens_at_ms: 0,
            opens_in_s,
        };
        assert_eq!(refresh_s(before(7 * 86_400), 20), 300);
        assert_eq!(refresh_s(before(1_200), 20), 120);
        assert_eq!(refresh_s(before(150), 20), 20);
        assert_eq!(refresh_s(before(0), 20), 20);
        let line = Standing::InLine {
            position: 1,
            wait_s: 0,
            drawn: false,
        };
        assert_eq!(refresh_s(line, 20), 20);
        assert!(
            html(before(7 * 86_400), refresh_s(before(7 * 86_400), 20), None)
                .contains("every 5 minutes")
        );
    }

    #[test]
    fn the_challenge_page_runs_its_one_script_by_hash() {
        let page = challenge_html("v1.w.shop.18.1.2.sig", 18, "sluice_work_shop");
        assert!(page.contains(
            "<p id=\"work\" data-puzzle=\"v1.w.shop.18.1.2.sig\" data-work=\"18\" data-cookie=\"sluice_work_shop\">"
        ));
        assert!(page.contains(&format!("<script>{SCRIPT}</script>")));
        assert_eq!(page.matches("<script").count(), 1);
        assert!(!page.contains("http-equiv"), "the script reloads it");
        let scripted = challenge_policy();
        assert!(scripted.starts_with(policy().split("; base-uri").next().unwrap()));
        assert!(scripted.contains(&format!("; script-src {}; base-uri", hashed(SCRIPT))));
        assert!(!policy().contains("script-src"));
        let body: serde_json::Value = serde_json::from_str(&challenge_json(
            "v1.w.shop.18.1.2.sig",
            18,
            "sluice_work_shop",
        ))
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({"state": "challenge", "puzzle": "v1.w.shop.18.1.2.sig", "work": 18,
                               "cookie": "sluice_work_shop"})
        );
    }

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(wait(0), "under a minute");
        assert_eq!(wait(60), "1 min");
        assert_eq!(wait(61), "2 min");
        assert_eq!(wait(3_600), "1 h");
        assert_eq!(wait(3_601), "1 h 1 min");
        assert_eq!(seconds(1), "second");
        assert_eq!(seconds(20), "20 seconds");
        assert_eq!(seconds(300), "5 minutes");
    }
}
