//! Header order semantics and the `with_*` builders of `Record`.

use kstreams_record::{Header, Headers, Record, RecordMetadata};

fn keys(headers: &Headers) -> Vec<&str> {
    headers.iter().map(|h| h.key.as_str()).collect()
}

fn values<'a>(headers: impl IntoIterator<Item = &'a Header>) -> Vec<Option<&'a [u8]>> {
    headers.into_iter().map(|h| h.value.as_deref()).collect()
}

#[test]
fn new_headers_are_empty() {
    let h = Headers::new();
    assert!(h.is_empty());
    assert_eq!(h.len(), 0);
    assert!(h.last("a").is_none());
    assert_eq!(h.headers("a").count(), 0);
    assert_eq!(h.iter().count(), 0);
    assert_eq!(h, Headers::default());
}

#[test]
fn add_appends_and_keeps_duplicates_in_insertion_order() {
    let mut h = Headers::new();
    h.add("b", Some("1"))
        .add("a", Some(b"2".to_vec()))
        .add("b", None::<Vec<u8>>)
        .add("c", Some(&b""[..]))
        .add("b", Some("3"));
    assert_eq!(h.len(), 5);
    assert!(!h.is_empty());
    assert_eq!(keys(&h), ["b", "a", "b", "c", "b"]);
    assert_eq!(
        values(&h),
        [Some(&b"1"[..]), Some(b"2"), None, Some(b""), Some(b"3")]
    );
    // `headers` yields every header of the key, oldest first.
    assert_eq!(values(h.headers("b")), [Some(&b"1"[..]), None, Some(b"3")]);
    assert_eq!(values(h.headers("c")), [Some(&b""[..])]);
    assert_eq!(h.headers("zzz").count(), 0);
}

#[test]
fn last_is_the_latest_added_even_when_null() {
    let mut h = Headers::new();
    h.add("k", Some("old"));
    assert_eq!(h.last("k").unwrap().value.as_deref(), Some(&b"old"[..]));
    h.add("k", None::<Vec<u8>>);
    // A null value is still a header: last returns it, not the older one.
    let last = h.last("k").unwrap();
    assert_eq!(last.key, "k");
    assert_eq!(last.value, None);
    h.add("other", Some("x"));
    assert_eq!(h.last("k").unwrap().value, None);
    h.add("k", Some("new"));
    assert_eq!(h.last("k").unwrap().value.as_deref(), Some(&b"new"[..]));
}

#[test]
fn keys_are_case_sensitive_and_exact() {
    let h = Headers::new().with("Key", "1").with("key", "2");
    assert_eq!(h.last("Key").unwrap().value.as_deref(), Some(&b"1"[..]));
    assert_eq!(h.last("key").unwrap().value.as_deref(), Some(&b"2"[..]));
    assert!(h.last("KEY").is_none());
    assert!(h.last("ke").is_none());
    assert!(h.last("").is_none());
}

#[test]
fn remove_drops_all_of_a_key_and_keeps_the_rest_in_order() {
    let mut h = Headers::new()
        .with("a", "1")
        .with("b", "2")
        .with("a", "3")
        .with("c", "4")
        .with("a", "5")
        .with("b", "6");
    assert_eq!(h.remove("a"), 3);
    assert_eq!(keys(&h), ["b", "c", "b"]);
    assert_eq!(values(&h), [Some(&b"2"[..]), Some(b"4"), Some(b"6")]);
    assert!(h.last("a").is_none());
    assert_eq!(h.remove("a"), 0);
    assert_eq!(h.remove("missing"), 0);
    assert_eq!(h.len(), 3);
    // Adding the key again after removal starts a fresh sequence at the end.
    h.add("a", Some("7"));
    assert_eq!(keys(&h), ["b", "c", "b", "a"]);
    assert_eq!(h.remove("b"), 2);
    assert_eq!(h.remove("c"), 1);
    assert_eq!(h.remove("a"), 1);
    assert!(h.is_empty());
}

#[test]
fn with_builds_non_null_headers() {
    let h = Headers::new().with("a", "x").with("b", Vec::<u8>::new());
    assert_eq!(values(&h), [Some(&b"x"[..]), Some(b"")]);
}

#[test]
fn iteration_forms_agree_and_collect_round_trips() {
    let h = Headers::new().with("x", "1").with("y", "2").with("x", "3");
    let by_iter: Vec<&Header> = h.iter().collect();
    let by_ref: Vec<&Header> = (&h).into_iter().collect();
    let mut by_for = Vec::new();
    for header in &h {
        by_for.push(header);
    }
    assert_eq!(by_iter, by_ref);
    assert_eq!(by_iter, by_for);

    let collected: Headers = h.iter().cloned().collect();
    assert_eq!(collected, h);
    assert_eq!(keys(&collected), ["x", "y", "x"]);

    let reversed: Headers = h.iter().rev().cloned().collect();
    assert_ne!(reversed, h, "headers compare in order");
}

#[test]
fn headers_clone_is_independent() {
    let mut a = Headers::new().with("k", "1");
    let b = a.clone();
    a.add("k", Some("2"));
    assert_eq!(b.len(), 1);
    assert_eq!(b.last("k").unwrap().value.as_deref(), Some(&b"1"[..]));
}

fn sample_headers() -> Headers {
    Headers::new().with("trace", "abc").with("trace", "def")
}

fn sample() -> Record<String, i64> {
    Record::new("key".to_string(), 7, 1_000).with_headers(sample_headers())
}

#[test]
fn new_record_has_no_headers() {
    let r = Record::new("k", 1u8, -5);
    assert_eq!(r.key, "k");
    assert_eq!(r.value, 1);
    assert_eq!(r.timestamp, -5);
    assert!(r.headers.is_empty());
}

#[test]
fn with_key_changes_only_the_key_and_may_change_its_type() {
    let r: Record<u32, i64> = sample().with_key(99u32);
    assert_eq!(r.key, 99);
    assert_eq!(r.value, 7);
    assert_eq!(r.timestamp, 1_000);
    assert_eq!(r.headers, sample_headers());
}

#[test]
fn with_value_changes_only_the_value_and_may_change_its_type() {
    let r: Record<String, Option<String>> = sample().with_value(Some("v".to_string()));
    assert_eq!(r.key, "key");
    assert_eq!(r.value.as_deref(), Some("v"));
    assert_eq!(r.timestamp, 1_000);
    assert_eq!(r.headers, sample_headers());
}

#[test]
fn with_timestamp_changes_only_the_timestamp() {
    let r = sample().with_timestamp(i64::MIN);
    assert_eq!(r.key, "key");
    assert_eq!(r.value, 7);
    assert_eq!(r.timestamp, i64::MIN);
    assert_eq!(r.headers, sample_headers());
}

#[test]
fn with_headers_replaces_the_headers_and_keeps_the_rest() {
    let replacement = Headers::new().with("other", "1");
    let r = sample().with_headers(replacement.clone());
    assert_eq!(r.key, "key");
    assert_eq!(r.value, 7);
    assert_eq!(r.timestamp, 1_000);
    assert_eq!(r.headers, replacement);
    assert!(r.headers.last("trace").is_none());

    let cleared = sample().with_headers(Headers::new());
    assert!(cleared.headers.is_empty());
    assert_eq!((cleared.key.as_str(), cleared.value), ("key", 7));
}

#[test]
fn with_methods_chain() {
    let r = sample()
        .with_key(1i32)
        .with_value("v")
        .with_timestamp(2)
        .with_headers(Headers::new().with("h", "x"));
    assert_eq!(
        r,
        Record::new(1i32, "v", 2).with_headers(Headers::new().with("h", "x"))
    );
}

#[test]
fn records_compare_by_every_field() {
    let base = sample();
    assert_eq!(base, sample());
    assert_ne!(base, sample().with_key("other".to_string()));
    assert_ne!(base, sample().with_value(8));
    assert_ne!(base, sample().with_timestamp(1_001));
    assert_ne!(base, sample().with_headers(Headers::new()));
}

#[test]
fn record_metadata_fields() {
    let m = RecordMetadata {
        topic: "t".into(),
        partition: 3,
        offset: 42,
    };
    assert_eq!(m.clone(), m);
    assert_eq!((&*m.topic, m.partition, m.offset), ("t", 3, 42));
}
