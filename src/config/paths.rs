//! `paths = { case = "...", trailing_slash = "..." }`: how strictly rules
//! compare request paths, at the top level and per rule.

use super::{error, ConfigError};
use crate::from_tree;
use crate::http::path::PathOptions;

from_tree! {
    #[derive(Default)]
    pub(super) struct RawPaths {
        case: Option<String> = optional "case",
        trailing_slash: Option<String> = optional "trailing_slash",
    }
}

/// `raw` over `base`: each field the config sets replaces the base's.
pub(super) fn validate_paths(
    raw: Option<RawPaths>,
    base: PathOptions,
    at: &str,
) -> Result<PathOptions, ConfigError> {
    let raw = raw.unwrap_or_default();
    let case_insensitive = match raw.case.as_deref() {
        None => base.case_insensitive,
        Some("insensitive") => true,
        Some("sensitive") => false,
        Some(other) => {
            return Err(error(
                &format!("{at}.case"),
                format!("{other:?} is not a choice: use \"insensitive\" (/API and /api are one path) or \"sensitive\""),
            ))
        }
    };
    let ignore_trailing_slash = match raw.trailing_slash.as_deref() {
        None => base.ignore_trailing_slash,
        Some("ignore") => true,
        Some("strict") => false,
        Some(other) => {
            return Err(error(
                &format!("{at}.trailing_slash"),
                format!("{other:?} is not a choice: use \"ignore\" (/login/ and /login are one path) or \"strict\""),
            ))
        }
    };
    Ok(PathOptions {
        case_insensitive,
        ignore_trailing_slash,
    })
}
