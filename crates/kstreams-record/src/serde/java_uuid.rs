//! Kafka's `UUIDSerde`: a UUID as its text, read back as Java's
//! `UUID.fromString` reads it.

use uuid::Uuid;

use super::{malformed, null_error, Serde, SerdeError};
use crate::Headers;

/// The length of a UUID's text: 32 hex digits and 4 dashes.
const TEXT_LEN: usize = 36;

/// Kafka's message for any text that is no UUID.
const NOT_A_UUID: &str = "Error parsing data into UUID";

/// Kafka's `UUIDSerde` (`Serdes.UUID()`): a [`Uuid`] as its text in UTF-8,
/// as Java's `UUID.toString()` writes it: 36 bytes, lowercase hex in
/// groups of 8-4-4-4-12 (`123e4567-e89b-12d3-a456-426614174000`).
///
/// Reading accepts the text Java's `UUID.fromString` accepts, which is
/// more than the canonical form: upper case, groups with fewer digits
/// (`1-2-3-4-5`), a leading `+` in a group, and groups with more digits,
/// of which the low ones count. It rejects what Java rejects (the 32
/// digits without dashes, braces, more than 36 characters), with Kafka's
/// message. One difference: Java also takes non-ASCII digits (Arabic-Indic,
/// full-width); this serde does not.
#[derive(Clone, Copy, Debug, Default)]
pub struct UuidSerde;

impl Serde<Uuid> for UuidSerde {
    fn fixed_size(&self) -> Option<usize> {
        Some(TEXT_LEN)
    }
    fn serialize(
        &self,
        _: &str,
        _: &mut Headers,
        value: &Uuid,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut text = [0; TEXT_LEN];
        Ok(Some(
            value
                .hyphenated()
                .encode_lower(&mut text)
                .as_bytes()
                .to_vec(),
        ))
    }
    fn serialize_into(
        &self,
        _: &str,
        _: &mut Headers,
        value: &Uuid,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        let mut text = [0; TEXT_LEN];
        out.extend_from_slice(value.hyphenated().encode_lower(&mut text).as_bytes());
        Ok(true)
    }
    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Uuid, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<Uuid>(topic))?;
        let text = std::str::from_utf8(bytes)
            .map_err(|source| malformed(topic, NOT_A_UUID, format!("not UTF-8: {source}")))?;
        java_from_string(text).map_err(|detail| malformed(topic, NOT_A_UUID, detail))
    }
}

/// Java's `UUID.fromString`: five groups of hex digits separated by four
/// dashes, at most 36 characters, each group masked to its width (8, 4, 4,
/// 4 and 12 digits). Why the text is no UUID otherwise.
fn java_from_string(text: &str) -> Result<Uuid, String> {
    // Java counts UTF-16 units; any non-ASCII text fails below anyway.
    let len = text.encode_utf16().count();
    if len > TEXT_LEN {
        return Err(format!("{len} characters, a UUID has at most {TEXT_LEN}"));
    }
    let mut groups = [0u64; 5];
    let mut parts = text.split('-');
    for (i, group) in groups.iter_mut().enumerate() {
        let part = parts.next().ok_or_else(|| dashes(text))?;
        *group = java_hex_long(part)
            .ok_or_else(|| format!("group {} is not a hexadecimal number", i + 1))?;
    }
    if parts.next().is_some() {
        return Err(dashes(text));
    }
    let [a, b, c, d, e] = groups;
    let high = (a & 0xffff_ffff) << 32 | (b & 0xffff) << 16 | (c & 0xffff);
    let low = (d & 0xffff) << 48 | (e & 0xffff_ffff_ffff);
    Ok(Uuid::from_u64_pair(high, low))
}

fn dashes(text: &str) -> String {
    let found = text.bytes().filter(|&b| b == b'-').count();
    format!("{found} dashes, a UUID has 4")
}

/// Java's `Long.parseLong(group, 16)` for a group without dashes: an
/// optional `+`, then at least one hex digit, at most `Long.MAX_VALUE`.
fn java_hex_long(group: &str) -> Option<u64> {
    let digits = group.strip_prefix('+').unwrap_or(group);
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for c in digits.chars() {
        value = value
            .checked_mul(16)?
            .checked_add(u64::from(c.to_digit(16)?))?;
        if value > i64::MAX as u64 {
            return None;
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &[u8]) -> Result<Uuid, SerdeError> {
        UuidSerde.deserialize("t", &Headers::new(), Some(text))
    }

    #[test]
    fn uuids_are_their_lowercase_text() {
        let id = Uuid::from_u64_pair(0x123e_4567_e89b_12d3, 0xa456_4266_1417_4000);
        let text = b"123e4567-e89b-12d3-a456-426614174000";
        assert_eq!(
            UuidSerde.serialize("t", &mut Headers::new(), &id).unwrap(),
            Some(text.to_vec())
        );
        let mut out = vec![7];
        UuidSerde
            .serialize_into("t", &mut Headers::new(), &id, &mut out)
            .unwrap();
        assert_eq!(&out[1..], text);
        assert_eq!(read(text).unwrap(), id);
        assert_eq!(read(b"123E4567-E89B-12D3-A456-426614174000").unwrap(), id);
    }

    #[test]
    fn reading_takes_what_java_takes() {
        assert_eq!(
            read(b"1-2-3-4-5").unwrap(),
            Uuid::from_u64_pair(0x0000_0001_0002_0003, 0x0004_0000_0000_0005)
        );
        assert_eq!(
            read(b"+a-+b-c-d-e").unwrap(),
            Uuid::from_u64_pair(0x0000_000a_000b_000c, 0x000d_0000_0000_000e)
        );
        // Digits beyond a group's width are dropped, as Java masks them.
        assert_eq!(
            read(b"123456789a-1ffff-1-1-1234567890abc").unwrap(),
            Uuid::from_u64_pair(0x3456_789a_ffff_0001, 0x0001_2345_6789_0abc)
        );
        for bad in [
            &b""[..],
            b"123e4567e89b12d3a456426614174000",
            b"{123e4567-e89b-12d3-a456-426614174000}",
            b"123e4567-e89b-12d3-a456-4266141740000",
            b"1-2-3-4",
            b"1-2-3-4-5-6",
            b"1--1-1-1",
            b"+-1-1-1-1",
            b"++1-1-1-1-1",
            b"g-1-1-1-1",
            b"8000000000000000-1-1-1-1",
            b"\xff-1-1-1-1",
        ] {
            let err = read(bad).unwrap_err();
            assert_eq!(err.kafka_message(), NOT_A_UUID, "{bad:?}");
            assert!(
                err.to_string()
                    .starts_with("topic t: Error parsing data into UUID ("),
                "{err}"
            );
        }
        assert_eq!(
            read(b"7fffffffffffffff-1-1-1-1").unwrap(),
            Uuid::from_u64_pair(0xffff_ffff_0001_0001, 0x0001_0000_0000_0001)
        );
        assert!(matches!(
            UuidSerde.deserialize("t", &Headers::new(), None),
            Err(SerdeError::UnexpectedNull { .. })
        ));
    }
}
