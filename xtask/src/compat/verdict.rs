//! How a run that has an expected output of its own says how it went: its
//! output against the expectation, then one line that ends every run.

use std::path::Path;
use std::time::Instant;

use super::records::{self, Record};
use super::scenario::Scenario;
use crate::process::secs;

/// Compares `actual` (the output of the run `what` describes, e.g. "java
/// then kstreams") with the expected output and prints the result; true
/// when equal.
pub(super) fn against_expected(
    scenario: &Scenario,
    what: &str,
    expected: &[Record],
    actual: &[Record],
) -> bool {
    match records::diff("expected", expected, what, actual) {
        None => {
            eprintln!(
                "compat: {}: {what} == expected ({} records)",
                scenario.name,
                actual.len()
            );
            true
        }
        Some(report) => {
            eprintln!(
                "compat: {}: {what} differs from expected:\n{report}",
                scenario.name
            );
            false
        }
    }
}

/// The line that ends a run: `compat: <scenario> [<kind>] matches|DIFFERS
/// (<time>; files in <dir>)`.
pub(super) fn conclude(scenario: &Scenario, kind: &str, agree: bool, began: Instant, dir: &Path) {
    let name = match kind {
        "" => scenario.name.to_owned(),
        kind => format!("{} {kind}", scenario.name),
    };
    eprintln!(
        "compat: {name} {} ({}; files in {})",
        if agree { "matches" } else { "DIFFERS" },
        secs(began.elapsed()),
        dir.display()
    );
}
