//! The admin API's query parameters, read one way for every route: an
//! unknown one, one given twice or a value out of range is a `400` naming
//! it, nothing clamped in silence. A paged answer's `cursor` is its last
//! item's sort key (hex of its JSON), so a page starts after that item.

use super::problem::Problem;
use super::url;
use crate::input::scan::FromScan;

/// A whole-number parameter: its name, what it counts, its range and the
/// value taken when it is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole {
    pub name: &'static str,
    /// What the number is, for the error (`"minutes"`).
    pub unit: &'static str,
    pub min: u64,
    pub max: u64,
    pub default: u64,
}

/// A request's query parameters, checked against the names its route
/// takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// The parameters of `url`; a name `known` does not list, or one given
    /// twice, is a 400 naming it.
    pub fn read(url: &str, known: &[&str]) -> Result<Params, Problem> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in url::pairs(url) {
            if !known.contains(&name.as_str()) {
                let takes = if known.is_empty() {
                    "this route takes no query parameters".to_string()
                } else {
                    format!("this route takes {}", known.join(", "))
                };
                return Err(Problem::invalid(
                    &name,
                    format!("unknown query parameter {name:?}: {takes}"),
                ));
            }
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(Problem::invalid(
                    &name,
                    format!("{name} is given more than once"),
                ));
            }
            pairs.push((name, value));
        }
        Ok(Params { pairs })
    }

    /// The value of `name`, as sent.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The number `spec` names: digits only (no sign, no point, no
    /// spaces), within its range; its default when absent.
    pub fn whole(&self, spec: &Whole) -> Result<u64, Problem> {
        let Some(text) = self.text(spec.name) else {
            return Ok(spec.default);
        };
        text.parse::<u64>()
            .ok()
            .filter(|n| {
                text.bytes().all(|b| b.is_ascii_digit()) && (spec.min..=spec.max).contains(n)
            })
            .ok_or_else(|| {
                let range = if spec.max == u64::MAX {
                    format!("a whole number of at least {}", spec.min)
                } else {
                    format!("a whole number from {} to {}", spec.min, spec.max)
                };
                Problem::invalid(
                    spec.name,
                    format!(
                        "{} must be {} ({range}), got {text:?}",
                        spec.name, spec.unit
                    ),
                )
            })
    }

    /// The `cursor` a previous page handed back, decoded; `None` for the
    /// first page. One that no page could have given is a 400 naming it.
    pub fn cursor<T: FromScan>(&self) -> Result<Option<T>, Problem> {
        let Some(text) = self.text(CURSOR) else {
            return Ok(None);
        };
        decode_hex(text)
            .and_then(|bytes| T::from_json(std::str::from_utf8(&bytes).ok()?).ok())
            .map(Some)
            .ok_or_else(|| {
                Problem::invalid(
                    CURSOR,
                    "cursor must be the `next` of a previous page, sent as it was given",
                )
            })
    }
}

/// The parameter that continues a paged answer.
pub const CURSOR: &str = "cursor";

/// The `next` cursor of a page whose last item sorts by `key`.
pub fn cursor<T: crate::json::Write>(key: &T) -> String {
    let json = crate::json::to_string(key);
    let mut out = String::with_capacity(json.len() * 2);
    for byte in json.bytes() {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| {
        HEX.iter()
            .position(|&h| h == b)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const MINUTES: Whole = Whole {
        name: "top_minutes",
        unit: "minutes",
        min: 1,
        max: 60,
        default: 10,
    };

    fn field(problem: &Problem) -> String {
        let body: Value = serde_json::from_str(&problem.to_json()).unwrap();
        assert_eq!(problem.status, 400);
        assert_eq!(body["code"], "invalid-request");
        body["field"].as_str().unwrap().to_string()
    }

    fn read(query: &str) -> Result<Params, Problem> {
        Params::read(&format!("https://h/p?{query}"), &["top_minutes", "cursor"])
    }

    #[test]
    fn a_whole_number_is_digits_within_its_range_or_its_default() {
        assert_eq!(read("").unwrap().whole(&MINUTES).unwrap(), 10);
        assert_eq!(read("top_minutes=1").unwrap().whole(&MINUTES).unwrap(), 1);
        assert_eq!(read("top_minutes=60").unwrap().whole(&MINUTES).unwrap(), 60);
        for bad in [
            "0",
            "61",
            "x",
            "-3",
            "",
            "+5",
            "1.5",
            "%201",
            "99999999999999999999999",
        ] {
            let problem = read(&format!("top_minutes={bad}"))
                .unwrap()
                .whole(&MINUTES)
                .unwrap_err();
            assert_eq!(field(&problem), "top_minutes", "{bad}");
            assert!(problem.to_json().contains("from 1 to 60"), "{bad}");
        }
    }

    #[test]
    fn an_unbounded_number_says_so() {
        let since = Whole {
            name: "since",
            unit: "milliseconds since the epoch",
            min: 0,
            max: u64::MAX,
            default: 0,
        };
        let params = Params::read("https://h/p?since=-1", &["since"]).unwrap();
        let problem = params.whole(&since).unwrap_err();
        assert!(problem.to_json().contains("of at least 0"));
    }

    #[test]
    fn unknown_and_repeated_parameters_are_named() {
        assert_eq!(field(&read("top_minute=5").unwrap_err()), "top_minute");
        assert_eq!(
            field(&read("top_minutes=5&top_minutes=6").unwrap_err()),
            "top_minutes"
        );
        let none = Params::read("https://h/p?x=1", &[]).unwrap_err();
        assert!(none.to_json().contains("takes no query parameters"));
        assert!(Params::read("https://h/p", &[]).is_ok());
    }

    /// A cursor of three values, as the ban pages' is.
    type Triple = (u64, String, String);

    #[test]
    fn a_cursor_round_trips_and_a_forged_one_is_named() {
        let next = cursor(&(1_700_000_000_000u64, "ké\"y", "manual"));
        assert!(next.bytes().all(|b| b.is_ascii_hexdigit()));
        let params = read(&format!("cursor={next}")).unwrap();
        let back = params.cursor::<Triple>().unwrap().unwrap();
        assert_eq!(back, (1_700_000_000_000, "ké\"y".into(), "manual".into()));
        assert_eq!(read("").unwrap().cursor::<Triple>().unwrap(), None);
        for bad in ["zz", "abc", "5b315d", "", "7b7d", "5b312c2261225d"] {
            let problem = read(&format!("cursor={bad}"))
                .unwrap()
                .cursor::<Triple>()
                .unwrap_err();
            assert_eq!(field(&problem), "cursor", "{bad}");
        }
    }
}
