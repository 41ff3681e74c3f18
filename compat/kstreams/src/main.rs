//! The kstreams twin of compat/'s Kafka Streams reference apps.
//!
//! ```text
//! kstreams-compat run <scenario> --bootstrap B --app-id A --input I --output O
//!                     [--state-dir DIR] [--describe-to FILE]
//! ```
//!
//! Runs the scenario's topology until SIGTERM or SIGINT, then closes the
//! application cleanly (a final commit). `cargo xtask compat --side kstreams`
//! starts it, waits from the outside until its group has committed the end
//! of its input, stops it and diffs its output against the expected one and
//! against Apache Kafka Streams'.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kstreams::prelude::*;

/// Mirrors `Scenarios.FILTER_CHAR` of the Java side.
const FILTER_CHAR: char = 'a';

/// Mirrors `Scenarios.WINDOW_SIZE` and `Scenarios.WINDOW_GRACE`.
const WINDOW_SIZE: Duration = Duration::from_secs(10);
const WINDOW_GRACE: Duration = Duration::from_secs(5);
/// Mirrors `Scenarios.JOIN_DIFFERENCE` and `Scenarios.JOIN_GRACE`.
const JOIN_DIFFERENCE: Duration = Duration::from_secs(3);
const JOIN_GRACE: Duration = Duration::from_secs(2);

/// The scenarios this side can run today.
const SUPPORTED: &[&str] = &[
    "wordcount",
    "filter-map",
    "windowed-count",
    "table-aggregate",
    "stream-table-join",
    "table-table-join",
    "table-table-outer-join",
    "stream-stream-join",
];

fn main() -> ExitCode {
    // windowed-count drops late records on purpose; each draws a warning.
    env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("warn,kstreams_dsl::windowed=error"),
    )
    .init();
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kstreams-compat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The topology of a scenario; the same operators, in the same order, as
/// compat/src/main/java/dev/kstreams/compat/Scenarios.java.
fn topology(scenario: &str, input: &str, output: &str) -> Result<Topology, String> {
    let builder = StreamsBuilder::new();
    match scenario {
        "filter-map" => builder
            .stream_with(input, Consumed::with(StringSerde, StringSerde))
            .filter(|_, value| value.contains(FILTER_CHAR))
            // Java's toUpperCase(Locale.ROOT) and Rust's to_uppercase agree
            // on the generated (ASCII) sentences.
            .map_values(|value| value.to_uppercase())
            .to_with(output, Produced::with(StringSerde, StringSerde)),
        // The input has null keys, hence the nullable key serde.
        "wordcount" => builder
            .stream_with(input, Consumed::with(Nullable(StringSerde), StringSerde))
            .flat_map_values(|line| java_split_non_word(&line.to_lowercase()))
            .group_by_with(
                |_, word| word.clone(),
                Grouped::with(StringSerde, StringSerde),
            )
            .count_with(None, Materialized::as_("counts"))
            .to_stream()
            .to_with(output, Produced::with(StringSerde, Nullable(I64Serde))),
        "windowed-count" => builder
            .stream_with(input, Consumed::with(StringSerde, StringSerde))
            .group_by_key()
            .windowed_by(TimeWindows::of_size_and_grace(WINDOW_SIZE, WINDOW_GRACE))
            .count()
            .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
            .to_stream()
            .to_with(
                output,
                Produced::with(
                    TimeWindowedSerde::new(StringSerde, WINDOW_SIZE.as_millis() as i64),
                    Nullable(I64Serde),
                ),
            ),
        "table-aggregate" => builder
            .table_with(
                input,
                Consumed::with(StringSerde, StringSerde),
                Materialized::new(),
            )
            .group_by_with(
                |_user, region| (region.clone(), region),
                Grouped::with(StringSerde, StringSerde),
            )
            .count()
            .to_stream()
            .to_with(output, Produced::with(StringSerde, Nullable(I64Serde))),
        "stream-table-join"
        | "table-table-join"
        | "table-table-outer-join"
        | "stream-stream-join" => join(&builder, scenario, input, output)?,
        other => {
            return Err(format!(
                "unknown scenario {other} ({})",
                SUPPORTED.join(", ")
            ))
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// The join scenarios: two input topics, given as `--input FIRST,SECOND`.
fn join(builder: &StreamsBuilder, scenario: &str, input: &str, output: &str) -> Result<(), String> {
    let Some((first, second)) = input.split_once(',') else {
        return Err(format!(
            "{scenario} reads two topics, --input FIRST,SECOND; got {input}"
        ));
    };
    let strings = || Consumed::with(StringSerde, StringSerde);
    let produced = || Produced::with(StringSerde, StringSerde);
    let or_null = |value: Option<&String>| value.map_or("null", String::as_str).to_owned();
    match scenario {
        "stream-table-join" => {
            let customers = builder.table_with(first, strings(), Materialized::new());
            builder
                .stream_with(second, strings())
                .left_join(&customers, move |order, name| {
                    format!("{order}|{}", or_null(name))
                })
                .to_with(output, produced());
        }
        "table-table-join" | "table-table-outer-join" => {
            let left = builder.table_with(first, strings(), Materialized::new());
            let right = builder.table_with(second, strings(), Materialized::new());
            let joined = if scenario == "table-table-join" {
                left.join(&right, |l, r| format!("{l}|{r}"))
            } else {
                left.outer_join(&right, move |l, r| format!("{}|{}", or_null(l), or_null(r)))
            };
            joined
                .to_stream()
                .to_with(output, Produced::with(StringSerde, Nullable(StringSerde)));
        }
        _ => {
            let left = builder.stream_with(first, strings());
            let right = builder.stream_with(second, strings());
            left.left_join_windowed_with(
                &right,
                move |l, r| format!("{l}|{}", or_null(r)),
                JoinWindows::of_time_difference_and_grace(JOIN_DIFFERENCE, JOIN_GRACE),
                StreamJoined::with(StringSerde, StringSerde, StringSerde),
            )
            .to_with(output, produced());
        }
    }
    Ok(())
}

/// Java's `line.split("\\W+")`: the pieces between runs of non-word
/// characters (`\w` is `[a-zA-Z_0-9]`), trailing empty pieces dropped but a
/// leading one kept; a line without separators is one piece, even if empty.
fn java_split_non_word(line: &str) -> Vec<String> {
    let separator = |c: char| !(c.is_ascii_alphanumeric() || c == '_');
    if !line.contains(separator) {
        return vec![line.to_owned()];
    }
    // Rust splits at each separator, Java at each run of them: only the piece
    // before the first run may be empty.
    let mut words: Vec<String> = line
        .split(separator)
        .enumerate()
        .filter(|(i, word)| *i == 0 || !word.is_empty())
        .map(|(_, word)| word.to_owned())
        .collect();
    if words.iter().all(String::is_empty) {
        words.clear();
    }
    words
}

fn run(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let (command, rest) = args
        .split_first()
        .ok_or("usage: kstreams-compat run <scenario> --bootstrap B ... | supported")?;
    if command == "supported" {
        println!("{}", SUPPORTED.join(" "));
        return Ok(());
    }
    if command != "run" {
        return Err(format!("unknown command {command} (run, supported)").into());
    }
    let (scenario, rest) = rest.split_first().ok_or("name a scenario")?;
    let options = options(rest)?;
    let required = |key: &str| {
        options
            .get(key)
            .cloned()
            .ok_or_else(|| format!("--{key} is required"))
    };
    let (bootstrap, app_id) = (required("bootstrap")?, required("app-id")?);
    let topology = topology(scenario, &required("input")?, &required("output")?)?;
    if let Some(path) = options.get("describe-to") {
        std::fs::write(path, topology.describe().to_string())?;
    }
    // As the Java side (RunApp.config): no record cache, so every update is
    // forwarded; one thread (the default); a short commit interval.
    let mut config =
        StreamsConfig::new(app_id, bootstrap).commit_interval(Duration::from_millis(100));
    config.set("statestore.cache.max.bytes", "0")?;
    if let Some(dir) = options.get("state-dir") {
        config = config.state_dir(dir);
    }
    let mut app = KafkaStreams::new(topology, config);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    app.start()?;
    while !stop.load(Ordering::Relaxed) && app.state() != State::Error {
        std::thread::sleep(Duration::from_millis(50));
    }
    let closed = app.close(Duration::from_secs(30));
    if app.state() == State::Error || !closed {
        let errors = app.errors();
        return Err(
            format!("the application failed: {errors:?} (closed in time: {closed})").into(),
        );
    }
    Ok(())
}

/// `--key value` pairs.
fn options(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut options = HashMap::new();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let key = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("expected --option, got {flag}"))?;
        let value = args
            .next()
            .ok_or_else(|| format!("--{key} needs a value"))?;
        options.insert(key.to_string(), value.clone());
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::java_split_non_word as split;

    #[test]
    fn splits_like_java_on_non_word_runs() {
        // Expected values are what Java's "...".split("\\W+") returns.
        assert_eq!(split("hello, kafka world!"), ["hello", "kafka", "world"]);
        assert_eq!(split("snake_case x9"), ["snake_case", "x9"]);
        assert_eq!(split(", leading"), ["", "leading"]);
        assert_eq!(split("trailing.."), ["trailing"]);
        assert_eq!(split("word"), ["word"]);
        assert_eq!(split(""), [""]);
        assert!(split("!?, ").is_empty());
        assert_eq!(split("caf\u{e9} ol\u{e9}"), ["caf", "ol"]);
    }
}
