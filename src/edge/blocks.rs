//! The isolate's admission blocks (`gate::local`): one per isolate, with a
//! holder id drawn at random when the isolate first needs it, and the
//! calls a check becomes. A block lapsed before its key's next call is
//! reported in the background, from the next request this isolate serves.
//! A refusal that may be for this isolate's own block waits for the ask
//! it raced to land (every call has a deadline), and is decided again if
//! the ask brought a block (`isolate::flights`).

use std::cell::RefCell;
use std::time::Duration;

use worker::{console_error, Context, Delay, Result};

use super::client::{new_lease_id, Objects};
use super::clock::now_ms;
use crate::gate::local::{Call, Local, LocalBlocks};
use crate::isolate::flights::AGAIN;
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
            *blocks = made();
        }
        blocks.as_mut().map(f)
    })
}

/// Out of line: `with` is instantiated once per caller.
#[inline(never)]
fn made() -> Option<LocalBlocks> {
    Some(LocalBlocks::new(new_lease_id().ok()?))
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
    let mut again = 0;
    loop {
        let now = now_ms();
        // Decided first: a call to this key's object takes its blocks,
        // lapsed ones included, so they are reported with it, not by a
        // call of their own.
        let decided = with(|blocks| blocks.decide(request, local, now));
        report_due(objects, ctx, now, &request.key);
        let call = match decided {
            Some(Local::Admitted(outcome)) => return Ok(outcome),
            Some(Local::Call(call)) => call,
            None => return objects.check_request(request).await,
        };
        let answer = fly(objects, &call).await;
        if let Some(asking) = landed(&call, answer.as_ref().ok()).filter(|_| again < AGAIN) {
            if asking {
                ask_landed(&call.request.key).await;
            }
            if with(|blocks| blocks.again(&call)) == Some(true) {
                again += 1;
                continue;
            }
        }
        return answer;
    }
}

/// Makes `call`; dropped unanswered (its request cancelled), it lands as
/// failed, so that its key is not left asking.
async fn fly(objects: &Objects, call: &Call) -> Result<Outcome> {
    let mut unlanded = Unlanded(Some(call));
    let answer = objects.check_request(&call.request).await;
    unlanded.0 = None;
    answer
}

struct Unlanded<'a>(Option<&'a Call>);

impl Drop for Unlanded<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.0 {
            landed(call, None);
        }
    }
}

/// Takes `call`'s answer. `Some` when its own refusal may be for this
/// isolate's blocks ([`LocalBlocks::answered`]), saying whether an ask of
/// its key is still in flight.
fn landed(call: &Call, outcome: Option<&Outcome>) -> Option<bool> {
    let key = &call.request.key;
    let answered = |blocks: &mut LocalBlocks| (blocks.answered(call, outcome), blocks.asking(key));
    let (look, asking) = with(answered).unwrap_or_default();
    look.then_some(asking)
}

/// Until `key` has no ask of this isolate in flight (each call lands by
/// its deadline), looked at on this request's own timer: woken by the
/// request whose ask landed, its continuation would run in that request's
/// context, where the runtime refuses this one's I/O ("Cannot perform I/O
/// on behalf of a different request").
async fn ask_landed(key: &str) {
    while with(|blocks| blocks.asking(key)).unwrap_or(false) {
        Delay::from(Duration::from_millis(1)).await;
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
            let answer = fly(&objects, &call).await;
            if let Err(e) = &answer {
                console_error!("sluice: could not report admission blocks: {e}");
            }
            landed(&call, answer.as_ref().ok());
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
