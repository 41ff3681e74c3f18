/// One record header: a UTF-8 key and an optional byte value, as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The header key.
    pub key: String,
    /// The header value; `None` is Kafka's null header value.
    pub value: Option<Vec<u8>>,
}

/// The headers of a record, in the order they were added.
///
/// Kafka allows several headers with the same key; [`Headers::last`] returns
/// the one added last, as `Headers.lastHeader` does in Kafka's clients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Headers {
    entries: Vec<Header>,
}

impl Headers {
    /// An empty set of headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a header; existing headers with the same key are kept.
    pub fn add(&mut self, key: impl Into<String>, value: Option<impl Into<Vec<u8>>>) -> &mut Self {
        self.entries.push(Header {
            key: key.into(),
            value: value.map(Into::into),
        });
        self
    }

    /// Builder form of [`Headers::add`].
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.add(key, Some(value));
        self
    }

    /// The header with this key that was added last.
    pub fn last(&self, key: &str) -> Option<&Header> {
        self.entries.iter().rev().find(|h| h.key == key)
    }

    /// Every header with this key, oldest first.
    pub fn headers<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Header> + 'a {
        self.entries.iter().filter(move |h| h.key == key)
    }

    /// Removes every header with this key; returns how many were removed.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|h| h.key != key);
        before - self.entries.len()
    }

    /// All headers, in insertion order.
    pub fn iter(&self) -> std::slice::Iter<'_, Header> {
        self.entries.iter()
    }

    /// The number of headers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = &'a Header;
    type IntoIter = std::slice::Iter<'a, Header>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

impl FromIterator<Header> for Headers {
    fn from_iter<T: IntoIterator<Item = Header>>(iter: T) -> Self {
        Self {
            entries: iter.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_returns_the_latest_of_repeated_keys() {
        let mut h = Headers::new();
        h.add("a", Some(b"1".to_vec()))
            .add("b", Some(b"x".to_vec()))
            .add("a", Some(b"2".to_vec()));
        assert_eq!(h.last("a").unwrap().value.as_deref(), Some(&b"2"[..]));
        assert_eq!(h.headers("a").count(), 2);
        assert!(h.last("zzz").is_none());
    }

    #[test]
    fn remove_drops_every_header_of_the_key_and_keeps_order() {
        let mut h = Headers::new();
        h.add("a", Some(b"1".to_vec()))
            .add("b", None::<Vec<u8>>)
            .add("a", Some(b"2".to_vec()))
            .add("c", Some(b"3".to_vec()));
        assert_eq!(h.remove("a"), 2);
        let keys: Vec<_> = h.iter().map(|h| h.key.as_str()).collect();
        assert_eq!(keys, ["b", "c"]);
        assert_eq!(h.last("b").unwrap().value, None);
        assert_eq!(h.remove("a"), 0);
    }
}
