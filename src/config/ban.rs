//! A rule's escalating bans (`ban`).

use serde_json::Value;

use super::{error, ConfigError};
use crate::input::duration::parse_ms;
use crate::input::tree::{self, Fields, FromTree};
use crate::ledger::BanPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleBan {
    pub policy: BanPolicy,
    /// 429 or 403.
    pub status: u16,
}

pub(super) struct RawBan {
    after: u64,
    within: String,
    duration: String,
    multiplier: Option<u64>,
    max: Option<String>,
    status: Option<u16>,
}

impl FromTree for RawBan {
    fn from_tree(value: Value) -> Result<RawBan, tree::Error> {
        const NAMES: &[&str] = &["after", "within", "for", "multiplier", "max", "status"];
        let mut f = Fields::new(value, "struct RawBan", NAMES)?;
        let raw = RawBan {
            after: f.required("after"),
            within: f.required("within"),
            duration: f.required("for"),
            multiplier: f.optional("multiplier"),
            max: f.optional("max"),
            status: f.optional("status"),
        };
        f.finish().map(|()| raw)
    }
}

pub(super) fn validate_ban(raw: RawBan, at: &str) -> Result<RuleBan, ConfigError> {
    let ms = |text: &str, name: &str| parse_ms(text).map_err(|m| error(&format!("{at}.{name}"), m));
    let within = ms(&raw.within, "within")?;
    let duration = ms(&raw.duration, "for")?;
    let max = match &raw.max {
        Some(max) => ms(max, "max")?,
        None => duration,
    };
    let policy = BanPolicy::new(
        raw.after,
        within,
        duration,
        raw.multiplier.unwrap_or(1),
        max,
    )
    .map_err(|e| error(&format!("{at}.{}", e.field), e.message))?;
    let status = match raw.status {
        None | Some(429) => 429,
        Some(403) => 403,
        Some(other) => {
            return Err(error(
                &format!("{at}.status"),
                format!("status must be 429 or 403, got {other}"),
            ))
        }
    };
    Ok(RuleBan { policy, status })
}
