//! A validated "at most `limit` units in any window of `window_ms`".

use std::fmt;

/// The largest limit Sluice accepts. A sliding log holds up to one entry per
/// admitted unit, so this bounds one key's memory (8 bytes an entry, 8 MB at
/// worst) well inside a Durable Object's 128 MB.
pub const MAX_LIMIT: u64 = 1_000_000;

/// The longest window Sluice accepts: 30 days. It also lets a log store its
/// timestamps as `u32` offsets from a base (2^32 ms is about 49 days).
pub const MAX_WINDOW_MS: u64 = 30 * 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    limit: u32,
    window_ms: u64,
}

/// Which part of a policy is out of range; the message names the field so the
/// config loader and the HTTP API can pass it on unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    Limit(u64),
    Window(u64),
}

impl PolicyError {
    /// The field name as the decision API spells it.
    pub fn field(&self) -> &'static str {
        match self {
            PolicyError::Limit(_) => "limit",
            PolicyError::Window(_) => "window_ms",
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Limit(n) => {
                write!(f, "limit must be an integer from 1 to {MAX_LIMIT}, got {n}")
            }
            PolicyError::Window(ms) => write!(
                f,
                "window must be from 1 ms to 30 days ({MAX_WINDOW_MS} ms), got {ms} ms"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

impl Policy {
    pub fn new(limit: u64, window_ms: u64) -> Result<Policy, PolicyError> {
        let limit = match u32::try_from(limit) {
            Ok(n) if (1..=MAX_LIMIT).contains(&limit) => n,
            _ => return Err(PolicyError::Limit(limit)),
        };
        if !(1..=MAX_WINDOW_MS).contains(&window_ms) {
            return Err(PolicyError::Window(window_ms));
        }
        Ok(Policy { limit, window_ms })
    }

    /// The policy with `limit` and `window_ms` brought into range, for
    /// values that were checked where they came in (a room's terms): it
    /// cannot fail, so the caller needs no path for a failure it ruled out.
    pub fn clamped(limit: u64, window_ms: u64) -> Policy {
        Policy {
            limit: limit.clamp(1, MAX_LIMIT) as u32,
            window_ms: window_ms.clamp(1, MAX_WINDOW_MS),
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_bounds() {
        assert!(Policy::new(1, 1).is_ok());
        assert!(Policy::new(MAX_LIMIT, MAX_WINDOW_MS).is_ok());
    }

    #[test]
    fn clamped_brings_values_into_range() {
        assert_eq!(Policy::clamped(0, 0), Policy::new(1, 1).unwrap());
        assert_eq!(
            Policy::clamped(u64::MAX, u64::MAX),
            Policy::new(MAX_LIMIT, MAX_WINDOW_MS).unwrap()
        );
        assert_eq!(Policy::clamped(7, 60_000), Policy::new(7, 60_000).unwrap());
    }

    #[test]
    fn rejects_out_of_range_fields_by_name() {
        assert_eq!(Policy::new(0, 1000).unwrap_err().field(), "limit");
        assert_eq!(
            Policy::new(MAX_LIMIT + 1, 1000).unwrap_err().field(),
            "limit"
        );
        assert_eq!(Policy::new(u64::MAX, 1000).unwrap_err().field(), "limit");
        assert_eq!(Policy::new(10, 0).unwrap_err().field(), "window_ms");
        let err = Policy::new(10, MAX_WINDOW_MS + 1).unwrap_err();
        assert_eq!(err.field(), "window_ms");
        assert!(err.to_string().contains("30 days"));
    }
}
