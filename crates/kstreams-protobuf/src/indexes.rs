//! Confluent's message indexes: which message of the schema's `.proto`
//! file a record holds, written between the schema id and the message.
//!
//! A path of indexes: the first is the message's position among the file's
//! top-level messages, each next one its position among the nested
//! messages of the one before. Encoded as a count, then each index, all as
//! zig-zag varints (Kafka's `ByteUtils.writeVarint`); the path `[0]`, the
//! file's first message and the common case, is the single byte `0` (a
//! count of zero).
//!
//! ```
//! use kstreams_protobuf::indexes;
//!
//! let mut out = Vec::new();
//! indexes::write(&[0], &mut out);
//! assert_eq!(out, [0]);
//! out.clear();
//! indexes::write(&[1, 2], &mut out);
//! assert_eq!(out, [4, 2, 4]); // count 2, then 1 and 2, zig-zag
//! assert_eq!(indexes::read(&out)?, (vec![1, 2], &[][..]));
//! # Ok::<(), kstreams_schema_registry::Error>(())
//! ```

use kstreams_schema_registry::{Error, Result};

/// Appends the encoding of `path` to `out`.
pub fn write(path: &[i32], out: &mut Vec<u8>) {
    if path == [0] {
        out.push(0);
        return;
    }
    write_varint(path.len() as i32, out);
    for &index in path {
        write_varint(index, out);
    }
}

/// Reads a path from the start of `bytes`; returns it and the bytes after
/// it (the message).
pub fn read(bytes: &[u8]) -> Result<(Vec<i32>, &[u8])> {
    let (count, mut rest) = read_varint(bytes, "the message index count")?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    // Each index takes at least one byte: a count past the bytes left is
    // a corrupt record, and must not size an allocation.
    if count < 0 || count as usize > rest.len() {
        return Err(Error::protobuf(
            "bad message indexes",
            format!(
                "the record says {count} message indexes, but {} byte(s) follow",
                rest.len()
            ),
        ));
    }
    let mut path = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (index, after) = read_varint(rest, "a message index")?;
        if index < 0 {
            return Err(Error::protobuf(
                "bad message indexes",
                format!("message index {index} is negative"),
            ));
        }
        path.push(index);
        rest = after;
    }
    Ok((path, rest))
}

fn write_varint(value: i32, out: &mut Vec<u8>) {
    let mut zigzag = ((value << 1) ^ (value >> 31)) as u32;
    while zigzag >= 0x80 {
        out.push((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// A zig-zag varint of at most 5 bytes, as Kafka's `ByteUtils.readVarint`.
fn read_varint<'a>(bytes: &'a [u8], what: &str) -> Result<(i32, &'a [u8])> {
    let mut value: u32 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(5) {
        if i == 4 && byte > 0x0f {
            return Err(Error::protobuf(
                "bad message indexes",
                format!("{what} is a varint longer than 32 bits"),
            ));
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let decoded = ((value >> 1) as i32) ^ -((value & 1) as i32);
            return Ok((decoded, &bytes[i + 1..]));
        }
    }
    Err(Error::protobuf(
        "bad message indexes",
        format!("the record ends inside {what}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        for path in [vec![0], vec![1], vec![0, 0], vec![3, 70, 1], vec![i32::MAX]] {
            let mut out = Vec::new();
            write(&path, &mut out);
            out.push(0x2a);
            assert_eq!(read(&out).unwrap(), (path, &[0x2a][..]));
        }
    }

    #[test]
    fn varints_are_zig_zag_as_kafkas() {
        let mut out = Vec::new();
        for value in [0, -1, 1, -2, 63, -64, 64, i32::MIN, i32::MAX] {
            out.clear();
            write_varint(value, &mut out);
            assert_eq!(read_varint(&out, "x").unwrap(), (value, &[][..]));
        }
        out.clear();
        write_varint(64, &mut out);
        assert_eq!(out, [0x80, 0x01]);
    }

    #[test]
    fn bad_indexes_are_errors() {
        let message = |bytes: &[u8]| read(bytes).unwrap_err().to_string();
        assert!(message(&[]).contains("ends inside the message index count"));
        assert!(message(&[0x80]).contains("ends inside"));
        assert!(message(&[0xff, 0xff, 0xff, 0xff, 0x7f]).contains("longer than 32 bits"));
        assert!(message(&[0x01]).contains("-1 message indexes"));
        assert!(message(&[0x7e, 0]).contains("63 message indexes, but 1 byte"));
        assert!(message(&[0x02, 0x01]).contains("negative"));
        assert!(message(&[0x04, 0x02, 0x80]).contains("ends inside a message index"));
    }
}
