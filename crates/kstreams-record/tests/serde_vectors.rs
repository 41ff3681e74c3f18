//! Byte-exact vectors for the built-in serdes against Kafka's own
//! serializers, and the errors they report on bad input.

use kstreams_record::{
    BytesSerde, DefaultSerde, F64Serde, Headers, I32Serde, I64Serde, JsonSerde, Nullable, Serde,
    SerdeError, StringSerde, UnitSerde,
};

const TOPIC: &str = "orders-topic";

fn ser<T, S: Serde<T> + ?Sized>(serde: &S, value: &T) -> Option<Vec<u8>> {
    serde
        .serialize(TOPIC, &mut Headers::new(), value)
        .expect("serialize")
}

fn de<T, S: Serde<T> + ?Sized>(serde: &S, bytes: Option<&[u8]>) -> Result<T, SerdeError> {
    serde.deserialize(TOPIC, &Headers::new(), bytes)
}

// ---------------------------------------------------------------------------
// IntegerSerializer: 4 bytes big-endian.

#[test]
fn i32_vectors_match_kafka_integer_serializer() {
    let vectors: &[(i32, [u8; 4])] = &[
        (0, [0x00, 0x00, 0x00, 0x00]),
        (1, [0x00, 0x00, 0x00, 0x01]),
        (-1, [0xff, 0xff, 0xff, 0xff]),
        (256, [0x00, 0x00, 0x01, 0x00]),
        (0x0102_0304, [0x01, 0x02, 0x03, 0x04]),
        (i32::MAX, [0x7f, 0xff, 0xff, 0xff]),
        (i32::MIN, [0x80, 0x00, 0x00, 0x00]),
    ];
    for &(value, bytes) in vectors {
        assert_eq!(ser(&I32Serde, &value), Some(bytes.to_vec()), "{value}");
        assert_eq!(de(&I32Serde, Some(&bytes)).unwrap(), value, "{bytes:02x?}");
    }
}

// ---------------------------------------------------------------------------
// LongSerializer: 8 bytes big-endian.

#[test]
fn i64_vectors_match_kafka_long_serializer() {
    let vectors: &[(i64, [u8; 8])] = &[
        (0, [0; 8]),
        (1, [0, 0, 0, 0, 0, 0, 0, 1]),
        (-1, [0xff; 8]),
        (
            0x0102_0304_0506_0708,
            [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08],
        ),
        // A typical epoch-millis timestamp: 2021-01-01T00:00:00Z.
        (
            1_609_459_200_000,
            [0x00, 0x00, 0x01, 0x76, 0xbb, 0x3e, 0x70, 0x00],
        ),
        (i64::MAX, [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        (i64::MIN, [0x80, 0, 0, 0, 0, 0, 0, 0]),
    ];
    for &(value, bytes) in vectors {
        assert_eq!(ser(&I64Serde, &value), Some(bytes.to_vec()), "{value}");
        assert_eq!(de(&I64Serde, Some(&bytes)).unwrap(), value, "{bytes:02x?}");
    }
}

// ---------------------------------------------------------------------------
// DoubleSerializer: IEEE 754 bits (doubleToLongBits) big-endian.

#[test]
fn f64_vectors_match_kafka_double_serializer() {
    let vectors: &[(f64, [u8; 8])] = &[
        (0.0, [0; 8]),
        (-0.0, [0x80, 0, 0, 0, 0, 0, 0, 0]),
        (1.0, [0x3f, 0xf0, 0, 0, 0, 0, 0, 0]),
        (-2.0, [0xc0, 0x00, 0, 0, 0, 0, 0, 0]),
        (0.5, [0x3f, 0xe0, 0, 0, 0, 0, 0, 0]),
        (0.1, [0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a]),
        (f64::INFINITY, [0x7f, 0xf0, 0, 0, 0, 0, 0, 0]),
        (f64::NEG_INFINITY, [0xff, 0xf0, 0, 0, 0, 0, 0, 0]),
        (f64::MAX, [0x7f, 0xef, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        (f64::MIN_POSITIVE, [0x00, 0x10, 0, 0, 0, 0, 0, 0]),
        // Smallest subnormal.
        (f64::from_bits(1), [0, 0, 0, 0, 0, 0, 0, 1]),
    ];
    for &(value, bytes) in vectors {
        assert_eq!(ser(&F64Serde, &value), Some(bytes.to_vec()), "{value}");
        let back = de(&F64Serde, Some(&bytes)).unwrap();
        assert_eq!(back.to_bits(), value.to_bits(), "{bytes:02x?}");
    }
}

#[test]
fn f64_negative_zero_keeps_its_sign() {
    let back = de(&F64Serde, ser(&F64Serde, &-0.0).as_deref()).unwrap();
    assert!(back == 0.0 && back.is_sign_negative());
}

#[test]
fn f64_nan_is_written_as_java_canonical_nan() {
    const CANONICAL: [u8; 8] = [0x7f, 0xf8, 0, 0, 0, 0, 0, 0];
    assert_eq!(ser(&F64Serde, &f64::NAN), Some(CANONICAL.to_vec()));

    // doubleToLongBits collapses every NaN to 7ff8000000000000: a NaN
    // computed at run time (negative on x86), a negative NaN, a signalling
    // NaN and a NaN with a payload all produce the same bytes.
    let zero = std::hint::black_box(0.0f64);
    let nans = [
        zero / zero,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff0_0000_0000_0001),
        f64::from_bits(0x7fff_ffff_ffff_ffff),
        f64::from_bits(0x7ff8_dead_beef_0000),
    ];
    for nan in nans {
        assert!(nan.is_nan());
        assert_eq!(
            ser(&F64Serde, &nan),
            Some(CANONICAL.to_vec()),
            "{:016x}",
            nan.to_bits()
        );
    }

    // Reading keeps the bits as written, like Java's longBitsToDouble.
    let back = de(&F64Serde, Some(&CANONICAL)).unwrap();
    assert_eq!(back.to_bits(), 0x7ff8_0000_0000_0000);
    let payload = 0xfff8_0000_dead_beef_u64.to_be_bytes();
    let back = de(&F64Serde, Some(&payload)).unwrap();
    assert_eq!(back.to_bits(), 0xfff8_0000_dead_beef);
}

// ---------------------------------------------------------------------------
// StringSerializer: UTF-8 bytes.

#[test]
fn string_vectors_match_kafka_string_serializer() {
    let vectors: &[(&str, &[u8])] = &[
        ("", b""),
        ("a", b"a"),
        ("hello world", b"hello world"),
        // 2-, 3- and 4-byte UTF-8 sequences.
        ("é", &[0xc3, 0xa9]),
        ("€", &[0xe2, 0x82, 0xac]),
        ("日本", &[0xe6, 0x97, 0xa5, 0xe6, 0x9c, 0xac]),
        ("😀", &[0xf0, 0x9f, 0x98, 0x80]),
        ("a\u{0}b", &[0x61, 0x00, 0x62]),
    ];
    for &(value, bytes) in vectors {
        assert_eq!(
            ser(&StringSerde, &value.to_string()),
            Some(bytes.to_vec()),
            "{value:?}"
        );
        assert_eq!(
            de(&StringSerde, Some(bytes)).unwrap(),
            value,
            "{bytes:02x?}"
        );
    }
}

#[test]
fn empty_string_is_empty_bytes_not_null() {
    assert_eq!(ser(&StringSerde, &String::new()), Some(Vec::new()));
    assert_eq!(de(&StringSerde, Some(b"")).unwrap(), "");
}

#[test]
fn bytes_serde_passes_bytes_through() {
    for bytes in [&b""[..], b"\x00", b"\xff\xfe\x00abc"] {
        assert_eq!(ser(&BytesSerde, &bytes.to_vec()), Some(bytes.to_vec()));
        assert_eq!(de(&BytesSerde, Some(bytes)).unwrap(), bytes);
    }
}

// ---------------------------------------------------------------------------
// Errors.

#[test]
fn wrong_sizes_are_errors_naming_expected_and_actual() {
    fn check<T: std::fmt::Debug>(
        result: Result<T, SerdeError>,
        want_type: &str,
        want_expected: usize,
        want_actual: usize,
    ) {
        match result {
            Err(
                ref err @ SerdeError::WrongSize {
                    ref topic,
                    type_name,
                    expected,
                    actual,
                },
            ) => {
                assert_eq!(topic, TOPIC);
                assert_eq!(type_name, want_type);
                assert_eq!(expected, want_expected);
                assert_eq!(actual, want_actual);
                let message = err.to_string();
                assert!(message.contains(TOPIC), "{message}");
                assert!(message.contains(want_type), "{message}");
                assert!(
                    message.contains(&format!("exactly {want_expected} bytes")),
                    "{message}"
                );
                assert!(message.contains(&format!("got {want_actual}")), "{message}");
            }
            other => panic!("expected WrongSize, got {other:?}"),
        }
    }
    for len in [0, 1, 3, 5, 8] {
        check(de(&I32Serde, Some(&vec![0; len])), "i32", 4, len);
    }
    for len in [0, 4, 7, 9, 16] {
        check(de(&I64Serde, Some(&vec![0; len])), "i64", 8, len);
        check(de(&F64Serde, Some(&vec![0; len])), "f64", 8, len);
    }
    // Wrapped in Nullable, the inner size check still applies.
    match de(&Nullable(I32Serde), Some(&[1, 2][..])) {
        Err(SerdeError::WrongSize {
            expected: 4,
            actual: 2,
            ..
        }) => {}
        other => panic!("expected WrongSize, got {other:?}"),
    }
}

#[test]
fn invalid_utf8_is_an_error_naming_the_topic() {
    let cases: &[&[u8]] = &[
        &[0xff],
        &[0xc3],             // truncated 2-byte sequence
        &[0x61, 0x80, 0x62], // lone continuation byte
        &[0xed, 0xa0, 0x80], // UTF-16 surrogate
        &[0xc0, 0x80],       // overlong NUL
    ];
    for &bytes in cases {
        match de(&StringSerde, Some(bytes)) {
            Err(ref err @ SerdeError::InvalidUtf8 { ref topic, .. }) => {
                assert_eq!(topic, TOPIC);
                let message = err.to_string();
                assert!(message.contains(TOPIC), "{message}");
                assert!(message.contains("UTF-8"), "{message}");
            }
            other => panic!("{bytes:02x?}: expected InvalidUtf8, got {other:?}"),
        }
    }
}

#[test]
fn null_into_non_nullable_is_unexpected_null_that_tells_the_fix() {
    fn check<T: std::fmt::Debug>(result: Result<T, SerdeError>, type_fragment: &str) {
        match result {
            Err(
                ref err @ SerdeError::UnexpectedNull {
                    ref topic,
                    type_name,
                },
            ) => {
                assert_eq!(topic, TOPIC);
                assert!(type_name.contains(type_fragment), "{type_name}");
                let message = err.to_string();
                assert!(message.contains(TOPIC), "{message}");
                assert!(message.contains(type_name), "{message}");
                assert!(message.contains("Option<_>"), "{message}");
                assert!(message.contains("Nullable"), "{message}");
            }
            other => panic!("expected UnexpectedNull, got {other:?}"),
        }
    }
    check(de(&StringSerde, None), "String");
    check(de(&BytesSerde, None), "Vec<u8>");
    check(de(&I32Serde, None), "i32");
    check(de(&I64Serde, None), "i64");
    check(de(&F64Serde, None), "f64");
    check(de(&JsonSerde::<Order>::new(), None), "Order");
    check(de(&*String::default_serde(), None), "String");
    check(de(&*i64::default_serde(), None), "i64");
}

// ---------------------------------------------------------------------------
// Nullable.

#[test]
fn nullable_maps_none_and_null_both_ways() {
    let serde = Nullable(StringSerde);
    assert_eq!(ser(&serde, &None), None);
    assert_eq!(de(&serde, None).unwrap(), None);
    assert_eq!(ser(&serde, &Some("x".to_string())), Some(b"x".to_vec()));
    assert_eq!(de(&serde, Some(b"x")).unwrap(), Some("x".to_string()));

    let serde = Nullable(I64Serde);
    assert_eq!(ser(&serde, &None), None);
    assert_eq!(ser(&serde, &Some(1)), Some(vec![0, 0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(de(&serde, None).unwrap(), None);
    assert_eq!(de(&serde, Some(&[0xff; 8])).unwrap(), Some(-1));
}

#[test]
fn nullable_some_empty_stays_non_null() {
    let serde = Nullable(StringSerde);
    assert_eq!(ser(&serde, &Some(String::new())), Some(Vec::new()));
    assert_eq!(de(&serde, Some(b"")).unwrap(), Some(String::new()));

    let serde = Nullable(BytesSerde);
    assert_eq!(ser(&serde, &Some(Vec::new())), Some(Vec::new()));
    assert_eq!(de(&serde, Some(b"")).unwrap(), Some(Vec::new()));
}

#[test]
fn nullable_passes_inner_errors_through() {
    match de(&Nullable(StringSerde), Some(&[0xff][..])) {
        Err(SerdeError::InvalidUtf8 { topic, .. }) => assert_eq!(topic, TOPIC),
        other => panic!("expected InvalidUtf8, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// UnitSerde (Kafka's VoidSerde).

#[test]
fn unit_serde_writes_null_and_rejects_non_null() {
    assert_eq!(ser(&UnitSerde, &()), None);
    de(&UnitSerde, None).unwrap();
    for bytes in [&b""[..], b"\x00", b"abc"] {
        match de(&UnitSerde, Some(bytes)) {
            Err(ref err @ SerdeError::Malformed { ref topic, .. }) => {
                assert_eq!(topic, TOPIC);
                assert_eq!(
                    err.kafka_message(),
                    "Data should be null for a VoidDeserializer."
                );
                let message = err.to_string();
                assert!(message.contains(TOPIC), "{message}");
                assert!(
                    message.contains(&format!("got {} bytes", bytes.len())),
                    "{message}"
                );
            }
            other => panic!("{bytes:?}: expected an error, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// JsonSerde.

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Order {
    id: u64,
    customer: String,
    amount: f64,
    tags: Vec<String>,
    note: Option<String>,
}

fn order() -> Order {
    Order {
        id: 42,
        customer: "Zoë".to_string(),
        amount: 12.5,
        tags: vec!["a".to_string(), "b".to_string()],
        note: None,
    }
}

#[test]
fn json_serde_round_trips_a_derived_struct() {
    let serde = JsonSerde::<Order>::new();
    let bytes = ser(&serde, &order()).expect("JSON is never null");
    assert_eq!(
        std::str::from_utf8(&bytes).unwrap(),
        r#"{"id":42,"customer":"Zoë","amount":12.5,"tags":["a","b"],"note":null}"#
    );
    assert_eq!(de(&serde, Some(&bytes)).unwrap(), order());

    // Field order and whitespace in the input do not matter.
    let text = br#" { "note": "n", "tags": [], "amount": -1, "customer": "", "id": 0 } "#;
    let parsed = de(&serde, Some(text)).unwrap();
    assert_eq!(parsed.note.as_deref(), Some("n"));
    assert_eq!(parsed.amount, -1.0);
}

#[test]
fn json_serde_reports_bad_json_as_an_error() {
    let serde = JsonSerde::<Order>::new();
    let cases: &[&[u8]] = &[
        b"",
        b"{",
        b"not json",
        br#"{"id":"forty-two","customer":"","amount":1,"tags":[],"note":null}"#,
        br#"{"id":1}"#,
        &[0xff, 0xfe],
    ];
    for &bytes in cases {
        match de(&serde, Some(bytes)) {
            Err(
                ref err @ SerdeError::Json {
                    ref topic,
                    type_name,
                    ..
                },
            ) => {
                assert_eq!(topic, TOPIC);
                assert!(type_name.contains("Order"), "{type_name}");
                let message = err.to_string();
                assert!(message.contains(TOPIC), "{message}");
                assert!(message.contains("Order"), "{message}");
            }
            other => panic!("{bytes:?}: expected a Json error, got {other:?}"),
        }
    }
}

#[test]
fn json_serde_reports_unserializable_values_as_an_error() {
    // JSON object keys must be strings.
    let mut map = std::collections::BTreeMap::new();
    map.insert(vec![1u8], 1u8);
    let serde = JsonSerde::<std::collections::BTreeMap<Vec<u8>, u8>>::new();
    match serde.serialize(TOPIC, &mut Headers::new(), &map) {
        Err(SerdeError::Json { topic, .. }) => assert_eq!(topic, TOPIC),
        other => panic!("expected a Json error, got {other:?}"),
    }
}

#[test]
fn nullable_json_maps_null_to_none() {
    let serde = Nullable(JsonSerde::<Order>::new());
    assert_eq!(ser(&serde, &None), None);
    assert_eq!(de(&serde, None).unwrap(), None);
    let bytes = ser(&serde, &Some(order()));
    assert_eq!(de(&serde, bytes.as_deref()).unwrap(), Some(order()));
}

// ---------------------------------------------------------------------------
// DefaultSerde.

#[test]
fn default_serdes_write_the_same_bytes_as_the_named_serdes() {
    assert_eq!(ser(&*i32::default_serde(), &1), Some(vec![0, 0, 0, 1]));
    assert_eq!(ser(&*i64::default_serde(), &-1), Some(vec![0xff; 8]));
    assert_eq!(
        ser(&*f64::default_serde(), &1.0),
        Some(vec![0x3f, 0xf0, 0, 0, 0, 0, 0, 0])
    );
    assert_eq!(
        ser(&*String::default_serde(), &"é".to_string()),
        Some(vec![0xc3, 0xa9])
    );
    assert_eq!(ser(&*Vec::<u8>::default_serde(), &vec![7]), Some(vec![7]));
    assert_eq!(ser(&*<()>::default_serde(), &()), None);
}

#[test]
fn default_serde_for_option_maps_none_to_null() {
    let serde = Option::<i64>::default_serde();
    assert_eq!(ser(&*serde, &None), None);
    assert_eq!(ser(&*serde, &Some(1)), Some(vec![0, 0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(de(&*serde, None).unwrap(), None);
    assert_eq!(de(&*serde, Some(&[0xff; 8])).unwrap(), Some(-1));
    assert!(matches!(
        de(&*serde, Some(&[0; 3])),
        Err(SerdeError::WrongSize {
            expected: 8,
            actual: 3,
            ..
        })
    ));

    let serde = Option::<String>::default_serde();
    assert_eq!(ser(&*serde, &Some(String::new())), Some(Vec::new()));
    assert_eq!(de(&*serde, Some(b"")).unwrap(), Some(String::new()));
    assert_eq!(de(&*serde, None).unwrap(), None);

    let serde = Option::<i32>::default_serde();
    assert_eq!(de(&*serde, None).unwrap(), None);
    assert_eq!(de(&*serde, Some(&[0, 0, 0, 5])).unwrap(), Some(5));

    let serde = Option::<f64>::default_serde();
    assert_eq!(de(&*serde, None).unwrap(), None);
    assert_eq!(
        ser(&*serde, &Some(f64::NAN)),
        Some(vec![0x7f, 0xf8, 0, 0, 0, 0, 0, 0])
    );

    let serde = Option::<Vec<u8>>::default_serde();
    assert_eq!(de(&*serde, None).unwrap(), None);
    assert_eq!(de(&*serde, Some(b"")).unwrap(), Some(Vec::new()));
}

#[test]
fn shared_serdes_are_serdes_themselves() {
    // An Arc<dyn Serde<T>> can be wrapped by value, e.g. in Nullable.
    let serde = Nullable(i32::default_serde());
    assert_eq!(ser(&serde, &Some(-1)), Some(vec![0xff; 4]));
    assert_eq!(de(&serde, None).unwrap(), None);
}
