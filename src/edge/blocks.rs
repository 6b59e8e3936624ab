//! The isolate's admission blocks (`gate::local`): one per isolate, with a
//! holder id drawn at random when the isolate first needs it, and the
//! calls a check becomes. A block lapsed before its key's next call is
//! reported in the background, from the next request this isolate serves.

use std::cell::RefCell;

use worker::{console_error, Context, Result};

use super::client::{new_lease_id, Objects};
use super::clock::now_ms;
use crate::gate::local::{Local, LocalBlocks};
use crate::ledger::Outcome;
use crate::objects::name::Scope;
use crate::objects::protocol::{CheckRequest, SettleRequest};

thread_local! {
    static BLOCKS: RefCell<Option<LocalBlocks>> = const { RefCell::new(None) };
}

/// Runs `f` on the isolate's blocks, made on first use; `None` when the
/// platform has no randomness for a holder id (then every check is a
/// call, as without blocks).
fn with<R>(f: impl FnOnce(&mut LocalBlocks) -> R) -> Option<R> {
    BLOCKS.with(|blocks| {
        let mut blocks = blocks.borrow_mut();
        if blocks.is_none() {
            *blocks = Some(LocalBlocks::new(new_lease_id().ok()?));
        }
        blocks.as_mut().map(f)
    })
}

/// `request`'s answer: from a block held when `local` allows and one can
/// take it, else from its object, with this isolate's reports of that
/// object and an ask for blocks.
pub async fn check(
    objects: &Objects,
    ctx: &Context,
    request: &CheckRequest,
    local: bool,
) -> Result<Outcome> {
    let now = now_ms();
    // Decided first: a call to this key's object takes its blocks, lapsed
    // ones included, so they are reported with it, not by a call of their
    // own.
    let decided = with(|blocks| blocks.decide(request, local, now));
    report_due(objects, ctx, now, &request.key);
    match decided {
        Some(Local::Admitted(outcome)) => Ok(outcome),
        Some(Local::Call { request, sent }) => {
            let answer = objects.check_request(&request).await;
            with(|blocks| blocks.answered(&request, answer.as_ref().ok(), sent));
            answer
        }
        None => objects.check_request(request).await,
    }
}

/// The part of `scope`'s split quota (of `parts`) that a block this
/// isolate holds can admit into at `now_ms`, if any.
pub fn usable_part(scope: &Scope, parts: u32, now_ms: u64) -> Option<u32> {
    BLOCKS.with(|blocks| {
        let blocks = blocks.borrow();
        blocks.as_ref()?.usable(now_ms, |object| {
            scope.part_of(object).filter(|&part| part < parts)
        })
    })
}

/// Reports the blocks lapsed, or spent and not of `deciding`, each
/// object's in one call, in the background. A report lost on the way
/// leaves its block counted at the object until it lapses there: refusals
/// possible, never more admitted.
fn report_due(objects: &Objects, ctx: &Context, now: u64, deciding: &str) {
    for call in with(|blocks| blocks.due(now, deciding)).unwrap_or_default() {
        let objects = objects.clone();
        ctx.wait_until(async move {
            if let Err(e) = objects.check_request(&call).await {
                console_error!("sluice: could not report admission blocks: {e}");
            }
        });
    }
}

/// Keeps or refunds `settle`'s reservation in the isolate's blocks where
/// they hold it pending; false when they do not (the settle goes to the
/// object).
pub fn settle(settle: &SettleRequest) -> bool {
    with(|blocks| blocks.settle(settle)).unwrap_or(false)
}

/// What the isolate's blocks hold and did, for operators.
pub fn figures() -> crate::json::Json {
    BLOCKS
        .with(|blocks| blocks.borrow().as_ref().map(LocalBlocks::figures))
        .unwrap_or_else(|| crate::json!({"held": 0, "granted": 0, "admitted": 0, "settled": 0}))
}
