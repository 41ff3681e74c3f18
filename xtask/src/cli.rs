//! Just enough argument parsing for a handful of tasks: positionals and
//! `--name value` (or `--name=value`) options. Every option takes a value,
//! which is what lets positionals and options come in any order.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{anyhow, bail, Context, Result};

/// A task of `cargo xtask`: what dispatches it and what its help says.
pub(crate) struct Task {
    pub name: &'static str,
    /// One line on what it does, for the list `cargo xtask --help` prints.
    pub summary: &'static str,
    /// Its arguments and what they do, for `cargo xtask help <task>`.
    pub usage: &'static str,
    pub run: fn(Args) -> Result<ExitCode>,
}

/// Width of the task names' column in the overview.
const NAME_WIDTH: usize = 10;

/// `cargo xtask --help`: every task with one line on what it does.
pub(crate) fn overview(tasks: &[Task]) -> String {
    let mut text = String::from(
        "usage: cargo xtask <task> [ARGS]\n\
         `cargo xtask help <task>` (or `cargo xtask <task> --help`) shows a task's arguments.\n\n\
         tasks:\n",
    );
    for task in tasks {
        // A longer name pushes its summary right, a space after it.
        let width = NAME_WIDTH.max(task.name.len() + 1);
        text.push_str(&format!("  {:width$}{}\n", task.name, task.summary));
    }
    text.push_str(&format!(
        "  {:NAME_WIDTH$}{}\n",
        "help", "this list, or one task's arguments (help <task>)"
    ));
    text
}

/// `cargo xtask help <task>`: its summary, then its arguments.
pub(crate) fn task_help(task: &Task) -> String {
    format!(
        "cargo xtask {}: {}\n\nusage: cargo xtask {}",
        task.name, task.summary, task.usage
    )
}

/// A check's exit status: 0 when it passed, 1 when not.
pub(crate) fn exit_code(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The arguments not yet consumed by the task.
#[derive(Debug)]
pub(crate) struct Args {
    items: VecDeque<String>,
}

impl Args {
    pub(crate) fn new(items: impl IntoIterator<Item = String>) -> Self {
        Args {
            items: items.into_iter().collect(),
        }
    }

    /// Takes the next positional argument (options and their values are left
    /// in place).
    pub(crate) fn next(&mut self) -> Option<String> {
        let mut index = 0;
        while index < self.items.len() {
            let item = &self.items[index];
            if !item.starts_with("--") {
                return self.items.remove(index);
            }
            index += if item.contains('=') { 1 } else { 2 };
        }
        None
    }

    /// Takes the flag `--name` (an option without a value); call it before
    /// taking positionals, which assume every option has a value.
    pub(crate) fn flag(&mut self, name: &str) -> bool {
        let flag = format!("--{name}");
        match self.items.iter().position(|item| *item == flag) {
            Some(index) => {
                self.items.remove(index);
                true
            }
            None => false,
        }
    }

    /// Takes `--name value` or `--name=value` and parses the value.
    pub(crate) fn option<T>(&mut self, name: &str) -> Result<Option<T>>
    where
        T: FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        let Some(raw) = self.take_option(name)? else {
            return Ok(None);
        };
        raw.parse()
            .map(Some)
            .with_context(|| format!("bad value `{raw}` for --{name}"))
    }

    /// Fails on whatever no task asked for, so a typo is not silently ignored.
    /// Everything not taken yet, in order: arguments passed through to
    /// another tool.
    pub(crate) fn rest(self) -> Vec<String> {
        self.items.into()
    }

    pub(crate) fn finish(self) -> Result<()> {
        if self.items.is_empty() {
            Ok(())
        } else {
            let rest: Vec<_> = self.items.into();
            bail!("unexpected arguments: {}", rest.join(" "))
        }
    }

    fn take_option(&mut self, name: &str) -> Result<Option<String>> {
        let flag = format!("--{name}");
        let inline = format!("--{name}=");
        let Some(index) = self
            .items
            .iter()
            .position(|a| *a == flag || a.starts_with(&inline))
        else {
            return Ok(None);
        };
        let item = self.items.remove(index).expect("index is in range");
        if let Some(value) = item.strip_prefix(&inline) {
            return Ok(Some(value.to_owned()));
        }
        self.items
            .remove(index)
            .map(Some)
            .ok_or_else(|| anyhow!("{flag} needs a value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Args {
        Args::new(line.split_whitespace().map(String::from))
    }

    #[test]
    fn options_and_positionals_in_any_order() {
        let mut a = args("--brokers 3 start --port=9092 --records 200 more");
        assert_eq!(a.option::<u16>("port").unwrap(), Some(9092));
        assert_eq!(a.option::<usize>("brokers").unwrap(), Some(3));
        assert_eq!(a.next().as_deref(), Some("start"));
        assert_eq!(a.next().as_deref(), Some("more"));
        assert_eq!(a.next(), None);
        assert_eq!(a.option::<usize>("records").unwrap(), Some(200));
        a.finish().unwrap();
    }

    fn nothing(_: Args) -> Result<ExitCode> {
        Ok(ExitCode::SUCCESS)
    }

    #[test]
    fn the_overview_gives_each_task_one_line() {
        let tasks = [
            Task {
                name: "one",
                summary: "does the first thing",
                usage: "one [--flag]\n  more text\n",
                run: nothing,
            },
            Task {
                name: "two",
                summary: "does the second",
                usage: "two\n",
                run: nothing,
            },
        ];
        let text = overview(&tasks);
        let listed: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "tasks:")
            .skip(1)
            .collect();
        assert_eq!(
            listed,
            [
                "  one       does the first thing",
                "  two       does the second",
                "  help      this list, or one task's arguments (help <task>)",
            ]
        );
        assert!(
            !text.contains("more text"),
            "arguments belong to `help <task>`"
        );
        assert!(task_help(&tasks[0]).contains("usage: cargo xtask one [--flag]\n  more text"));
    }

    #[test]
    fn leftovers_and_bad_values_are_errors() {
        assert!(args("start --what").finish().is_err());
        assert!(args("--brokers x").option::<usize>("brokers").is_err());
        assert!(args("--brokers").option::<usize>("brokers").is_err());
    }
}
