//! The Confluent wire format: one magic byte `0`, the schema id as a 4-byte
//! big-endian integer, then the payload: an Avro binary datum, Protobuf
//! message indexes and the message, or a JSON document.
//!
//! ```
//! use kstreams_schema_registry::wire::{self, SchemaId};
//!
//! let mut record = Vec::new();
//! wire::write_header(SchemaId(7), &mut record);
//! record.extend_from_slice(b"{}");
//! assert_eq!(wire::split(&record)?, (SchemaId(7), &b"{}"[..]));
//! # Ok::<(), kstreams_schema_registry::Error>(())
//! ```

use std::fmt;

use crate::error::{Error, Result};

/// The first byte of every record in the Confluent wire format.
pub const MAGIC_BYTE: u8 = 0;

/// Magic byte plus schema id.
pub const HEADER_LEN: usize = 5;

/// A schema's id in the registry: the 4 bytes after the magic byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaId(pub u32);

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Appends the magic byte and `id` to `out`; the payload follows.
pub fn write_header(id: SchemaId, out: &mut Vec<u8>) {
    out.push(MAGIC_BYTE);
    out.extend_from_slice(&id.0.to_be_bytes());
}

/// Splits a record into its schema id and its payload.
pub fn split(bytes: &[u8]) -> Result<(SchemaId, &[u8])> {
    // The magic byte is checked first: a short JSON or string payload should
    // be reported for what it is, not as a truncated record.
    match bytes.first() {
        None => return Err(Error::Truncated { len: 0 }),
        Some(&found) if found != MAGIC_BYTE => return Err(Error::WrongMagicByte { found }),
        Some(_) => {}
    }
    let (header, datum) = bytes
        .split_at_checked(HEADER_LEN)
        .ok_or(Error::Truncated { len: bytes.len() })?;
    let id = u32::from_be_bytes(
        header[1..]
            .try_into()
            .expect("4 bytes after the magic byte"),
    );
    Ok((SchemaId(id), datum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_magic_then_big_endian_id() {
        let mut out = Vec::new();
        write_header(SchemaId(0x0102_0304), &mut out);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        out.push(42);
        assert_eq!(split(&out).unwrap(), (SchemaId(0x0102_0304), &[42u8][..]));
    }

    #[test]
    fn a_header_alone_is_an_empty_datum() {
        assert_eq!(split(&[0, 0, 0, 0, 7]).unwrap(), (SchemaId(7), &[][..]));
    }

    #[test]
    fn short_and_foreign_bytes_are_errors() {
        assert!(matches!(split(&[]), Err(Error::Truncated { len: 0 })));
        assert!(matches!(
            split(&[0, 0, 1]),
            Err(Error::Truncated { len: 3 })
        ));
        assert!(matches!(
            split(b"{\"a\":1}"),
            Err(Error::WrongMagicByte { found: b'{' })
        ));
        let message = split(&[1, 0, 0, 0, 1]).unwrap_err().to_string();
        assert!(message.contains("0x01"), "{message}");
    }
}
