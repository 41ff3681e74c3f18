//! [`JsonSchema`]: a schema's text, its parsed form and its validator.

use std::fmt;
use std::sync::Arc;

use kstreams_schema_registry::{Error, NamedSchema, Result};
use serde_json::Value;

/// Validation errors listed in one message; past them the count is given.
const MAX_LISTED_ERRORS: usize = 5;

/// A JSON Schema: the text registered, and a validator compiled from it.
///
/// The `title` is the record name of the record subject name strategies,
/// as in Confluent's `JsonSchema.name()`.
///
/// ```
/// use kstreams_json_schema::JsonSchema;
///
/// let schema = JsonSchema::parse(r#"{"title":"shop.Order","type":"object","required":["item"]}"#)?;
/// assert_eq!(schema.title(), Some("shop.Order"));
/// let why = schema.validate(&serde_json::json!({"qty": 1})).unwrap_err();
/// assert!(why.contains("\"item\" is a required property"), "{why}");
/// assert!(JsonSchema::parse(r#"{"type": 12}"#).is_err());
/// # Ok::<(), kstreams_schema_registry::Error>(())
/// ```
#[derive(Clone)]
pub struct JsonSchema {
    text: String,
    title: Option<String>,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonSchema")
            .field("text", &self.text)
            .finish_non_exhaustive()
    }
}

impl JsonSchema {
    /// Parses a schema from its text and compiles its validator (the draft
    /// its `$schema` names, or the newest one); a text that is not JSON or
    /// not a valid schema is an error.
    pub fn parse(text: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::json_schema("the JSON Schema is not JSON", e))?;
        let validator = jsonschema::validator_for(&value)
            .map_err(|e| Error::json_schema("invalid JSON Schema", e))?;
        let title = value
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(JsonSchema {
            text: text.to_owned(),
            title,
            validator: Arc::new(validator),
        })
    }

    /// The schema's text, as registered.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The schema's `title`, if it has one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Checks `document` against the schema; the error lists the failing
    /// paths (JSON pointers into the document) and why each fails.
    pub fn validate(&self, document: &Value) -> std::result::Result<(), String> {
        let mut failures = Vec::new();
        let mut count = 0usize;
        for error in self.validator.iter_errors(document) {
            count += 1;
            if failures.len() < MAX_LISTED_ERRORS {
                let path = error.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                failures.push(format!("at {path}: {error}"));
            }
        }
        if count == 0 {
            return Ok(());
        }
        if count > failures.len() {
            failures.push(format!("and {} more", count - failures.len()));
        }
        Err(failures.join("; "))
    }
}

impl NamedSchema for JsonSchema {
    fn record_name(&self) -> Option<String> {
        self.title.clone()
    }

    fn describe(&self) -> String {
        format!("a JSON Schema without a title: {}", excerpt(&self.text))
    }
}

fn excerpt(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_lists_the_failing_paths() {
        let schema = JsonSchema::parse(
            r#"{"type":"object","properties":{
                "a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}}}"#,
        )
        .unwrap();
        assert_eq!(schema.validate(&json!({"a": 1, "b": ["x"]})), Ok(()));
        let why = schema
            .validate(&json!({"a": "x", "b": ["x", 2]}))
            .unwrap_err();
        assert!(why.contains("at /a: "), "{why}");
        assert!(why.contains("at /b/1: "), "{why}");
        let root = schema.validate(&json!(3)).unwrap_err();
        assert!(root.starts_with("at /: "), "{root}");
    }

    #[test]
    fn long_lists_are_cut() {
        let schema = JsonSchema::parse(r#"{"type":"array","items":{"type":"string"}}"#).unwrap();
        let why = schema.validate(&json!([1, 2, 3, 4, 5, 6, 7])).unwrap_err();
        assert!(why.ends_with("and 2 more"), "{why}");
    }

    #[test]
    fn bad_schemas_are_errors() {
        let not_json = JsonSchema::parse("{").unwrap_err().to_string();
        assert!(not_json.contains("not JSON"), "{not_json}");
        let invalid = JsonSchema::parse(r#"{"type":"nothing"}"#)
            .unwrap_err()
            .to_string();
        assert!(invalid.contains("invalid JSON Schema"), "{invalid}");
    }
}
