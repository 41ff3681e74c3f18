//! Subject name strategies: under which subject a serializer registers or
//! looks up its schema, as Confluent's `key.subject.name.strategy` and
//! `value.subject.name.strategy`, for every schema format.

use crate::error::{Error, Result};

/// A schema as the record strategies see it: the name of the record it
/// describes, Confluent's `ParsedSchema.name()`.
///
/// An Avro schema's full name (with the `avro` feature), a Protobuf
/// message's full name, a JSON Schema's `title`.
///
/// ```
/// use kstreams_schema_registry::{NamedSchema, SubjectNameStrategy};
///
/// struct Message(&'static str);
/// impl NamedSchema for Message {
///     fn record_name(&self) -> Option<String> { Some(self.0.to_owned()) }
///     fn describe(&self) -> String { self.0.to_owned() }
/// }
/// let subject = SubjectNameStrategy::TopicRecordName.subject("orders", false, &Message("shop.Order"))?;
/// assert_eq!(subject, "orders-shop.Order");
/// # Ok::<(), kstreams_schema_registry::Error>(())
/// ```
pub trait NamedSchema {
    /// The record's full name, `None` for an unnamed schema.
    fn record_name(&self) -> Option<String>;

    /// The schema in a few words, for error messages.
    fn describe(&self) -> String;
}

#[cfg(feature = "avro")]
impl NamedSchema for apache_avro::Schema {
    fn record_name(&self) -> Option<String> {
        self.name().map(|name| name.fullname(None))
    }

    fn describe(&self) -> String {
        self.canonical_form()
    }
}

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
    /// The record strategies need a named schema (an Avro record, enum or
    /// fixed; a Protobuf message; a JSON Schema with a `title`).
    pub fn subject<S: NamedSchema + ?Sized>(
        self,
        topic: &str,
        is_key: bool,
        schema: &S,
    ) -> Result<String> {
        let record_name = || {
            schema.record_name().ok_or_else(|| Error::Config {
                key: strategy_key(is_key).into(),
                message: format!(
                    "{self:?}Strategy names subjects after the record, \
                     but the schema is not a named type: {}",
                    schema.describe()
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

    struct Named(Option<&'static str>);

    impl NamedSchema for Named {
        fn record_name(&self) -> Option<String> {
            self.0.map(str::to_owned)
        }
        fn describe(&self) -> String {
            "\"string\"".into()
        }
    }

    fn user() -> Named {
        Named(Some("com.example.User"))
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
            .subject("orders", false, &Named(None))
            .unwrap_err();
        assert!(
            error.to_string().contains("value.subject.name.strategy"),
            "{error}"
        );
        assert_eq!(
            SubjectNameStrategy::TopicName
                .subject("orders", false, &Named(None))
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
