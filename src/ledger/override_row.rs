//! An [`Override`] as its storage row holds it: JSON with each policy's spec
//! in storage encoding ([`Spec::encode`]). Objects already hold rows in this
//! form, so it stays fixed whatever the worker↔object protocol sends.

use serde::Serialize;

use super::overrides::read_whole;
use super::Override;
use crate::input::scan::{list, need, nullable, whole, Read, Scan};
use crate::limit::Spec;

#[derive(Serialize)]
struct Row {
    policies: Vec<RowPolicy>,
    until_ms: Option<u64>,
    reason: String,
    set_ms: u64,
    whole: Option<(String, u64)>,
}

crate::write_json!(Row {
    policies,
    until_ms,
    reason,
    set_ms,
    whole if Option::is_none,
});

#[derive(Serialize)]
struct RowPolicy {
    name: String,
    spec: (u64, u64, u64, u64),
}

impl crate::json::Write for RowPolicy {
    fn write(&self, out: &mut crate::json::Text) {
        let (a, b, c, d) = self.spec;
        let mut fields = out.object();
        fields.field("name", &self.name);
        fields.field("spec", &[a, b, c, d][..]);
        fields.end();
    }
}

/// The row body for an override.
pub fn encode(o: &Override) -> String {
    crate::json::to_string(&Row {
        policies: o
            .policies
            .iter()
            .map(|(name, spec)| RowPolicy {
                name: name.clone(),
                spec: spec.encode(),
            })
            .collect(),
        until_ms: o.until_ms,
        reason: o.reason.clone(),
        set_ms: o.set_ms,
        whole: o.whole.clone(),
    })
}

/// The override a row body holds; `None` if it no longer reads back or a
/// spec no longer validates. Read by hand ([`crate::input::scan`]), as the
/// objects read their calls.
pub fn decode(body: &str) -> Option<Override> {
    let row = whole(body, row).ok()?;
    let policies = row
        .policies
        .into_iter()
        .map(|p| {
            let (kind, a, b, c) = p.spec;
            Spec::decode(kind, a, b, c).map(|spec| (p.name, spec))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Override {
        policies,
        until_ms: row.until_ms,
        reason: row.reason,
        set_ms: row.set_ms,
        whole: row.whole,
    })
}

fn row(scan: &mut Scan) -> Read<Row> {
    let (mut policies, mut until_ms, mut reason, mut set_ms) = (None, None, None, None);
    let mut whole = None;
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "policies" => policies = Some(list(scan, row_policy)?),
            "until_ms" => until_ms = nullable(scan, Scan::u64)?,
            "reason" => reason = Some(scan.string()?),
            "set_ms" => set_ms = Some(scan.u64()?),
            "whole" => whole = nullable(scan, read_whole)?,
            _ => scan.skip()?,
        }
    }
    Ok(Row {
        policies: need(policies)?,
        until_ms,
        reason: need(reason)?,
        set_ms: need(set_ms)?,
        whole,
    })
}

fn row_policy(scan: &mut Scan) -> Read<RowPolicy> {
    let (mut name, mut spec) = (None, None);
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "name" => name = Some(scan.string()?),
            "spec" => {
                let mut items = scan.array()?;
                let mut values = [0; 4];
                for value in &mut values {
                    items.more(scan)?;
                    *value = scan.u64()?;
                }
                items.close(scan)?;
                spec = Some((values[0], values[1], values[2], values[3]));
            }
            _ => scan.skip()?,
        }
    }
    Ok(RowPolicy {
        name: need(name)?,
        spec: need(spec)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Policy;

    #[test]
    fn a_row_stored_by_earlier_versions_still_reads_back() {
        let body = r#"{"policies":[{"name":"api","spec":[0,10,1000,0]},{"name":"cell","spec":[2,4,2,1000]}],"until_ms":5000,"reason":"launch","set_ms":100}"#;
        let o = decode(body).unwrap();
        assert_eq!(o.policies.len(), 2);
        assert_eq!(
            o.policies[0],
            (
                "api".to_string(),
                Spec::SlidingLog(Policy::new(10, 1000).unwrap())
            )
        );
        assert_eq!(o.policies[1].1.algorithm(), "gcra");
        assert_eq!(
            (o.until_ms, o.reason.as_str(), o.set_ms),
            (Some(5000), "launch", 100)
        );
        assert_eq!(encode(&o), body);
        let whole = Override {
            whole: Some(("api".into(), 30)),
            ..o
        };
        assert_eq!(decode(&encode(&whole)), Some(whole));
    }

    #[test]
    fn a_row_that_no_longer_validates_is_none() {
        assert!(decode(r#"{"policies":[{"name":"x","spec":[0,0,1000,0]}],"until_ms":null,"reason":"","set_ms":0}"#).is_none());
        assert!(decode(r#"{"policies":[{"name":"x","spec":[0,10,1000]}],"until_ms":null,"reason":"","set_ms":0}"#).is_none());
        assert!(decode("{").is_none());
    }
}
