//! The crate's one error type.

/// What went wrong in the registry client, the wire format or a schema.
///
/// The serdes (Avro, Protobuf, JSON Schema) turn it into a
/// `kstreams_record::SerdeError` naming the topic, so a malformed record
/// reaches the configured handler instead of stopping the thread.
///
/// ```
/// use kstreams_schema_registry::{wire, Error};
///
/// let error = wire::split(b"{}").unwrap_err();
/// assert!(matches!(error, Error::WrongMagicByte { found: b'{' }));
/// assert!(error.to_string().contains("not written by a Schema Registry serializer"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fewer bytes than the 5-byte header.
    #[error(
        "{len} byte(s) is too short for the Confluent wire format \
         (magic byte and 4-byte schema id, then the payload)"
    )]
    Truncated {
        /// How many bytes there were.
        len: usize,
    },
    /// The first byte is not the magic byte `0`: the record was not written
    /// by a Schema Registry serializer (plain Avro, JSON or a string, say).
    #[error(
        "first byte is 0x{found:02x}, not the Confluent magic byte 0x00: \
         not written by a Schema Registry serializer"
    )]
    WrongMagicByte {
        /// The first byte found.
        found: u8,
    },
    /// The registry has no such schema id, subject or version (HTTP 404).
    #[error("{what} not found in the schema registry at {url}: {message}")]
    NotFound {
        /// What was looked up: "schema id 7", "subject orders-value", ...
        what: String,
        /// The registry's address.
        url: String,
        /// Confluent's error code (40401 subject, 40402 version, 40403 schema).
        error_code: Option<i64>,
        /// The registry's message.
        message: String,
    },
    /// The registry refused the request: an incompatible or invalid schema
    /// (409, 422), bad credentials (401, 403), a server error (5xx).
    #[error("schema registry at {url} answered {status}{}: {message}", code_suffix(*error_code))]
    Rejected {
        /// The registry's address.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Confluent's error code, when the body had one.
        error_code: Option<i64>,
        /// The registry's message.
        message: String,
    },
    /// No registry answered: connection refused, timeout, TLS failure.
    #[error("schema registry at {url} is unreachable: {message}")]
    Unreachable {
        /// The last address tried.
        url: String,
        /// The transport error.
        message: String,
    },
    /// The registry answered with something that is not its JSON.
    #[error("schema registry at {url} sent an unexpected response: {message}")]
    BadResponse {
        /// The registry's address.
        url: String,
        /// What was wrong with it.
        message: String,
    },
    /// A schema does not parse, a datum does not fit its schema, or a reader
    /// schema cannot read what the writer schema wrote.
    #[error("{context}: {message}")]
    Avro {
        /// Which schema or datum.
        context: String,
        /// apache-avro's explanation.
        message: String,
    },
    /// A Protobuf schema does not parse, or a record's message indexes or
    /// bytes do not fit it.
    #[error("{context}: {message}")]
    Protobuf {
        /// Which schema or record.
        context: String,
        /// What is wrong with it.
        message: String,
    },
    /// A JSON Schema does not parse, or a document is not JSON, does not
    /// validate against its schema, or does not map to the Rust type.
    #[error("{context}: {message}")]
    JsonSchema {
        /// Which schema or document.
        context: String,
        /// What is wrong with it (for validation: the failing paths).
        message: String,
    },
    /// A configuration key has a value this crate cannot use.
    #[error("config {key}: {message}")]
    Config {
        /// The key, as Confluent's serializers name it.
        key: String,
        /// Why its value is wrong.
        message: String,
    },
}

fn code_suffix(error_code: Option<i64>) -> String {
    error_code
        .map(|code| format!(" (error code {code})"))
        .unwrap_or_default()
}

impl Error {
    /// Whether the registry said the thing looked up does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// An [`Error::Avro`] from a context and apache-avro's error.
    pub fn avro(context: impl Into<String>, error: impl std::fmt::Display) -> Error {
        Error::Avro {
            context: context.into(),
            message: error.to_string(),
        }
    }

    /// An [`Error::Protobuf`] from a context and the underlying error.
    pub fn protobuf(context: impl Into<String>, error: impl std::fmt::Display) -> Error {
        Error::Protobuf {
            context: context.into(),
            message: error.to_string(),
        }
    }

    /// An [`Error::JsonSchema`] from a context and the underlying error.
    pub fn json_schema(context: impl Into<String>, error: impl std::fmt::Display) -> Error {
        Error::JsonSchema {
            context: context.into(),
            message: error.to_string(),
        }
    }
}

/// A result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
