//! The Durable Object that holds one key's state: single-threaded, so a
//! decision and its write happen with nothing in between; SQLite keeps what it
//! admitted through restarts; one alarm sweeps. The ledger decides, `sql`
//! writes, and only a request waiting for a lease awaits something else.

mod meter;
mod sql;

use sql::Tables;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use worker::wasm_bindgen::JsValue;
use worker::{
    console_error, durable_object, Delay, DurableObject, Env, Request, Response, Result, State,
};

use super::client::Objects;
use super::clock::now_ms;
use super::rpc::{self, Served, Serving};
use super::storage::set_alarm_at;
use crate::http::api::THROTTLE_SLOT;
use crate::http::problem::{Code, Problem};
use crate::input::scan::FromScan;
use crate::ledger::blocks::Taken;
use crate::ledger::{Ask, BanPolicy, Expired, LeaseAsk, Ledger, Outcome, Stock, StockAsk, Write};
use crate::limit::gcra::GcraPolicy;
use crate::limit::lease::Lease;
use crate::limit::Spec;
use crate::objects::name::Scope;
use crate::objects::protocol::{
    CheckRequest, ControlRequest, Inspection, KeyBanRequest, KeyState, LeaseRequest, LimiterCall,
    LimiterReply, OverrideRequest, PeekRequest, SettleAnswer, SettleRequest, StockRequest,
    ThrottleRequest, WireOverride,
};
use crate::objects::queue::Queue;
use crate::sale::Seconds;

#[durable_object]
pub struct Limiter {
    key: Rc<Key>,
}

/// The object's state and its work; shared, so that an RPC call's future
/// can own it (`rpc::answer_now`).
struct Key {
    state: State,
    /// For a sold-out quota's part, to tell its siblings of its stock.
    env: Env,
    inner: RefCell<Inner>,
}

/// How long a part waits for a sibling to take its word on its stock.
const TELL_MS: u64 = 2_000;

/// A check that waits for a lease, and where its answer goes.
struct Waiting {
    check: Parsed,
    reply: oneshot::Sender<Outcome>,
}

/// A check request, validated.
struct Parsed {
    specs: Vec<(String, Spec)>,
    cost: u32,
    ban: Option<BanPolicy>,
    lease: Option<LeaseAsk>,
}

impl Parsed {
    fn ask(&self) -> Ask<'_> {
        Ask {
            specs: &self.specs,
            cost: self.cost,
            ban: self.ban.as_ref(),
            lease: self.lease.as_ref(),
        }
    }
}

#[derive(Default)]
struct Inner {
    ledger: Ledger,
    /// Whether the ledger has been read back from storage.
    loaded: bool,
    /// Which tables exist: none on a new object and after the sweep frees
    /// storage, so that reading never creates storage.
    tables: Tables,
    /// When the alarm is set for, as far as this instance knows.
    alarm_ms: Option<u64>,
    /// Checks this instance has served, for measuring how many requests
    /// reach an object at all.
    checks: u64,
    waiting: Queue<Waiting>,
    /// A global quota's part: its decisions per second, for the sale's
    /// view (memory only: a restart counts from zero again).
    seconds: Seconds,
}

impl DurableObject for Limiter {
    fn new(state: State, env: Env) -> Self {
        Limiter {
            key: Rc::new(Key {
                state,
                env,
                inner: RefCell::new(Inner::default()),
            }),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let text = req.text().await.unwrap_or_default();
        rpc::response(self.key.serve_text(&text).await)
    }

    async fn alarm(&self) -> Result<Response> {
        self.key.alarm().await
    }
}

#[worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
impl Limiter {
    /// One call by RPC: the call's JSON in, the reply's out. A decision
    /// on a loaded object awaits nothing, so it is answered at once,
    /// without a promise and a turn of the event loop
    /// (`rpc::answer_now`).
    pub fn serve(&self, text: String) -> std::result::Result<JsValue, JsValue> {
        let key = Rc::clone(&self.key);
        rpc::answer_now(async move { key.serve_text(&text).await })
    }
}

/// A call's reply, or the problem that says why it cannot be served.
type Answer = std::result::Result<LimiterReply, Problem>;

impl Key {
    async fn alarm(&self) -> Result<Response> {
        meter::count(|m| m.alarms += 1);
        self.load().await?;
        let now = now_ms();
        let expired = {
            let mut inner = self.inner.borrow_mut();
            inner.alarm_ms = None;
            inner.ledger.sweep(now)
        };
        let freed_leases = expired.iter().any(|e| matches!(e, Expired::Lease { .. }));
        self.delete(expired).await?;
        if freed_leases {
            self.serve_waiting().await?;
        }
        self.tell_siblings().await?;
        Response::empty()
    }

    /// A sold-out quota's part tells the siblings it owes its word on its
    /// stock, in its alarm (no request waits on it); a call that fails is
    /// made again a while later, the others with it.
    async fn tell_siblings(&self) -> Result<()> {
        let now = now_ms();
        let (before, owed) = {
            let inner = self.inner.borrow();
            let stock = inner.ledger.stock();
            let owed = stock.and_then(|s| {
                let (to, told, due_ms) = s.owed()?;
                (due_ms <= now).then(|| (to.to_vec(), told, s.name.clone(), s.ask))
            });
            (stock.cloned(), owed)
        };
        let Some((to, told, name, ask)) = owed else {
            return Ok(());
        };
        let objects = Objects::new(&self.env, TELL_MS);
        for part in to {
            let Some(sibling) = Scope::sibling(&name, part) else {
                continue;
            };
            let request = StockRequest {
                key: sibling.as_str().to_string(),
                from: ask.part,
                ask: StockAsk { part, ..ask },
                told,
            };
            let told_it = objects.tell_stock(request).await;
            let mut inner = self.inner.borrow_mut();
            match told_it {
                Ok(()) => inner.ledger.told(Some(part), told, now),
                Err(e) => {
                    console_error!("sluice: {name} could not tell {}: {e}", sibling.as_str());
                    inner.ledger.told(None, told, now);
                    break;
                }
            }
        }
        self.judge_stock(before).await
    }

    /// A part of a sold-out quota judges its stock after a call
    /// (`ledger::stock`), from what it stored (`before`).
    async fn judge_stock(&self, before: Option<Stock>) -> Result<()> {
        let now = now_ms();
        let (writes, expired) = {
            let mut inner = self.inner.borrow_mut();
            if before.is_none() && inner.ledger.stock().is_none() {
                return Ok(());
            }
            inner.ledger.judge_stock(before.as_ref(), now)
        };
        self.persist(writes, now).await?;
        self.delete(expired).await
    }

    /// [`Self::serve_call`], boxed: `fetch` and `serve` share one copy of
    /// its code in the wasm.
    fn serve_text<'a>(&'a self, text: &'a str) -> Serving<'a> {
        Box::pin(self.serve_call(text))
    }

    /// One call from the worker, by RPC or by `fetch`: parsed in Rust
    /// from its text (`Request::json` would have JavaScript parse it and
    /// then walk the result back into Rust with a wasm↔JS call per field
    /// and value).
    async fn serve_call(&self, text: &str) -> Result<Served> {
        meter::count(|m| m.requests += 1);
        self.load().await?;
        let Ok(call) = LimiterCall::from_json(text) else {
            return Ok(Err(Problem::invalid("body", "malformed key object call")));
        };
        let before = self.inner.borrow().ledger.stock().cloned();
        let answer = match call {
            LimiterCall::Check(check) => self.check(check).await?,
            LimiterCall::Throttle(request) => self.throttle(request).await?,
            LimiterCall::Renew(request) => self.renew(request).await?,
            LimiterCall::Release(request) => self.release(request).await?,
            LimiterCall::Peek(request) => self.peek(&request),
            LimiterCall::Reset(_) => self.reset().await?,
            LimiterCall::Settle(request) => self.settle(request).await?,
            LimiterCall::Override(request) => self.set_override(request).await?,
            LimiterCall::Ban(request) => self.set_ban(request).await?,
            LimiterCall::Control(request) => self.set_control(request).await?,
            LimiterCall::Stock(request) => self.take_told(request),
            LimiterCall::Inspect => Ok(LimiterReply::Inspection(self.inspect()?)),
        };
        self.judge_stock(before).await?;
        Ok(match answer {
            Ok(reply) => Ok(crate::json::to_string(&reply)),
            Err(problem) => Err(problem),
        })
    }

    async fn check(&self, check: CheckRequest) -> Result<Answer> {
        let reports = match check.reports() {
            Ok(reports) => reports,
            Err(e) => return Ok(Err(Problem::invalid("body", e.0))),
        };
        if let Some(ask) = check.stock {
            let policies = check.policies().unwrap_or_default();
            let [share] = policies.as_slice() else {
                return Ok(Err(Problem::invalid(
                    "stock",
                    "a sold-out quota has one policy",
                )));
            };
            if !stock_fits(ask) {
                return Ok(Err(Problem::invalid("stock", "no such part")));
            }
            self.inner
                .borrow_mut()
                .ledger
                .ask_stock(&check.key, ask, share);
        }
        // A lease is decided call by call: no block goes with one. A
        // reservation's may (the isolate holds its own reservations from
        // blocks pending until they are settled).
        let block = check.block.as_ref().filter(|_| check.lease.is_none());
        let parsed = match (check.policies(), check.ban()) {
            (Ok(specs), Ok(ban)) => Parsed {
                specs,
                cost: check.cost,
                ban,
                lease: check.lease,
            },
            (Err(e), _) | (_, Err(e)) => return Ok(Err(Problem::invalid("body", e.0))),
        };
        let now = now_ms();
        let mut taken = Taken::default();
        if !reports.is_empty() {
            taken = self.inner.borrow_mut().ledger.take_reports(
                &reports,
                &parsed.specs,
                parsed.ban.as_ref(),
                now,
            );
            self.inner
                .borrow_mut()
                .seconds
                .count_reported(now, taken.admitted);
        }
        let (mut outcome, mut writes) = {
            let mut inner = self.inner.borrow_mut();
            inner.checks += 1;
            let conflict = check
                .refuse_conflicts
                .then(|| inner.ledger.conflict(&parsed.specs, now))
                .flatten();
            let reserve = check
                .reserve
                .as_ref()
                .map(|r| (r.id.as_str(), now.saturating_add(r.ttl_ms)));
            let decided = match conflict {
                Some(name) => (Outcome::conflicting(name), Vec::new()),
                None => inner
                    .ledger
                    .check_inviting(&parsed.ask(), reserve, check.invitations, now),
            };
            if check.watched {
                inner.seconds.count(now, decided.0.allowed);
            }
            decided
        };
        if let Some(ask) = block.filter(|_| outcome.allowed) {
            let (grants, granted) = self.inner.borrow_mut().ledger.grant_blocks(
                &parsed.specs,
                &ask.holder,
                ask.rate,
                now,
            );
            writes.extend(granted);
            outcome.blocks = grants;
        }
        // The reports', the decision's and the grants' rows, merged.
        let (writes, expired) = taken.rows(writes);
        self.persist(writes, now).await?;
        if !reports.is_empty() {
            self.delete(expired).await?;
        }
        let queue = check
            .queue
            .filter(|q| q.max_wait_ms > 0 && outcome.lease.as_ref().is_some_and(|l| l.refused));
        let Some(queue) = queue else {
            return Ok(Ok(LimiterReply::Outcome(outcome)));
        };
        if self.inner.borrow().waiting.len() >= queue.max_len as usize {
            return Ok(Ok(LimiterReply::Outcome(outcome)));
        }
        let answer = self.wait(parsed, queue.max_wait_ms).await;
        Ok(Ok(LimiterReply::Outcome(answer.unwrap_or(outcome))))
    }

    /// Waits, first come first served, for a release to grant the lease;
    /// `None` if none came within `max_wait_ms`.
    async fn wait(&self, check: Parsed, max_wait_ms: u64) -> Option<Outcome> {
        let (reply, mut answer) = oneshot::channel();
        let id = self
            .inner
            .borrow_mut()
            .waiting
            .push(Waiting { check, reply });
        let deadline = Delay::from(Duration::from_millis(max_wait_ms));
        match select(&mut answer, deadline).await {
            Either::Left((served, _)) => served.ok(),
            Either::Right(_) => {
                // Leave the queue first: after that nobody can answer, so
                // anything not yet received never will be.
                self.inner.borrow_mut().waiting.remove(id);
                answer.try_recv().ok().flatten()
            }
        }
    }

    /// Offers capacity freed by a release or a lapse to waiting checks.
    async fn serve_waiting(&self) -> Result<()> {
        let now = now_ms();
        let served = {
            let mut inner = self.inner.borrow_mut();
            let Inner {
                ledger, waiting, ..
            } = &mut *inner;
            waiting.serve(|w| {
                let (outcome, writes) = ledger.check(&w.check.ask(), now);
                let still_waiting = outcome.lease.as_ref().is_some_and(|l| l.refused);
                (!still_waiting).then_some((outcome, writes))
            })
        };
        for (waiting, (outcome, writes)) in served {
            self.persist(writes, now).await?;
            // A waiter that gave up has left the queue, so it cannot be here.
            let _ = waiting.reply.send(outcome);
        }
        Ok(())
    }

    async fn renew(&self, request: LeaseRequest) -> Result<Answer> {
        let now = now_ms();
        let (renewed, writes) =
            self.inner
                .borrow_mut()
                .ledger
                .renew(&request.id, request.ttl_ms, now);
        self.persist(writes, now).await?;
        Ok(Ok(lease_reply(renewed)))
    }

    async fn release(&self, request: LeaseRequest) -> Result<Answer> {
        let now = now_ms();
        let (released, writes, expired) = self.inner.borrow_mut().ledger.release(&request.id, now);
        self.persist(writes, now).await?;
        let freed = !expired.is_empty();
        self.delete(expired).await?;
        if freed {
            self.serve_waiting().await?;
        }
        Ok(Ok(lease_reply(released)))
    }

    async fn throttle(&self, request: ThrottleRequest) -> Result<Answer> {
        let policy = match GcraPolicy::new(request.max_burst, request.count, request.period_ms) {
            Ok(policy) => policy,
            Err(e) => return Ok(Err(Problem::invalid(e.field(), e.to_string()))),
        };
        let now = now_ms();
        let answer =
            self.inner
                .borrow_mut()
                .ledger
                .throttle(THROTTLE_SLOT, policy, now, request.quantity);
        let Some((throttle, writes)) = answer else {
            return Ok(Err(Problem::new(
                Code::Internal,
                "the throttle slot holds another algorithm",
            )));
        };
        self.persist(writes, now).await?;
        Ok(Ok(LimiterReply::Throttle(throttle)))
    }

    /// An operator's reset: forget the key's state (but for what its
    /// blocks still out hold), and free storage if nothing else is held.
    async fn reset(&self) -> Result<Answer> {
        let now = now_ms();
        let (writes, expired) = self.inner.borrow_mut().ledger.reset(now);
        let forgot = !expired.is_empty() || !writes.is_empty();
        self.delete(expired).await?;
        self.persist(writes, now).await?;
        Ok(Ok(LimiterReply::Reset { forgot }))
    }

    /// A key's state for an operator, under the policies the request
    /// names, changing nothing.
    fn peek(&self, request: &PeekRequest) -> Answer {
        let policies = match request.policies() {
            Ok(policies) => policies,
            Err(e) => return Err(Problem::invalid("body", e.0)),
        };
        let mut inner = self.inner.borrow_mut();
        let now = now_ms();
        let (slots, ban) = match policies {
            Some(policies) => inner.ledger.peek_in_force(&policies, now),
            None => inner.ledger.peek(now),
        };
        Ok(LimiterReply::Key(KeyState {
            slots,
            ban,
            leases: inner.ledger.leases().to_vec(),
            overridden: inner.ledger.overridden().map(WireOverride::encode),
            control: inner.ledger.control().cloned(),
            seconds: inner.seconds.with_log(now, inner.ledger.admissions()),
        }))
    }

    /// Keeps or refunds a reservation. A refund that leaves the key empty
    /// frees its storage instead of writing what it took back.
    async fn settle(&self, request: SettleRequest) -> Result<Answer> {
        let now = now_ms();
        let (settled, writes, expired) =
            self.inner
                .borrow_mut()
                .ledger
                .settle(&request.reservation, request.keep, now);
        if !self.inner.borrow().ledger.is_empty(now) {
            self.persist(writes, now).await?;
        }
        self.delete(expired).await?;
        Ok(Ok(match settled {
            Some(settled) => LimiterReply::Settled(SettleAnswer {
                kept: settled.kept,
                repeated: settled.repeated,
            }),
            None => LimiterReply::NoSuchReservation,
        }))
    }

    /// Sets or lifts a key's override; answers the one it replaced.
    async fn set_override(&self, request: OverrideRequest) -> Result<Answer> {
        let next = match request.overridden.as_ref().map(WireOverride::decode) {
            None => None,
            Some(Ok(next)) => Some(next),
            Some(Err(e)) => return Ok(Err(Problem::invalid("override", e.0))),
        };
        let now = now_ms();
        let (previous, writes, expired) = self.inner.borrow_mut().ledger.set_override(next);
        self.persist(writes, now).await?;
        self.delete(expired).await?;
        Ok(Ok(LimiterReply::Override {
            previous: previous.as_ref().map(WireOverride::encode),
        }))
    }

    /// Bans the key on its rule, or lifts its ban; answers the ban that
    /// was in force.
    async fn set_ban(&self, request: KeyBanRequest) -> Result<Answer> {
        let now = now_ms();
        let next = request.ban.map(|ban| (ban.until_ms, ban.reason));
        let (previous, writes, expired) = self.inner.borrow_mut().ledger.set_ban(next, now);
        self.persist(writes, now).await?;
        self.delete(expired).await?;
        Ok(Ok(LimiterReply::Ban { previous }))
    }

    /// A sibling part's word on its stock; answers the state in force
    /// before it (the judgement after the call may close or open it).
    fn take_told(&self, request: StockRequest) -> Answer {
        if !stock_fits(request.ask) || request.from >= request.ask.parts {
            return Err(Problem::invalid("stock", "no such part"));
        }
        let mut inner = self.inner.borrow_mut();
        let previous = inner.ledger.control().cloned();
        let StockRequest {
            key,
            from,
            ask,
            told,
        } = request;
        inner.ledger.take_told(&key, ask, from, told);
        Ok(LimiterReply::Control { previous })
    }

    /// Pauses, closes or opens the rule this object is a part of, from its
    /// next decision; answers the state that was in force.
    async fn set_control(&self, request: ControlRequest) -> Result<Answer> {
        let (previous, writes, expired) =
            self.inner.borrow_mut().ledger.set_control(request.control);
        self.persist(writes, now_ms()).await?;
        self.delete(expired).await?;
        Ok(Ok(LimiterReply::Control { previous }))
    }

    /// Writes what a decision recorded and re-arms the alarm.
    async fn persist(&self, writes: Vec<Write>, now: u64) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let storage_sql = self.state.storage().sql();
        let mut tables = self.inner.borrow().tables;
        let written = writes
            .into_iter()
            .try_for_each(|write| sql::put(&storage_sql, &mut tables, write));
        self.inner.borrow_mut().tables = tables;
        written?;
        self.rearm(now)
    }

    /// Deletes what the ledger expired; frees the whole storage once the
    /// ledger is empty, and otherwise re-arms for the next sweep. Nothing
    /// is reported anywhere: a key's lifecycle stays inside its object.
    async fn delete(&self, expired: Vec<Expired>) -> Result<()> {
        let (empty, mut tables) = {
            let inner = self.inner.borrow();
            (inner.ledger.is_empty(now_ms()), inner.tables)
        };
        if empty {
            if tables.any() {
                // Whether deleteAll also clears the alarm depends on the
                // compatibility date; clearing it here keeps memory true.
                let storage = self.state.storage();
                storage.delete_all().await?;
                storage.delete_alarm().await?;
                let mut inner = self.inner.borrow_mut();
                inner.tables = Tables::default();
                inner.alarm_ms = None;
            }
            return Ok(());
        }
        let storage_sql = self.state.storage().sql();
        let removed = expired
            .into_iter()
            .try_for_each(|gone| sql::remove(&storage_sql, &mut tables, gone));
        self.inner.borrow_mut().tables = tables;
        removed?;
        self.rearm(now_ms())
    }

    fn inspect(&self) -> Result<Inspection> {
        // Read before counting the rows, so the meter leaves out the
        // inspection's own reads.
        let meter = meter::read();
        let inner = self.inner.borrow();
        let stored_rows = sql::row_count(&self.state.storage().sql(), inner.tables)?;
        Ok(Inspection {
            held: !inner.ledger.is_empty(now_ms()),
            stored_rows,
            has_storage: inner.tables.any(),
            alarm_ms: inner.alarm_ms,
            checks: inner.checks,
            meter,
        })
    }

    /// Reads the ledger back from storage once per instance.
    async fn load(&self) -> Result<()> {
        if self.inner.borrow().loaded {
            return Ok(());
        }
        let storage_sql = self.state.storage().sql();
        let tables = sql::existing(&storage_sql)?;
        let ledger = sql::load(&storage_sql, tables)?;
        // An object without tables has had nothing stored since it began or
        // since its sweep freed its storage (alarm and all), so a new key's
        // first request skips the alarm lookup.
        let alarm_ms = if tables.any() {
            self.state
                .storage()
                .get_alarm()
                .await?
                .and_then(|at| u64::try_from(at).ok())
        } else {
            None
        };
        let mut inner = self.inner.borrow_mut();
        if !inner.loaded {
            *inner = Inner {
                ledger,
                loaded: true,
                tables,
                alarm_ms,
                ..Inner::default()
            };
        }
        Ok(())
    }

    /// Moves the alarm earlier if the ledger is due sooner than it is set.
    fn rearm(&self, now: u64) -> Result<()> {
        let (due, armed) = {
            let inner = self.inner.borrow();
            (inner.ledger.next_sweep(now), inner.alarm_ms)
        };
        let Some(due) = due.filter(|&due| armed.is_none_or(|armed| due < armed)) else {
            return Ok(());
        };
        set_alarm_at(&self.state, due)?;
        self.inner.borrow_mut().alarm_ms = Some(due);
        Ok(())
    }
}

/// Whether a stock's part is one of a quota's parts.
fn stock_fits(ask: StockAsk) -> bool {
    ask.part < ask.parts && ask.parts <= crate::limit::split::MAX_PARTS
}

fn lease_reply(lease: Option<Lease>) -> LimiterReply {
    lease.map_or(LimiterReply::NoSuchLease, LimiterReply::Lease)
}
