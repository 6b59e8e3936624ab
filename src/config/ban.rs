//! A rule's escalating bans (`ban`).

use super::policies::quoting;
use super::{error, ConfigError};
use crate::from_tree;
use crate::input::duration::parse_ms;
use crate::ledger::BanPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleBan {
    pub policy: BanPolicy,
    /// 429 or 403.
    pub status: u16,
}

from_tree! {
    pub(super) struct RawBan {
        after: u64 = required "after",
        within: String = required "within",
        duration: String = required "for",
        multiplier: Option<u64> = optional "multiplier",
        max: Option<String> = optional "max",
        status: Option<u16> = optional "status",
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
    .map_err(|e| {
        let written = match e.field {
            "within" => Some(&raw.within),
            "for" => Some(&raw.duration),
            "max" => raw.max.as_ref(),
            _ => None,
        };
        let message = written.map_or(e.message.clone(), |text| quoting(&e.message, text));
        error(&format!("{at}.{}", e.field), message)
    })?;
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
