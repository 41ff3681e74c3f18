//! The real test broker that `cargo xtask kafka start` runs.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use crate::Error;

/// The environment variable that holds the real broker's bootstrap servers.
pub const BOOTSTRAP_ENV: &str = "KSTREAMS_BOOTSTRAP";

/// The real broker for a test, or `None` when the test should be skipped.
///
/// Reads [`BOOTSTRAP_ENV`]. Without it the test is skipped (a line on stderr
/// says so), except in CI (`CI` set and not `false`/`0`), where it panics:
/// CI runs the tests through `cargo xtask ci`, which always provides a broker,
/// so a missing one is a broken setup that must not pass as skipped tests.
///
/// ```no_run
/// if let Some(bootstrap) = kstreams_embedded::test_broker() {
///     // ... run the test against `bootstrap`
/// #   assert!(!bootstrap.is_empty());
/// }
/// ```
#[track_caller]
pub fn test_broker() -> Option<String> {
    let bootstrap = std::env::var(BOOTSTRAP_ENV).ok();
    let ci = std::env::var("CI").ok();
    match decide(bootstrap.as_deref(), ci.as_deref()) {
        Decision::Use(bootstrap) => Some(bootstrap),
        Decision::Skip => {
            // Straight to the stream, not eprintln!: the test harness captures
            // the print macros of passing tests, and a skip should be seen.
            // One write, so that parallel tests do not interleave mid-line.
            let test = std::thread::current().name().unwrap_or("test").to_owned();
            let line = format!("skipped {test}: {BOOTSTRAP_ENV} not set (run cargo xtask ci)\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
        Decision::Fail => panic!(
            "{BOOTSTRAP_ENV} is not set but CI is: run the tests through `cargo xtask ci`, \
             which starts a broker"
        ),
    }
}

#[derive(Debug, PartialEq)]
enum Decision {
    Use(String),
    Skip,
    Fail,
}

fn decide(bootstrap: Option<&str>, ci: Option<&str>) -> Decision {
    match bootstrap.map(str::trim) {
        Some(bootstrap) if !bootstrap.is_empty() => Decision::Use(bootstrap.to_owned()),
        _ if ci.is_some_and(|ci| !matches!(ci, "" | "0" | "false")) => Decision::Fail,
        _ => Decision::Skip,
    }
}

/// Creates a topic on a real broker and waits until the controller has it.
pub fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
) -> Result<(), Error> {
    create_topic_with_config(bootstrap, name, partitions, replication, &[])
}

/// [`create_topic`] with topic configs, e.g. `[("cleanup.policy", "compact")]`.
pub fn create_topic_with_config(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
    config: &[(&str, &str)],
) -> Result<(), Error> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let topic = config.iter().fold(
        NewTopic::new(name, partitions, TopicReplication::Fixed(replication)),
        |topic, (key, value)| topic.set(key, value),
    );
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    // The admin client polls on its own thread; the future only waits for it.
    for result in block_on(admin.create_topics([&topic], &options))? {
        result.map_err(|(topic, code)| Error::CreateTopic { topic, code })?;
    }
    Ok(())
}

/// Deletes topics from a real broker (e.g. a benchmark's, so that repeated
/// runs do not fill its disk); a topic that does not exist is not an error.
pub fn delete_topics(bootstrap: &str, names: &[&str]) -> Result<(), Error> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in block_on(admin.delete_topics(names, &options))? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
            Err((topic, code)) => return Err(Error::DeleteTopic { topic, code }),
        }
    }
    Ok(())
}

/// `<prefix>-<pid>-<nanos>`: a topic or group name no earlier run used, for
/// tests that share a long-lived broker.
pub fn unique_name(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_the_broker_when_set() {
        let expected = Decision::Use("127.0.0.1:9092".into());
        assert_eq!(decide(Some(" 127.0.0.1:9092 "), None), expected);
        assert_eq!(decide(Some("127.0.0.1:9092"), Some("true")), expected);
    }

    #[test]
    fn skips_locally_and_fails_in_ci() {
        assert_eq!(decide(None, None), Decision::Skip);
        assert_eq!(decide(Some(""), Some("false")), Decision::Skip);
        assert_eq!(decide(None, Some("0")), Decision::Skip);
        assert_eq!(decide(None, Some("true")), Decision::Fail);
        assert_eq!(decide(Some(" "), Some("1")), Decision::Fail);
    }

    #[test]
    fn unique_names_differ() {
        assert_ne!(unique_name("t"), unique_name("t"));
    }
}
