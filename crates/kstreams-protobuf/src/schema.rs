//! A message's schema as the registry keeps it: the `.proto` source of the
//! file that defines it, the files that file imports, and where the message
//! sits in its file.

use base64::Engine as _;
use kstreams_schema_registry::{Error, NamedSchema, Result};
use prost_types::{DescriptorProto, FileDescriptorProto};

/// One `.proto` file: the name other files import it by, and its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoFile {
    /// The import path (`shop/money.proto`); imports of the same file
    /// must spell it the same way.
    pub name: String,
    /// The file's text.
    pub source: String,
}

impl ProtoFile {
    /// A file named `name` with `source`.
    pub fn new(name: impl Into<String>, source: impl Into<String>) -> Self {
        ProtoFile {
            name: name.into(),
            source: source.into(),
        }
    }
}

/// The schema a [`ProtobufSerde`](crate::ProtobufSerde) writes with: the
/// `.proto` file that defines the message, the message's full name, and the
/// files the first one imports (transitively), which are registered as
/// references.
///
/// The source is the one the prost types were generated from, typically
/// through `include_str!` of the file `prost-build` compiled: the registry
/// stores and compares `.proto` text, and prost's generated code carries no
/// descriptor to render it from.
///
/// ```
/// use kstreams_protobuf::{ProtoFile, ProtobufSchema};
///
/// let schema = ProtobufSchema::new(
///     ProtoFile::new("shop/order.proto", r#"
///         syntax = "proto3";
///         package shop;
///         import "shop/money.proto";
///         message Order { string item = 1; Money price = 2; message Line { int32 n = 1; } }
///     "#),
///     "shop.Order.Line",
/// )?
/// .with_dependency(ProtoFile::new(
///     "shop/money.proto",
///     "syntax = \"proto3\"; package shop; message Money { int64 cents = 1; }",
/// ))?;
/// assert_eq!(schema.message_indexes(), [0, 0]);
/// # Ok::<(), kstreams_schema_registry::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ProtobufSchema {
    file: ProtoFile,
    imports: Vec<String>,
    message: String,
    indexes: Vec<i32>,
    dependencies: Vec<(ProtoFile, Vec<String>)>,
}

impl ProtobufSchema {
    /// The schema of message `message` (its full name, with the package:
    /// `shop.Order`, or `shop.Order.Line` for a nested one) of `file`.
    pub fn new(file: ProtoFile, message: &str) -> Result<Self> {
        let parsed = parse(&file.name, &file.source)?;
        let message = message.trim_start_matches('.');
        let tree = MessageTree::of(&parsed);
        let indexes = tree.indexes_of(message).ok_or_else(|| {
            Error::protobuf(
                format!("{} defines no message {message}", file.name),
                format!("it defines {}", tree.names().join(", ")),
            )
        })?;
        Ok(ProtobufSchema {
            imports: parsed.dependency,
            file,
            message: message.to_owned(),
            indexes,
            dependencies: Vec::new(),
        })
    }

    /// Adds a file that the message's file imports, directly or through
    /// another dependency. Imports of `google/protobuf/*.proto` (the
    /// well-known types) may be left out: the registry knows them, and
    /// Confluent's serializer skips them (`skip.known.types`).
    pub fn with_dependency(mut self, file: ProtoFile) -> Result<Self> {
        let parsed = parse(&file.name, &file.source)?;
        self.dependencies.push((file, parsed.dependency));
        Ok(self)
    }

    /// The message's full name.
    pub fn message_name(&self) -> &str {
        &self.message
    }

    /// The message's index path in its file (see [`crate::indexes`]).
    pub fn message_indexes(&self) -> &[i32] {
        &self.indexes
    }

    /// The file that defines the message.
    pub fn file(&self) -> &ProtoFile {
        &self.file
    }

    /// The files `self.file()` imports.
    pub(crate) fn imports(&self) -> &[String] {
        &self.imports
    }

    /// A dependency by import name, with its own imports.
    pub(crate) fn dependency(&self, name: &str) -> Option<&(ProtoFile, Vec<String>)> {
        self.dependencies.iter().find(|(file, _)| file.name == name)
    }
}

impl NamedSchema for ProtobufSchema {
    fn record_name(&self) -> Option<String> {
        Some(self.message.clone())
    }

    fn describe(&self) -> String {
        format!("message {} of {}", self.message, self.file.name)
    }
}

/// Whether an import is one of Protobuf's well-known types, which the
/// registry has built in.
pub(crate) fn is_known_type(import: &str) -> bool {
    import.starts_with("google/protobuf/")
}

pub(crate) fn parse(name: &str, source: &str) -> Result<FileDescriptorProto> {
    protox_parse::parse(name, source)
        .map_err(|e| Error::protobuf(format!("{name} is not valid .proto source"), e))
}

/// Parses a schema the registry holds: `.proto` source, or the base64 of
/// a serialized `FileDescriptorProto`, the form Confluent's Python and Go
/// serializers register and a registry may hand back as it got it.
pub(crate) fn parse_registered(name: &str, text: &str) -> Result<FileDescriptorProto> {
    let source_error = match parse(name, text) {
        Ok(parsed) => return Ok(parsed),
        Err(error) => error,
    };
    let trimmed = text.trim();
    let looks_encoded = !trimmed.is_empty()
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    if looks_encoded {
        if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(trimmed) {
            if let Ok(parsed) = <FileDescriptorProto as prost::Message>::decode(bytes.as_slice()) {
                return Ok(parsed);
            }
        }
    }
    Err(source_error)
}

/// The full names of a file's messages, nested as in the file: what a
/// message index path walks.
#[derive(Debug, Default)]
pub(crate) struct MessageTree {
    messages: Vec<(String, MessageTree)>,
}

impl MessageTree {
    pub(crate) fn of(file: &FileDescriptorProto) -> Self {
        let prefix = match file.package() {
            "" => String::new(),
            package => format!("{package}."),
        };
        Self::nested(&prefix, &file.message_type)
    }

    fn nested(prefix: &str, messages: &[DescriptorProto]) -> Self {
        MessageTree {
            messages: messages
                .iter()
                .map(|message| {
                    let name = format!("{prefix}{}", message.name());
                    let children = Self::nested(&format!("{name}."), &message.nested_type);
                    (name, children)
                })
                .collect(),
        }
    }

    /// The message at `path`, or why there is none.
    pub(crate) fn name_at(&self, path: &[i32]) -> std::result::Result<&str, String> {
        let mut level = self;
        let mut name = None;
        for (depth, &index) in path.iter().enumerate() {
            match level.messages.get(index as usize) {
                Some((found, nested)) => {
                    name = Some(found.as_str());
                    level = nested;
                }
                None => {
                    return Err(format!(
                    "index {index} at depth {depth} of {path:?} is past the {} message(s) there",
                    level.messages.len()
                ))
                }
            }
        }
        name.ok_or_else(|| "the index path is empty".to_owned())
    }

    pub(crate) fn indexes_of(&self, full_name: &str) -> Option<Vec<i32>> {
        for (index, (name, nested)) in self.messages.iter().enumerate() {
            if name == full_name {
                return Some(vec![index as i32]);
            }
            let inside = full_name
                .strip_prefix(name.as_str())
                .is_some_and(|rest| rest.starts_with('.'));
            if inside {
                if let Some(mut path) = nested.indexes_of(full_name) {
                    path.insert(0, index as i32);
                    return Some(path);
                }
            }
        }
        None
    }

    fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for (name, nested) in &self.messages {
            names.push(name.clone());
            names.extend(nested.names());
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOP: &str = r#"
        syntax = "proto3";
        package shop;
        message Order { message Line { message Note {} } message Tax {} }
        message Refund { string why = 1; }
    "#;

    #[test]
    fn index_paths_follow_the_files_nesting() {
        let tree = MessageTree::of(&parse("shop.proto", SHOP).unwrap());
        assert_eq!(tree.indexes_of("shop.Order"), Some(vec![0]));
        assert_eq!(tree.indexes_of("shop.Refund"), Some(vec![1]));
        assert_eq!(tree.indexes_of("shop.Order.Tax"), Some(vec![0, 1]));
        assert_eq!(tree.indexes_of("shop.Order.Line.Note"), Some(vec![0, 0, 0]));
        assert_eq!(tree.indexes_of("shop.Orders"), None);
        assert_eq!(tree.name_at(&[0, 0, 0]), Ok("shop.Order.Line.Note"));
        assert_eq!(tree.name_at(&[1]), Ok("shop.Refund"));
        assert!(tree
            .name_at(&[2])
            .unwrap_err()
            .contains("past the 2 message(s)"));
        assert!(tree.name_at(&[1, 0]).unwrap_err().contains("depth 1"));
    }

    #[test]
    fn registered_schemas_may_be_base64_descriptors() {
        let parsed = parse("shop.proto", SHOP).unwrap();
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(prost::Message::encode_to_vec(&parsed));
        let decoded = parse_registered("id 1", &encoded).unwrap();
        assert_eq!(
            MessageTree::of(&decoded).indexes_of("shop.Order.Tax"),
            Some(vec![0, 1])
        );
        let error = parse_registered("id 1", "bm90IGEgZGVzY3JpcHRvcg==!")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not valid .proto source"), "{error}");
    }

    #[test]
    fn unknown_messages_and_bad_source_are_errors() {
        let missing = ProtobufSchema::new(ProtoFile::new("shop.proto", SHOP), "shop.Nope")
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("defines no message shop.Nope"),
            "{missing}"
        );
        assert!(missing.contains("shop.Order.Line.Note"), "{missing}");
        let bad = ProtobufSchema::new(ProtoFile::new("bad.proto", "message {"), "A")
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("bad.proto is not valid .proto source"),
            "{bad}"
        );
    }
}
