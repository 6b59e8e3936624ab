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

use super::pattern::Step;
use super::{error, ConfigError, Rule};

/// The most states one search visits before it gives up and counts the
/// rule as reachable: far more than any config's patterns make, so that
/// a hostile config cannot make validation slow, and never a false error.
const MAX_STATES: usize = 4_096;

/// Where a pattern's match stands: before step `at >> 1`, or (`at & 1`)
/// inside the segment that step matches, after at least one character of
/// it; [`DEAD`] when it cannot match any more.
type At = u32;
const DEAD: At = u32::MAX;

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
        let i = (at >> 1) as usize;
        if at == DEAD {
            return DEAD;
        }
        if at & 1 == 1 {
            return match (c, self.steps.get(i + 1)) {
                ('/', Some(Step::Char('/'))) => at + 3,
                ('/', _) => DEAD,
                _ => at,
            };
        }
        match self.steps.get(i) {
            Some(Step::Char(x)) if *x == c => at + 2,
            Some(Step::Segment) if c != '/' => at | 1,
            Some(Step::Rest) => at,
            _ => DEAD,
        }
    }

    fn accepts(&self, at: At) -> bool {
        let (i, len) = ((at >> 1) as usize, self.steps.len());
        at != DEAD
            && if at & 1 == 1 {
                i + 1 == len
            } else {
                i == len || self.steps[i] == Step::Rest
            }
    }

    /// Whether every path from `at` on matches: a `*` reached.
    fn takes_the_rest(&self, at: At) -> bool {
        at & 1 == 0 && self.steps.get((at >> 1) as usize) == Some(&Step::Rest)
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

/// Where a canonical path stands, a segment never being empty, `.` or
/// `..`: at the root, at a segment's start, after `.` or `..`, or in
/// another segment; `None` for no canonical path.
fn segment(at: u32, c: char) -> Option<u32> {
    const ROOT: u32 = 0;
    const START: u32 = 1;
    const DOT: u32 = 2;
    match (at, c) {
        (OTHER, '/') => Some(START),
        (_, '/') => None,
        (ROOT | START, '.') => Some(DOT),
        (DOT, '.') => Some(DOT + 1),
        _ => Some(OTHER),
    }
}

/// A segment that is none of the others: a path may end there.
const OTHER: u32 = 4;

/// A canonical path (with a trailing `/` when its client sent one) that
/// `rule` matches and none of `earlier` does, found breadth first. A
/// state is where the path stands and each pattern's match: `[segment,
/// rule's, earlier's...]`, with the state it came from and the character
/// read.
fn uncovered(rule: &Rule, earlier: &[&Rule]) -> Option<String> {
    let matchers: Vec<Matcher> = [rule]
        .into_iter()
        .chain(earlier.iter().copied())
        .map(Matcher::of)
        .collect();
    let kinds = characters(rule, earlier)?;
    let first: Vec<u32> = [0]
        .into_iter()
        .chain(matchers.iter().map(|m| m.next(0, '/')))
        .collect();
    let mut states: Vec<(Vec<u32>, usize, char)> = vec![(first, 0, '/')];
    let mut at = 0;
    while let Some((state, _, _)) = states.get(at) {
        let state = state.clone();
        let root = state[0] == 0;
        if root || state[0] == OTHER {
            for trailing in [false, !root] {
                let mut taken = matchers
                    .iter()
                    .zip(&state[1..])
                    .map(|(m, &a)| m.matches(a, root, trailing));
                if taken.next() == Some(true) && !taken.any(|t| t) {
                    return Some(path(&states, at, trailing));
                }
            }
        }
        for &c in &kinds {
            let next: Vec<u32> = std::iter::once(segment(state[0], c).unwrap_or(DEAD))
                .chain(matchers.iter().zip(&state[1..]).map(|(m, &a)| m.next(a, c)))
                .collect();
            let covered = matchers[1..]
                .iter()
                .zip(&next[2..])
                .any(|(m, &a)| m.takes_the_rest(a));
            if next[0] == DEAD || next[1] == DEAD || covered || states.iter().any(|s| s.0 == next) {
                continue;
            }
            if states.len() >= MAX_STATES {
                return Some(String::new());
            }
            states.push((next, at, c));
        }
        at += 1;
    }
    None
}

/// The path that led to state `at`.
fn path(states: &[(Vec<u32>, usize, char)], mut at: usize, trailing: bool) -> String {
    let mut chars = if trailing { vec!['/'] } else { Vec::new() };
    while at > 0 {
        chars.push(states[at].2);
        at = states[at].1;
    }
    chars.push('/');
    chars.into_iter().rev().collect()
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
