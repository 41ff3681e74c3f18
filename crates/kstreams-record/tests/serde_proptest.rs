//! Property tests: every built-in serde round-trips, and the fixed-width
//! serdes agree with the big-endian layout of Kafka's serializers.

use kstreams_record::{
    BytesSerde, DefaultSerde, F64Serde, Headers, I32Serde, I64Serde, JsonSerde, Nullable, Serde,
    SerdeError, StringSerde,
};
use proptest::prelude::*;

const TOPIC: &str = "prop-topic";
const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;

fn ser<T, S: Serde<T> + ?Sized>(serde: &S, value: &T) -> Option<Vec<u8>> {
    serde
        .serialize(TOPIC, &mut Headers::new(), value)
        .expect("serialize")
}

fn de<T, S: Serde<T> + ?Sized>(serde: &S, bytes: Option<&[u8]>) -> Result<T, SerdeError> {
    serde.deserialize(TOPIC, &Headers::new(), bytes)
}

fn round_trip<T, S: Serde<T> + ?Sized>(serde: &S, value: &T) -> T {
    let bytes = ser(serde, value);
    de(serde, bytes.as_deref()).expect("deserialize")
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Event {
    id: i64,
    name: String,
    score: i32,
    payload: Vec<u8>,
    parent: Option<u32>,
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<i64>(),
        any::<String>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..32),
        any::<Option<u32>>(),
    )
        .prop_map(|(id, name, score, payload, parent)| Event {
            id,
            name,
            score,
            payload,
            parent,
        })
}

proptest! {
    #[test]
    fn string_round_trips_as_utf8(value in any::<String>()) {
        let bytes = ser(&StringSerde, &value);
        prop_assert_eq!(bytes.as_deref(), Some(value.as_bytes()));
        prop_assert_eq!(round_trip(&StringSerde, &value), value);
    }

    #[test]
    fn bytes_round_trip_unchanged(value in proptest::collection::vec(any::<u8>(), 0..256)) {
        prop_assert_eq!(ser(&BytesSerde, &value), Some(value.clone()));
        prop_assert_eq!(round_trip(&BytesSerde, &value), value);
    }

    #[test]
    fn i32_round_trips_big_endian(value in any::<i32>()) {
        let bytes = ser(&I32Serde, &value).unwrap();
        prop_assert_eq!(&bytes[..], &value.to_be_bytes()[..]);
        prop_assert_eq!(round_trip(&I32Serde, &value), value);
    }

    #[test]
    fn i64_round_trips_big_endian(value in any::<i64>()) {
        let bytes = ser(&I64Serde, &value).unwrap();
        prop_assert_eq!(&bytes[..], &value.to_be_bytes()[..]);
        prop_assert_eq!(round_trip(&I64Serde, &value), value);
    }

    /// Every bit pattern, NaNs included: non-NaN values are bit-exact, every
    /// NaN comes back as the canonical NaN (Java's doubleToLongBits).
    #[test]
    fn f64_round_trips_bit_exact(bits in any::<u64>()) {
        let value = f64::from_bits(bits);
        let bytes = ser(&F64Serde, &value).unwrap();
        let back = round_trip(&F64Serde, &value);
        if value.is_nan() {
            prop_assert_eq!(&bytes[..], &CANONICAL_NAN.to_be_bytes()[..]);
            prop_assert_eq!(back.to_bits(), CANONICAL_NAN);
        } else {
            prop_assert_eq!(&bytes[..], &bits.to_be_bytes()[..]);
            prop_assert_eq!(back.to_bits(), bits);
        }
    }

    /// Also over proptest's float strategy, which favours special values.
    #[test]
    fn f64_special_values_round_trip(value in proptest::num::f64::ANY) {
        let back = round_trip(&F64Serde, &value);
        if value.is_nan() {
            prop_assert_eq!(back.to_bits(), CANONICAL_NAN);
        } else {
            prop_assert_eq!(back.to_bits(), value.to_bits());
        }
    }

    /// Reading never changes bits, whatever the 8 bytes are (NaN payloads too).
    #[test]
    fn f64_reads_any_eight_bytes_bit_exact(bytes in any::<[u8; 8]>()) {
        let value = de(&F64Serde, Some(&bytes)).unwrap();
        prop_assert_eq!(value.to_bits(), u64::from_be_bytes(bytes));
    }

    #[test]
    fn option_string_round_trips(value in any::<Option<String>>()) {
        let serde = Nullable(StringSerde);
        prop_assert_eq!(ser(&serde, &value).is_none(), value.is_none());
        prop_assert_eq!(round_trip(&serde, &value), value);
    }

    #[test]
    fn option_bytes_round_trips(value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64))) {
        let serde = Nullable(BytesSerde);
        prop_assert_eq!(ser(&serde, &value).is_none(), value.is_none());
        prop_assert_eq!(round_trip(&serde, &value), value);
    }

    #[test]
    fn option_i32_round_trips(value in any::<Option<i32>>()) {
        prop_assert_eq!(round_trip(&Nullable(I32Serde), &value), value);
    }

    #[test]
    fn option_i64_round_trips(value in any::<Option<i64>>()) {
        prop_assert_eq!(round_trip(&Nullable(I64Serde), &value), value);
    }

    #[test]
    fn option_f64_round_trips(bits in any::<Option<u64>>()) {
        let value = bits.map(f64::from_bits);
        let back = round_trip(&Nullable(F64Serde), &value);
        let expected = value.map(|v| if v.is_nan() { CANONICAL_NAN } else { v.to_bits() });
        prop_assert_eq!(back.map(f64::to_bits), expected);
    }

    #[test]
    fn json_round_trips(value in event()) {
        let serde = JsonSerde::<Event>::new();
        prop_assert_eq!(round_trip(&serde, &value), value);
    }

    #[test]
    fn option_json_round_trips(value in proptest::option::of(event())) {
        let serde = Nullable(JsonSerde::<Event>::new());
        prop_assert_eq!(round_trip(&serde, &value), value);
    }

    /// The DefaultSerde of each type writes what the named serde writes, and
    /// Option<T>'s default serde round-trips.
    #[test]
    fn default_serdes_round_trip(
        s in any::<Option<String>>(),
        b in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32)),
        i in any::<Option<i32>>(),
        l in any::<Option<i64>>(),
        d in any::<Option<u64>>(),
    ) {
        prop_assert_eq!(round_trip(&*Option::<String>::default_serde(), &s), s.clone());
        prop_assert_eq!(round_trip(&*Option::<Vec<u8>>::default_serde(), &b), b.clone());
        prop_assert_eq!(round_trip(&*Option::<i32>::default_serde(), &i), i);
        prop_assert_eq!(round_trip(&*Option::<i64>::default_serde(), &l), l);
        let d = d.map(f64::from_bits);
        prop_assert_eq!(
            ser(&*Option::<f64>::default_serde(), &d),
            ser(&Nullable(F64Serde), &d)
        );
        if let Some(s) = &s {
            prop_assert_eq!(ser(&*String::default_serde(), s), ser(&StringSerde, s));
        }
        if let Some(i) = i {
            prop_assert_eq!(ser(&*i32::default_serde(), &i), ser(&I32Serde, &i));
        }
        if let Some(l) = l {
            prop_assert_eq!(ser(&*i64::default_serde(), &l), ser(&I64Serde, &l));
        }
    }

    /// `serialize_into` appends exactly what `serialize` returns (after
    /// whatever the buffer held), for every built-in and through the
    /// shared (`Arc<dyn Serde>`) and `Nullable` wrappers.
    #[test]
    fn serialize_into_appends_what_serialize_returns(
        s in any::<String>(),
        b in proptest::collection::vec(any::<u8>(), 0..32),
        l in any::<Option<i64>>(),
        bits in any::<u64>(),
        event in event(),
        prefix in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        fn check<T, S: Serde<T> + ?Sized>(serde: &S, value: &T, prefix: &[u8]) -> Result<(), TestCaseError> {
            let mut out = prefix.to_vec();
            let written = serde
                .serialize_into(TOPIC, &mut Headers::new(), value, &mut out)
                .expect("serialize_into");
            let expected = ser(serde, value);
            prop_assert_eq!(written, expected.is_some());
            prop_assert_eq!(&out[..prefix.len()], prefix);
            prop_assert_eq!(&out[prefix.len()..], expected.as_deref().unwrap_or_default());
            Ok(())
        }
        check(&StringSerde, &s, &prefix)?;
        check(&*String::default_serde(), &s, &prefix)?;
        check(&BytesSerde, &b, &prefix)?;
        check(&Nullable(I64Serde), &l, &prefix)?;
        check(&*Option::<i64>::default_serde(), &l, &prefix)?;
        check(&I32Serde, &(bits as i32), &prefix)?;
        check(&F64Serde, &f64::from_bits(bits), &prefix)?;
        check(&JsonSerde::<Event>::new(), &event, &prefix)?;
    }

    /// Fixed-width serdes reject every length but their own, without panicking.
    #[test]
    fn fixed_width_serdes_reject_other_lengths(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
        let len = bytes.len();
        prop_assert_eq!(de(&I32Serde, Some(&bytes)).is_ok(), len == 4);
        prop_assert_eq!(de(&I64Serde, Some(&bytes)).is_ok(), len == 8);
        prop_assert_eq!(de(&F64Serde, Some(&bytes)).is_ok(), len == 8);
    }

    /// The string serde accepts exactly the UTF-8 byte strings, and never panics.
    #[test]
    fn string_serde_accepts_exactly_utf8(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
        let result = de(&StringSerde, Some(&bytes));
        match std::str::from_utf8(&bytes) {
            Ok(s) => prop_assert_eq!(result.unwrap(), s),
            Err(_) => {
                let is_invalid_utf8 = matches!(result, Err(SerdeError::InvalidUtf8 { .. }));
                prop_assert!(is_invalid_utf8);
            }
        }
    }
}
