//! An [`Override`] as its storage row holds it: JSON with each policy's spec
//! in storage encoding ([`Spec::encode`]). Objects already hold rows in this
//! form, so it stays fixed whatever the worker↔object protocol sends.

use super::Override;
use crate::input::scan::FromScan;
use crate::limit::Spec;

crate::wire! {
    struct Row {
        policies: Vec<RowPolicy>,
        until_ms: Option<u64>,
        reason: String,
        set_ms: u64,
        whole: Option<(String, u64)> = None,
    }
}

crate::wire! {
    /// A policy and its spec as [`Spec::encode`] gives it, four numbers.
    struct RowPolicy {
        name: String,
        spec: Vec<u64>,
    }
}

/// The row body for an override.
pub fn encode(o: &Override) -> String {
    crate::json::to_string(&Row {
        policies: o
            .policies
            .iter()
            .map(|(name, spec)| {
                let (kind, a, b, c) = spec.encode();
                RowPolicy {
                    name: name.clone(),
                    spec: vec![kind, a, b, c],
                }
            })
            .collect(),
        until_ms: o.until_ms,
        reason: o.reason.clone(),
        set_ms: o.set_ms,
        whole: o.whole.clone(),
    })
}

/// The override a row body holds; `None` if it no longer reads back or a
/// spec no longer validates.
pub fn decode(body: &str) -> Option<Override> {
    let row = Row::from_json(body).ok()?;
    let policies = row
        .policies
        .into_iter()
        .map(|p| match p.spec[..] {
            [kind, a, b, c] => Spec::decode(kind, a, b, c).map(|spec| (p.name, spec)),
            _ => None,
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
