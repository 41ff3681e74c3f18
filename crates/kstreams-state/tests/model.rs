#![cfg(feature = "rocksdb")]
//! Every store type on both engines (and with the cache on) against a
//! simple model, then a restore of its changelog into an empty store.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{context, restore, Engine, ENGINES};
use kstreams_record::{I64Serde, StringSerde};
use kstreams_state::*;
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "ab", "b", "ba", "c", "", "a\u{0}", "d"])
        .prop_map(str::to_string)
}

fn kv_supplier(engine: Engine) -> std::sync::Arc<dyn KeyValueBytesStoreSupplier> {
    match engine {
        Engine::Memory => Stores::in_memory_key_value_store("kv"),
        Engine::Rocks => Stores::persistent_key_value_store("kv"),
    }
}

#[derive(Clone, Debug)]
enum KvOp {
    Put(String, i64),
    PutIfAbsent(String, i64),
    Delete(String),
    Get(String),
    Range(Option<String>, Option<String>, bool),
    Prefix(String),
    Flush,
}

fn kv_op() -> impl Strategy<Value = KvOp> {
    prop_oneof![
        4 => (key(), any::<i64>()).prop_map(|(k, v)| KvOp::Put(k, v)),
        1 => (key(), any::<i64>()).prop_map(|(k, v)| KvOp::PutIfAbsent(k, v)),
        2 => key().prop_map(KvOp::Delete),
        2 => key().prop_map(KvOp::Get),
        2 => (prop::option::of(key()), prop::option::of(key()), any::<bool>())
            .prop_map(|(a, b, r)| KvOp::Range(a, b, r)),
        1 => prop::sample::select(vec!["a", "b", ""]).prop_map(|p| KvOp::Prefix(p.to_string())),
        1 => Just(KvOp::Flush),
    ]
}

fn run_kv(engine: Engine, cache_bytes: Option<usize>, ops: &[KvOp]) {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, changelog) = context(dir.path(), cache_bytes.unwrap_or(0));
    let mut builder = Stores::key_value_store_builder(kv_supplier(engine), StringSerde, I64Serde);
    if cache_bytes.is_some() {
        builder = builder.with_caching_enabled();
    }
    let built = builder.build();
    built.init(&ctx).unwrap();
    let store: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        ctx.set_record_timestamp(i as i64);
        match op {
            KvOp::Put(k, v) => {
                store.borrow_mut().put(k.clone(), *v).unwrap();
                model.insert(k.clone(), *v);
            }
            KvOp::PutIfAbsent(k, v) => {
                let got = store.borrow_mut().put_if_absent(k.clone(), *v).unwrap();
                let want = model.get(k).copied();
                if want.is_none() {
                    model.insert(k.clone(), *v);
                }
                assert_eq!(got, want, "{op:?}");
            }
            KvOp::Delete(k) => {
                assert_eq!(
                    store.borrow_mut().delete(k).unwrap(),
                    model.remove(k),
                    "{op:?}"
                );
            }
            KvOp::Get(k) => assert_eq!(store.borrow().get(k).unwrap(), model.get(k).copied()),
            KvOp::Range(a, b, reverse) => {
                let s = store.borrow();
                let it = if *reverse {
                    s.reverse_range(a.as_ref(), b.as_ref())
                } else {
                    s.range(a.as_ref(), b.as_ref())
                }
                .unwrap();
                let got: Vec<(String, i64)> = it.map(Result::unwrap).collect();
                let mut want: Vec<(String, i64)> = if matches!((a, b), (Some(a), Some(b)) if a > b)
                {
                    vec![]
                } else {
                    model
                        .iter()
                        .filter(|(k, _)| a.as_ref().is_none_or(|a| *k >= a))
                        .filter(|(k, _)| b.as_ref().is_none_or(|b| *k <= b))
                        .map(|(k, v)| (k.clone(), *v))
                        .collect()
                };
                if *reverse {
                    want.reverse();
                }
                assert_eq!(got, want, "{op:?}");
            }
            KvOp::Prefix(p) => {
                let got: Vec<(String, i64)> = store
                    .borrow()
                    .prefix_scan(p.as_bytes())
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let want: Vec<(String, i64)> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(p.as_str()))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                assert_eq!(got, want, "{op:?}");
            }
            KvOp::Flush => built.lifecycle.borrow_mut().flush().unwrap(),
        }
    }
    built.lifecycle.borrow_mut().flush().unwrap();
    let all: Vec<(String, i64)> = store.borrow().all().unwrap().map(Result::unwrap).collect();
    let want: Vec<(String, i64)> = model.clone().into_iter().collect();
    assert_eq!(all, want);

    // The changelog rebuilds the same contents in an empty store.
    let records = changelog.borrow().clone();
    assert!(records
        .iter()
        .all(|r| r.topic == "app-kv-changelog" && r.partition == 0));
    let dir2 = tempfile::tempdir().unwrap();
    let (ctx2, _) = context(dir2.path(), 0);
    let fresh = Stores::key_value_store_builder(kv_supplier(engine), StringSerde, I64Serde).build();
    fresh.init(&ctx2).unwrap();
    restore(&fresh, &records);
    let restored: KeyValueStoreHandle<String, i64> = fresh.handle().unwrap();
    let got: Vec<(String, i64)> = restored
        .borrow()
        .all()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, want);
    built.lifecycle.borrow_mut().close().unwrap();
    fresh.lifecycle.borrow_mut().close().unwrap();
}

// ---------- window ----------

const W_RETENTION: u64 = 180_000;
const W_SIZE: u64 = 10_000;

#[derive(Clone, Debug)]
enum WinOp {
    Put(String, Option<i64>, i64),
    Fetch(String, i64),
    FetchTime(String, i64, i64, bool),
    FetchKeys(Option<String>, Option<String>, i64, i64, bool),
    Flush,
}

fn ts() -> impl Strategy<Value = i64> {
    (0i64..60).prop_map(|n| n * 10_000)
}

fn win_op() -> impl Strategy<Value = WinOp> {
    prop_oneof![
        5 => (key(), prop::option::weighted(0.85, any::<i64>()), ts()).prop_map(|(k, v, t)| WinOp::Put(k, v, t)),
        2 => (key(), ts()).prop_map(|(k, t)| WinOp::Fetch(k, t)),
        2 => (key(), ts(), ts(), any::<bool>()).prop_map(|(k, a, b, r)| WinOp::FetchTime(k, a, b, r)),
        2 => (prop::option::of(key()), prop::option::of(key()), ts(), ts(), any::<bool>())
            .prop_map(|(a, b, f, t, r)| WinOp::FetchKeys(a, b, f, t, r)),
        1 => Just(WinOp::Flush),
    ]
}

fn window_supplier(engine: Engine, dups: bool) -> std::sync::Arc<dyn WindowBytesStoreSupplier> {
    let (r, w) = (
        Duration::from_millis(W_RETENTION),
        Duration::from_millis(W_SIZE),
    );
    match engine {
        Engine::Memory => Stores::in_memory_window_store("win", r, w, dups).unwrap(),
        Engine::Rocks => Stores::persistent_window_store("win", r, w, dups).unwrap(),
    }
}

/// Kafka Streams' window store semantics, plainly.
#[derive(Default)]
struct WindowModel {
    entries: BTreeMap<(i64, String, u32), i64>,
    observed: Option<i64>,
    dups: bool,
    seq: u32,
}

impl WindowModel {
    fn horizon(&self) -> i64 {
        self.observed.map_or(i64::MIN, |o| o - W_RETENTION as i64)
    }
    fn put(&mut self, k: &str, v: Option<i64>, t: i64) {
        self.observed = Some(self.observed.map_or(t, |o| o.max(t)));
        if t <= self.horizon() {
            return;
        }
        if self.dups {
            if let Some(v) = v {
                self.seq += 1;
                self.entries.insert((t, k.to_string(), self.seq), v);
            }
            return;
        }
        match v {
            Some(v) => {
                self.entries.insert((t, k.to_string(), 0), v);
            }
            None => {
                self.entries.remove(&(t, k.to_string(), 0));
            }
        }
    }
    fn visible(&self) -> impl Iterator<Item = (&(i64, String, u32), &i64)> {
        let h = self.horizon();
        self.entries.iter().filter(move |((t, _, _), _)| *t > h)
    }
}

fn run_window(engine: Engine, cache_bytes: Option<usize>, dups: bool, ops: &[WinOp]) {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, changelog) = context(dir.path(), cache_bytes.unwrap_or(0));
    let mut builder =
        Stores::window_store_builder(window_supplier(engine, dups), StringSerde, I64Serde);
    if cache_bytes.is_some() {
        builder = builder.with_caching_enabled();
    }
    let built = builder.build();
    built.init(&ctx).unwrap();
    let store: WindowStoreHandle<String, i64> = built.handle().unwrap();
    let mut model = WindowModel {
        dups,
        ..Default::default()
    };
    let window = |t: i64| Window::new(t, t + W_SIZE as i64);
    for (i, op) in ops.iter().enumerate() {
        ctx.set_record_timestamp(i as i64);
        match op {
            WinOp::Put(k, v, t) => {
                store.borrow_mut().put(k.clone(), *v, *t).unwrap();
                model.put(k, *v, *t);
            }
            WinOp::Fetch(k, t) => {
                if dups {
                    continue;
                }
                let want = model
                    .visible()
                    .find(|((mt, mk, _), _)| mt == t && mk == k)
                    .map(|(_, v)| *v);
                assert_eq!(store.borrow().fetch(k, *t).unwrap(), want, "{op:?}");
            }
            WinOp::FetchTime(k, a, b, reverse) => {
                let s = store.borrow();
                let it = if *reverse {
                    s.backward_fetch_time_range(k, *a, *b)
                } else {
                    s.fetch_time_range(k, *a, *b)
                }
                .unwrap();
                let got: Vec<(i64, i64)> = it.map(Result::unwrap).collect();
                let mut want: Vec<(i64, i64)> = model
                    .visible()
                    .filter(|((t, mk, _), _)| mk == k && t >= a && t <= b)
                    .map(|((t, _, _), v)| (*t, *v))
                    .collect();
                if *reverse {
                    want.reverse();
                }
                assert_eq!(got, want, "{op:?}");
            }
            WinOp::FetchKeys(kf, kt, a, b, reverse) => {
                let s = store.borrow();
                let it = if *reverse {
                    s.backward_fetch_key_range(kf.as_ref(), kt.as_ref(), *a, *b)
                } else {
                    s.fetch_key_range(kf.as_ref(), kt.as_ref(), *a, *b)
                }
                .unwrap();
                let got: Vec<(Windowed<String>, i64)> = it.map(Result::unwrap).collect();
                let mut want: Vec<(Windowed<String>, i64)> = if matches!((kf, kt), (Some(x), Some(y)) if x > y)
                {
                    vec![]
                } else {
                    model
                        .visible()
                        .filter(|((t, _, _), _)| t >= a && t <= b)
                        .filter(|((_, mk, _), _)| kf.as_ref().is_none_or(|f| mk >= f))
                        .filter(|((_, mk, _), _)| kt.as_ref().is_none_or(|f| mk <= f))
                        .map(|((t, mk, _), v)| (Windowed::new(mk.clone(), window(*t)), *v))
                        .collect()
                };
                if *reverse {
                    want.reverse();
                }
                assert_eq!(got, want, "{op:?}");
            }
            WinOp::Flush => built.lifecycle.borrow_mut().flush().unwrap(),
        }
    }
    built.lifecycle.borrow_mut().flush().unwrap();
    let want: Vec<(Windowed<String>, i64)> = model
        .visible()
        .map(|((t, k, _), v)| (Windowed::new(k.clone(), window(*t)), *v))
        .collect();
    let got: Vec<(Windowed<String>, i64)> =
        store.borrow().all().unwrap().map(Result::unwrap).collect();
    assert_eq!(got, want);

    let records = changelog.borrow().clone();
    let dir2 = tempfile::tempdir().unwrap();
    let (ctx2, _) = context(dir2.path(), 0);
    let fresh =
        Stores::window_store_builder(window_supplier(engine, dups), StringSerde, I64Serde).build();
    fresh.init(&ctx2).unwrap();
    restore(&fresh, &records);
    let restored: WindowStoreHandle<String, i64> = fresh.handle().unwrap();
    let got: Vec<(Windowed<String>, i64)> = restored
        .borrow()
        .all()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, want, "restored");
    built.lifecycle.borrow_mut().close().unwrap();
}

// ---------- session ----------

const S_RETENTION: u64 = 180_000;

#[derive(Clone, Debug)]
enum SesOp {
    Put(String, i64, i64, Option<i64>),
    FetchSession(String, i64, i64),
    Find(Option<String>, Option<String>, i64, i64, bool),
    Flush,
}

fn ses_op() -> impl Strategy<Value = SesOp> {
    prop_oneof![
        5 => (key(), ts(), 0i64..4, prop::option::weighted(0.85, any::<i64>()))
            .prop_map(|(k, s, len, v)| SesOp::Put(k, s, s + len * 10_000, v)),
        2 => (key(), ts(), 0i64..4).prop_map(|(k, s, len)| SesOp::FetchSession(k, s, s + len * 10_000)),
        3 => (prop::option::of(key()), prop::option::of(key()), ts(), ts(), any::<bool>())
            .prop_map(|(a, b, e, s, r)| SesOp::Find(a, b, e, s, r)),
        1 => Just(SesOp::Flush),
    ]
}

fn session_supplier(engine: Engine) -> std::sync::Arc<dyn SessionBytesStoreSupplier> {
    let r = Duration::from_millis(S_RETENTION);
    match engine {
        Engine::Memory => Stores::in_memory_session_store("ses", r),
        Engine::Rocks => Stores::persistent_session_store("ses", r),
    }
}

fn run_session(engine: Engine, cache_bytes: Option<usize>, ops: &[SesOp]) {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, changelog) = context(dir.path(), cache_bytes.unwrap_or(0));
    let mut builder =
        Stores::session_store_builder(session_supplier(engine), StringSerde, I64Serde);
    if cache_bytes.is_some() {
        builder = builder.with_caching_enabled();
    }
    let built = builder.build();
    built.init(&ctx).unwrap();
    let store: SessionStoreHandle<String, i64> = built.handle().unwrap();
    let cached = cache_bytes.is_some();
    // (end, key, start) -> value: every session the store may still show.
    let mut model: BTreeMap<(i64, String, i64), i64> = BTreeMap::new();
    let mut observed: Option<i64> = None;
    // As Kafka Streams' session stores: the engine keeps a session ending
    // exactly `retention` behind its stream time, but a lookup sees only
    // later ends (`getActualFrom`). The cache takes every put and shows
    // whatever it still holds, so with caching a session older than that
    // may be shown (if still cached), and one after it must be.
    let horizon = |o: Option<i64>| o.map_or(i64::MIN, |o| o - S_RETENTION as i64);
    let readable = |o: Option<i64>| o.map_or(i64::MIN, |o| o - S_RETENTION as i64 + 1);
    for (i, op) in ops.iter().enumerate() {
        ctx.set_record_timestamp(i as i64);
        match op {
            SesOp::Put(k, s, e, v) => {
                let session = Windowed::new(k.clone(), Window::new(*s, *e));
                match v {
                    Some(v) => store.borrow_mut().put(session, Some(*v)).unwrap(),
                    None => store.borrow_mut().remove(&session).unwrap(),
                }
                observed = Some(observed.map_or(*e, |o| o.max(*e)));
                if cached || *e >= horizon(observed) {
                    match v {
                        Some(v) => {
                            model.insert((*e, k.clone(), *s), *v);
                        }
                        None => {
                            model.remove(&(*e, k.clone(), *s));
                        }
                    }
                }
            }
            SesOp::FetchSession(k, s, e) => {
                let got = store.borrow().fetch_session(k, *s, *e).unwrap();
                let stored = model.get(&(*e, k.clone(), *s)).copied();
                if *e >= readable(observed) {
                    assert_eq!(got, stored, "{op:?}");
                } else if cached {
                    assert!(got.is_none() || got == stored, "{op:?}: {got:?}");
                } else {
                    assert_eq!(got, None, "{op:?}");
                }
            }
            SesOp::Find(kf, kt, earliest_end, latest_start, reverse) => {
                let s = store.borrow();
                let single = kf.is_some() && kf == kt;
                let it = match (single, reverse) {
                    (true, false) => {
                        s.find_sessions(kf.as_ref().unwrap(), *earliest_end, *latest_start)
                    }
                    (true, true) => {
                        s.backward_find_sessions(kf.as_ref().unwrap(), *earliest_end, *latest_start)
                    }
                    (false, false) => s.find_sessions_key_range(
                        kf.as_ref(),
                        kt.as_ref(),
                        *earliest_end,
                        *latest_start,
                    ),
                    (false, true) => s.backward_find_sessions_key_range(
                        kf.as_ref(),
                        kt.as_ref(),
                        *earliest_end,
                        *latest_start,
                    ),
                }
                .unwrap();
                let got: Vec<(Windowed<String>, i64)> = it.map(Result::unwrap).collect();
                let mut candidates: Vec<(Windowed<String>, i64)> = if matches!((kf, kt), (Some(x), Some(y)) if x > y)
                {
                    vec![]
                } else {
                    model
                        .iter()
                        .filter(|((e, _, s), _)| e >= earliest_end && s <= latest_start)
                        .filter(|((_, k, _), _)| kf.as_ref().is_none_or(|f| k >= f))
                        .filter(|((_, k, _), _)| kt.as_ref().is_none_or(|f| k <= f))
                        .map(|((e, k, s), v)| (Windowed::new(k.clone(), Window::new(*s, *e)), *v))
                        .collect()
                };
                if *reverse {
                    candidates.reverse();
                }
                check_sessions(&got, &candidates, readable(observed), cached, op);
            }
            SesOp::Flush => built.lifecycle.borrow_mut().flush().unwrap(),
        }
    }
    built.lifecycle.borrow_mut().flush().unwrap();
    let want: Vec<(Windowed<String>, i64)> = model
        .iter()
        .filter(|((e, _, _), _)| *e >= readable(observed))
        .map(|((e, k, s), v)| (Windowed::new(k.clone(), Window::new(*s, *e)), *v))
        .collect();
    let all: Vec<(Windowed<String>, i64)> = model
        .iter()
        .map(|((e, k, s), v)| (Windowed::new(k.clone(), Window::new(*s, *e)), *v))
        .collect();
    let got: Vec<_> = store
        .borrow()
        .fetch_key_range(None, None)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    check_sessions(&got, &all, readable(observed), cached, &"all after flush");

    let records = changelog.borrow().clone();
    let dir2 = tempfile::tempdir().unwrap();
    let (ctx2, _) = context(dir2.path(), 0);
    let fresh =
        Stores::session_store_builder(session_supplier(engine), StringSerde, I64Serde).build();
    fresh.init(&ctx2).unwrap();
    restore(&fresh, &records);
    let restored: SessionStoreHandle<String, i64> = fresh.handle().unwrap();
    let got: Vec<_> = restored
        .borrow()
        .fetch_key_range(None, None)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, want, "restored");
}

/// What a session lookup returned, against `candidates` (the model's
/// sessions the lookup asked for, in its order): exactly those ending at or
/// after `readable`; with caching, also any of the others still cached,
/// with the model's value and in order.
fn check_sessions(
    got: &[(Windowed<String>, i64)],
    candidates: &[(Windowed<String>, i64)],
    readable: i64,
    cached: bool,
    what: &dyn std::fmt::Debug,
) {
    let required: Vec<_> = candidates
        .iter()
        .filter(|(w, _)| w.window.end >= readable)
        .cloned()
        .collect();
    if !cached {
        assert_eq!(got, required, "{what:?}");
        return;
    }
    let shown_required: Vec<_> = got
        .iter()
        .filter(|(w, _)| w.window.end >= readable)
        .cloned()
        .collect();
    assert_eq!(shown_required, required, "{what:?}");
    let in_order: Vec<_> = candidates
        .iter()
        .filter(|c| got.contains(c))
        .cloned()
        .collect();
    assert_eq!(
        got, in_order,
        "{what:?}: a session not in the model, or out of order"
    );
}

// ---------- versioned ----------

const V_RETENTION: i64 = 50;

#[derive(Clone, Debug)]
enum VerOp {
    Put(String, Option<i64>, i64),
    Delete(String, i64),
    Get(String),
    GetAsOf(String, i64),
}

fn vts() -> impl Strategy<Value = i64> {
    0i64..200
}

fn ver_op() -> impl Strategy<Value = VerOp> {
    prop_oneof![
        5 => (key(), prop::option::weighted(0.85, any::<i64>()), vts()).prop_map(|(k, v, t)| VerOp::Put(k, v, t)),
        1 => (key(), vts()).prop_map(|(k, t)| VerOp::Delete(k, t)),
        2 => key().prop_map(VerOp::Get),
        4 => (key(), vts()).prop_map(|(k, t)| VerOp::GetAsOf(k, t)),
    ]
}

fn versioned_supplier(engine: Engine) -> std::sync::Arc<dyn VersionedBytesStoreSupplier> {
    let r = Duration::from_millis(V_RETENTION as u64);
    match engine {
        Engine::Memory => Stores::in_memory_versioned_key_value_store("ver", r),
        Engine::Rocks => Stores::persistent_versioned_key_value_store("ver", r),
    }
}

/// KIP-889 semantics over a full history.
#[derive(Default)]
struct VersionedModel {
    history: BTreeMap<String, BTreeMap<i64, Option<i64>>>,
    observed: Option<i64>,
}

impl VersionedModel {
    fn horizon(&self) -> i64 {
        self.observed.map_or(i64::MIN, |o| o - V_RETENTION)
    }
    fn put(&mut self, k: &str, v: Option<i64>, t: i64) -> i64 {
        if t < self.horizon() {
            return PUT_RETURN_CODE_NOT_PUT;
        }
        self.observed = Some(self.observed.map_or(t, |o| o.max(t)));
        let versions = self.history.entry(k.to_string()).or_default();
        versions.insert(t, v);
        versions
            .range(t + 1..)
            .next()
            .map_or(PUT_RETURN_CODE_VALID_TO_UNDEFINED, |(n, _)| *n)
    }
    fn get(&self, k: &str) -> Option<VersionedRecord<i64>> {
        let (t, v) = self.history.get(k)?.iter().next_back()?;
        v.map(|value| VersionedRecord {
            value,
            timestamp: *t,
            valid_to: None,
        })
    }
    fn get_as_of(&self, k: &str, as_of: i64) -> Option<VersionedRecord<i64>> {
        if as_of < self.horizon() {
            return self.get(k).filter(|r| r.timestamp <= as_of);
        }
        let versions = self.history.get(k)?;
        let (t, v) = versions.range(..=as_of).next_back()?;
        let next = versions.range(t + 1..).next().map(|(n, _)| *n);
        v.map(|value| VersionedRecord {
            value,
            timestamp: *t,
            valid_to: next,
        })
    }
}

fn run_versioned(engine: Engine, ops: &[VerOp]) {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, changelog) = context(dir.path(), 0);
    let built = Stores::versioned_key_value_store_builder(
        versioned_supplier(engine),
        StringSerde,
        I64Serde,
    )
    .build();
    built.init(&ctx).unwrap();
    let store: VersionedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    let mut model = VersionedModel::default();
    for op in ops {
        match op {
            VerOp::Put(k, v, t) => {
                assert_eq!(
                    store.borrow_mut().put(k.clone(), *v, *t).unwrap(),
                    model.put(k, *v, *t),
                    "{op:?}"
                );
            }
            VerOp::Delete(k, t) => {
                let want = if *t < model.horizon() {
                    None
                } else {
                    let existing = model.get_as_of(k, *t);
                    model.put(k, None, *t);
                    existing
                };
                assert_eq!(store.borrow_mut().delete(k, *t).unwrap(), want, "{op:?}");
            }
            VerOp::Get(k) => assert_eq!(store.borrow().get(k).unwrap(), model.get(k), "{op:?}"),
            VerOp::GetAsOf(k, t) => {
                assert_eq!(
                    store.borrow().get_as_of(k, *t).unwrap(),
                    model.get_as_of(k, *t),
                    "{op:?}"
                )
            }
        }
    }
    // The changelog rebuilds a store that answers every query the same.
    let records = changelog.borrow().clone();
    let dir2 = tempfile::tempdir().unwrap();
    let (ctx2, _) = context(dir2.path(), 0);
    let fresh = Stores::versioned_key_value_store_builder(
        versioned_supplier(engine),
        StringSerde,
        I64Serde,
    )
    .build();
    fresh.init(&ctx2).unwrap();
    restore(&fresh, &records);
    let restored: VersionedKeyValueStoreHandle<String, i64> = fresh.handle().unwrap();
    for k in ["a", "ab", "b", "ba", "c", "", "a\u{0}", "d"] {
        let k = k.to_string();
        assert_eq!(restored.borrow().get(&k).unwrap(), model.get(&k));
        for t in (0..210).step_by(7) {
            assert_eq!(
                restored.borrow().get_as_of(&k, t).unwrap(),
                model.get_as_of(&k, t),
                "restored {k:?} as of {t}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn key_value_stores_match_the_model(ops in prop::collection::vec(kv_op(), 1..60)) {
        for engine in ENGINES {
            run_kv(engine, None, &ops);
            run_kv(engine, Some(400), &ops);
        }
    }

    #[test]
    fn window_stores_match_the_model(ops in prop::collection::vec(win_op(), 1..60)) {
        for engine in ENGINES {
            run_window(engine, None, false, &ops);
            run_window(engine, Some(400), false, &ops);
            run_window(engine, None, true, &ops);
        }
    }

    #[test]
    fn session_stores_match_the_model(ops in prop::collection::vec(ses_op(), 1..60)) {
        for engine in ENGINES {
            run_session(engine, None, &ops);
            run_session(engine, Some(400), &ops);
        }
    }

    #[test]
    fn versioned_stores_match_the_model(ops in prop::collection::vec(ver_op(), 1..80)) {
        for engine in ENGINES {
            run_versioned(engine, &ops);
        }
    }
}
