//! Loading a configuration from Kafka-style properties: key-value pairs
//! (Kafka Streams' `StreamsConfig(Map)`), and Java `.properties` files and
//! text as `java.util.Properties#load` reads them (ISO-8859-1 from bytes),
//! with errors that name the file and the line of the key.

use super::keys::{APPLICATION_ID, BOOTSTRAP_SERVERS};
use super::{ConfigError, StreamsConfig};

impl StreamsConfig {
    /// Reads Kafka-style properties. Unknown keys and bad values are errors
    /// naming the key.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        let mut application_id = None;
        let mut bootstrap = None;
        let mut rest = Vec::new();
        for (k, v) in properties {
            let (k, v) = (k.as_ref().trim().to_string(), v.as_ref().trim().to_string());
            match k.as_str() {
                APPLICATION_ID => application_id = Some(v),
                BOOTSTRAP_SERVERS => bootstrap = Some(v),
                _ => rest.push((k, v)),
            }
        }
        let application_id =
            application_id
                .filter(|v| !v.is_empty())
                .ok_or(ConfigError::Missing {
                    key: APPLICATION_ID,
                    hint:
                        "set it to a name unique to this application; it names the consumer group \
                       and internal topics",
                })?;
        let bootstrap = bootstrap
            .filter(|v| !v.is_empty())
            .ok_or(ConfigError::Missing {
                key: BOOTSTRAP_SERVERS,
                hint: "set it to host:port of one or more brokers, comma-separated",
            })?;
        let mut config = Self::new(application_id, bootstrap);
        for (k, v) in rest {
            config.set(&k, &v)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Reads a Java `.properties` file, as a Kafka Streams application
    /// loads its `streams.properties` (`Properties#load`): `#` and `!`
    /// comments, `=`, `:` or whitespace between key and value, `\` line
    /// continuations and escapes, `\uXXXX`, ISO-8859-1 text; a key given
    /// twice takes its last value. Then as
    /// [`StreamsConfig::from_properties`]; an error names the file and the
    /// line of the key.
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("streams.properties");
    /// std::fs::write(&path, "application.id=orders\nbootstrap.servers=localhost:9092\n\
    ///                        num.stream.threads = two\n").unwrap();
    /// let err = StreamsConfig::from_properties_file(&path).unwrap_err();
    /// assert!(err.to_string().ends_with(
    ///     "streams.properties:3: invalid value \"two\" for config num.stream.threads: \
    ///      a whole number of threads, at least 1"
    /// ));
    /// ```
    pub fn from_properties_file(path: impl AsRef<std::path::Path>) -> Result<Self, ConfigError> {
        Self::from_properties_file_with_defaults(path, &[])
    }

    /// [`StreamsConfig::from_properties_file`], with `defaults` taken
    /// where the file does not give a key.
    pub(crate) fn from_properties_file_with_defaults(
        path: impl AsRef<std::path::Path>,
        defaults: &[(&str, &str)],
    ) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| ConfigError::Unreadable {
            message: format!(
                "cannot read properties file {origin}: {e}; give the path of the application's \
                 .properties file"
            ),
        })?;
        let lines = java_properties::PropertiesIter::new(std::io::BufReader::new(file));
        Self::from_property_lines(lines, &origin, defaults)
    }

    /// Reads Java `.properties` text from `reader` (ISO-8859-1, as
    /// `Properties#load(InputStream)`); `origin` names it in errors.
    pub fn from_properties_reader(
        reader: impl std::io::Read,
        origin: &str,
    ) -> Result<Self, ConfigError> {
        let lines = java_properties::PropertiesIter::new(reader);
        Self::from_property_lines(lines, origin, &[])
    }

    /// Reads Java `.properties` syntax from a string (as
    /// `Properties#load(Reader)`: the text is taken as it is, no
    /// ISO-8859-1 decoding).
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let config = StreamsConfig::from_properties_str(
    ///     "# ported from Kafka Streams\n\
    ///      application.id : orders\n\
    ///      bootstrap.servers localhost:9092,\\\n    localhost:9093\n\
    ///      ! unprefixed client keys reach every client they apply to\n\
    ///      auto.offset.reset=earliest\n",
    /// )
    /// .unwrap();
    /// assert_eq!(config.application_id(), "orders");
    /// ```
    pub fn from_properties_str(text: &str) -> Result<Self, ConfigError> {
        let lines =
            java_properties::PropertiesIter::new_with_encoding(text.as_bytes(), encoding_rs::UTF_8);
        Self::from_property_lines(lines, "properties text", &[])
    }

    /// Reads `lines`; `defaults` go before them, so a line giving the
    /// same key wins.
    fn from_property_lines(
        lines: java_properties::PropertiesIter<impl std::io::Read>,
        origin: &str,
        defaults: &[(&str, &str)],
    ) -> Result<Self, ConfigError> {
        let mut entries: Vec<(usize, String, String)> = Vec::new();
        for line in lines {
            let line = line.map_err(|e| ConfigError::InProperties {
                origin: origin.to_string(),
                line: e.line_number(),
                error: Box::new(ConfigError::Unreadable {
                    message: format!(
                        "not Java .properties syntax ({}); write key=value lines, escape a \
                         backslash as \\\\ and give \\u escapes four hex digits",
                        properties_error_text(&e)
                    ),
                }),
            })?;
            let number = line.line_number();
            if let java_properties::LineContent::KVPair(key, value) = line.consume_content() {
                entries.push((number, key, value));
            }
        }
        let line_of = |key: &str| {
            entries
                .iter()
                .rev()
                .find(|(_, k, _)| k.trim() == key)
                .map(|(n, _, _)| *n)
        };
        let defaults = defaults.iter().map(|(k, v)| (*k, *v));
        let given = entries.iter().map(|(_, k, v)| (k.as_str(), v.as_str()));
        Self::from_properties(defaults.chain(given)).map_err(|error| {
            let line = error.key().and_then(|key| line_of(&key));
            ConfigError::InProperties {
                origin: origin.to_string(),
                line,
                error: Box::new(error),
            }
        })
    }
}

/// java-properties' message without its own "(line_number = n)" suffix:
/// the line is said once, in front.
fn properties_error_text(error: &java_properties::PropertiesError) -> String {
    let text = error.to_string();
    match text.rfind(" (line_number") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::{KafkaClient, ProcessingGuarantee};
    use super::*;
    use crate::kafka::partition_group::MaxTaskIdle;

    #[test]
    fn missing_required_keys_are_named_with_a_hint() {
        let err = StreamsConfig::from_properties([("bootstrap.servers", "b:1")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("missing required config application.id"),
            "{err}"
        );
        let err = StreamsConfig::from_properties([("application.id", "a")]).unwrap_err();
        assert!(err.to_string().contains("bootstrap.servers"), "{err}");
    }

    /// A Kafka Streams application's streams.properties, unchanged: every
    /// separator and escape Java's Properties#load takes.
    const PORTED: &str = r#"# streams.properties of a Kafka Streams application
! both comment markers
application.id = orders-enricher
bootstrap.servers: broker-1:9092,\
                   broker-2:9092
processing.guarantee exactly_once_v2
max.task.idle.ms=-1
compression.type=zstd
auto.offset.reset=earliest
max.poll.records=500
acks=all
state.dir=/var/lib/kstreams/\u006frders
main.consumer.fetch.min.bytes   = 1
key\ with\ spaces\=and\:colons=ignored
"#;

    #[test]
    fn a_kafka_streams_properties_file_is_read_as_java_reads_it() {
        let text = PORTED.replace("key\\ with\\ spaces\\=and\\:colons=ignored\n", "");
        let config = StreamsConfig::from_properties_str(&text).unwrap();
        assert_eq!(config.application_id, "orders-enricher");
        assert_eq!(config.bootstrap_servers, "broker-1:9092,broker-2:9092");
        assert_eq!(
            config.processing_guarantee,
            ProcessingGuarantee::ExactlyOnceV2
        );
        assert_eq!(config.max_task_idle, MaxTaskIdle::Never);
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/kstreams/orders"));
        let get = |client, key| {
            config
                .client_settings(client)
                .get(key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get(KafkaClient::Producer, "compression.type").as_deref(),
            Some("zstd")
        );
        assert_eq!(get(KafkaClient::Producer, "acks").as_deref(), Some("all"));
        assert_eq!(
            get(KafkaClient::MainConsumer, "auto.offset.reset").as_deref(),
            Some("earliest")
        );
        assert_eq!(
            get(KafkaClient::MainConsumer, "fetch.min.bytes").as_deref(),
            Some("1")
        );
        assert_eq!(get(KafkaClient::RestoreConsumer, "fetch.min.bytes"), None);

        // The same bytes from a file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.properties");
        std::fs::write(&path, &text).unwrap();
        let from_file = StreamsConfig::from_properties_file(&path).unwrap();
        assert_eq!(from_file.bootstrap_servers, config.bootstrap_servers);
        assert_eq!(from_file.state_dir, config.state_dir);
    }

    #[test]
    fn errors_in_a_properties_file_name_the_file_the_line_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.properties");
        // A key with escaped separators is one key: unknown, on line 14.
        std::fs::write(&path, PORTED).unwrap();
        let err = StreamsConfig::from_properties_file(&path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "{}:14: unknown config key with spaces=and:colons",
                path.display()
            )),
            "{text}"
        );
        assert!(
            matches!(&err, ConfigError::InProperties { line: Some(14), error, .. }
            if matches!(**error, ConfigError::Unknown { .. }))
        );

        // A bad value: the line of the key.
        std::fs::write(
            &path,
            "application.id=a\nbootstrap.servers=b:1\n\n  acks = banana\n",
        )
        .unwrap();
        let text = StreamsConfig::from_properties_file(&path)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!(
                "{}:4: config acks=banana is refused by librdkafka",
                path.display()
            )),
            "{text}"
        );

        // A missing key has no line.
        std::fs::write(&path, "bootstrap.servers=b:1\n").unwrap();
        let text = StreamsConfig::from_properties_file(&path)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!(
                "{}: missing required config application.id",
                path.display()
            )),
            "{text}"
        );

        // Not properties syntax: a broken \u escape, with its line.
        let err = StreamsConfig::from_properties_str("application.id=a\nstate.dir=\\u00zz\n")
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::InProperties { line: Some(2), .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("properties text:2: not Java .properties syntax"),
            "{err}"
        );

        // A file that is not there.
        let gone = dir.path().join("nope.properties");
        let text = StreamsConfig::from_properties_file(&gone)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!("cannot read properties file {}", gone.display())),
            "{text}"
        );
    }

    #[test]
    fn a_properties_file_is_iso_8859_1_and_a_string_is_taken_as_it_is() {
        // Java's Properties#load(InputStream): byte 0xE9 is 'é'.
        let bytes = b"application.id=caf\xe9\nbootstrap.servers=b:1\n";
        let config = StreamsConfig::from_properties_reader(&bytes[..], "bytes").unwrap();
        assert_eq!(config.application_id, "caf\u{e9}");
        let config =
            StreamsConfig::from_properties_str("application.id=caf\u{e9}\nbootstrap.servers=b:1")
                .unwrap();
        assert_eq!(config.application_id, "caf\u{e9}");
    }
}
