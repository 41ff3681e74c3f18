//! `cargo test` with a digest of what failed: the names of the failing
//! tests and their panic messages, gathered from the test harness's output
//! while it streams through, so that CI can repeat them in its last lines
//! (a long log is often read only from its end).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// At most this many lines of digest: enough for a few failures with their
/// messages, short enough to stay in a log's tail.
const MAX_DIGEST_LINES: usize = 40;

/// Runs `command` (a `cargo test`), passing its output through; returns
/// whether it passed and the digest of its failures.
pub(crate) fn run(command: &mut Command) -> Result<(bool, Vec<String>)> {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start cargo test: {command:?}"))?;
    let stdout = child.stdout.take().context("cargo test has no stdout")?;
    let mut digest = Digest::default();
    let mut out = std::io::stdout();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test's output")?;
        let _ = writeln!(out, "{line}");
        digest.see(&line);
    }
    let status = child.wait().context("waiting for cargo test")?;
    Ok((status.success(), digest.lines))
}

/// The failure lines seen so far.
#[derive(Default)]
struct Digest {
    lines: Vec<String>,
    /// The line after "panicked at" carries the message.
    after_panic: bool,
}

impl Digest {
    fn see(&mut self, line: &str) {
        let keep = self.after_panic
            || (line.starts_with("test ") && line.ends_with(" FAILED"))
            || line.contains("panicked at");
        self.after_panic = line.contains("panicked at");
        if keep && self.lines.len() < MAX_DIGEST_LINES {
            self.lines.push(line.trim_end().to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_failing_tests_and_their_panic_messages_only() {
        let mut digest = Digest::default();
        for line in [
            "running 2 tests",
            "test fine ... ok",
            "test broken ... FAILED",
            "",
            "---- broken stdout ----",
            "thread 'broken' panicked at crates/x/tests/y.rs:10:5:",
            "assertion `left == right` failed",
            "  left: 1",
            "test result: FAILED. 1 passed; 1 failed",
        ] {
            digest.see(line);
        }
        assert_eq!(
            digest.lines,
            vec![
                "test broken ... FAILED",
                "thread 'broken' panicked at crates/x/tests/y.rs:10:5:",
                "assertion `left == right` failed",
            ]
        );
    }
}
