//! The Durable Object calls an isolate has made since it started, by the
//! binding called. `GET {prefix}/admin/stats` reports them under
//! `isolate.object_calls`, so that a load test (`npm run sale`) can say what
//! its requests cost in object requests, which is what the platform bills
//! and what bounds a hot object, without instrumenting the objects.

/// Calls per binding, in the order each binding was first called. There
/// are as many entries as the worker has object bindings (three), so a
/// list is the cheapest map.
#[derive(Debug, Default)]
pub struct ObjectCalls {
    counts: Vec<(&'static str, u64)>,
}

impl ObjectCalls {
    /// Counts one call to an object of `binding`, made or attempted (a
    /// call that fails or runs out of time was still sent).
    pub fn count(&mut self, binding: &'static str) {
        match self.counts.iter_mut().find(|(name, _)| *name == binding) {
            Some((_, calls)) => *calls += 1,
            None => self.counts.push((binding, 1)),
        }
    }

    /// `{"LIMITER": n, "HUB": n, …}`; a binding never called is absent.
    pub fn figures(&self) -> crate::json::Json {
        crate::json::sorted(self)
    }
}

/// Written in a sorted text ([`crate::json::sorted`]), the bindings come
/// in the order of their names.
impl crate::json::Write for ObjectCalls {
    fn write(&self, out: &mut crate::json::Text) {
        let mut fields = out.object();
        for (name, calls) in &self.counts {
            fields.field(name, calls);
        }
        fields.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_binding_apart() {
        let mut calls = ObjectCalls::default();
        assert_eq!(calls.figures().value(), serde_json::json!({}));
        for binding in ["LIMITER", "HUB", "LIMITER", "LIMITER"] {
            calls.count(binding);
        }
        assert_eq!(
            calls.figures().value(),
            serde_json::json!({"LIMITER": 3, "HUB": 1})
        );
    }
}
