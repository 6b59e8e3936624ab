//! Property test for the admin API's paged ban list: bans spread over 16
//! hubs (a manual ban in every hub, a rule's ban in the one its isolate
//! reported to), each hub answering the first `limit` after the cursor in
//! order, the worker merging them: following the cursors lists every ban
//! exactly once, newest first, and no page holds more than `limit`.

use proptest::prelude::*;
use sluice::isolate::banlist::BanRecord;
use sluice::isolate::pages::{after_cursor, ban_order, merge_bans, BanCursor};

const HUBS: usize = 16;

/// What a hub answers: its first `limit` bans after `cursor`.
fn hub_page(hub: &[BanRecord], cursor: Option<&BanCursor>, limit: usize) -> Vec<BanRecord> {
    let mut page: Vec<BanRecord> = hub
        .iter()
        .filter(|ban| cursor.is_none_or(|c| after_cursor(ban, c)))
        .cloned()
        .collect();
    page.sort_by(ban_order);
    page.truncate(limit);
    page
}

fn bans() -> impl Strategy<Value = Vec<(u8, u8, bool, usize)>> {
    // (key, start, manual, the hub a rule's ban was reported to); few
    // distinct starts, so that ties are common.
    prop::collection::vec((0u8..40, 0u8..6, any::<bool>(), 0..HUBS), 0..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn following_the_cursors_lists_every_ban_once_newest_first(bans in bans(), limit in 1usize..12) {
        let mut hubs = vec![Vec::<BanRecord>::new(); HUBS];
        let mut truth: Vec<BanRecord> = Vec::new();
        for (key, start, manual, hub) in bans {
            let ban = BanRecord {
                key: format!("k{key}"),
                until_ms: u64::MAX,
                reason: String::new(),
                source: if manual { "manual".into() } else { "rule:api".into() },
                started_ms: u64::from(start),
            };
            // A hub holds one ban per key and source (the later replaces).
            if truth.iter().any(|b| b.key == ban.key && b.source == ban.source) {
                continue;
            }
            truth.push(ban.clone());
            if manual {
                hubs.iter_mut().for_each(|h| h.push(ban.clone()));
            } else {
                hubs[hub].push(ban);
            }
        }
        truth.sort_by(ban_order);

        let mut listed = Vec::new();
        let mut cursor: Option<BanCursor> = None;
        for _ in 0..=truth.len() + 1 {
            let pages = hubs.iter().map(|hub| hub_page(hub, cursor.as_ref(), limit)).collect();
            let (page, next) = merge_bans(pages, limit);
            prop_assert!(page.len() <= limit);
            listed.extend(page);
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        prop_assert!(cursor.is_none(), "the pages came to an end");
        prop_assert_eq!(listed, truth);
    }
}
