//! The isolate's [`Meter`]: what its key objects have cost so far.

use std::cell::Cell;

use crate::objects::protocol::Meter;

thread_local! {
    static METER: Cell<Meter> = Cell::new(Meter::default());
}

pub fn count(change: impl FnOnce(&mut Meter)) {
    METER.with(|meter| {
        let mut now = meter.get();
        change(&mut now);
        meter.set(now);
    });
}

pub fn read() -> Meter {
    METER.with(Cell::get)
}
