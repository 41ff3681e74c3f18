//! Kafka's `BooleanSerde`: one byte per boolean.

use super::{malformed, null_error, Serde, SerdeError};
use crate::Headers;

/// Kafka's `BooleanSerde` (`Serdes.Boolean()`): `true` as the byte `01`,
/// `false` as `00`. Reading takes exactly one byte, `00` or `01`, and
/// rejects anything else as Kafka's `BooleanDeserializer` does.
#[derive(Clone, Copy, Debug, Default)]
pub struct BoolSerde;

impl Serde<bool> for BoolSerde {
    fn serialize(
        &self,
        _: &str,
        _: &mut Headers,
        value: &bool,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(vec![u8::from(*value)]))
    }
    fn serialize_into(
        &self,
        _: &str,
        _: &mut Headers,
        value: &bool,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        out.push(u8::from(*value));
        Ok(true)
    }
    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<bool, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<bool>(topic))?;
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            [other] => Err(malformed(
                topic,
                // Java prints the byte signed.
                format!(
                    "Unexpected byte received by BooleanDeserializer: {}",
                    *other as i8
                ),
                format!("0x{other:02x}; a boolean is 0x00 or 0x01"),
            )),
            _ => Err(SerdeError::WrongSize {
                topic: topic.to_string(),
                type_name: "bool",
                expected: 1,
                actual: bytes.len(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_one_byte_and_other_bytes_are_errors() {
        let h = Headers::new();
        for (value, byte) in [(true, 1u8), (false, 0)] {
            assert_eq!(
                BoolSerde
                    .serialize("t", &mut Headers::new(), &value)
                    .unwrap(),
                Some(vec![byte])
            );
            let mut out = vec![9];
            assert!(BoolSerde
                .serialize_into("t", &mut Headers::new(), &value, &mut out)
                .unwrap());
            assert_eq!(out, [9, byte]);
            assert_eq!(
                BoolSerde.deserialize("t", &h, Some(&[byte])).unwrap(),
                value
            );
        }
        let err = BoolSerde.deserialize("t", &h, Some(&[0xff])).unwrap_err();
        assert_eq!(
            err.kafka_message(),
            "Unexpected byte received by BooleanDeserializer: -1"
        );
        assert_eq!(
            err.to_string(),
            "topic t: Unexpected byte received by BooleanDeserializer: -1 \
             (0xff; a boolean is 0x00 or 0x01)"
        );
        for bytes in [&[][..], &[1, 0][..]] {
            let err = BoolSerde.deserialize("t", &h, Some(bytes)).unwrap_err();
            assert_eq!(
                err.kafka_message(),
                "Size of data received by BooleanDeserializer is not 1"
            );
        }
        assert!(matches!(
            BoolSerde.deserialize("t", &h, None),
            Err(SerdeError::UnexpectedNull { .. })
        ));
    }
}
