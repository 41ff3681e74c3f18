//! Kafka's default partitioning of keyed records, for the records whose
//! partition kstreams picks itself rather than leaving it to librdkafka:
//! windowed keys, which `KStream::to` partitions by their plain key as Kafka
//! Streams' `WindowedStreamPartitioner` does. Same hash as the Java
//! producer's `BuiltInPartitioner.partitionForKey` and librdkafka's
//! `murmur2_random`, so a plain key lands where it would on its own.

/// The partition of `key` among `partitions`: `toPositive(murmur2(key)) %
/// partitions`.
pub(crate) fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// MurmurHash2 (32-bit, seed 0x9747b28c) as Kafka's `Utils.murmur2`
/// computes it.
fn murmur2(data: &[u8]) -> i32 {
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

    /// Values of org.apache.kafka.common.utils.Utils.murmur2.
    #[test]
    fn hashes_as_kafka() {
        for (key, hash) in [
            ("", 275646681),
            ("a", -1563381124),
            ("abc", 479470107),
            ("abcd", -1323649548),
            ("user-7", 696778364),
            ("hello", 2132663229),
            ("kafka streams", -412931767),
        ] {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key:?}");
        }
        assert_eq!(
            partition_for_key(b"a", 3),
            (-1563381124i32 & 0x7fff_ffff) % 3
        );
    }
}
