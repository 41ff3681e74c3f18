//! Subject name strategies: under which subject a serializer registers or
//! looks up its schema, as Confluent's `key.subject.name.strategy` and
//! `value.subject.name.strategy`.

use apache_avro::Schema;

use crate::error::{Error, Result};

/// How the subject of a schema is named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SubjectNameStrategy {
    /// `<topic>-key` or `<topic>-value`: one schema (and its evolution) per
    /// topic. Confluent's default.
    #[default]
    TopicName,
    /// The record's full name (`com.example.User`): one subject per record
    /// type, shared by every topic that carries it.
    RecordName,
    /// `<topic>-<full record name>`: several record types on one topic, each
    /// evolving on its own.
    TopicRecordName,
}

impl SubjectNameStrategy {
    /// The subject for `schema` when written to `topic` as a key or a value.
    ///
    /// The record strategies need a named schema (record, enum or fixed).
    pub fn subject(self, topic: &str, is_key: bool, schema: &Schema) -> Result<String> {
        let record_name = || {
            schema
                .name()
                .map(|name| name.fullname(None))
                .ok_or_else(|| Error::Config {
                    key: strategy_key(is_key).into(),
                    message: format!(
                        "{self:?}Strategy names subjects after the record, \
                         but the schema is not a named type: {}",
                        schema.canonical_form()
                    ),
                })
        };
        Ok(match self {
            SubjectNameStrategy::TopicName => {
                format!("{topic}-{}", if is_key { "key" } else { "value" })
            }
            SubjectNameStrategy::RecordName => record_name()?,
            SubjectNameStrategy::TopicRecordName => format!("{topic}-{}", record_name()?),
        })
    }

    /// Reads a strategy as Confluent's configs name it: the Java class name
    /// (`io.confluent.kafka.serializers.subject.RecordNameStrategy`) or its
    /// last part (`RecordNameStrategy`).
    pub fn from_config(key: &str, value: &str) -> Result<Self> {
        let name = value.trim().rsplit('.').next().unwrap_or_default();
        match name {
            "TopicNameStrategy" => Ok(SubjectNameStrategy::TopicName),
            "RecordNameStrategy" => Ok(SubjectNameStrategy::RecordName),
            "TopicRecordNameStrategy" => Ok(SubjectNameStrategy::TopicRecordName),
            _ => Err(Error::Config {
                key: key.into(),
                message: format!(
                    "unknown subject name strategy `{value}`; expected TopicNameStrategy, \
                     RecordNameStrategy or TopicRecordNameStrategy"
                ),
            }),
        }
    }
}

fn strategy_key(is_key: bool) -> &'static str {
    if is_key {
        "key.subject.name.strategy"
    } else {
        "value.subject.name.strategy"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> Schema {
        Schema::parse_str(
            r#"{"type":"record","name":"User","namespace":"com.example","fields":[]}"#,
        )
        .unwrap()
    }

    #[test]
    fn subjects_as_confluent_names_them() {
        let user = user();
        let s = |strategy: SubjectNameStrategy, is_key| {
            strategy.subject("orders", is_key, &user).unwrap()
        };
        assert_eq!(s(SubjectNameStrategy::TopicName, false), "orders-value");
        assert_eq!(s(SubjectNameStrategy::TopicName, true), "orders-key");
        assert_eq!(
            s(SubjectNameStrategy::RecordName, false),
            "com.example.User"
        );
        assert_eq!(
            s(SubjectNameStrategy::TopicRecordName, true),
            "orders-com.example.User"
        );
    }

    #[test]
    fn record_strategies_need_a_named_schema() {
        let error = SubjectNameStrategy::RecordName
            .subject("orders", false, &Schema::String)
            .unwrap_err();
        assert!(
            error.to_string().contains("value.subject.name.strategy"),
            "{error}"
        );
        assert_eq!(
            SubjectNameStrategy::TopicName
                .subject("orders", false, &Schema::String)
                .unwrap(),
            "orders-value"
        );
    }

    #[test]
    fn configs_take_class_names_or_short_names() {
        let parse = |v| SubjectNameStrategy::from_config("value.subject.name.strategy", v);
        assert_eq!(
            parse("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy").unwrap(),
            SubjectNameStrategy::TopicRecordName
        );
        assert_eq!(
            parse("RecordNameStrategy").unwrap(),
            SubjectNameStrategy::RecordName
        );
        assert!(parse("Topic").is_err());
    }
}
