//! The iteration order of a Java `HashSet`, for what Kafka Streams hands the
//! streams group protocol as sets: the co-partition groups of a topology
//! and the topics in each. The heartbeat carries them as lists, and the
//! broker keeps the topology of the first member and refuses a member whose
//! topology differs, in order too; so a kstreams member sharing a group
//! with Kafka Streams members must list them as a `HashSet` iterates.
//!
//! A `HashSet` iterates its table's buckets in order; an element's bucket is
//! its spread hash (`h ^ (h >>> 16)`) modulo the table's capacity, a power
//! of two, at least 16, and large enough that the set is at most 3/4 full.
//! Elements sharing a bucket keep their insertion order (here: the order
//! given).

/// Java's `hashCode` of a value that Kafka Streams keeps in a `HashSet`.
pub(crate) trait JavaHash {
    fn java_hash(&self) -> i32;
}

/// `String#hashCode`: over UTF-16 code units, `h = 31 * h + c`.
impl JavaHash for String {
    fn java_hash(&self) -> i32 {
        self.encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
    }
}

/// `AbstractSet#hashCode` of a set of strings: the sum of their hashes.
impl JavaHash for Vec<String> {
    fn java_hash(&self) -> i32 {
        self.iter()
            .fold(0i32, |sum, s| sum.wrapping_add(s.java_hash()))
    }
}

/// `items` in the order a `HashSet` holding them iterates.
pub(crate) fn java_hash_set_order<T: JavaHash>(items: Vec<T>) -> Vec<T> {
    let mut capacity: usize = 16;
    while items.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mask = capacity - 1;
    let mut keyed: Vec<(usize, T)> = items
        .into_iter()
        .map(|item| {
            let h = item.java_hash() as u32;
            ((h ^ (h >> 16)) as usize & mask, item)
        })
        .collect();
    // Stable: elements of one bucket keep the order given.
    keyed.sort_by_key(|(bucket, _)| *bucket);
    keyed.into_iter().map(|(_, item)| item).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn string_hashes_are_javas() {
        // What "...".hashCode() returns in Java 17.
        assert_eq!(String::new().java_hash(), 0);
        assert_eq!("a".to_string().java_hash(), 97);
        assert_eq!("orders".to_string().java_hash(), -1008770331);
        assert_eq!("polygenelubricants".to_string().java_hash(), i32::MIN);
        assert_eq!("é".to_string().java_hash(), 233);
    }

    #[test]
    fn a_hash_set_iterates_by_bucket() {
        // What Java 17 prints for each set.
        assert_eq!("clicks".to_string().java_hash(), -1357714453);
        assert_eq!(
            java_hash_set_order(strings(&["orders", "clicks", "a"])),
            strings(&["a", "clicks", "orders"])
        );
        let groups = vec![strings(&["b"]), strings(&["a"])];
        assert_eq!(
            java_hash_set_order(groups),
            vec![strings(&["a"]), strings(&["b"])]
        );
        // Twenty elements: a table of 32 buckets.
        let many: Vec<String> = (0..20).map(|i| format!("app-topic-{i}")).collect();
        let expected: Vec<String> = [
            0, 1, 19, 17, 18, 8, 9, 6, 7, 4, 5, 2, 3, 15, 16, 13, 14, 11, 12, 10,
        ]
        .iter()
        .map(|i| format!("app-topic-{i}"))
        .collect();
        assert_eq!(java_hash_set_order(many), expected);
    }
}
