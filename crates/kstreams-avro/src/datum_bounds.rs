//! Walks an Avro datum against its writer schema once, allocating nothing,
//! and refuses it when a block count or a length cannot fit in the bytes
//! left.
//!
//! apache-avro 0.21 `reserve`s an array's or map's block count before it
//! reads one item, and its `max_allocation_bytes` guard counts entries, not
//! bytes: a few bytes of varint ask for gigabytes, the allocation fails and
//! the process aborts, which no deserialization handler can catch. A datum
//! that passes this walk holds every item it counts, so what apache-avro
//! reserves stays proportional to the datum's size.

use apache_avro::schema::{NamesRef, Namespace, ResolvedSchema, Schema};

/// Array items in one datum that take no bytes (items of `null`, of a
/// zero-size `fixed`, of a record of such fields). They cost nothing in the
/// input but a value each in memory, so the bytes left cannot bound them;
/// 64 Ki of them is far past any real record and keeps their memory to a
/// few megabytes.
const MAX_ZERO_SIZE_ITEMS: usize = 1 << 16;

/// Checks that `datum` fits `schema` as far as apache-avro's allocations
/// depend on it; the error says what does not fit.
pub(crate) fn check(schema: &Schema, datum: &[u8]) -> Result<(), String> {
    let resolved = ResolvedSchema::try_from(schema).map_err(|e| e.to_string())?;
    let mut walk = Walk {
        names: resolved.get_names(),
        rest: datum,
        zero_size_items_left: MAX_ZERO_SIZE_ITEMS,
    };
    walk.datum(schema, &None)
}

struct Walk<'a> {
    names: &'a NamesRef<'a>,
    rest: &'a [u8],
    zero_size_items_left: usize,
}

impl Walk<'_> {
    fn datum(&mut self, schema: &Schema, namespace: &Namespace) -> Result<(), String> {
        match schema {
            Schema::Null => Ok(()),
            Schema::Boolean => self.take(1, "a boolean"),
            Schema::Int
            | Schema::Long
            | Schema::Enum(_)
            | Schema::Date
            | Schema::TimeMillis
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => self.long().map(drop),
            Schema::Float => self.take(4, "a float"),
            Schema::Double => self.take(8, "a double"),
            Schema::Duration => self.take(12, "a duration"),
            Schema::Fixed(fixed) => self.take(fixed.size, "a fixed"),
            // apache-avro reads a uuid and a big-decimal as bytes.
            Schema::Bytes | Schema::BigDecimal | Schema::Uuid => self.length_prefixed("bytes"),
            Schema::String => self.length_prefixed("a string"),
            Schema::Decimal(decimal) => self.datum(&decimal.inner, namespace),
            Schema::Union(union) => {
                let index = self.long()?;
                let variants = union.variants();
                let variant = usize::try_from(index)
                    .ok()
                    .and_then(|i| variants.get(i))
                    .ok_or_else(|| {
                        format!(
                            "union branch {index} does not exist (the union has {})",
                            variants.len()
                        )
                    })?;
                self.datum(variant, namespace)
            }
            Schema::Record(record) => {
                let namespace = record.name.fully_qualified_name(namespace).namespace;
                record
                    .fields
                    .iter()
                    .try_for_each(|field| self.datum(&field.schema, &namespace))
            }
            Schema::Array(array) => {
                self.blocks("array", true, |walk| walk.datum(&array.items, namespace))
            }
            Schema::Map(map) => self.blocks("map", false, |walk| {
                walk.length_prefixed("a map key")?;
                walk.datum(&map.types, namespace)
            }),
            Schema::Ref { name } => {
                let name = name.fully_qualified_name(namespace);
                let names = self.names;
                let named = names
                    .get(&name)
                    .copied()
                    .ok_or_else(|| format!("the schema names {name}, which it does not define"))?;
                self.datum(named, &name.namespace)
            }
        }
    }

    /// An array's or map's blocks: a count, for a negative count its byte
    /// size, then that many items, until a count of zero.
    fn blocks(
        &mut self,
        kind: &str,
        items_may_be_empty: bool,
        mut item: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        loop {
            let raw = self.long()?;
            if raw == 0 {
                return Ok(());
            }
            if raw < 0 {
                let size = self.long()?;
                if usize::try_from(size).unwrap_or(usize::MAX) > self.rest.len() {
                    return Err(format!(
                        "{kind} block of {size} bytes does not fit in the {} bytes left",
                        self.rest.len()
                    ));
                }
            }
            let count = raw.unsigned_abs();
            // A map entry takes at least its key's length byte; an array
            // item may take none, and then draws on the zero-size budget.
            let room = if items_may_be_empty {
                self.rest.len().saturating_add(self.zero_size_items_left)
            } else {
                self.rest.len()
            };
            if count > u64::try_from(room).unwrap_or(u64::MAX) {
                return Err(format!(
                    "{kind} block count {count} cannot fit in the {} bytes left of the datum",
                    self.rest.len()
                ));
            }
            for _ in 0..count {
                let before = self.rest.len();
                item(self)?;
                if self.rest.len() == before {
                    self.zero_size_items_left =
                        self.zero_size_items_left.checked_sub(1).ok_or_else(|| {
                            format!(
                                "{kind} holds more than {MAX_ZERO_SIZE_ITEMS} items of zero size"
                            )
                        })?;
                }
            }
        }
    }

    fn length_prefixed(&mut self, what: &str) -> Result<(), String> {
        let len = self.long()?;
        let len = usize::try_from(len).map_err(|_| format!("{what} has length {len}"))?;
        self.take(len, what)
    }

    fn take(&mut self, len: usize, what: &str) -> Result<(), String> {
        self.rest = self.rest.get(len..).ok_or_else(|| {
            format!(
                "{what} of {len} bytes runs past the end: {} bytes left",
                self.rest.len()
            )
        })?;
        Ok(())
    }

    /// A zig-zag varint, as apache-avro reads it: at most 10 bytes.
    fn long(&mut self) -> Result<i64, String> {
        let mut zigzag = 0u64;
        for (i, &byte) in self.rest.iter().enumerate().take(10) {
            zigzag |= u64::from(byte & 0x7f) << (i * 7);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Ok((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64));
            }
        }
        Err(if self.rest.len() >= 10 {
            "a varint longer than 10 bytes".to_owned()
        } else {
            format!("a varint runs past the end: {} bytes left", self.rest.len())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use apache_avro::types::Value;
    use apache_avro::{from_avro_datum, to_avro_datum, Days, Decimal, Duration, Millis, Months};

    use super::*;

    fn schema(json: &str) -> Schema {
        Schema::parse_str(json).expect("a test schema parses")
    }

    /// A zig-zag varint, as Avro writes a long.
    fn varint(value: i64) -> Vec<u8> {
        let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
        let mut out = Vec::new();
        while zigzag > 0x7f {
            out.push(0x80 | (zigzag & 0x7f) as u8);
            zigzag >>= 7;
        }
        out.push(zigzag as u8);
        out
    }

    fn passes_and_decodes(schema: &Schema, value: Value) {
        let datum = to_avro_datum(schema, value.clone()).expect("the test value fits");
        assert_eq!(check(schema, &datum), Ok(()), "{value:?}");
        assert_eq!(
            from_avro_datum(schema, &mut &datum[..], None).unwrap(),
            value
        );
    }

    #[test]
    fn a_map_block_count_past_the_bytes_left_is_refused() {
        // The fuzzer's input: a map whose first block claims ~400 M entries
        // in a datum of a few bytes, which apache-avro would reserve.
        let attrs = schema(r#"{"type":"map","values":"long"}"#);
        let mut datum = varint(400_000_000);
        datum.extend([2, b'x', 4, 0]);
        let why = check(&attrs, &datum).unwrap_err();
        assert_eq!(
            why,
            "map block count 400000000 cannot fit in the 4 bytes left of the datum"
        );
        // The same with a negative count and its byte size.
        let mut datum = varint(-400_000_000);
        datum.extend(varint(3));
        datum.extend([2, b'x', 4, 0]);
        assert!(check(&attrs, &datum)
            .unwrap_err()
            .contains("map block count 400000000"));
    }

    #[test]
    fn an_array_block_count_past_the_bytes_left_is_refused() {
        let tags = schema(r#"{"type":"array","items":"string"}"#);
        let mut datum = varint(1 << 40);
        datum.extend([2, b'a', 0]);
        assert!(check(&tags, &datum)
            .unwrap_err()
            .contains("array block count 1099511627776 cannot fit in the 3 bytes left"));
        assert!(check(&tags, &varint(i64::MIN)).is_err());
    }

    #[test]
    fn items_of_zero_size_are_bounded_by_count_not_bytes() {
        let nulls = schema(r#"{"type":"array","items":"null"}"#);
        passes_and_decodes(&nulls, Value::Array(vec![Value::Null; 1000]));
        let mut datum = varint(MAX_ZERO_SIZE_ITEMS as i64 + 1);
        datum.push(0);
        assert!(check(&nulls, &datum).is_err());
        // Across blocks too: the budget is the datum's, not a block's. The
        // second count fits in the bytes left (the trailing ones), but its
        // items take none of them.
        let mut datum = varint(MAX_ZERO_SIZE_ITEMS as i64);
        datum.extend(varint(3));
        datum.extend([0, 0, 0, 0]);
        assert_eq!(
            check(&nulls, &datum).unwrap_err(),
            "array holds more than 65536 items of zero size"
        );
        datum.truncate(datum.len() - 3);
        assert!(check(&nulls, &datum)
            .unwrap_err()
            .contains("array block count 3 cannot fit in the 1 bytes left"));
    }

    #[test]
    fn lengths_past_the_end_are_refused() {
        let string = schema(r#""string""#);
        let mut datum = varint(1 << 30);
        datum.extend(b"abc");
        assert_eq!(
            check(&string, &datum).unwrap_err(),
            "a string of 1073741824 bytes runs past the end: 3 bytes left"
        );
        assert!(check(&string, &varint(-1)).is_err());
        let fixed = schema(r#"{"type":"fixed","name":"F","size":16}"#);
        assert!(check(&fixed, &[0; 15]).is_err());
        assert!(check(&schema(r#""long""#), &[0x80; 3]).is_err());
        assert!(check(&schema(r#""long""#), &[0x80; 11]).is_err());
        let union = schema(r#"["null","int"]"#);
        assert!(check(&union, &varint(2))
            .unwrap_err()
            .contains("union branch 2"));
    }

    #[test]
    fn nested_arrays_and_maps_are_walked_to_the_bottom() {
        let nested = schema(
            r#"{"type":"array","items":{"type":"map","values":{"type":"array","items":"int"}}}"#,
        );
        let inner = |n: i32| Value::Array((0..n).map(Value::Int).collect());
        let map: HashMap<String, Value> =
            [("a".to_owned(), inner(3)), ("b".to_owned(), inner(0))].into();
        passes_and_decodes(
            &nested,
            Value::Array(vec![Value::Map(map), Value::Map(HashMap::new())]),
        );
        // One item of the outer array: a map of one entry whose array
        // claims a count its bytes cannot hold.
        let mut datum = vec![2, 2, 2, b'k'];
        datum.extend(varint(1 << 33));
        datum.extend([2, 0, 0, 0]);
        assert!(check(&nested, &datum)
            .unwrap_err()
            .contains("array block count 8589934592 cannot fit in the 4 bytes left"));
    }

    #[test]
    fn every_schema_shape_still_passes() {
        let record = schema(
            r#"{"type":"record","name":"All","namespace":"t","fields":[
              {"name":"n","type":"null"},
              {"name":"b","type":"boolean"},
              {"name":"i","type":"int"},
              {"name":"l","type":"long"},
              {"name":"f","type":"float"},
              {"name":"d","type":"double"},
              {"name":"by","type":"bytes"},
              {"name":"s","type":"string"},
              {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
              {"name":"fx","type":{"type":"fixed","name":"Fx","size":3}},
              {"name":"fx2","type":"Fx"},
              {"name":"u","type":["null","string","E"]},
              {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
              {"name":"date","type":{"type":"int","logicalType":"date"}},
              {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
              {"name":"uuid","type":{"type":"string","logicalType":"uuid"}},
              {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
              {"name":"next","type":["null","All"]}
            ]}"#,
        );
        let all = |next: Value| {
            Value::Record(vec![
                ("n".into(), Value::Null),
                ("b".into(), Value::Boolean(true)),
                ("i".into(), Value::Int(-7)),
                ("l".into(), Value::Long(i64::MIN)),
                ("f".into(), Value::Float(1.5)),
                ("d".into(), Value::Double(-2.25)),
                ("by".into(), Value::Bytes(vec![1, 2, 3])),
                ("s".into(), Value::String("hé".into())),
                ("e".into(), Value::Enum(1, "Y".into())),
                ("fx".into(), Value::Fixed(3, vec![9, 8, 7])),
                ("fx2".into(), Value::Fixed(3, vec![0, 0, 0])),
                (
                    "u".into(),
                    Value::Union(2, Box::new(Value::Enum(0, "X".into()))),
                ),
                ("dec".into(), Value::Decimal(Decimal::from(vec![1, 0]))),
                ("date".into(), Value::Date(19_000)),
                ("ts".into(), Value::TimestampMicros(1_700_000_000_000_000)),
                (
                    "uuid".into(),
                    Value::Uuid("67e55044-10b1-426f-9247-bb680e5fe0c8".parse().unwrap()),
                ),
                (
                    "dur".into(),
                    Value::Duration(Duration::new(Months::new(1), Days::new(2), Millis::new(3))),
                ),
                ("next".into(), next),
            ])
        };
        let chained = all(Value::Union(
            1,
            Box::new(all(Value::Union(0, Box::new(Value::Null)))),
        ));
        passes_and_decodes(&record, chained);
    }
}
