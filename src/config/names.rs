//! The names a config gives: rule ids, tier and policy names.

use crate::bounds::MAX_NAME_BYTES;

/// Rule ids name key objects (`rule:<id>.<tier>:<key>`) and policies
/// (`<id>.<policy>`), so they hold no `.` or `:`; `_` starts Sluice's own
/// names.
pub(super) fn validate_rule_id(id: &str) -> Result<(), String> {
    if is_part_name(id) && !id.starts_with('_') {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a valid rule id: use 1 to {MAX_NAME_BYTES} letters, digits, \"-\" or \"_\", not starting with \"_\""
        ))
    }
}

/// 1 to [`MAX_NAME_BYTES`] of `A-Z a-z 0-9 - _`.
fn is_part_name(name: &str) -> bool {
    (1..=MAX_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Tier and policy names join rule ids in policy names
/// (`<rule>.<tier>.<policy>`) and object names (`rule:<rule>.<tier>:<key>`),
/// so like rule ids they hold no `.` or `:`: with them, `a` + `b.c` and
/// `a.b` + `c` would be one name.
pub(super) fn validate_part_name(name: &str) -> Result<(), String> {
    if is_part_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to {MAX_NAME_BYTES} letters, digits, \"-\" or \"_\" (no \".\" or \":\", which separate the parts of policy names)"
        ))
    }
}
