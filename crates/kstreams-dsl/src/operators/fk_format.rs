//! The bytes of a foreign-key join's internal topics, as Kafka Streams 4.4
//! writes them, so an application moved between the two reads the records
//! in flight and the subscription store's changelog:
//!
//! - subscription (`SubscriptionWrapperSerde`, version 1): a byte with the
//!   version (1) in its low 7 bits and 0x80 set when there is no hash, the
//!   instruction byte, the 16-byte hash when there is one, the primary key's
//!   bytes, the left record's partition (4 bytes, big-endian). Version 0 has
//!   no partition;
//! - response (`SubscriptionResponseWrapperSerde`, version 0): the version
//!   byte (0x80 set when there is no hash), the 16-byte hash when there is
//!   one, the right value's bytes (none for no value);
//! - the hash is `Murmur3.hash128` (x64, seed 104729) of the left value's
//!   bytes, its two 64-bit halves big-endian.

// Kafka Streams' `SubscriptionWrapper.Instruction`: what a subscription
// asks of the right side.

/// Unsubscribe, answer nothing (the left row moved to another foreign key).
pub(crate) const DELETE_KEY_NO_PROPAGATE: u8 = 0;
/// Unsubscribe and answer with no value (the left row is gone).
pub(crate) const DELETE_KEY_AND_PROPAGATE: u8 = 1;
/// Subscribe; answer even without a right row.
pub(crate) const PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE: u8 = 2;
/// Subscribe; answer only with a right row.
pub(crate) const PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE: u8 = 3;

/// The subscription version kstreams writes (Kafka Streams 3.5+'s current).
const SUBSCRIPTION_VERSION: u8 = 1;
/// The response version (Kafka Streams' current).
const RESPONSE_VERSION: u8 = 0;
const NO_HASH: u8 = 0x80;

/// A left value's hash as Kafka Streams computes it.
pub(crate) type ValueHash = [u8; 16];

/// A subscription as read from its topic or the subscription store.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Subscription<'a> {
    pub(crate) instruction: u8,
    pub(crate) hash: Option<ValueHash>,
    pub(crate) primary_key: &'a [u8],
    /// The left record's partition (none in version 0).
    pub(crate) primary_partition: Option<i32>,
}

pub(crate) fn subscription(
    instruction: u8,
    hash: Option<&ValueHash>,
    primary_key: &[u8],
    primary_partition: i32,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 16 + primary_key.len() + 4);
    match hash {
        Some(hash) => {
            out.push(SUBSCRIPTION_VERSION);
            out.push(instruction);
            out.extend_from_slice(hash);
        }
        None => {
            out.push(SUBSCRIPTION_VERSION | NO_HASH);
            out.push(instruction);
        }
    }
    out.extend_from_slice(primary_key);
    out.extend_from_slice(&primary_partition.to_be_bytes());
    out
}

pub(crate) fn parse_subscription(bytes: &[u8]) -> Option<Subscription<'_>> {
    let (&first, rest) = bytes.split_first()?;
    let version = first & 0x7f;
    if version > SUBSCRIPTION_VERSION {
        return None;
    }
    let (&instruction, rest) = rest.split_first()?;
    if instruction > PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE {
        return None;
    }
    let (hash, rest) = take_hash(first, rest)?;
    let (primary_key, primary_partition) = if version > 0 {
        let at = rest.len().checked_sub(4)?;
        let (pk, partition) = rest.split_at(at);
        (pk, Some(i32::from_be_bytes(partition.try_into().ok()?)))
    } else {
        (rest, None)
    };
    Some(Subscription {
        instruction,
        hash,
        primary_key,
        primary_partition,
    })
}

pub(crate) fn response(hash: Option<&ValueHash>, right: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + right.map_or(0, <[u8]>::len));
    match hash {
        Some(hash) => {
            out.push(RESPONSE_VERSION);
            out.extend_from_slice(hash);
        }
        None => out.push(RESPONSE_VERSION | NO_HASH),
    }
    out.extend_from_slice(right.unwrap_or_default());
    out
}

/// A response's hash and right value; as in Kafka Streams, no bytes after
/// the hash is no value.
pub(crate) fn parse_response(bytes: &[u8]) -> Option<(Option<ValueHash>, Option<&[u8]>)> {
    let (&first, rest) = bytes.split_first()?;
    if first & 0x7f != RESPONSE_VERSION {
        return None;
    }
    let (hash, rest) = take_hash(first, rest)?;
    Some((hash, (!rest.is_empty()).then_some(rest)))
}

/// The hash after a version byte `first` whose 0x80 bit says there is
/// none, and the bytes after it.
fn take_hash(first: u8, rest: &[u8]) -> Option<(Option<ValueHash>, &[u8])> {
    if first & NO_HASH != 0 {
        return Some((None, rest));
    }
    let hash: ValueHash = rest.get(..16)?.try_into().ok()?;
    Some((Some(hash), &rest[16..]))
}

/// Kafka Streams' `Murmur3.hash128(data)`: MurmurHash3 x64 128-bit with
/// seed 104729, the two halves big-endian.
pub(crate) fn murmur3_hash128(data: &[u8]) -> ValueHash {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    const SEED: u64 = 104_729;
    let mix_k1 = |k: u64| k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    let mix_k2 = |k: u64| k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    let (mut h1, mut h2) = (SEED, SEED);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let k1 = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
        let k2 = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
        h1 ^= mix_k1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let little_endian = |bytes: &[u8]| {
        bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    if tail.len() > 8 {
        h2 ^= mix_k2(little_endian(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(little_endian(&tail[..tail.len().min(8)]));
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&h1.to_be_bytes());
    out[8..].copy_from_slice(&h2.to_be_bytes());
    out
}

fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The subscription store's key (Kafka Streams' `CombinedKeySchema`): the
/// foreign key's length (4 bytes, big-endian) and bytes, then the primary
/// key, so one foreign key's subscriptions share a prefix.
pub(crate) fn subscription_key(fk: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut out = subscription_prefix(fk);
    out.extend_from_slice(pk);
    out
}

pub(crate) fn subscription_prefix(fk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fk.len());
    out.extend_from_slice(&(fk.len() as u32).to_be_bytes());
    out.extend_from_slice(fk);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_read_back_with_and_without_hash() {
        let hash = murmur3_hash128(b"v");
        let bytes = subscription(PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, Some(&hash), b"pk", 5);
        assert_eq!(
            parse_subscription(&bytes),
            Some(Subscription {
                instruction: 3,
                hash: Some(hash),
                primary_key: b"pk",
                primary_partition: Some(5),
            })
        );
        let bytes = subscription(DELETE_KEY_AND_PROPAGATE, None, b"pk", 0);
        assert_eq!(bytes, [0x81, 1, b'p', b'k', 0, 0, 0, 0]);
        // Version 0 (Kafka Streams before 3.5) has no partition.
        let v0 = parse_subscription(&[0x80, 2, b'p', b'k']).unwrap();
        assert_eq!((v0.primary_key, v0.primary_partition), (&b"pk"[..], None));
        assert!(parse_subscription(&[0x82, 2, b'p', b'k']).is_none());
        assert!(parse_subscription(&[0x81, 4, b'p', b'k', 0, 0, 0, 0]).is_none());
    }

    #[test]
    fn responses_read_back() {
        let hash = murmur3_hash128(b"v");
        assert_eq!(
            parse_response(&response(Some(&hash), Some(b"r"))),
            Some((Some(hash), Some(&b"r"[..])))
        );
        assert_eq!(parse_response(&response(None, None)), Some((None, None)));
        assert!(parse_response(&[0x01]).is_none());
    }
}
