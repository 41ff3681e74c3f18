//! What the integration tests share: the user record in two versions.

use serde::{Deserialize, Serialize};

/// The Rust side of the user schema's first version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserV1 {
    pub name: String,
    pub favorite_number: Option<i32>,
}

/// The second version: one field more, with a default in the schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserV2 {
    pub name: String,
    pub favorite_number: Option<i32>,
    pub email: String,
}

/// The record of the Confluent wire-format spec test.
pub(crate) fn alice() -> UserV1 {
    UserV1 {
        name: "alice".into(),
        favorite_number: Some(7),
    }
}
