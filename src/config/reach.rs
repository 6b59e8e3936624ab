//! Whether a rule can ever apply. The first rule that matches a request
//! applies, so a rule whose every request an earlier rule matches never
//! does: a waiting room on `/shop/*` before a rule on `/shop/checkout`, or
//! two rooms on one path. That is a config error naming both. Decided
//! pattern against pattern (each is deterministic: a parameter takes a
//! whole segment, `*` only ends it), so an error is never false; a rule
//! only several earlier rules cover between them is not looked for.

use super::pattern::Step;
use super::{error, ConfigError, Rule};

/// The first rule that can never apply, with the earlier rule that takes
/// its requests.
pub(super) fn check(rules: &[Rule]) -> Result<(), ConfigError> {
    for (j, rule) in rules.iter().enumerate() {
        if let Some(i) = rules[..j].iter().position(|earlier| takes(earlier, rule)) {
            return Err(error(
                &format!("SLUICE.rules[{j}].match"),
                format!(
                    "rule {:?} can never apply: every request it matches is matched first by rules[{i}] ({:?}) (the first rule that matches a request applies): put it before that rule, or narrow that rule's match",
                    rule.id, rules[i].id
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `a` matches every request `b` does: `a` takes every method `b`
/// does, compares paths at least as loosely, and its pattern matches every
/// path `b`'s does (or, ignoring a trailing slash, that path with one).
pub(crate) fn takes(a: &Rule, b: &Rule) -> bool {
    let methods = match (&a.methods, &b.methods) {
        (None, _) => true,
        (Some(theirs), Some(mine)) => mine.iter().all(|m| theirs.contains(m)),
        (Some(_), None) => false,
    };
    let (fold, slash) = (a.paths.case_insensitive, a.paths.ignore_trailing_slash);
    if !methods || (b.paths.case_insensitive && !fold) || (b.paths.ignore_trailing_slash && !slash)
    {
        return false;
    }
    let (outer, mut inner) = (a.path.steps(), b.path.clone());
    if fold {
        inner = inner.folded();
    }
    let mut inner = inner.steps();
    if covers(&outer, &inner) {
        return true;
    }
    let open_end = inner
        .last()
        .is_some_and(|s| *s == Step::Segment || segment(s));
    inner.push(Step::Char('/'));
    slash && open_end && covers(&outer, &inner)
}

/// Whether every text pattern `b` matches, pattern `a` matches.
fn covers(a: &[Step], b: &[Step]) -> bool {
    match (a.first(), b.first()) {
        (None, None) | (Some(Step::Rest), _) => true,
        (Some(Step::Char(x)), Some(Step::Char(y))) => x == y && covers(&a[1..], &b[1..]),
        (Some(Step::Segment), Some(Step::Segment)) => covers(&a[1..], &b[1..]),
        (Some(Step::Segment), Some(first)) if segment(first) => {
            covers(&a[1..], &b[b.iter().take_while(|s| segment(s)).count()..])
        }
        _ => false,
    }
}

/// A character inside a segment.
fn segment(step: &Step) -> bool {
    matches!(step, Step::Char(c) if *c != '/')
}

#[cfg(test)]
mod tests;
