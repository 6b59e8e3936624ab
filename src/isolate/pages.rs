//! The admin API's paged lists merged from the hubs (bans newest first, a
//! rule's top keys largest first): each hub answers a page after the cursor,
//! the worker merges them, drops copies and keeps a page, so no call grows
//! with what the hubs hold and no item is on two pages.

use std::cmp::Ordering;

use crate::input::scan::{FromScan, Read, Scan};
use crate::isolate::banlist::BanRecord;
use crate::isolate::top::Counted;

/// Where a page of bans ends: the last ban's start, key and source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BanCursor(pub u64, pub String, pub String);

impl crate::json::Write for BanCursor {
    fn write(&self, out: &mut crate::json::Text) {
        (self.0, &self.1, &self.2).write(out);
    }
}

impl BanCursor {
    pub fn of(ban: &BanRecord) -> BanCursor {
        BanCursor(ban.started_ms, ban.key.clone(), ban.source.clone())
    }
}

/// `[started_ms, key, source]`: a hub is sent one, and a page hands one out.
impl FromScan for BanCursor {
    fn from_scan(scan: &mut Scan<'_>) -> Read<BanCursor> {
        let (started_ms, key, source) = FromScan::from_scan(scan)?;
        Ok(BanCursor(started_ms, key, source))
    }
}

/// Bans newest first, then by key and source: the order of every page.
pub fn ban_order(a: &BanRecord, b: &BanRecord) -> Ordering {
    b.started_ms
        .cmp(&a.started_ms)
        .then_with(|| a.key.cmp(&b.key))
        .then_with(|| a.source.cmp(&b.source))
}

/// Whether `ban` comes after `cursor` in [`ban_order`].
pub fn after_cursor(ban: &BanRecord, cursor: &BanCursor) -> bool {
    let BanCursor(started_ms, key, source) = cursor;
    ban.started_ms
        .cmp(started_ms)
        .reverse()
        .then_with(|| ban.key.as_str().cmp(key))
        .then_with(|| ban.source.as_str().cmp(source))
        == Ordering::Greater
}

/// One page of bans from each hub's page (each at most `limit`, in
/// [`ban_order`], after the same cursor): the first `limit` of them all,
/// each once, and the cursor of the next page, if there may be one.
pub fn merge_bans(hubs: Vec<Vec<BanRecord>>, limit: usize) -> (Vec<BanRecord>, Option<BanCursor>) {
    let full = hubs.iter().any(|page| page.len() >= limit);
    let mut bans: Vec<BanRecord> = hubs.into_iter().flatten().collect();
    bans.sort_by(ban_order);
    bans.dedup_by(|b, a| a.key == b.key && a.source == b.source);
    let more = full || bans.len() > limit;
    bans.truncate(limit);
    let next = bans.last().filter(|_| more).map(BanCursor::of);
    (bans, next)
}

/// Where a page of top keys ends: the last key's count and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopCursor(pub u64, pub String);

impl crate::json::Write for TopCursor {
    fn write(&self, out: &mut crate::json::Text) {
        (self.0, &self.1).write(out);
    }
}

/// `[count, key]`.
impl FromScan for TopCursor {
    fn from_scan(scan: &mut Scan<'_>) -> Read<TopCursor> {
        let (count, key) = FromScan::from_scan(scan)?;
        Ok(TopCursor(count, key))
    }
}

/// A page of `ranked` (largest first, as [`crate::isolate::top::TopKeys::ranked`]
/// orders it): the first `limit` after `cursor`, and the next cursor.
pub fn page_top(
    ranked: Vec<Counted>,
    cursor: Option<&TopCursor>,
    limit: usize,
) -> (Vec<Counted>, Option<TopCursor>) {
    let mut rest: Vec<Counted> = ranked
        .into_iter()
        .filter(|c| {
            cursor.is_none_or(|TopCursor(count, key)| {
                c.count < *count || (c.count == *count && c.key.as_str() > key.as_str())
            })
        })
        .collect();
    let more = rest.len() > limit;
    rest.truncate(limit);
    let next = rest
        .last()
        .filter(|_| more)
        .map(|c| TopCursor(c.count, c.key.clone()));
    (rest, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ban(key: &str, started_ms: u64, source: &str) -> BanRecord {
        BanRecord {
            key: key.into(),
            until_ms: u64::MAX,
            reason: String::new(),
            source: source.into(),
            started_ms,
        }
    }

    #[test]
    fn bans_are_newest_first_then_by_key_and_source() {
        let mut bans = [
            ban("b", 5, "manual"),
            ban("a", 5, "rule:x"),
            ban("z", 9, "manual"),
            ban("a", 5, "manual"),
        ];
        bans.sort_by(ban_order);
        let order: Vec<(&str, &str)> = bans
            .iter()
            .map(|b| (b.key.as_str(), b.source.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("z", "manual"),
                ("a", "manual"),
                ("a", "rule:x"),
                ("b", "manual")
            ]
        );
        let cursor = BanCursor::of(&bans[1]);
        let after: Vec<bool> = bans.iter().map(|b| after_cursor(b, &cursor)).collect();
        assert_eq!(after, [false, false, true, true]);
    }

    #[test]
    fn a_merged_page_drops_the_copies_every_hub_holds() {
        let manual = ban("m", 7, "manual");
        let hubs = vec![
            vec![manual.clone(), ban("a", 3, "rule:x")],
            vec![manual.clone()],
            vec![ban("b", 4, "rule:x")],
        ];
        let (page, next) = merge_bans(hubs.clone(), 2);
        assert_eq!(page, [manual.clone(), ban("b", 4, "rule:x")]);
        assert_eq!(next, Some(BanCursor(4, "b".into(), "rule:x".into())));
        let (all, last) = merge_bans(hubs, 5);
        assert_eq!(all.len(), 3);
        assert_eq!(last, None);
    }

    #[test]
    fn top_keys_page_after_their_cursor() {
        let counted = |key: &str, count| Counted {
            key: key.into(),
            count,
            error: 0,
        };
        let ranked = vec![
            counted("a", 5),
            counted("b", 3),
            counted("c", 3),
            counted("d", 1),
        ];
        let (first, next) = page_top(ranked.clone(), None, 2);
        assert_eq!(first, [counted("a", 5), counted("b", 3)]);
        let (second, last) = page_top(ranked.clone(), next.as_ref(), 2);
        assert_eq!(second, [counted("c", 3), counted("d", 1)]);
        assert_eq!(last, None);
        assert_eq!(page_top(ranked, None, 4).1, None);
    }
}
