//! Shared topic names for the records a thread reads or writes.

use std::sync::Arc;

use rustc_hash::FxHashSet;

/// One shared name per topic a thread reads or writes (its source topics,
/// and the changelog topics its stores send to): each record carries its
/// topic as a clone of it, so a record costs a reference count instead of an
/// allocation and a copy of its topic's name (and the source node's record
/// metadata takes it over as it is).
#[derive(Default)]
pub(crate) struct TopicNames {
    names: FxHashSet<Arc<str>>,
    /// The name given last: records come in runs of one topic, so most
    /// lookups are one comparison, with no hashing.
    last: Option<Arc<str>>,
}

impl TopicNames {
    /// The shared name equal to `topic`, added on first sight. Names are
    /// never dropped: a thread reads a bounded set of topics.
    pub(crate) fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(last) = &self.last {
            if **last == *topic {
                return last.clone();
            }
        }
        let name = match self.names.get(topic) {
            Some(name) => name.clone(),
            None => {
                let name: Arc<str> = Arc::from(topic);
                self.names.insert(name.clone());
                name
            }
        };
        self.last = Some(name.clone());
        name
    }

    /// The shared name whose text is `topic` (a name's bytes, as librdkafka
    /// gives them): the last name given is compared byte for byte, with no
    /// UTF-8 check; another is converted and looked up. Kafka's topic names
    /// are ASCII, so the lossy conversion never changes one.
    pub(crate) fn get_bytes(&mut self, topic: &[u8]) -> Arc<str> {
        if let Some(last) = &self.last {
            if last.as_bytes() == topic {
                return last.clone();
            }
        }
        self.get(&String::from_utf8_lossy(topic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_given_as_bytes_is_the_same_shared_name() {
        let mut names = TopicNames::default();
        let orders = names.get("orders");
        assert!(
            Arc::ptr_eq(&names.get_bytes(b"orders"), &orders),
            "the last name"
        );
        let payments = names.get_bytes(b"payments");
        assert_eq!(&*payments, "payments");
        assert!(
            Arc::ptr_eq(&names.get_bytes(b"orders"), &orders),
            "a known name"
        );
        assert!(Arc::ptr_eq(&names.get("payments"), &payments));
    }

    #[test]
    fn a_topic_seen_again_gets_the_same_shared_name() {
        let mut names = TopicNames::default();
        let first = names.get("orders");
        let again = names.get("orders");
        let other = names.get("payments");
        let first_again = names.get("orders");
        assert!(Arc::ptr_eq(&first, &again));
        assert!(Arc::ptr_eq(&first, &first_again));
        assert_eq!(&*other, "payments");
        assert!(!Arc::ptr_eq(&first, &other));
    }
}
