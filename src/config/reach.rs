//! Whether a rule can ever apply. The first rule that matches a request
//! applies, so a rule whose every request an earlier rule (or several)
//! matches never does: a waiting room on `/shop/*` before a rule on
//! `/shop/checkout`, or two rooms on one path. That is a config error
//! naming both, decided exactly over the rules' patterns, methods and
//! `paths` by looking for a request the rule matches and no earlier rule
//! of its method does: a search of the canonical paths through the
//! patterns' automata side by side (each pattern is deterministic: a
//! parameter takes a whole segment, `*` only ends it), over one character
//! of each kind the patterns tell apart. Request paths reach a rule
//! percent-encoded, so only ASCII characters are tried.

use std::collections::{HashSet, VecDeque};

use super::pattern::Step;
use super::{error, ConfigError, Rule};

/// The most states one search visits before it gives up and counts the
/// rule as reachable: far more than any config's patterns make, so that
/// a hostile config cannot make validation slow, and never a false error.
const MAX_STATES: usize = 100_000;

/// Where a pattern's match stands: before step `.0`, or (`.1`) inside the
/// segment step `.0` matches, after at least one character of it; `None`
/// when it cannot match any more.
type At = Option<(usize, bool)>;

/// The first rule (by index) that can never apply, with the earlier rules
/// that take its requests: the fewest that do.
pub(super) fn check(rules: &[Rule]) -> Result<(), ConfigError> {
    for (j, rule) in rules.iter().enumerate() {
        let earlier: Vec<usize> = (0..j).collect();
        if earlier.is_empty() || witness(rule, rules, &[]).is_none() {
            continue;
        }
        if witness(rule, rules, &earlier).is_some() {
            continue;
        }
        let mut cover = match earlier
            .iter()
            .find(|&&i| witness(rule, rules, &[i]).is_none())
        {
            Some(&i) => vec![i],
            None => earlier,
        };
        for i in (0..cover.len()).rev() {
            let mut fewer = cover.clone();
            fewer.remove(i);
            if witness(rule, rules, &fewer).is_none() {
                cover = fewer;
            }
        }
        let names: Vec<String> = cover
            .iter()
            .map(|&i| format!("rules[{i}] ({:?})", rules[i].id))
            .collect();
        return Err(error(
            &format!("SLUICE.rules[{j}].match"),
            format!(
                "rule {:?} can never apply: every request it matches is matched first by {} (the first rule that matches a request applies): put it before them, or narrow their match",
                rule.id,
                names.join(" and ")
            ),
        ));
    }
    Ok(())
}

/// A request (method, path) that `rule` matches and none of `rules[i]`
/// for `i` in `earlier` does; `None` when there is none.
pub(crate) fn witness(rule: &Rule, rules: &[Rule], earlier: &[usize]) -> Option<(String, String)> {
    // Two rules whose patterns start with literal text neither of which
    // begins the other (in any case) match no path in common.
    let head = |r: &Rule| r.path.literal_head().to_ascii_lowercase();
    let own = head(rule);
    let earlier: Vec<&Rule> = earlier
        .iter()
        .map(|&i| &rules[i])
        .filter(|r| {
            let theirs = head(r);
            own.starts_with(&theirs) || theirs.starts_with(&own)
        })
        .collect();
    let named = |r: &&Rule| r.methods.clone().unwrap_or_default();
    let methods = match &rule.methods {
        Some(methods) => methods.clone(),
        // Every method some earlier rule names, and one none does.
        None => {
            let mut methods: Vec<String> = earlier.iter().flat_map(named).collect();
            let other = (1..).map(|n| "Z".repeat(n)).find(|m| !methods.contains(m));
            methods.extend(other);
            methods
        }
    };
    methods.into_iter().find_map(|method| {
        let of_method: Vec<&Rule> = earlier
            .iter()
            .copied()
            .filter(|r| r.methods.as_ref().is_none_or(|m| m.contains(&method)))
            .collect();
        uncovered(rule, &of_method).map(|path| (method, path))
    })
}

/// A rule's pattern as an automaton over the request's characters.
struct Matcher {
    steps: Vec<Step>,
    fold: bool,
    either_slash: bool,
}

impl Matcher {
    fn of(rule: &Rule) -> Matcher {
        Matcher {
            steps: rule.path.steps(),
            fold: rule.paths.case_insensitive,
            either_slash: rule.paths.ignore_trailing_slash,
        }
    }

    fn next(&self, at: At, c: char) -> At {
        let c = if self.fold { c.to_ascii_lowercase() } else { c };
        let (i, inside) = at?;
        if inside {
            return match (c, self.steps.get(i + 1)) {
                ('/', Some(Step::Char('/'))) => Some((i + 2, false)),
                ('/', _) => None,
                _ => at,
            };
        }
        match self.steps.get(i)? {
            Step::Char(x) => (*x == c).then_some((i + 1, false)),
            Step::Segment => (c != '/').then_some((i, true)),
            Step::Rest => at,
        }
    }

    fn accepts(&self, at: At) -> bool {
        match at {
            Some((i, true)) => i + 1 == self.steps.len(),
            Some((i, false)) => i == self.steps.len() || self.steps[i] == Step::Rest,
            None => false,
        }
    }

    /// Whether every path from `at` on matches: a `*` reached.
    fn takes_the_rest(&self, at: At) -> bool {
        matches!(at, Some((i, false)) if self.steps.get(i) == Some(&Step::Rest))
    }

    /// Whether the path read so far (at `at`; `root` when it is `/`)
    /// matches, its client having sent a trailing `/` or not.
    fn matches(&self, at: At, root: bool, trailing: bool) -> bool {
        let slashed = || self.accepts(self.next(at, '/'));
        if self.either_slash && !root {
            self.accepts(at) || slashed()
        } else if trailing {
            slashed()
        } else {
            self.accepts(at)
        }
    }
}

/// Where a canonical path stands: a segment is never empty, `.` or `..`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Segment {
    Root,
    Start,
    Dot,
    Dots,
    Other,
}

impl Segment {
    fn next(self, c: char) -> Option<Segment> {
        match (self, c) {
            (Segment::Other, '/') => Some(Segment::Start),
            (_, '/') => None,
            (Segment::Root | Segment::Start, '.') => Some(Segment::Dot),
            (Segment::Dot, '.') => Some(Segment::Dots),
            _ => Some(Segment::Other),
        }
    }
}

/// A canonical path (with a trailing `/` when its client sent one) that
/// `rule` matches and none of `earlier` does, found breadth first.
fn uncovered(rule: &Rule, earlier: &[&Rule]) -> Option<String> {
    let own = Matcher::of(rule);
    let others: Vec<Matcher> = earlier.iter().map(|r| Matcher::of(r)).collect();
    let kinds = characters(rule, earlier)?;
    let start = Some((0, false));
    let first = (
        Segment::Root,
        own.next(start, '/'),
        others
            .iter()
            .map(|m| m.next(start, '/'))
            .collect::<Vec<At>>(),
    );
    let mut seen = HashSet::from([first.clone()]);
    let mut queue = VecDeque::from([(first, String::from("/"))]);
    while let Some(((segment, at, ats), path)) = queue.pop_front() {
        let root = segment == Segment::Root;
        if root || segment == Segment::Other {
            for trailing in [false, !root] {
                let taken = |(m, at): (&Matcher, &At)| m.matches(*at, root, trailing);
                if own.matches(at, root, trailing) && !others.iter().zip(&ats).any(taken) {
                    return Some(if trailing { path + "/" } else { path });
                }
            }
        }
        for &c in &kinds {
            let (Some(segment), Some(at)) = (segment.next(c), own.next(at, c)) else {
                continue;
            };
            let at = Some(at);
            let ats: Vec<At> = others
                .iter()
                .zip(&ats)
                .map(|(m, a)| m.next(*a, c))
                .collect();
            if others.iter().zip(&ats).any(|(m, a)| m.takes_the_rest(*a)) {
                continue;
            }
            let state = (segment, at, ats);
            if seen.len() >= MAX_STATES {
                return Some(path);
            }
            if seen.insert(state.clone()) {
                queue.push_back((state, format!("{path}{c}")));
            }
        }
    }
    None
}

/// One character of each kind the rules' patterns tell apart: `/`, each
/// ASCII character their literal text holds in either case, and one they
/// do not hold. `None` when every character is taken (no such config is
/// written; the rule then counts as reachable).
fn characters(rule: &Rule, earlier: &[&Rule]) -> Option<Vec<char>> {
    let mut kinds = vec!['/'];
    for step in earlier.iter().chain([&rule]).flat_map(|r| r.path.steps()) {
        if let Step::Char(c) = step {
            for c in [c.to_ascii_lowercase(), c.to_ascii_uppercase()] {
                if c.is_ascii() && !kinds.contains(&c) {
                    kinds.push(c);
                }
            }
        }
    }
    let other = ('!'..='~').find(|c| !kinds.contains(c) && !"%.;?#".contains(*c))?;
    kinds.push(other);
    Some(kinds)
}

#[cfg(test)]
mod tests;
