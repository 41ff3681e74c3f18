//! Kafka's default partitioning of keyed records: `toPositive(murmur2(key))
//! % partitions`, as the Java producer's `BuiltInPartitioner.partitionForKey`
//! and librdkafka's `murmur2_random` compute it. kstreams uses it where it
//! picks a partition itself (a windowed key's plain key, a key's metadata
//! for interactive queries), so a key lands where Kafka would put it.

/// The partition of `key` among `partitions`: `toPositive(murmur2(key)) %
/// partitions`.
///
/// ```
/// assert_eq!(kstreams_record::partition_for_key(b"user-7", 3), 696778364 % 3);
/// ```
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// MurmurHash2 (32-bit, seed 0x9747b28c) as Kafka's `Utils.murmur2`
/// computes it (Java int arithmetic, unsigned shifts).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by org.apache.kafka.common.utils.Utils.murmur2.
    #[test]
    fn hashes_as_kafka() {
        for (key, hash) in [
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
        ] {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key:?}");
        }
    }

    #[test]
    fn a_negative_hash_is_made_positive_before_the_modulo() {
        assert_eq!(
            partition_for_key(b"a", 3),
            (-1563381124i32 & 0x7fff_ffff) % 3
        );
    }
}
