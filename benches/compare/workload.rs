//! The workloads of `cargo xtask bench compare`: their input, generated
//! from a seed, and the output each must produce, computed here without
//! either Streams library so that a fast wrong run cannot win.

use std::collections::HashMap;
use std::fmt;

/// First event time of the generated input (2023-11-14T22:13:20Z).
pub const BASE_TIME_MS: i64 = 1_700_000_000_000;
/// Event time between two consecutive input records.
pub const TIME_STEP_MS: i64 = 2;
/// The tumbling windows of `window-count`.
pub const WINDOW_SIZE_MS: i64 = 60_000;
/// Bytes of every stream value.
pub const VALUE_BYTES: usize = 100;
/// Distinct keys of every input unless `--keys` says otherwise: a state
/// that fits in the record cache. The large-state runs give millions.
pub const DEFAULT_KEYS: u64 = 10_000;
/// Values starting with this byte are dropped by the pass-through's filter.
pub const DROPPED_MARK: u8 = b'#';

/// One topology measured on every implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `filter` (drops values marked [`DROPPED_MARK`]) then `mapValues`
    /// (ASCII upper case), at least once.
    PassThrough,
    /// The same under exactly_once_v2.
    PassThroughEos,
    /// `groupByKey().count()` on a RocksDB store.
    Count,
    /// `groupByKey().windowedBy(1 min tumbling, no grace).count()` on RocksDB.
    WindowCount,
    /// A stream left-joined with a table of every key, co-partitioned.
    Join,
    /// The count under exactly_once_v2: the crash-recovery run kills it
    /// mid-input and starts it again on the same state directory.
    CountEos,
    /// The count's topology restarted after its local state was deleted:
    /// timed until it serves again (every changelog partition restored,
    /// RUNNING), then fed [`check_input`] to show the restored counts go on.
    Restore,
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::PassThrough,
        Workload::Count,
        Workload::WindowCount,
        Workload::Join,
        Workload::PassThroughEos,
        Workload::Restore,
        Workload::CountEos,
    ];

    pub fn parse(name: &str) -> Result<Workload, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workload `{name}` (one of: {})", names.join(", "))
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::PassThrough => "pass-through",
            Workload::PassThroughEos => "pass-through-eos",
            Workload::Count => "count",
            Workload::WindowCount => "window-count",
            Workload::Join => "join",
            Workload::Restore => "restore",
            Workload::CountEos => "count-eos",
        }
    }

    pub fn exactly_once(self) -> bool {
        matches!(self, Workload::PassThroughEos | Workload::CountEos)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// splitmix64: a small, good, seedable generator, so the same seed gives
/// the same input on every machine.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One input record.
pub struct InputRecord {
    pub key: String,
    pub value: Vec<u8>,
    pub timestamp: i64,
}

pub fn key_name(index: u64) -> String {
    format!("key-{index:05}")
}

/// The stream input: `records` records over `keys` keys (drawn at random:
/// as many records as keys touch about 63 % of them), one in ten values
/// marked to be dropped by the pass-through's filter, event time advancing
/// [`TIME_STEP_MS`] per record.
pub fn stream_input(seed: u64, records: u64, keys: u64) -> impl Iterator<Item = InputRecord> {
    let mut random = SplitMix64::new(seed);
    (0..records).map(move |i| {
        let word = random.next_u64();
        let key = key_name(word % keys);
        let mut value = Vec::with_capacity(VALUE_BYTES);
        let mut letters = random.next_u64();
        for n in 0..VALUE_BYTES {
            if n % 12 == 0 {
                letters = random.next_u64();
            }
            value.push(b'a' + (letters % 26) as u8);
            letters /= 26;
        }
        if (word >> 32).is_multiple_of(10) {
            value[0] = DROPPED_MARK;
        }
        InputRecord {
            key,
            value,
            timestamp: BASE_TIME_MS + i as i64 * TIME_STEP_MS,
        }
    })
}

/// The join's table: one value per key, timestamped before every stream
/// record, so every join finds its key whichever side is read first.
pub fn table_input(keys: u64) -> impl Iterator<Item = InputRecord> {
    (0..keys).map(|k| InputRecord {
        key: key_name(k),
        value: format!("customer-{k}").into_bytes(),
        timestamp: BASE_TIME_MS - 1_000,
    })
}

/// The state a latency run over a large key space starts from: one
/// record per key, timestamped before every rate-limited record, so that
/// the measured period updates existing counts (the state is as large as
/// it will be) and its output can be told from this one's by timestamp.
pub fn preload_input(keys: u64) -> impl Iterator<Item = InputRecord> {
    (0..keys).map(|k| InputRecord {
        key: key_name(k),
        value: format!("preload-{k}").into_bytes(),
        timestamp: BASE_TIME_MS - 1_000,
    })
}

/// `expected`'s count after [`preload_input`] over `keys` keys was
/// counted first: every key one more.
pub fn with_preload(expected: Expected, keys: u64) -> Result<Expected, String> {
    let Expected::Finals(mut finals) = expected else {
        return Err("a preload is counted only by count".into());
    };
    for record in preload_input(keys) {
        *finals.entry((record.key, 0)).or_insert(0) += 1;
    }
    Ok(Expected::Finals(finals))
}

/// Keys `restore` feeds one more record each after its restore: every
/// `CHECK_EVERY`th key.
pub const CHECK_EVERY: u64 = 10;

/// What `restore` feeds once it serves again: one record for every
/// [`CHECK_EVERY`]th key, timestamped after the `records` of the stream
/// input, so that each of those keys' counts must go on from the restored
/// one (a count restored wrong, or not at all, shows in the output).
pub fn check_input(records: u64, keys: u64) -> impl Iterator<Item = InputRecord> {
    let after = BASE_TIME_MS + records as i64 * TIME_STEP_MS;
    (0..keys)
        .step_by(CHECK_EVERY as usize)
        .map(move |k| InputRecord {
            key: key_name(k),
            value: format!("check-{k}").into_bytes(),
            timestamp: after,
        })
}

/// How many records [`check_input`] holds over `keys` keys (xtask's
/// `check_records` must say as many).
#[cfg(test)]
pub fn check_records(keys: u64) -> u64 {
    keys.div_ceil(CHECK_EVERY)
}

/// What the pass-through does to one value.
pub fn pass_through(value: &[u8]) -> Option<Vec<u8>> {
    (value.first() != Some(&DROPPED_MARK)).then(|| value.to_ascii_uppercase())
}

/// What the join's joiner does with a stream value and its table value.
pub fn join_value(value: &[u8], table: Option<&[u8]>) -> Vec<u8> {
    let mut joined = value.to_vec();
    joined.push(b'|');
    joined.extend_from_slice(table.unwrap_or(b"null"));
    joined
}

/// The start of the window that holds `timestamp`.
pub fn window_start(timestamp: i64) -> i64 {
    timestamp - timestamp.rem_euclid(WINDOW_SIZE_MS)
}

/// An order-independent digest of a topic's records: their number and the
/// wrapping sum of a hash of each (key, value); duplicates and losses both
/// change it, the order within and across partitions does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digest {
    pub records: u64,
    pub sum: u64,
}

impl Digest {
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        self.records += 1;
        self.sum = self
            .sum
            .wrapping_add(fnv1a(key).rotate_left(29) ^ fnv1a(value));
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// What a workload's output must be.
#[derive(Debug, PartialEq, Eq)]
pub enum Expected {
    /// Every record, in any order (pass-through, join).
    Records(Digest),
    /// The last value of every key (count), or of every key and window
    /// start (window count).
    Finals(HashMap<(String, i64), i64>),
}

/// The expected output of `workload` on the input of `seed`, `records`
/// and `keys`.
pub fn expected(workload: Workload, seed: u64, records: u64, keys: u64) -> Expected {
    let input = stream_input(seed, records, keys);
    match workload {
        Workload::PassThrough | Workload::PassThroughEos => {
            let mut digest = Digest::default();
            for record in input {
                if let Some(value) = pass_through(&record.value) {
                    digest.add(record.key.as_bytes(), &value);
                }
            }
            Expected::Records(digest)
        }
        Workload::Join => {
            let table: HashMap<String, Vec<u8>> =
                table_input(keys).map(|r| (r.key, r.value)).collect();
            let mut digest = Digest::default();
            for record in input {
                let joined = join_value(&record.value, table.get(&record.key).map(Vec::as_slice));
                digest.add(record.key.as_bytes(), &joined);
            }
            Expected::Records(digest)
        }
        Workload::Count | Workload::CountEos | Workload::WindowCount | Workload::Restore => {
            let mut finals = HashMap::new();
            // restore: the count's input, then the records fed after the
            // restore.
            let check = (workload == Workload::Restore).then(|| check_input(records, keys));
            for record in input.chain(check.into_iter().flatten()) {
                let window = if workload == Workload::WindowCount {
                    window_start(record.timestamp)
                } else {
                    0
                };
                *finals.entry((record.key, window)).or_insert(0) += 1;
            }
            Expected::Finals(finals)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_input() {
        let a: Vec<_> = stream_input(7, 100, DEFAULT_KEYS)
            .map(|r| (r.key, r.value))
            .collect();
        let b: Vec<_> = stream_input(7, 100, DEFAULT_KEYS)
            .map(|r| (r.key, r.value))
            .collect();
        let c: Vec<_> = stream_input(8, 100, DEFAULT_KEYS)
            .map(|r| (r.key, r.value))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|(_, v)| v.len() == VALUE_BYTES));
    }

    #[test]
    fn about_one_in_ten_values_is_dropped() {
        let dropped = stream_input(1, 10_000, DEFAULT_KEYS)
            .filter(|r| pass_through(&r.value).is_none())
            .count();
        assert!((800..1200).contains(&dropped), "{dropped}");
    }

    #[test]
    fn a_digest_sees_a_lost_or_duplicated_record_but_not_order() {
        let mut forward = Digest::default();
        let mut backward = Digest::default();
        let records = [("a", "1"), ("b", "2"), ("c", "3")];
        records
            .iter()
            .for_each(|(k, v)| forward.add(k.as_bytes(), v.as_bytes()));
        records
            .iter()
            .rev()
            .for_each(|(k, v)| backward.add(k.as_bytes(), v.as_bytes()));
        assert_eq!(forward, backward);
        let mut duplicated = forward;
        duplicated.add(b"a", b"1");
        assert_ne!(duplicated, forward);
        let mut swapped = Digest::default();
        swapped.add(b"a", b"2");
        swapped.add(b"b", b"1");
        swapped.add(b"c", b"3");
        assert_ne!(swapped.sum, forward.sum);
    }

    #[test]
    fn counts_add_up_to_the_input() {
        let Expected::Finals(finals) = expected(Workload::WindowCount, 3, 50_000, DEFAULT_KEYS)
        else {
            panic!("window count expects finals");
        };
        assert_eq!(finals.values().sum::<i64>(), 50_000);
        assert!(finals.keys().all(|(_, start)| start % WINDOW_SIZE_MS == 0));
    }

    #[test]
    fn restore_expects_the_count_plus_one_per_checked_key() {
        let Expected::Finals(count) = expected(Workload::Count, 3, 50_000, DEFAULT_KEYS) else {
            panic!("count expects finals");
        };
        let Expected::Finals(restore) = expected(Workload::Restore, 3, 50_000, DEFAULT_KEYS) else {
            panic!("restore expects finals");
        };
        assert_eq!(
            check_input(50_000, DEFAULT_KEYS).count() as u64,
            check_records(DEFAULT_KEYS)
        );
        assert_eq!(
            restore.values().sum::<i64>(),
            50_000 + check_records(DEFAULT_KEYS) as i64
        );
        for k in [0, CHECK_EVERY, 5 * CHECK_EVERY] {
            let key = (key_name(k), 0);
            assert_eq!(restore[&key], count[&key] + 1);
        }
        let unchecked = (key_name(1), 0);
        assert_eq!(restore[&unchecked], count[&unchecked]);
    }

    #[test]
    fn a_preload_counts_every_key_once_more() {
        let keys = 1_000;
        let Expected::Finals(count) = expected(Workload::Count, 3, 5_000, keys) else {
            panic!("count expects finals");
        };
        let Expected::Finals(preloaded) =
            with_preload(expected(Workload::Count, 3, 5_000, keys), keys).unwrap()
        else {
            panic!("count expects finals");
        };
        assert_eq!(preloaded.len() as u64, keys);
        for k in 0..keys {
            let key = (key_name(k), 0);
            assert_eq!(preloaded[&key], count.get(&key).copied().unwrap_or(0) + 1);
        }
        assert!(with_preload(expected(Workload::PassThrough, 3, 10, keys), keys).is_err());
    }

    #[test]
    fn a_large_key_space_spreads_the_input_over_it() {
        // As many records as keys: about 1 - 1/e of the keys get one.
        let keys = 200_000;
        let distinct: std::collections::HashSet<String> =
            stream_input(5, keys, keys).map(|r| r.key).collect();
        let share = distinct.len() as f64 / keys as f64;
        assert!((0.62..0.645).contains(&share), "{share}");
        assert!(distinct.iter().all(|key| key.len() <= "key-199999".len()));
        assert_eq!(check_records(keys), 20_000);
        assert_eq!(table_input(keys).count() as u64, keys);
    }
}
