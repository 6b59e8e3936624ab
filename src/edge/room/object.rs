//! The Durable Object that runs one shard of a waiting room
//! (`crate::room::shard`): `shards` of them per room, named by
//! `ObjectName::room_shard`, each owning its share of the places and of
//! the rate, so no visitor's request ever reaches an object every visitor
//! shares. The shard decides and says what to write; `sql` writes it
//! before anything else can run, and the alarm does the lapses, expiries,
//! offers and the opening that fall due while nobody calls.

use std::cell::{Cell, RefCell};

use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use super::super::client::random_pair;
use super::super::clock::now_ms;
use super::super::rpc::{self, served_by_rpc, Served};
use super::super::storage::set_alarm_at;
use super::sql;
use crate::http::problem::Problem;
use crate::room::protocol::{Figures, RoomCall, RoomReply};
use crate::room::shard::{Change, Shard, Terms};

#[durable_object]
pub struct Room {
    state: State,
    /// `None` until read back from storage (or, for a new shard, until
    /// its first call brings its terms).
    shard: RefCell<Option<Shard>>,
    /// Whether storage holds the shard's state row.
    stored: Cell<bool>,
    /// When the alarm is set for, as far as this instance knows.
    alarm_ms: Cell<Option<u64>>,
    /// Calls this instance has served.
    calls: Cell<u64>,
}

impl DurableObject for Room {
    fn new(state: State, _env: Env) -> Self {
        Room {
            state,
            shard: RefCell::new(None),
            stored: Cell::new(false),
            alarm_ms: Cell::new(None),
            calls: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let text = req.text().await.unwrap_or_default();
        rpc::response(self.serve_text(&text).await)
    }

    async fn alarm(&self) -> Result<Response> {
        self.alarm_ms.set(None);
        self.load(None).await?;
        let seed = fresh_seed()?;
        let now = now_ms();
        if let Some(done) = self.operate(|shard| ((), shard.tick(now, &mut || seed))) {
            done?;
            self.rearm().await?;
        }
        Response::empty()
    }
}

served_by_rpc!(Room);

impl Room {
    /// One call from the worker, by RPC or by `fetch`.
    async fn serve_call(&self, text: &str) -> Result<Served> {
        self.calls.set(self.calls.get() + 1);
        let Ok(call) = RoomCall::from_json(text) else {
            return Ok(Err(Problem::invalid("body", "malformed room call")));
        };
        let terms = call.terms();
        if let Err(e) = terms.check() {
            return Ok(Err(Problem::invalid("terms", e)));
        }
        self.load(Some(terms)).await?;
        let seed = fresh_seed()?;
        let now = now_ms();
        let calls = self.calls.get();
        let answer = self.operate(|shard| {
            let mut draw = || seed;
            let mut changes = shard.set_terms(now, terms);
            let reply = match call {
                RoomCall::Visit(_, holding) => {
                    let (turn, done) = shard.visit(now, holding, &mut draw);
                    changes.extend(done);
                    RoomReply::Visit(turn, shard.status())
                }
                RoomCall::End(_, id) => {
                    let (ended, done) = shard.end(now, id, &mut draw);
                    changes.extend(done);
                    RoomReply::Ended(ended, shard.status())
                }
                RoomCall::Control(_, control) => {
                    let (previous, done) = shard.set_control(now, control, &mut draw);
                    changes.extend(done);
                    RoomReply::Control(previous, shard.status())
                }
                RoomCall::Inspect(_) | RoomCall::Reset(_) => {
                    changes.extend(match call {
                        RoomCall::Reset(_) => shard.reset(now, &mut draw),
                        _ => shard.tick(now, &mut draw),
                    });
                    RoomReply::Figures(Figures {
                        status: shard.status(),
                        history: shard.history().copied().collect(),
                        calls,
                    })
                }
            };
            (reply, changes)
        });
        match answer {
            Some(reply) => {
                let reply = reply?;
                self.rearm().await?;
                Ok(Ok(crate::json::to_string(&reply)))
            }
            None => Ok(Err(Problem::invalid("terms", "no shard to call"))),
        }
    }

    /// Reads the shard back once per instance; a shard that stored nothing
    /// yet starts under `terms` (an alarm brings none, and then there is
    /// nothing to do).
    async fn load(&self, terms: Option<Terms>) -> Result<()> {
        if self.shard.borrow().is_some() {
            return Ok(());
        }
        let loaded = sql::load(&self.state.storage().sql())?;
        let alarm_ms = match loaded {
            Some(_) => self
                .state
                .storage()
                .get_alarm()
                .await?
                .and_then(|at| u64::try_from(at).ok()),
            None => None,
        };
        if self.shard.borrow().is_some() {
            return Ok(());
        }
        let shard = match (loaded, terms) {
            (Some((stored_terms, stored)), _) => {
                self.stored.set(true);
                Shard::restore(stored_terms, stored)
            }
            (None, Some(terms)) => Shard::new(terms),
            (None, None) => return Ok(()),
        };
        *self.shard.borrow_mut() = Some(shard);
        self.alarm_ms.set(alarm_ms);
        Ok(())
    }

    /// Runs `op` on the shard and writes what it changed, with nothing in
    /// between; `None` when there is no shard.
    fn operate<T>(&self, op: impl FnOnce(&mut Shard) -> (T, Vec<Change>)) -> Option<Result<T>> {
        let mut slot = self.shard.borrow_mut();
        let shard = slot.as_mut()?;
        let (result, changes) = op(shard);
        let state = (shard.terms(), shard.counters());
        let new = !self.stored.get();
        if changes.is_empty() && !new {
            return Some(Ok(result));
        }
        let written = sql::apply(&self.state.storage().sql(), &changes, state, new);
        Some(written.map(|()| {
            self.stored.set(true);
            result
        }))
    }

    /// Sets the alarm for when the shard is next due, or clears it.
    async fn rearm(&self) -> Result<()> {
        let due = self.shard.borrow().as_ref().and_then(Shard::next_alarm);
        if due == self.alarm_ms.get() {
            return Ok(());
        }
        match due {
            Some(at) => set_alarm_at(&self.state, at)?,
            None => self.state.storage().delete_alarm().await?,
        }
        self.alarm_ms.set(due);
        Ok(())
    }
}

/// The seed a shard draws if it opens during this call.
fn fresh_seed() -> Result<u64> {
    let (a, b) = random_pair()?;
    Ok((u64::from(a) << 32) | u64::from(b))
}
