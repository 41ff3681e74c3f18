//! Kafka's `ListSerde`: a list of values of one serde, in the layout of
//! Kafka's `ListSerializer` and `ListDeserializer` (described on
//! [`ListSerde`]).

use super::{malformed, null_error, Serde, SerdeError};
use crate::{ByteReader, Headers};

/// The layout flag of lists of fixed-size entries (Kafka's `CONSTANT_SIZE`).
const CONSTANT_SIZE: u8 = 0;
/// The layout flag of lists of length-prefixed entries (`VARIABLE_SIZE`).
const VARIABLE_SIZE: u8 = 1;
/// The length of a null entry in a `VARIABLE_SIZE` list.
const NULL_ENTRY: i32 = -1;

/// Kafka's message when the bytes end before a flag, count, index or length.
const CUT_SHORT: &str = "Unable to deserialize into a List";

/// Kafka's `ListSerde` (`Serdes.ListSerde(ArrayList.class, inner)`): a
/// `Vec` of the values of an inner serde, in Kafka's layout.
///
/// A list starts with a layout flag byte. Lists of Kafka's fixed-size
/// serdes (Short, Integer, Long, Float, Double and UUID; see
/// [`Serde::fixed_size`]) take flag 0: the count and indexes of the null
/// entries (i32s), the number of entries (i32), then each non-null entry's
/// bytes. Lists of any other serde take flag 1: the number of entries
/// (i32), then each entry as its length (i32, -1 for a null) and its
/// bytes. Reading goes by the flag, as Kafka's does, checks what Kafka
/// checks and fails with Kafka's messages ([`SerdeError::kafka_message`]);
/// bytes after the last entry are ignored, as Kafka ignores them.
///
/// Kafka's lists may hold nulls: read and write them as `Vec<Option<T>>`
/// with a [`Nullable`](crate::Nullable) inner serde. A `ListSerde` of a
/// non-nullable serde rejects a list with a null entry. The inner serde
/// sees the record's topic and headers, as Kafka's does.
///
/// ```
/// use kstreams_record::{Headers, I32Serde, ListSerde, Nullable, Serde, StringSerde};
///
/// // Kafka's ListSerde of Serdes.String(): flag 1, the size, each entry after its length.
/// let names = ListSerde(StringSerde);
/// let list = vec!["a".to_string(), "bc".to_string()];
/// let bytes = names.serialize("t", &mut Headers::new(), &list).unwrap().unwrap();
/// assert_eq!(bytes, [1, 0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 2, b'b', b'c']);
/// assert_eq!(names.deserialize("t", &Headers::new(), Some(&bytes)).unwrap(), list);
///
/// // Kafka's ListSerde of Serdes.Integer(), with a null: flag 0, one null at
/// // index 1, the size, then the 4 bytes of each non-null entry.
/// let counts = ListSerde(Nullable(I32Serde));
/// let bytes = counts.serialize("t", &mut Headers::new(), &vec![Some(7), None]).unwrap().unwrap();
/// assert_eq!(bytes, [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 7]);
/// assert_eq!(counts.deserialize("t", &Headers::new(), Some(&bytes)).unwrap(), vec![Some(7), None]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ListSerde<S>(pub S);

impl<T: 'static, S: Serde<T>> Serde<Vec<T>> for ListSerde<S> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Vec<T>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(topic, headers, value, &mut out)?;
        Ok(Some(out))
    }
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Vec<T>,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        let start = out.len();
        let written = match self.0.fixed_size() {
            Some(width) => self.write_constant_size(topic, headers, value, width, out),
            None => self.write_variable_size(topic, headers, value, out),
        };
        if written.is_err() {
            out.truncate(start);
        }
        written.map(|()| true)
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Vec<T>, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<Vec<T>>(topic))?;
        self.read(topic, headers, bytes)
    }
}

impl<S> ListSerde<S> {
    fn write_constant_size<T>(
        &self,
        topic: &str,
        headers: &mut Headers,
        list: &[T],
        width: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError>
    where
        S: Serde<T>,
    {
        out.push(CONSTANT_SIZE);
        let nulls: Vec<usize> = (0..list.len())
            .filter(|&i| self.0.is_null(&list[i]))
            .collect();
        out.extend_from_slice(&java_int(topic, nulls.len(), "null entries")?.to_be_bytes());
        for &i in &nulls {
            out.extend_from_slice(&java_int(topic, i, "entries")?.to_be_bytes());
        }
        out.extend_from_slice(&java_int(topic, list.len(), "entries")?.to_be_bytes());
        let mut nulls = nulls.into_iter().peekable();
        for (i, entry) in list.iter().enumerate() {
            if nulls.next_if_eq(&i).is_some() {
                continue;
            }
            let before = out.len();
            let written = self.0.serialize_into(topic, headers, entry, out)?;
            if !written || out.len() - before != width {
                return Err(SerdeError::Custom {
                    topic: topic.to_string(),
                    message: format!(
                        "list entry {i}: a serde of fixed size {width} wrote {}",
                        if written {
                            format!("{} bytes", out.len() - before)
                        } else {
                            "a null its is_null did not announce".to_string()
                        }
                    ),
                });
            }
        }
        Ok(())
    }

    fn write_variable_size<T>(
        &self,
        topic: &str,
        headers: &mut Headers,
        list: &[T],
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError>
    where
        S: Serde<T>,
    {
        out.push(VARIABLE_SIZE);
        out.extend_from_slice(&java_int(topic, list.len(), "entries")?.to_be_bytes());
        for entry in list {
            let at = out.len();
            out.extend_from_slice(&[0; 4]);
            let len = if self.0.serialize_into(topic, headers, entry, out)? {
                java_int(topic, out.len() - at - 4, "bytes in a list entry")?
            } else {
                NULL_ENTRY
            };
            out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        Ok(())
    }

    /// Kafka's `ListDeserializer#deserialize`, with its checks in its order
    /// and its messages.
    fn read<T>(&self, topic: &str, headers: &Headers, bytes: &[u8]) -> Result<Vec<T>, SerdeError>
    where
        S: Serde<T>,
    {
        let total = bytes.len();
        let mut r = ByteReader::new(bytes);
        let flag = r
            .take(1)
            .ok_or_else(|| cut_short(topic, "the layout flag"))?[0];
        // The null indexes and width of a constant-size list; None for a
        // variable-size one.
        let constant = match flag {
            CONSTANT_SIZE => {
                let width = self.0.fixed_size().ok_or_else(|| {
                    malformed(
                        topic,
                        "Data is encoded as constant size entries, but configured inner \
                         deserializer is not a known fixed-size deserializer.",
                        "flag 0 is for lists of Kafka's Short, Integer, Long, Float, Double \
                         and UUID serdes",
                    )
                })?;
                Some((width, read_null_indexes(topic, &mut r, total)?))
            }
            VARIABLE_SIZE => None,
            other => {
                return Err(malformed(
                    topic,
                    "Invalid serialization strategy flag value",
                    format!("flag {other}, a list has 0 or 1"),
                ))
            }
        };
        let size = r
            .i32()
            .ok_or_else(|| cut_short(topic, "the number of entries"))?;
        let size = usize::try_from(size).map_err(|_| {
            malformed(
                topic,
                "Corrupted byte[]. The number of list entries cannot be negative.",
                format!("{size} entries"),
            )
        })?;
        if size > total {
            return Err(malformed(
                topic,
                "Corrupted byte[]. The number of list entries cannot be larger than overall \
                 number of bytes.",
                format!("{size} entries in {total} bytes"),
            ));
        }
        let mut list = Vec::with_capacity(size);
        for i in 0..size {
            let len = match &constant {
                Some((width, nulls)) => {
                    let is_null = i32::try_from(i).is_ok_and(|i| nulls.binary_search(&i).is_ok());
                    (!is_null).then_some(*width)
                }
                None => read_entry_len(topic, &mut r, total, i)?,
            };
            let entry = match len {
                None => self
                    .0
                    .deserialize(topic, headers, None)
                    .map_err(|e| null_entry(e, i))?,
                Some(len) => {
                    let left = r.rest().len();
                    let payload = r.take(len).ok_or_else(|| {
                        malformed(
                            topic,
                            "End of the stream was reached prematurely",
                            format!("entry {i} needs {len} bytes, {left} left"),
                        )
                    })?;
                    self.0.deserialize(topic, headers, Some(payload))?
                }
            };
            list.push(entry);
        }
        // Like Kafka, bytes after the last entry are not read.
        Ok(list)
    }
}

/// The sorted indexes of a constant-size list's null entries.
fn read_null_indexes(
    topic: &str,
    r: &mut ByteReader<'_>,
    total: usize,
) -> Result<Vec<i32>, SerdeError> {
    let count = r
        .i32()
        .ok_or_else(|| cut_short(topic, "the number of null entries"))?;
    let count = usize::try_from(count).map_err(|_| {
        malformed(
            topic,
            "Corrupted byte[]. The number of null list entries cannot be negative.",
            format!("{count} null entries"),
        )
    })?;
    if count > total / 4 {
        return Err(malformed(
            topic,
            "Corrupted byte[]. The number of null list entries cannot be larger than overall \
             number of elements.",
            format!("{count} null entries in {total} bytes"),
        ));
    }
    let mut nulls = (0..count)
        .map(|_| {
            r.i32()
                .ok_or_else(|| cut_short(topic, "the null entries' indexes"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    nulls.sort_unstable();
    Ok(nulls)
}

/// A variable-size list's entry length, `None` for a null entry.
fn read_entry_len(
    topic: &str,
    r: &mut ByteReader<'_>,
    total: usize,
    i: usize,
) -> Result<Option<usize>, SerdeError> {
    let len = r
        .i32()
        .ok_or_else(|| cut_short(topic, &format!("entry {i}'s length")))?;
    if len == NULL_ENTRY {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| {
        malformed(
            topic,
            "Corrupted byte[]. A list entry cannot have negative size.",
            format!("entry {i} has length {len}"),
        )
    })?;
    if len > total {
        return Err(malformed(
            topic,
            "Corrupted byte[]. A list entry cannot be larger than the overall number of bytes.",
            format!("entry {i} has length {len} in {total} bytes"),
        ));
    }
    Ok(Some(len))
}

/// The bytes end before `what` is complete.
fn cut_short(topic: &str, what: &str) -> SerdeError {
    malformed(topic, CUT_SHORT, format!("the bytes end inside {what}"))
}

/// A null entry that the inner serde cannot read, said as a list's.
fn null_entry(error: SerdeError, i: usize) -> SerdeError {
    match error {
        SerdeError::UnexpectedNull { topic, type_name } => SerdeError::Custom {
            topic,
            message: format!(
                "list entry {i} is null, which a {type_name} cannot be; read the list \
                 as Vec<Option<_>> with ListSerde(Nullable(..))"
            ),
        },
        other => other,
    }
}

/// A count or index as the Java int Kafka's layout has for it.
fn java_int(topic: &str, n: usize, what: &str) -> Result<i32, SerdeError> {
    i32::try_from(n).map_err(|_| SerdeError::Custom {
        topic: topic.to_string(),
        message: format!("a list holds at most {} {what}, got {n}", i32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BytesSerde, I32Serde, I64Serde, Nullable, StringSerde, UnitSerde, UuidSerde};

    fn write<T: 'static>(serde: &impl Serde<Vec<T>>, list: &Vec<T>) -> Vec<u8> {
        serde
            .serialize("t", &mut Headers::new(), list)
            .unwrap()
            .unwrap()
    }

    fn read<T: 'static>(serde: &impl Serde<Vec<T>>, bytes: &[u8]) -> Result<Vec<T>, SerdeError> {
        serde.deserialize("t", &Headers::new(), Some(bytes))
    }

    #[test]
    fn fixed_size_serdes_write_constant_size_lists() {
        let serde = ListSerde(Nullable(I64Serde));
        let list = vec![Some(1), None, Some(-1), None];
        let bytes = write(&serde, &list);
        let mut expected = vec![0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 4];
        expected.extend_from_slice(&1i64.to_be_bytes());
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(read(&serde, &bytes).unwrap(), list);
        assert_eq!(
            write(&ListSerde(I32Serde), &vec![]),
            [0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn other_serdes_write_each_entry_after_its_length() {
        let serde = ListSerde(Nullable(StringSerde));
        let list = vec![Some("a".to_string()), None, Some(String::new())];
        let bytes = write(&serde, &list);
        assert_eq!(
            bytes,
            [1, 0, 0, 0, 3, 0, 0, 0, 1, b'a', 255, 255, 255, 255, 0, 0, 0, 0]
        );
        assert_eq!(read(&serde, &bytes).unwrap(), list);
        // A list of unit values is all nulls.
        assert_eq!(
            write(&ListSerde(UnitSerde), &vec![(), ()]),
            [1, 0, 0, 0, 2, 255, 255, 255, 255, 255, 255, 255, 255]
        );
        // Lists nest, the inner one as a variable-size entry.
        let nested = ListSerde(ListSerde(I32Serde));
        let list = vec![vec![5], vec![]];
        assert_eq!(read(&nested, &write(&nested, &list)).unwrap(), list);
    }

    #[test]
    fn serialize_into_appends_and_leaves_the_buffer_alone_on_errors() {
        let mut out = vec![9];
        assert!(ListSerde(BytesSerde)
            .serialize_into("t", &mut Headers::new(), &vec![vec![7]], &mut out)
            .unwrap());
        assert_eq!(out, [9, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7]);

        /// Claims 4 bytes, writes 3.
        struct Liar;
        impl Serde<u8> for Liar {
            fn fixed_size(&self) -> Option<usize> {
                Some(4)
            }
            fn serialize(
                &self,
                _: &str,
                _: &mut Headers,
                _: &u8,
            ) -> Result<Option<Vec<u8>>, SerdeError> {
                Ok(Some(vec![1, 2, 3]))
            }
            fn deserialize(
                &self,
                _: &str,
                _: &Headers,
                _: Option<&[u8]>,
            ) -> Result<u8, SerdeError> {
                Ok(0)
            }
        }
        let mut out = vec![9];
        let err = ListSerde(Liar)
            .serialize_into("t", &mut Headers::new(), &vec![1], &mut out)
            .unwrap_err();
        assert_eq!(out, [9]);
        assert!(
            err.to_string().contains("fixed size 4 wrote 3 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_null_entry_needs_a_nullable_inner_serde() {
        let bytes = write(&ListSerde(Nullable(I32Serde)), &vec![None, Some(1)]);
        let err = read(&ListSerde(I32Serde), &bytes).unwrap_err();
        assert!(
            err.to_string()
                .contains("list entry 0 is null, which a i32 cannot be"),
            "{err}"
        );
        let bytes = write(&ListSerde(Nullable(StringSerde)), &vec![None]);
        assert!(read(&ListSerde(StringSerde), &bytes).is_err());
    }

    #[test]
    fn reading_follows_the_flag_not_the_inner_serde() {
        // A variable-size list of a fixed-size serde reads (Kafka's reader
        // goes by the flag too).
        let bytes = [1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9];
        assert_eq!(read(&ListSerde(I32Serde), &bytes).unwrap(), vec![9]);
        // A constant-size list needs a fixed-size inner serde.
        let bytes = write(&ListSerde(UuidSerde), &vec![uuid::Uuid::nil()]);
        assert_eq!(bytes.len(), 1 + 4 + 4 + 36);
        let err = read(&ListSerde(BytesSerde), &bytes).unwrap_err();
        assert!(err
            .kafka_message()
            .starts_with("Data is encoded as constant size"));
        // Null indexes out of range or repeated are ignored, as in Kafka;
        // so are bytes after the last entry.
        let bytes = [
            0, 0, 0, 0, 2, 0, 0, 0, 9, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 5, 1,
        ];
        assert_eq!(read(&ListSerde(I32Serde), &bytes).unwrap(), vec![5]);
    }

    #[test]
    fn malformed_lists_are_errors_with_kafkas_messages() {
        let cases: [(&[u8], &str, &str); 8] = [
            (&[], CUT_SHORT, "the bytes end inside the layout flag"),
            (&[2], "Invalid serialization strategy flag value", "flag 2"),
            (&[1, 0, 0], CUT_SHORT, "the number of entries"),
            (&[1, 255, 255, 255, 255], "cannot be negative", "-1 entries"),
            (
                &[1, 0, 0, 0, 9],
                "cannot be larger than overall number of bytes",
                "9 entries in 5 bytes",
            ),
            (
                &[1, 0, 0, 0, 1, 255, 255, 255, 254],
                "cannot have negative size",
                "length -2",
            ),
            (
                &[1, 0, 0, 0, 1, 0, 0, 0, 3, 1],
                "End of the stream was reached prematurely",
                "entry 0 needs 3 bytes, 1 left",
            ),
            (
                &[1, 0, 0, 0, 2, 0, 0, 0, 0, 0],
                CUT_SHORT,
                "entry 1's length",
            ),
        ];
        for (bytes, kafka, detail) in cases {
            let err = read(&ListSerde(BytesSerde), bytes).unwrap_err();
            assert!(err.kafka_message().contains(kafka), "{bytes:?}: {err}");
            assert!(err.to_string().contains(detail), "{bytes:?}: {err}");
        }
        let err = read(&ListSerde(I32Serde), &[0, 255, 255, 255, 255]).unwrap_err();
        assert!(
            err.kafka_message()
                .contains("null list entries cannot be negative"),
            "{err}"
        );
        let err = read(&ListSerde(I32Serde), &[0, 0, 0, 0, 2]).unwrap_err();
        assert!(
            err.kafka_message()
                .contains("null list entries cannot be larger"),
            "{err}"
        );
        assert!(matches!(
            ListSerde(I32Serde).deserialize("t", &Headers::new(), None),
            Err(SerdeError::UnexpectedNull { .. })
        ));
    }
}
