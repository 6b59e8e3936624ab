//! `POST {prefix}/v1/limit` with `layers`: several keys, each with its own
//! limits (a one-key body's fields), admitted all together or not at all;
//! `cost` is the call's, taken in every layer. The answer lists each layer
//! asked under its `name` (given, else its key when that is a valid name,
//! else `layers[i]`).

use super::key_limits::{
    checked_cost, key_policies, limit_answer, KeyLimits, LimitRequest, RawPolicy,
};
use super::{check_policy_name, checked_key_at, wait_ms};
use crate::bounds::MAX_LAYERS;
use crate::from_tree;
use crate::http::problem::Problem;
use crate::json::Json;
use crate::json_object;
use crate::ledger::{Outcome, PolicyDecision};
use crate::limit::Retry;

/// A call over several keys, in the order they are asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayeredRequest {
    pub layers: Vec<KeyLayer>,
    pub cost: u32,
}

/// One key of a layered call, and the name its answer goes under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayer {
    pub name: String,
    pub request: LimitRequest,
}

from_tree! {
    /// One of `layers` as sent.
    pub(super) struct RawLayer {
        name: Option<String> = optional "name",
        key: String = required "key",
        limit: Option<u64> = optional "limit",
        window_ms: Option<u64> = optional "window_ms",
        algorithm: Option<String> = optional "algorithm",
        policies: Option<Vec<RawPolicy>> = optional "policies",
    }
}

/// `local`: the call's `"local"`, for every key (a key before the last
/// reserves, held pending in a block and settled in the isolate that
/// climbs, `gate::key_climb`).
pub(super) fn parse_layers(
    raw: Vec<RawLayer>,
    cost: Option<u64>,
    local: bool,
) -> Result<LayeredRequest, Problem> {
    if raw.is_empty() || raw.len() > MAX_LAYERS {
        return Err(Problem::invalid(
            "layers",
            format!(
                "layers must hold 1 to {MAX_LAYERS} layers (each is one more call), got {}",
                raw.len()
            ),
        ));
    }
    let mut layers: Vec<KeyLayer> = Vec::with_capacity(raw.len());
    for (i, layer) in raw.into_iter().enumerate() {
        let at = format!("layers[{i}].");
        let key = checked_key_at(layer.key, &format!("{at}key"))?;
        if layers.iter().any(|l| l.request.key == key) {
            return Err(Problem::invalid(
                &format!("{at}key"),
                format!("key {key:?} is in an earlier layer: give one key's policies in one layer"),
            ));
        }
        let name = match layer.name {
            Some(name) => {
                check_policy_name(&name).map_err(|e| Problem::invalid(&format!("{at}name"), e))?;
                name
            }
            None if check_policy_name(&key).is_ok() => key.clone(),
            None => format!("layers[{i}]"),
        };
        if layers.iter().any(|l| l.name == name) {
            return Err(Problem::invalid(
                &format!("{at}name"),
                format!("layer name {name:?} is used twice"),
            ));
        }
        let limits = KeyLimits {
            limit: layer.limit,
            window_ms: layer.window_ms,
            algorithm: layer.algorithm,
            policies: layer.policies,
        };
        let named = limits.policies.is_some();
        let policies = key_policies(limits, &at)?;
        let request = LimitRequest {
            key,
            policies,
            cost: 1,
            named,
            reserve: None,
            local,
        };
        layers.push(KeyLayer { name, request });
    }
    let cost = checked_cost(cost, layers.iter().flat_map(|l| &l.request.policies))?;
    for layer in &mut layers {
        layer.request.cost = cost;
    }
    Ok(LayeredRequest { layers, cost })
}

impl LayeredRequest {
    /// The layer that refused, among `answers` (one per layer asked, in
    /// order), with its answer.
    fn refusal<'a>(&'a self, answers: &'a [Outcome]) -> Option<(&'a KeyLayer, &'a Outcome)> {
        self.layers
            .iter()
            .zip(answers)
            .find(|(_, outcome)| !outcome.allowed)
    }

    /// What the RateLimit fields announce: every layer's policies when all
    /// admitted, the refusing layer's when one refused, named after their
    /// layer (`name`, or `name.policy` for the `policies` form).
    pub fn announced(&self, answers: &[Outcome]) -> Outcome {
        let refusal = self.refusal(answers);
        let shown: Vec<(&KeyLayer, &Outcome)> = match refusal {
            Some(refused) => vec![refused],
            None => self.layers.iter().zip(answers).collect(),
        };
        let policies = shown
            .into_iter()
            .flat_map(|(layer, outcome)| {
                outcome.policies.iter().map(move |p| PolicyDecision {
                    name: if layer.request.named {
                        format!("{}.{}", layer.name, p.name)
                    } else {
                        layer.name.clone()
                    },
                    ..p.clone()
                })
            })
            .collect();
        Outcome {
            allowed: refusal.is_none(),
            pending: false,
            policies,
            ban: None,
            lease: None,
            conflict: None,
            retry: refusal.map_or(Retry::NOW, |(_, outcome)| outcome.retry),
            spread: None,
            halt: None,
            blocks: Vec::new(),
            whole: None,
        }
    }
}

/// The answer to a layered call: whether every layer admitted, the layer
/// that refused (`violated`) and when to retry, and each layer asked as a
/// one-key call would be answered, with its `name` and `key`. Layers after
/// the one that refused were not asked; those before it admitted, and
/// their units were given back.
pub fn layers_response(request: &LayeredRequest, answers: &[Outcome]) -> Json {
    let refusal = request.refusal(answers);
    let layers: Vec<Json> = request
        .layers
        .iter()
        .zip(answers)
        .map(|(layer, outcome)| {
            let mut answer = limit_answer(&layer.request, outcome);
            answer.put("name", layer.name.as_str());
            answer.put("key", layer.request.key.as_str());
            answer.finish()
        })
        .collect();
    let violated: Vec<&str> = refusal.iter().map(|(l, _)| l.name.as_str()).collect();
    let retry = refusal.map_or(Retry::NOW, |(_, outcome)| outcome.retry);
    let mut answer = json_object!({
        "allowed": refusal.is_none() && answers.len() == request.layers.len(),
        "violated": violated,
        "retry_after_ms": wait_ms(retry),
        "layers": layers,
    });
    if refusal.is_some_and(|(_, outcome)| outcome.pending) {
        answer.put("pending", &true);
    }
    if request.cost == 0 {
        let would_allow = answers
            .iter()
            .flat_map(|o| &o.policies)
            .all(|p| p.decision.remaining >= 1);
        answer.put("would_allow", &would_allow);
    }
    answer.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::http::api::tests::{problem_field, JSON};
    use crate::http::api::{parse_limit_request, LimitCall};
    use crate::ledger::{Ask, Ledger};

    fn layered(body: &str) -> LayeredRequest {
        match parse_limit_request(JSON, body.as_bytes()).unwrap() {
            LimitCall::Layers(request) => request,
            other => panic!("expected layers, got {other:?}"),
        }
    }

    fn field(body: &str) -> String {
        problem_field(parse_limit_request(JSON, body.as_bytes()).unwrap_err())
    }

    const SALE: &str = r#"{"layers": [
        {"key": "user:42", "limit": 1, "window_ms": 60000},
        {"key": "sale launch", "policies": [{"name": "minute", "limit": 3, "window_ms": 60000}]}
    ]}"#;

    #[test]
    fn layers_are_one_key_bodies_named_by_key_or_position() {
        let request = layered(SALE);
        assert_eq!(request.cost, 1);
        let [user, sale] = &request.layers[..] else {
            panic!("two layers")
        };
        assert_eq!(
            (user.name.as_str(), user.request.key.as_str()),
            ("user:42", "user:42")
        );
        assert_eq!(
            user.request.policies[0].0, "default",
            "the slot a one-key call uses"
        );
        assert!(!user.request.named && sale.request.named);
        assert_eq!(sale.name, "layers[1]", "a key that is no valid name");
        let named = layered(
            r#"{"cost": 2, "layers": [{"name": "buyer", "key": "u 1", "limit": 2, "window_ms": 1000}]}"#,
        );
        assert_eq!(
            (named.layers[0].name.as_str(), named.layers[0].request.cost),
            ("buyer", 2)
        );
    }

    #[test]
    fn every_invalid_layered_body_names_its_field() {
        let layer = r#"{"key": "k", "limit": 1, "window_ms": 1000}"#;
        let five = format!(r#"{{"layers": [{}]}}"#, [layer; 5].join(","));
        let cases = [
            (r#"{"layers": []}"#.to_string(), "layers"),
            (five, "layers"),
            (r#"{"layers": {}}"#.into(), "layers"),
            (format!(r#"{{"key": "k", "layers": [{layer}]}}"#), "key"),
            (format!(r#"{{"limit": 1, "layers": [{layer}]}}"#), "limit"),
            (format!(r#"{{"policies": [], "layers": [{layer}]}}"#), "policies"),
            (format!(r#"{{"reserve": true, "layers": [{layer}]}}"#), "reserve"),
            (format!(r#"{{"reservation_ttl_ms": 5, "layers": [{layer}]}}"#), "reserve"),
            (format!(r#"{{"cost": 2, "layers": [{layer}]}}"#), "cost"),
            (r#"{"layers": [{"limit": 1, "window_ms": 1}]}"#.into(), "layers[0].key"),
            (r#"{"layers": [{"key": "", "limit": 1, "window_ms": 1}]}"#.into(), "layers[0].key"),
            (format!(r#"{{"layers": [{layer}, {layer}]}}"#), "layers[1].key"),
            (
                r#"{"layers": [{"key": "a", "limit": 1, "window_ms": 1}, {"key": "b", "name": "a", "limit": 1, "window_ms": 1}]}"#.into(),
                "layers[1].name",
            ),
            (r#"{"layers": [{"key": "a", "name": "a b", "limit": 1, "window_ms": 1}]}"#.into(), "layers[0].name"),
            (r#"{"layers": [{"key": "a", "window_ms": 1}]}"#.into(), "layers[0].limit"),
            (r#"{"layers": [{"key": "a", "limit": 1}]}"#.into(), "layers[0].window_ms"),
            (r#"{"layers": [{"key": "a", "limit": 0, "window_ms": 1}]}"#.into(), "layers[0].limit"),
            (
                r#"{"layers": [{"key": "a", "limit": 1, "window_ms": 1, "algorithm": "gcra"}]}"#.into(),
                "layers[0].algorithm",
            ),
            (
                r#"{"layers": [{"key": "a", "limit": 1, "policies": [{"name": "p", "limit": 1, "window_ms": 1}]}]}"#.into(),
                "layers[0].limit",
            ),
            (
                r#"{"layers": [{"key": "a", "policies": [{"name": "throttle", "limit": 1, "window_ms": 1}]}]}"#.into(),
                "layers[0].policies[0].name",
            ),
            (r#"{"layers": [{"key": "a", "policies": []}]}"#.into(), "layers[0].policies"),
            (r#"{"layers": [{"key": "a", "limit": 1, "window_ms": 1, "x": 1}]}"#.into(), "layers[0].x"),
            (r#"{"limit": 1, "window_ms": 1}"#.into(), "key"),
        ];
        for (body, expected) in cases {
            assert_eq!(field(&body), expected, "{body}");
        }
    }

    /// What each layer's object answers after `before` admissions each.
    fn answers(request: &LayeredRequest, before: &[u32]) -> Vec<Outcome> {
        request
            .layers
            .iter()
            .zip(before)
            .map(|(layer, &n)| {
                let mut ledger = Ledger::new();
                let ask = |cost| Ask {
                    specs: &layer.request.policies,
                    cost,
                    ban: None,
                    lease: None,
                };
                for i in 0..n {
                    ledger.check(&ask(1), u64::from(i));
                }
                ledger.check(&ask(request.cost), 100).0
            })
            .collect()
    }

    #[test]
    fn an_admission_lists_every_layer_and_announces_every_policy() {
        let request = layered(SALE);
        let admitted = answers(&request, &[0, 2]);
        let answer = layers_response(&request, &admitted).value();
        assert_eq!(answer["allowed"], true);
        assert_eq!(answer["violated"], json!([]));
        assert_eq!(answer["retry_after_ms"], 0);
        assert_eq!(answer["layers"][0]["key"], "user:42");
        assert_eq!(answer["layers"][0]["remaining"], 0);
        assert_eq!(answer["layers"][1]["name"], "layers[1]");
        assert_eq!(answer["layers"][1]["policies"][0]["name"], "minute");
        let announced = request.announced(&admitted);
        let names: Vec<&str> = announced.policies.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["user:42", "layers[1].minute"]);
        assert!(announced.allowed);
    }

    #[test]
    fn a_refusal_names_the_layer_that_refused_and_announces_it_alone() {
        let request = layered(SALE);
        let refused = answers(&request, &[0, 3]);
        let answer = layers_response(&request, &refused).value();
        assert_eq!(answer["allowed"], false);
        assert_eq!(answer["violated"], json!(["layers[1]"]));
        assert!(answer["retry_after_ms"].as_u64().unwrap() > 59_000);
        assert_eq!(answer["layers"].as_array().unwrap().len(), 2);
        let announced = request.announced(&refused);
        assert_eq!(announced.policies.len(), 1);
        assert_eq!(announced.policies[0].name, "layers[1].minute");
        assert!(!announced.allowed && announced.retry == refused[1].retry);
        // Refused by the first: the second was never asked.
        let first = answers(&request, &[1, 0]);
        let answer = layers_response(&request, &first[..1]).value();
        assert_eq!(answer["violated"], json!(["user:42"]));
        assert_eq!(answer["layers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_peek_of_every_layer_says_whether_one_more_would_pass() {
        let body = r#"{"cost": 0, "layers": [
            {"key": "a", "limit": 1, "window_ms": 60000},
            {"key": "b", "limit": 2, "window_ms": 60000}
        ]}"#;
        let request = layered(body);
        let room = answers(&request, &[0, 1]);
        let answer = layers_response(&request, &room).value();
        assert_eq!(
            (&answer["allowed"], &answer["would_allow"]),
            (&json!(true), &json!(true))
        );
        let full = answers(&request, &[1, 0]);
        let answer = layers_response(&request, &full).value();
        assert_eq!(
            (&answer["allowed"], &answer["would_allow"]),
            (&json!(true), &json!(false))
        );
    }
}
