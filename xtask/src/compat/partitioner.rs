//! Kafka's default partitioning of keyed records, computed independently so
//! that expected outputs say which partition every record lands in.
//!
//! The Java producer and Kafka Streams' sinks both place a record with a
//! non-null key at `toPositive(murmur2(keyBytes)) % partitions`, where murmur2
//! is MurmurHash2 (32-bit) with seed 0x9747b28c.

/// MurmurHash2 as Kafka computes it (Java int arithmetic, unsigned shifts).
pub(super) fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("chunk of 4"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for `key`.
pub(super) fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by org.apache.kafka.common.utils.Utils.murmur2 (4.1.2).
    #[test]
    fn matches_kafka() {
        let cases: &[(&str, i32)] = &[
            ("", 275646681),
            ("a", -1563381124),
            ("ab", 316155434),
            ("abc", 479470107),
            ("abcd", -1323649548),
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("user-7", 696778364),
            ("hello", 2132663229),
            ("kafka streams", -412931767),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), *expected, "murmur2({input:?})");
        }
    }
}
