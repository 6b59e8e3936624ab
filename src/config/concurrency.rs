//! `concurrency`: at most N of a key's requests at the origin at once,
//! with leases that lapse and an optional queue.

use super::{error, ConfigError};
use crate::bounds::{DEFAULT_LEASE_TTL_MS, MAX_CONCURRENCY, MAX_LEASE_TTL_MS};
use crate::from_tree;
use crate::input::duration::parse_ms;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    pub limit: u32,
    /// A lease lapses after this long even if its request never finishes,
    /// so a worker that dies cannot leak capacity.
    pub lease_ttl_ms: u64,
    /// Wait up to this long for a slot (first come, first served) instead
    /// of refusing at once; 0 refuses at once.
    pub max_wait_ms: u64,
    /// At most this many requests wait per key; more are refused.
    pub max_queue: u32,
}

from_tree! {
    pub(super) struct RawQueue {
        max_wait: String = required "max_wait",
        max_len: Option<u64> = optional "max_len",
    }
}

pub(super) fn validate_concurrency(
    limit: Option<u64>,
    lease_ttl: Option<&str>,
    queue: Option<RawQueue>,
    at: &str,
) -> Result<Option<Concurrency>, ConfigError> {
    let Some(limit) = limit else {
        let orphan = match (lease_ttl, &queue) {
            (Some(_), _) => Some("lease_ttl"),
            (None, Some(_)) => Some("queue"),
            (None, None) => None,
        };
        return match orphan {
            Some(name) => Err(error(
                &format!("{at}.{name}"),
                format!("{name} applies to a concurrency limit: set concurrency = N too, or leave {name} out"),
            )),
            None => Ok(None),
        };
    };
    let limit = u32::try_from(limit)
        .ok()
        .filter(|n| (1..=MAX_CONCURRENCY).contains(n))
        .ok_or_else(|| {
            error(
                &format!("{at}.concurrency"),
                format!("concurrency must be from 1 to {MAX_CONCURRENCY}, got {limit}"),
            )
        })?;
    let lease_ttl_ms = match lease_ttl {
        None => DEFAULT_LEASE_TTL_MS,
        Some(text) => {
            let ms = parse_ms(text).map_err(|m| error(&format!("{at}.lease_ttl"), m))?;
            if !(1..=MAX_LEASE_TTL_MS).contains(&ms) {
                return Err(error(
                    &format!("{at}.lease_ttl"),
                    "lease_ttl must be from 1 ms to 1 day",
                ));
            }
            ms
        }
    };
    let (max_wait_ms, max_queue) = match queue {
        None => (0, 0),
        Some(queue) => {
            let wait =
                parse_ms(&queue.max_wait).map_err(|m| error(&format!("{at}.queue.max_wait"), m))?;
            if !(1..=60_000).contains(&wait) {
                return Err(error(
                    &format!("{at}.queue.max_wait"),
                    "max_wait must be from 1 ms to 60 s",
                ));
            }
            let len = queue.max_len.unwrap_or(100);
            if !(1..=10_000).contains(&len) {
                return Err(error(
                    &format!("{at}.queue.max_len"),
                    "max_len must be from 1 to 10000",
                ));
            }
            (wait, len as u32)
        }
    };
    Ok(Some(Concurrency {
        limit,
        lease_ttl_ms,
        max_wait_ms,
        max_queue,
    }))
}
