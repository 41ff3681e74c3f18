//! The [`Serde`] trait and the built-in serdes.
//!
//! A serde turns a typed key or value into the bytes of a Kafka record and
//! back. Kafka has null keys and values (tombstones); here they are
//! `Option<&[u8]>` on the wire side and `Option<T>` on the typed side through
//! [`Nullable`]. A serde for a non-nullable type rejects a null with
//! [`SerdeError::UnexpectedNull`] instead of inventing a value.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::Headers;

mod boolean;
mod java_uuid;
mod list;

pub use boolean::BoolSerde;
pub use java_uuid::UuidSerde;
pub use list::ListSerde;

/// Why a key or value could not be turned into bytes or back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SerdeError {
    /// A fixed-width type got the wrong number of bytes.
    #[error("topic {topic}: a {type_name} needs exactly {expected} bytes, got {actual}")]
    WrongSize {
        /// The topic being read or written.
        topic: String,
        /// The Rust type.
        type_name: &'static str,
        /// Bytes the type needs.
        expected: usize,
        /// Bytes received.
        actual: usize,
    },
    /// A string serde got bytes that are not UTF-8.
    #[error("topic {topic}: bytes are not valid UTF-8: {source}")]
    InvalidUtf8 {
        /// The topic being read.
        topic: String,
        /// Where the bytes stop being UTF-8.
        source: std::str::Utf8Error,
    },
    /// A null key or value reached a serde whose type cannot be null.
    #[error(
        "topic {topic}: got a null (tombstone) for non-nullable type {type_name}; \
         declare the type as Option<_> with the Nullable serde to accept nulls"
    )]
    UnexpectedNull {
        /// The topic being read.
        topic: String,
        /// The Rust type.
        type_name: &'static str,
    },
    /// JSON encoding or decoding failed.
    #[error("topic {topic}: JSON for {type_name}: {source}")]
    Json {
        /// The topic being read or written.
        topic: String,
        /// The Rust type.
        type_name: &'static str,
        /// The serde_json error.
        source: serde_json::Error,
    },
    /// Bytes that hold no value of the type (a boolean byte other than 0
    /// or 1, text that is no UUID, a list cut short), where Kafka's
    /// deserializer throws for the same bytes.
    #[error("topic {topic}: {kafka_message}{}", detail_suffix(.detail))]
    Malformed {
        /// The topic being read.
        topic: String,
        /// What Kafka's deserializer throws for the same bytes (its
        /// exception's `getMessage()`).
        kafka_message: String,
        /// What exactly is wrong where Kafka's message does not say;
        /// empty when it does.
        detail: String,
    },
    /// Any other failure, from a user serde.
    #[error("topic {topic}: {message}")]
    Custom {
        /// The topic being read or written.
        topic: String,
        /// What went wrong.
        message: String,
    },
}

impl SerdeError {
    /// The message Kafka's own serde throws for the same failure, as a
    /// Kafka Streams handler sees it in `getMessage()` (and as the
    /// `__streams.errors.message` header of a dead letter carries it):
    /// `Size of data received by IntegerDeserializer is not 4` for a
    /// fixed-width number of the wrong size; Kafka's own message for the
    /// bytes of a [`SerdeError::Malformed`]; otherwise this error's text
    /// without the topic, which Kafka's messages do not name.
    pub fn kafka_message(&self) -> String {
        match self {
            SerdeError::WrongSize {
                type_name,
                expected,
                ..
            } => match java_deserializer(type_name) {
                Some(class) => format!("Size of data received by {class} is not {expected}"),
                None => format!("a {type_name} needs exactly {expected} bytes"),
            },
            SerdeError::InvalidUtf8 { source, .. } => {
                format!("bytes are not valid UTF-8: {source}")
            }
            SerdeError::UnexpectedNull { type_name, .. } => {
                format!("got a null (tombstone) for non-nullable type {type_name}")
            }
            SerdeError::Json {
                type_name, source, ..
            } => format!("JSON for {type_name}: {source}"),
            SerdeError::Malformed { kafka_message, .. } => kafka_message.clone(),
            SerdeError::Custom { message, .. } => message.clone(),
        }
    }
}

/// The detail of a [`SerdeError::Malformed`] as the end of its message.
fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

/// A [`SerdeError::Malformed`] for `topic`.
fn malformed(
    topic: &str,
    kafka_message: impl Into<String>,
    detail: impl Into<String>,
) -> SerdeError {
    SerdeError::Malformed {
        topic: topic.to_string(),
        kafka_message: kafka_message.into(),
        detail: detail.into(),
    }
}

/// Kafka's deserializer class for a fixed-width type of the built-in serdes.
fn java_deserializer(type_name: &str) -> Option<&'static str> {
    match type_name {
        "bool" => Some("BooleanDeserializer"),
        "i16" => Some("ShortDeserializer"),
        "i32" => Some("IntegerDeserializer"),
        "i64" => Some("LongDeserializer"),
        "f64" => Some("DoubleDeserializer"),
        // Kafka's FloatDeserializer names no class in its message.
        "f32" => Some("Deserializer"),
        _ => None,
    }
}

/// Serializes and deserializes one type for a Kafka topic.
///
/// Both directions see the topic and the record headers, as Kafka's
/// `Serializer` and `Deserializer` do; a serializer may add headers (a schema
/// id, say). `None` bytes are Kafka's null.
pub trait Serde<T>: Send + Sync + 'static {
    /// Turns a value into record bytes; `Ok(None)` writes a null.
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
    ) -> Result<Option<Vec<u8>>, SerdeError>;

    /// Turns record bytes (`None` for null) into a value.
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<T, SerdeError>;

    /// [`Serde::serialize`] of a value the caller is done with. Sinks call
    /// it with each record's key and value, so a serde whose type already
    /// is its bytes (a `String`, a `Vec<u8>`) hands them over instead of
    /// copying. The default serializes by reference.
    fn serialize_owned(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        self.serialize(topic, headers, &value)
    }

    /// [`Serde::deserialize`] from bytes the caller is done with. Sources
    /// call it with each consumed record's key and value, so a serde whose
    /// type holds its bytes as they are (a `String`, a `Vec<u8>`) takes
    /// them without a copy. The default reads through `deserialize`.
    fn deserialize_owned(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<T, SerdeError> {
        self.deserialize(topic, headers, bytes.as_deref())
    }

    /// [`Serde::serialize`] appending to `out`, so that a caller on a hot
    /// path (a state store's get and put) reuses one buffer instead of
    /// allocating per call. Returns `false` for a null (nothing appended).
    /// The default calls `serialize`; serdes that can write in place
    /// override it.
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        match self.serialize(topic, headers, value)? {
            Some(bytes) => {
                out.extend_from_slice(&bytes);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Whether `value` is written as a null (a null key or a tombstone).
    /// Operators use it to drop null keys without serializing.
    fn is_null(&self, value: &T) -> bool {
        let _ = value;
        false
    }

    /// For a serde of windowed keys, how many leading bytes of
    /// `serialized` (its own output) are the plain key: Kafka Streams'
    /// `WindowedSerializer#serializeBaseKey`. `None` for other serdes.
    /// `KStream::to` partitions windowed keys by their plain key, so that
    /// all windows of a key land in one partition.
    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        let _ = serialized;
        None
    }

    /// How many bytes every non-null value takes, for the serdes whose
    /// lists Kafka's `ListSerializer` writes without a length per entry
    /// (its `CONSTANT_SIZE` strategy, chosen for Kafka's Short, Integer,
    /// Long, Float, Double and UUID serializers): [`ListSerde`] writes and
    /// reads lists of this serde that way. `None`, the default, for every
    /// other serde: [`ListSerde`] then writes each entry after its length,
    /// as Kafka does for any other serializer. Keep `None` in a serde of
    /// your own: Kafka picks the layout by the serializer's class and never
    /// picks the constant-size one for a user's serializer.
    fn fixed_size(&self) -> Option<usize> {
        None
    }
}

/// A shared, type-erased serde, as topologies store them.
pub type SharedSerde<T> = Arc<dyn Serde<T>>;

/// Types with an obvious serde, so `builder.stream::<String, i64>(..)` needs
/// no serde arguments: strings, bytes, Kafka's numeric types, booleans,
/// UUIDs, unit and `Option` of any of them.
pub trait DefaultSerde: Sized + 'static {
    /// The serde used when none is given.
    fn default_serde() -> SharedSerde<Self>;
}

fn null_error<T>(topic: &str) -> SerdeError {
    SerdeError::UnexpectedNull {
        topic: topic.to_string(),
        type_name: std::any::type_name::<T>(),
    }
}

/// `bytes` as text, or why they are not UTF-8. Checked with SIMD
/// (simdutf8): a source validates every string key and value it reads,
/// and std's check showed in the profiles of a pass-through and a join
/// (BENCHMARKS.md, "Sources: UTF-8 checks"). Only an invalid input is
/// checked again by std, for the error's position.
fn utf8<'a>(topic: &str, bytes: &'a [u8]) -> Result<&'a str, SerdeError> {
    simdutf8::basic::from_utf8(bytes).or_else(|_| {
        std::str::from_utf8(bytes).map_err(|source| SerdeError::InvalidUtf8 {
            topic: topic.to_string(),
            source,
        })
    })
}

/// UTF-8 strings, as Kafka's `StringSerializer` (UTF-8 by default).
#[derive(Clone, Copy, Debug, Default)]
pub struct StringSerde;

impl Serde<String> for StringSerde {
    fn serialize(
        &self,
        _: &str,
        _: &mut Headers,
        value: &String,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(value.as_bytes().to_vec()))
    }
    fn serialize_into(
        &self,
        _: &str,
        _: &mut Headers,
        value: &String,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        out.extend_from_slice(value.as_bytes());
        Ok(true)
    }
    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<String, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<String>(topic))?;
        utf8(topic, bytes).map(str::to_owned)
    }
    fn serialize_owned(
        &self,
        _: &str,
        _: &mut Headers,
        value: String,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(value.into_bytes()))
    }
    fn deserialize_owned(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<String, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<String>(topic))?;
        utf8(topic, &bytes)?;
        // The crate's one unsafe block: `String::from_utf8` would check the
        // bytes a second time (simdutf8 checked them in `utf8`, which also
        // names the topic on failure), a cost measured on string-valued
        // workloads (BENCHMARKS.md).
        #[allow(unsafe_code)]
        // SAFETY: `utf8` just checked that `bytes` is valid UTF-8, the one
        // requirement of `from_utf8_unchecked`; nothing changed them since.
        let value = unsafe { String::from_utf8_unchecked(bytes) };
        Ok(value)
    }
}

/// Raw bytes, unchanged.
#[derive(Clone, Copy, Debug, Default)]
pub struct BytesSerde;

impl Serde<Vec<u8>> for BytesSerde {
    fn serialize(
        &self,
        _: &str,
        _: &mut Headers,
        value: &Vec<u8>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(value.clone()))
    }
    fn serialize_into(
        &self,
        _: &str,
        _: &mut Headers,
        value: &Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        out.extend_from_slice(value);
        Ok(true)
    }
    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Vec<u8>, SerdeError> {
        bytes
            .map(<[u8]>::to_vec)
            .ok_or_else(|| null_error::<Vec<u8>>(topic))
    }
    fn serialize_owned(
        &self,
        _: &str,
        _: &mut Headers,
        value: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(value))
    }
    fn deserialize_owned(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, SerdeError> {
        bytes.ok_or_else(|| null_error::<Vec<u8>>(topic))
    }
}

/// Kafka's `VoidSerde`: always null on the wire.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnitSerde;

impl Serde<()> for UnitSerde {
    fn is_null(&self, _: &()) -> bool {
        true
    }
    fn serialize(&self, _: &str, _: &mut Headers, _: &()) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(None)
    }
    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<(), SerdeError> {
        match bytes {
            None => Ok(()),
            Some(b) => Err(malformed(
                topic,
                "Data should be null for a VoidDeserializer.",
                format!("the unit serde reads only nulls, got {} bytes", b.len()),
            )),
        }
    }
}

/// Kafka's `VoidSerde` (`Serdes.Void()`) under its Kafka name: the
/// [`UnitSerde`].
pub use UnitSerde as VoidSerde;

macro_rules! big_endian_serde {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $width:expr) => {
        big_endian_serde!($(#[$doc])* $name, $ty, $width, std::convert::identity);
    };
    ($(#[$doc:meta])* $name:ident, $ty:ty, $width:expr, $before_write:path) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Serde<$ty> for $name {
            fn fixed_size(&self) -> Option<usize> {
                Some($width)
            }
            fn serialize(&self, _: &str, _: &mut Headers, value: &$ty) -> Result<Option<Vec<u8>>, SerdeError> {
                Ok(Some($before_write(*value).to_be_bytes().to_vec()))
            }
            fn serialize_into(&self, _: &str, _: &mut Headers, value: &$ty, out: &mut Vec<u8>) -> Result<bool, SerdeError> {
                out.extend_from_slice(&$before_write(*value).to_be_bytes());
                Ok(true)
            }
            fn deserialize(&self, topic: &str, _: &Headers, bytes: Option<&[u8]>) -> Result<$ty, SerdeError> {
                let bytes = bytes.ok_or_else(|| null_error::<$ty>(topic))?;
                let array: [u8; $width] = bytes.try_into().map_err(|_| SerdeError::WrongSize {
                    topic: topic.to_string(),
                    type_name: stringify!($ty),
                    expected: $width,
                    actual: bytes.len(),
                })?;
                Ok(<$ty>::from_be_bytes(array))
            }
        }
    };
}

big_endian_serde!(
    /// 2 bytes big-endian, as Kafka's `ShortSerializer` (`Serdes.Short()`).
    I16Serde, i16, 2
);
big_endian_serde!(
    /// 4 bytes big-endian, as Kafka's `IntegerSerializer`.
    I32Serde, i32, 4
);
big_endian_serde!(
    /// 8 bytes big-endian, as Kafka's `LongSerializer`.
    I64Serde, i64, 8
);
big_endian_serde!(
    /// 8 bytes of the IEEE 754 bits big-endian, as Kafka's `DoubleSerializer`.
    ///
    /// Like Java's `Double.doubleToLongBits`, every NaN is written as the
    /// canonical NaN `7ff8000000000000`; reading keeps the bits as they are.
    F64Serde, f64, 8, canonical_nan
);

big_endian_serde!(
    /// 4 bytes of the IEEE 754 bits big-endian, as Kafka's `FloatSerializer`
    /// (`Serdes.Float()`).
    ///
    /// Unlike Kafka's `DoubleSerializer`, Kafka's `FloatSerializer` writes
    /// the raw bits (`Float.floatToRawIntBits`), so a NaN keeps its bits.
    F32Serde, f32, 4
);

/// Java's `doubleToLongBits` collapses every NaN to one bit pattern; a NaN
/// computed at run time on x86 (`0.0 / 0.0`) has the sign bit set instead.
fn canonical_nan(value: f64) -> f64 {
    if value.is_nan() {
        f64::from_bits(0x7ff8_0000_0000_0000)
    } else {
        value
    }
}

/// Lifts a serde for `T` to `Option<T>`: `None` is Kafka's null.
#[derive(Clone, Copy, Debug, Default)]
pub struct Nullable<S>(pub S);

impl<T: 'static, S: Serde<T>> Serde<Option<T>> for Nullable<S> {
    fn is_null(&self, value: &Option<T>) -> bool {
        value.is_none()
    }
    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        self.0.base_key_len(serialized)
    }
    fn fixed_size(&self) -> Option<usize> {
        self.0.fixed_size()
    }
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Option<T>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        match value {
            None => Ok(None),
            Some(v) => self.0.serialize(topic, headers, v),
        }
    }
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Option<T>,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        match value {
            None => Ok(false),
            Some(v) => self.0.serialize_into(topic, headers, v, out),
        }
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Option<T>, SerdeError> {
        match bytes {
            None => Ok(None),
            Some(_) => self.0.deserialize(topic, headers, bytes).map(Some),
        }
    }
    fn serialize_owned(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: Option<T>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        match value {
            None => Ok(None),
            Some(v) => self.0.serialize_owned(topic, headers, v),
        }
    }
    fn deserialize_owned(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<Option<T>, SerdeError> {
        match bytes {
            None => Ok(None),
            Some(_) => self.0.deserialize_owned(topic, headers, bytes).map(Some),
        }
    }
}

/// Any type with `serde` derives, as JSON text.
pub struct JsonSerde<T>(PhantomData<fn() -> T>);

impl<T> JsonSerde<T> {
    /// A JSON serde for `T`.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for JsonSerde<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for JsonSerde<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for JsonSerde<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JsonSerde<{}>", std::any::type_name::<T>())
    }
}

impl<T> Serde<T> for JsonSerde<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    fn serialize(
        &self,
        topic: &str,
        _: &mut Headers,
        value: &T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        serde_json::to_vec(value)
            .map(Some)
            .map_err(|source| SerdeError::Json {
                topic: topic.to_string(),
                type_name: std::any::type_name::<T>(),
                source,
            })
    }
    fn deserialize(&self, topic: &str, _: &Headers, bytes: Option<&[u8]>) -> Result<T, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<T>(topic))?;
        serde_json::from_slice(bytes).map_err(|source| SerdeError::Json {
            topic: topic.to_string(),
            type_name: std::any::type_name::<T>(),
            source,
        })
    }
}

macro_rules! default_serde {
    ($ty:ty, $serde:expr) => {
        impl DefaultSerde for $ty {
            fn default_serde() -> SharedSerde<Self> {
                Arc::new($serde)
            }
        }
    };
}

default_serde!(String, StringSerde);
default_serde!(Vec<u8>, BytesSerde);
default_serde!((), UnitSerde);
default_serde!(bool, BoolSerde);
default_serde!(i16, I16Serde);
default_serde!(i32, I32Serde);
default_serde!(i64, I64Serde);
default_serde!(f32, F32Serde);
default_serde!(f64, F64Serde);
default_serde!(uuid::Uuid, UuidSerde);

impl<T: DefaultSerde> DefaultSerde for Option<T> {
    fn default_serde() -> SharedSerde<Self> {
        Arc::new(Nullable(SharedInner(T::default_serde())))
    }
}

/// The default serde of `T` when `T` is one of the types with a built-in
/// serde (strings, bytes, unit, bool, i16, i32, i64, f32, f64, UUIDs, and
/// `Option` of each),
/// found by type at run time: what the DSL falls back on when an operator
/// changed a type and was given no serde, as Kafka Streams falls back on
/// `default.key.serde` and `default.value.serde`.
pub fn builtin_serde<T: 'static>() -> Option<SharedSerde<T>> {
    fn of<T: 'static, D: DefaultSerde>() -> Option<SharedSerde<T>> {
        let any: Box<dyn std::any::Any> = Box::new(D::default_serde());
        any.downcast::<SharedSerde<T>>().ok().map(|b| *b)
    }
    of::<T, String>()
        .or_else(of::<T, Vec<u8>>)
        .or_else(of::<T, i64>)
        .or_else(of::<T, i32>)
        .or_else(of::<T, f64>)
        .or_else(of::<T, ()>)
        .or_else(of::<T, bool>)
        .or_else(of::<T, i16>)
        .or_else(of::<T, f32>)
        .or_else(of::<T, uuid::Uuid>)
        .or_else(of::<T, Option<String>>)
        .or_else(of::<T, Option<Vec<u8>>>)
        .or_else(of::<T, Option<i64>>)
        .or_else(of::<T, Option<i32>>)
        .or_else(of::<T, Option<f64>>)
        .or_else(of::<T, Option<bool>>)
        .or_else(of::<T, Option<i16>>)
        .or_else(of::<T, Option<f32>>)
        .or_else(of::<T, Option<uuid::Uuid>>)
}

/// Adapts a shared serde so it can be wrapped by value (as in [`Nullable`]).
struct SharedInner<T>(SharedSerde<T>);

impl<T: 'static> Serde<T> for SharedInner<T> {
    fn is_null(&self, value: &T) -> bool {
        self.0.is_null(value)
    }
    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        self.0.base_key_len(serialized)
    }
    fn fixed_size(&self) -> Option<usize> {
        self.0.fixed_size()
    }
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        self.0.serialize(topic, headers, value)
    }
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        self.0.serialize_into(topic, headers, value, out)
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<T, SerdeError> {
        self.0.deserialize(topic, headers, bytes)
    }
    fn serialize_owned(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        self.0.serialize_owned(topic, headers, value)
    }
    fn deserialize_owned(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<T, SerdeError> {
        self.0.deserialize_owned(topic, headers, bytes)
    }
}

impl<T: 'static> Serde<T> for Arc<dyn Serde<T>> {
    fn is_null(&self, value: &T) -> bool {
        (**self).is_null(value)
    }
    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        (**self).base_key_len(serialized)
    }
    fn fixed_size(&self) -> Option<usize> {
        (**self).fixed_size()
    }
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        (**self).serialize(topic, headers, value)
    }
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        (**self).serialize_into(topic, headers, value, out)
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<T, SerdeError> {
        (**self).deserialize(topic, headers, bytes)
    }
    fn serialize_owned(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        (**self).serialize_owned(topic, headers, value)
    }
    fn deserialize_owned(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<Vec<u8>>,
    ) -> Result<T, SerdeError> {
        (**self).deserialize_owned(topic, headers, bytes)
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    #[test]
    fn builtin_serdes_are_found_by_type() {
        let s = builtin_serde::<String>().unwrap();
        assert_eq!(
            s.serialize("t", &mut Headers::new(), &"a".to_string())
                .unwrap(),
            Some(b"a".to_vec())
        );
        let n = builtin_serde::<Option<i64>>().unwrap();
        assert_eq!(n.serialize("t", &mut Headers::new(), &None).unwrap(), None);
        assert!(builtin_serde::<u8>().is_none());
        let b = builtin_serde::<bool>().unwrap();
        assert_eq!(
            b.serialize("t", &mut Headers::new(), &true).unwrap(),
            Some(vec![1])
        );
        let f = builtin_serde::<Option<f32>>().unwrap();
        assert_eq!(f.fixed_size(), Some(4), "the shared wrappers keep the size");
        assert_eq!(builtin_serde::<i16>().unwrap().fixed_size(), Some(2));
        let u = builtin_serde::<Option<uuid::Uuid>>().unwrap();
        assert_eq!(
            u.serialize("t", &mut Headers::new(), &Some(uuid::Uuid::nil()))
                .unwrap()
                .map(|b| b.len()),
            Some(36)
        );
    }

    /// The owned paths give what the borrowed paths give, through the
    /// shared and nullable wrappers too, and reuse the buffer they take.
    #[test]
    fn owned_serde_paths_agree_with_the_borrowed_ones() {
        let h = Headers::new();
        let strings: SharedSerde<String> = Arc::new(StringSerde);
        let bytes = b"caf\xc3\xa9".to_vec();
        let taken = bytes.as_ptr();
        let value = strings.deserialize_owned("t", &h, Some(bytes)).unwrap();
        assert_eq!(value, "café");
        assert_eq!(value.as_ptr(), taken, "the string took the consumed buffer");
        let out = strings
            .serialize_owned("t", &mut Headers::new(), value)
            .unwrap()
            .unwrap();
        assert_eq!(out.as_ptr(), taken, "the sink took the string's buffer");

        let invalid = strings.deserialize_owned("t", &h, Some(b"ok\xffa".to_vec()));
        let borrowed = StringSerde.deserialize("t", &h, Some(b"ok\xffa"));
        let message = invalid.unwrap_err().to_string();
        assert_eq!(message, borrowed.unwrap_err().to_string());
        assert!(
            message.contains("from index 2"),
            "the error says where the bytes stop being UTF-8: {message}"
        );
        assert!(strings.deserialize_owned("t", &h, None).is_err());

        let optional = builtin_serde::<Option<Vec<u8>>>().unwrap();
        assert_eq!(optional.deserialize_owned("t", &h, None).unwrap(), None);
        assert_eq!(
            optional
                .deserialize_owned("t", &h, Some(vec![1, 2]))
                .unwrap(),
            Some(vec![1, 2])
        );
        assert_eq!(
            optional
                .serialize_owned("t", &mut Headers::new(), Some(vec![3]))
                .unwrap(),
            Some(vec![3])
        );
        assert_eq!(
            optional
                .serialize_owned("t", &mut Headers::new(), None)
                .unwrap(),
            None
        );

        // A serde without owned paths of its own goes through its borrowed ones.
        let longs = builtin_serde::<i64>().unwrap();
        assert_eq!(
            longs
                .deserialize_owned("t", &h, Some(7i64.to_be_bytes().to_vec()))
                .unwrap(),
            7
        );
        assert_eq!(
            longs.serialize_owned("t", &mut Headers::new(), 7).unwrap(),
            Some(7i64.to_be_bytes().to_vec())
        );
    }
}
