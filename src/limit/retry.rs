//! When a refused request could be retried: after a wait, or never.
//!
//! A request that costs more than a limit can never pass, however long it
//! waits. That is a case of its own rather than a large number, so that no
//! made-up wait can reach arithmetic, a `Retry-After` field or a JSON body:
//! every reader has to say what "never" means to it.

use crate::input::scan::{FromScan, Read, Scan};

/// When a request could be admitted, if nothing else were admitted
/// meanwhile. Ordered by how long the wait is: any `After` is sooner than
/// `Never`, so the wait for several refusals together is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Retry {
    /// After this many milliseconds; 0 for a request that passes now.
    After(u64),
    /// No wait can help: the request costs more than the limit.
    Never,
}

impl Retry {
    /// The wait of a request that is admitted.
    pub const NOW: Retry = Retry::After(0);

    /// The wait in milliseconds; `None` when no wait can help.
    pub fn ms(self) -> Option<u64> {
        match self {
            Retry::After(ms) => Some(ms),
            Retry::Never => None,
        }
    }

    /// The moment, in ms since the epoch, at which a request refused at
    /// `now_ms` could pass; `None` when never.
    pub fn at(self, now_ms: u64) -> Option<u64> {
        self.ms().map(|ms| now_ms.saturating_add(ms))
    }

    /// The same wait `elapsed_ms` later: what is left of it, down to 0.
    /// `Never` stays `Never`.
    pub fn elapsed(self, elapsed_ms: u64) -> Retry {
        match self {
            Retry::After(ms) => Retry::After(ms.saturating_sub(elapsed_ms)),
            Retry::Never => Retry::Never,
        }
    }
}

/// On the wire between a worker and an object, a wait is its number of ms
/// and never is `null`, as the decision API says it; left out, never.
impl crate::json::Write for Retry {
    fn write(&self, out: &mut crate::json::Text) {
        self.ms().write(out);
    }
}

impl FromScan for Retry {
    fn from_scan(scan: &mut Scan<'_>) -> Read<Retry> {
        Ok(Option::<u64>::from_scan(scan)?.map_or(Retry::Never, Retry::After))
    }

    fn absent() -> Option<Retry> {
        Some(Retry::Never)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_is_later_than_any_wait() {
        assert!(Retry::After(u64::MAX) < Retry::Never);
        assert!(Retry::NOW < Retry::After(1));
        let waits = [Retry::After(5), Retry::Never, Retry::After(9)];
        assert_eq!(waits.iter().max(), Some(&Retry::Never));
    }

    #[test]
    fn never_has_no_moment_and_does_not_count_down() {
        assert_eq!(Retry::Never.at(1_000), None);
        assert_eq!(Retry::Never.elapsed(u64::MAX), Retry::Never);
        assert_eq!(Retry::After(500).at(1_000), Some(1_500));
        assert_eq!(Retry::After(500).elapsed(200), Retry::After(300));
        assert_eq!(Retry::After(500).elapsed(900), Retry::NOW);
    }

    #[test]
    fn the_wire_form_is_ms_or_null() {
        let json = crate::json::to_string(&[Retry::After(42), Retry::Never][..]);
        assert_eq!(json, "[42,null]");
        let back = Vec::<Retry>::from_json(&json).unwrap();
        assert_eq!(back, [Retry::After(42), Retry::Never]);
    }
}
