//! The joins of a `KStream`: with a table (KIP-914 lookups as of the
//! stream record's time on versioned tables, KIP-923 stream-side grace),
//! with a global table, and with another stream in a time window.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kstreams_record::{BytesSerde, SharedSerde};
use kstreams_state::Stores;
use kstreams_time::{duration_ms, JoinWindows};

use crate::handles::types::KTable;
use crate::materialized::add_store;
use crate::operators::global_join::GlobalJoin;
use crate::operators::global_join::GlobalJoiner;
use crate::operators::global_join::KeySelector;
use crate::operators::stateless::PassThrough;
use crate::operators::stream_stream_join::JoinCore;
use crate::operators::stream_stream_join::PairJoiner;
use crate::operators::stream_stream_join::RememberInWindow;
use crate::operators::stream_stream_join::{LeftSide, RightSide};
use crate::operators::stream_table_join::BufferedRecordSerde;
use crate::operators::stream_table_join::StreamTableJoin;
use crate::operators::stream_table_join::StreamTableJoiner;
use crate::options::{IntoName, Named};
use crate::GlobalKTable;
use crate::Joined;
use crate::StreamJoined;
use crate::{KStream, TopologyError};

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the table's value for its key; records whose
    /// key the table does not have are dropped. With a versioned table the
    /// value is the one valid at the record's timestamp (KIP-914).
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// let regions = builder.table::<String, String>("user-regions");
    /// builder
    ///     .stream::<String, String>("clicks")
    ///     .join(&regions, |page, region| format!("{page} from {region}"))
    ///     .to("regional-clicks");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let region_updates = driver.create_input_topic("user-regions", StringSerde, StringSerde);
    /// let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    /// let out = driver.create_output_topic("regional-clicks", StringSerde, StringSerde);
    /// region_updates.pipe_input("alice".to_string(), "europe".to_string());
    /// clicks.pipe_input("alice".to_string(), "home".to_string());
    /// // Bob has no region yet: an inner join drops his click.
    /// clicks.pipe_input("bob".to_string(), "cart".to_string());
    /// assert_eq!(
    ///     out.read_key_values_to_list(),
    ///     vec![("alice".to_string(), "home from europe".to_string())]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, &VT) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.join_with(table, joiner, Joined::default())
    }

    /// [`KStream::join`] with options (name, grace, serdes).
    pub fn join_with<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, &VT) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        self.join_with_key(table, move |_, v, t| joiner(v, t), joined)
    }

    /// [`KStream::join_with`] with a joiner that also sees the record's key
    /// (read-only): Kafka Streams' `join(KTable, ValueJoinerWithKey,
    /// Joined)` (KIP-149). Pass `Joined::default()` for no options.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::{Joined, StreamsBuilder};
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// let regions = builder.table::<String, String>("user-regions");
    /// builder
    ///     .stream::<String, String>("clicks")
    ///     .join_with_key(
    ///         &regions,
    ///         |user, page, region| format!("{user} on {page} from {region}"),
    ///         Joined::default(),
    ///     )
    ///     .to("regional-clicks");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let region_updates = driver.create_input_topic("user-regions", StringSerde, StringSerde);
    /// let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    /// let out = driver.create_output_topic("regional-clicks", StringSerde, StringSerde);
    /// region_updates.pipe_input("alice".to_string(), "europe".to_string());
    /// clicks.pipe_input("alice".to_string(), "home".to_string());
    /// assert_eq!(out.read_values_to_list(), vec!["alice on home from europe".to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_with_key<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&K, &V, &VT) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        let joiner: StreamTableJoiner<K, V, VT, Option<VR>> =
            Arc::new(move |k, v, t| t.map(|t| joiner(k, v, t)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-JOIN-")
    }

    /// Joins each record with the table's value for its key, `None` if the
    /// table has none.
    pub fn left_join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, Option<&VT>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.left_join_with(table, joiner, Joined::default())
    }

    /// [`KStream::left_join`] with options (name, grace, serdes).
    pub fn left_join_with<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, Option<&VT>) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        self.left_join_with_key(table, move |_, v, t| joiner(v, t), joined)
    }

    /// [`KStream::left_join_with`] with a joiner that also sees the
    /// record's key (read-only): Kafka Streams' `leftJoin(KTable,
    /// ValueJoinerWithKey, Joined)` (KIP-149). Pass `Joined::default()` for
    /// no options.
    pub fn left_join_with_key<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&K, &V, Option<&VT>) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        let joiner: StreamTableJoiner<K, V, VT, Option<VR>> =
            Arc::new(move |k, v, t| Some(joiner(k, v, t)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-LEFTJOIN-")
    }

    fn stream_table_join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: StreamTableJoiner<K, V, VT, Option<VR>>,
        joined: Joined<K, V>,
        prefix: &str,
    ) -> KStream<K, VR> {
        let getter = (table.getter)();
        let mut s = self.state.borrow_mut();
        if joined.bootstrap {
            s.topology.graph.mark_bootstrap_upstream(&table.node);
        }
        let key_serde = joined
            .key_serde
            .clone()
            .or_else(|| self.key_serde.clone())
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = joined
            .value_serde
            .clone()
            .or_else(|| self.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<V>);
        let serdes = |store: &str| {
            Ok::<_, TopologyError>((
                key_serde
                    .clone()
                    .ok_or_else(|| TopologyError::MissingSerde {
                        store: store.to_string(),
                        part: "key",
                        type_name: std::any::type_name::<K>(),
                    })?,
                value_serde
                    .clone()
                    .ok_or_else(|| TopologyError::MissingSerde {
                        store: store.to_string(),
                        part: "value",
                        type_name: std::any::type_name::<V>(),
                    })?,
            ))
        };
        // After a key change the stream goes through a repartition topic
        // so its records meet the table's partition. As in Kafka Streams,
        // the topic is named after the join's name or else the stream's
        // node, and drawn before the join's own name.
        let mut parent = self.node.clone();
        if self.repartition_required {
            let topic = joined.name.clone().unwrap_or_else(|| self.node.clone());
            if let Some((k, v)) = s.record(serdes(&format!("{topic}-repartition"))) {
                parent = self.through_repartition_topic(&mut s, topic, k, v).node;
            }
        }
        let name = s.name_or_generate(joined.name.clone(), prefix);
        let out = KStream::new(self.state.clone(), name.clone());
        let invalid = |message: String| TopologyError::InvalidOperator {
            operator: format!("join {name}"),
            message,
        };
        let Some(getter) = s.record(getter.ok_or_else(|| {
            invalid(
                "the table cannot be read by a join (a windowed or suppressed table, or a \
                 table whose store has no serdes)"
                    .to_string(),
            )
        })) else {
            return out;
        };
        let mut buffer = None;
        if let Some(grace) = joined.grace {
            if !getter.versioned {
                s.record::<()>(Err(invalid(
                    "a grace period needs a versioned table: materialize the table with \
                     Materialized::with_versioned_history"
                        .to_string(),
                )));
                return out;
            }
            let store = format!("{name}-Buffer");
            let Some((k, v)) = s.record(serdes(&store)) else {
                return out;
            };
            let builder = Stores::key_value_store_builder(
                Stores::in_memory_key_value_store(&store),
                BytesSerde,
                BufferedRecordSerde {
                    key: k.clone(),
                    value: v,
                },
            );
            buffer = Some((store, duration_ms(grace), k, builder));
        }
        let make = getter.make.clone();
        let versioned = getter.versioned;
        let buffer_spec = buffer
            .as_ref()
            .map(|(store, grace, key_serde, _)| (store.clone(), *grace, key_serde.clone()));
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            name.clone(),
            Arc::new(move || StreamTableJoin {
                joiner: joiner.clone(),
                make: make.clone(),
                versioned,
                getter: None,
                buffer_spec: buffer_spec.clone(),
                buffer: None,
            }),
            &[parent.as_str()],
        );
        s.record(added);
        s.topology
            .graph
            .copartition(&[name.as_str(), table.node.as_str()]);
        // The buffer first, then the table's stores: Kafka Streams'
        // StreamTableJoinNode adds them in this order, and describe()
        // lists a node's stores in that order where their hashes collide.
        if let Some((_, _, _, builder)) = buffer {
            let added = add_store(&mut s.topology, builder, &name);
            s.record(added);
        }
        let stores: Vec<&str> = getter.stores.iter().map(String::as_str).collect();
        let connected = s
            .topology
            .connect_processor_and_state_stores(&name, &stores)
            .map(|_| ());
        s.record(connected);
        let mut out = out;
        out.key_serde = self.key_serde.clone();
        out
    }
}

/// Which records of a stream-stream join produce results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    Outer,
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins records of both streams with the same key at most the window
    /// apart: Kafka Streams' `KStream#join(KStream, ValueJoiner,
    /// JoinWindows)`. Results carry the larger of the two timestamps.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    /// use kstreams_time::JoinWindows;
    ///
    /// let builder = StreamsBuilder::new();
    /// let views = builder.stream::<String, String>("ad-views");
    /// let clicks = builder.stream::<String, String>("ad-clicks");
    /// views
    ///     .join_windowed(
    ///         &clicks,
    ///         |view, click| format!("{view}, then {click}"),
    ///         JoinWindows::of_time_difference_with_no_grace(Duration::from_millis(10)),
    ///     )
    ///     .to("viewed-then-clicked");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let view_input = driver.create_input_topic("ad-views", StringSerde, StringSerde);
    /// let click_input = driver.create_input_topic("ad-clicks", StringSerde, StringSerde);
    /// let out = driver.create_output_topic("viewed-then-clicked", StringSerde, StringSerde);
    /// view_input.pipe_input_at("ad-1".to_string(), "view".to_string(), 0);
    /// click_input.pipe_input_at("ad-1".to_string(), "click".to_string(), 5);
    /// // 30 ms after the view: outside the window, no match.
    /// click_input.pipe_input_at("ad-1".to_string(), "late click".to_string(), 30);
    /// assert_eq!(out.read_values_to_list(), vec!["view, then click".to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::join_windowed`] with names and serdes.
    pub fn join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        self.join_windowed_with_key(other, move |_, a, b| joiner(a, b), windows, joined)
    }

    /// [`KStream::join_windowed_with`] with a joiner that also sees the
    /// records' key (read-only): Kafka Streams' `join(KStream,
    /// ValueJoinerWithKey, JoinWindows, StreamJoined)` (KIP-149). Pass
    /// `StreamJoined::default()` for no options.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use kstreams_dsl::{StreamJoined, StreamsBuilder};
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    /// use kstreams_time::JoinWindows;
    ///
    /// let builder = StreamsBuilder::new();
    /// let views = builder.stream::<String, String>("ad-views");
    /// let clicks = builder.stream::<String, String>("ad-clicks");
    /// views
    ///     .join_windowed_with_key(
    ///         &clicks,
    ///         |ad, view, click| format!("{ad}: {view}, then {click}"),
    ///         JoinWindows::of_time_difference_with_no_grace(Duration::from_millis(10)),
    ///         StreamJoined::default(),
    ///     )
    ///     .to("viewed-then-clicked");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let view_input = driver.create_input_topic("ad-views", StringSerde, StringSerde);
    /// let click_input = driver.create_input_topic("ad-clicks", StringSerde, StringSerde);
    /// let out = driver.create_output_topic("viewed-then-clicked", StringSerde, StringSerde);
    /// view_input.pipe_input_at("ad-1".to_string(), "view".to_string(), 0);
    /// click_input.pipe_input_at("ad-1".to_string(), "click".to_string(), 5);
    /// assert_eq!(out.read_values_to_list(), vec!["ad-1: view, then click".to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_windowed_with_key<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&K, &V, &VO) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        let joiner: PairJoiner<K, V, VO, VR> = Arc::new(move |k, a, b| match (a, b) {
            (Some(a), Some(b)) => joiner(k, a, b),
            _ => unreachable!("an inner join calls its joiner with both values"),
        });
        self.stream_join(other, joiner, windows, joined, JoinKind::Inner)
    }

    /// Like [`KStream::join_windowed`], and each record of this stream that
    /// found no match is joined with `None` once its window has closed.
    pub fn left_join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.left_join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::left_join_windowed`] with names and serdes.
    pub fn left_join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        self.left_join_windowed_with_key(other, move |_, a, b| joiner(a, b), windows, joined)
    }

    /// [`KStream::left_join_windowed_with`] with a joiner that also sees
    /// the records' key (read-only), also for a record joined with `None`
    /// once its window has closed: Kafka Streams' `leftJoin(KStream,
    /// ValueJoinerWithKey, JoinWindows, StreamJoined)` (KIP-149).
    pub fn left_join_windowed_with_key<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&K, &V, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        let joiner: PairJoiner<K, V, VO, VR> = Arc::new(move |k, a, b| match a {
            Some(a) => joiner(k, a, b),
            None => unreachable!("a left join calls its joiner with a left value"),
        });
        self.stream_join(other, joiner, windows, joined, JoinKind::Left)
    }

    /// Like [`KStream::join_windowed`], and records of either stream that
    /// found no match are joined with `None` once their window has closed.
    pub fn outer_join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.outer_join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::outer_join_windowed`] with names and serdes.
    pub fn outer_join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        self.outer_join_windowed_with_key(other, move |_, a, b| joiner(a, b), windows, joined)
    }

    /// [`KStream::outer_join_windowed_with`] with a joiner that also sees
    /// the records' key (read-only), also for the records of either side
    /// joined with `None` once their window has closed: Kafka Streams'
    /// `outerJoin(KStream, ValueJoinerWithKey, JoinWindows, StreamJoined)`
    /// (KIP-149).
    pub fn outer_join_windowed_with_key<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&K, Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        self.stream_join(other, Arc::new(joiner), windows, joined, JoinKind::Outer)
    }

    fn stream_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: PairJoiner<K, V, VO, VR>,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
        kind: JoinKind,
    ) -> KStream<K, VR> {
        let mut s = self.state.borrow_mut();
        let named = joined.name.clone();
        let suffixed = |suffix: &str| named.as_ref().map(|n| format!("{n}{suffix}"));
        let key_serde = joined
            .key_serde
            .or_else(|| self.key_serde.clone())
            .or_else(|| other.key_serde.clone())
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = joined
            .value_serde
            .or_else(|| self.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<V>);
        let other_serde = joined
            .other_value_serde
            .or_else(|| other.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<VO>);
        // After a key change, each side meets its partition of the other
        // through a repartition topic: `<name>-left` / `<name>-right`, or
        // named after the stream's node when the join is not named. As in
        // Kafka Streams, these come before the join's own names.
        let mut this_parent = self.node.clone();
        if self.repartition_required {
            let prefix = suffixed("-left").unwrap_or_else(|| self.node.clone());
            if let Some((k, v)) = s.record(repartition_serdes(&prefix, &key_serde, &value_serde)) {
                this_parent = self.through_repartition_topic(&mut s, prefix, k, v).node;
            }
        }
        let mut other_parent = other.node.clone();
        if other.repartition_required {
            let prefix = suffixed("-right").unwrap_or_else(|| other.node.clone());
            if let Some((k, v)) = s.record(repartition_serdes(&prefix, &key_serde, &other_serde)) {
                other_parent = other.through_repartition_topic(&mut s, prefix, k, v).node;
            }
        }
        let this_windowed = s.name_or_generate(suffixed("-this-windowed"), "KSTREAM-WINDOWED-");
        let other_windowed = s.name_or_generate(suffixed("-other-windowed"), "KSTREAM-WINDOWED-");
        let left_outer = kind != JoinKind::Inner;
        let right_outer = kind == JoinKind::Outer;
        let (this_prefix, this_suffix) = if right_outer {
            ("KSTREAM-OUTERTHIS-", "-outer-this-join")
        } else {
            ("KSTREAM-JOINTHIS-", "-this-join")
        };
        let (other_prefix, other_suffix) = if left_outer {
            ("KSTREAM-OUTEROTHER-", "-outer-other-join")
        } else {
            ("KSTREAM-JOINOTHER-", "-other-join")
        };
        let this_generated = s.new_name(this_prefix);
        let other_generated = s.new_name(other_prefix);
        let this_join = suffixed(this_suffix).unwrap_or_else(|| this_generated.clone());
        let other_join = suffixed(other_suffix).unwrap_or_else(|| other_generated.clone());
        let merge = s.name_or_generate(suffixed("-merge"), "KSTREAM-MERGE-");
        let out = KStream::new(self.state.clone(), merge.clone());

        let invalid = |message: String| TopologyError::InvalidOperator {
            operator: format!("join {merge}"),
            message,
        };
        if let Err(e) = windows.validate() {
            s.record::<()>(Err(invalid(e.to_string())));
            return out;
        }
        let missing = |part, type_name| TopologyError::MissingSerde {
            store: this_join.clone(),
            part,
            type_name,
        };
        let key_serde = key_serde.ok_or_else(|| missing("key", std::any::type_name::<K>()));
        let value_serde = value_serde.ok_or_else(|| missing("value", std::any::type_name::<V>()));
        let other_serde = other_serde.ok_or_else(|| missing("value", std::any::type_name::<VO>()));
        let (Some(key_serde), Some(value_serde), Some(other_serde)) = (
            s.record(key_serde),
            s.record(value_serde),
            s.record(other_serde),
        ) else {
            return out;
        };
        // Kafka Streams' store names: `<store name><side suffix>-store`, or
        // after the generated side names; the shared store of unmatched
        // records takes the index of this side's name.
        let shared_suffix = if right_outer {
            "-outer-shared-join"
        } else {
            "-left-shared-join"
        };
        let (this_store, other_store, outer_store) = match &joined.store_name {
            Some(base) => (
                format!("{base}{this_suffix}-store"),
                format!("{base}{other_suffix}-store"),
                format!("{base}{shared_suffix}-store"),
            ),
            None => (
                format!("{this_generated}-store"),
                format!("{other_generated}-store"),
                format!(
                    "KSTREAM-OUTERSHARED-{}-store",
                    &this_generated[this_prefix.len()..]
                ),
            ),
        };
        let retention =
            Duration::from_millis((windows.size_ms() + windows.grace_ms()).max(0) as u64);
        let size = Duration::from_millis(windows.size_ms().max(0) as u64);
        let window_store = |name: &str| {
            Stores::in_memory_window_store(name, retention, size, true).map_err(|e| {
                TopologyError::InvalidOperator {
                    operator: format!("join {merge}"),
                    message: e.to_string(),
                }
            })
        };
        let (Some(this_supplier), Some(other_supplier)) = (
            s.record(window_store(&this_store)),
            s.record(window_store(&other_store)),
        ) else {
            return out;
        };

        // Each side's records go into its window store first.
        for (name, parent, store, windowed) in [
            (&this_windowed, &this_parent, &this_store, true),
            (&other_windowed, &other_parent, &other_store, false),
        ] {
            let store = store.clone();
            let added = if windowed {
                s.topology.add_typed_processor::<K, V, K, V, _>(
                    name.clone(),
                    Arc::new(move || RememberInWindow::<K, V> {
                        store_name: store.clone(),
                        store: None,
                    }),
                    &[parent.as_str()],
                )
            } else {
                s.topology.add_typed_processor::<K, VO, K, VO, _>(
                    name.clone(),
                    Arc::new(move || RememberInWindow::<K, VO> {
                        store_name: store.clone(),
                        store: None,
                    }),
                    &[parent.as_str()],
                )
            };
            s.record(added);
        }
        let added = add_store(
            &mut s.topology,
            Stores::window_store_builder(this_supplier, key_serde.clone(), value_serde.clone())
                .with_changelog_stamped_in_window(),
            &this_windowed,
        );
        s.record(added);
        let added = add_store(
            &mut s.topology,
            Stores::window_store_builder(other_supplier, key_serde.clone(), other_serde.clone())
                .with_changelog_stamped_in_window(),
            &other_windowed,
        );
        s.record(added);

        let core = JoinCore {
            joiner,
            windows,
            left_store: this_store.clone(),
            right_store: other_store.clone(),
            outer_store: left_outer.then(|| outer_store.clone()),
            key_serde: key_serde.clone(),
            left_serde: value_serde.clone(),
            right_serde: other_serde.clone(),
            min_times: Default::default(),
            types: PhantomData,
        };
        let this_core = core.clone();
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            this_join.clone(),
            Arc::new(move || LeftSide(this_core.open_later(left_outer))),
            &[this_windowed.as_str()],
        );
        s.record(added);
        let other_core = core;
        let added = s.topology.add_typed_processor::<K, VO, K, VR, _>(
            other_join.clone(),
            Arc::new(move || RightSide(other_core.open_later(right_outer))),
            &[other_windowed.as_str()],
        );
        s.record(added);
        // Each join processor reads the other side's window store.
        let connected = s
            .topology
            .connect_processor_and_state_stores(&this_join, &[other_store.as_str()])
            .map(|_| ());
        s.record(connected);
        let connected = s
            .topology
            .connect_processor_and_state_stores(&other_join, &[this_store.as_str()])
            .map(|_| ());
        s.record(connected);
        if left_outer {
            let builder = Stores::key_value_store_builder(
                Stores::in_memory_key_value_store(&outer_store),
                BytesSerde,
                BytesSerde,
            );
            let added = s
                .topology
                .add_state_store(builder, &[this_join.as_str(), other_join.as_str()])
                .map(|_| ());
            s.record(added);
        }
        s.topology
            .graph
            .copartition(&[this_join.as_str(), other_join.as_str()]);
        let added = s.topology.add_typed_processor::<K, VR, K, VR, _>(
            merge.clone(),
            Arc::new(|| PassThrough),
            &[this_join.as_str(), other_join.as_str()],
        );
        s.record(added);
        let mut out = out;
        out.key_serde = Some(key_serde);
        out
    }
}

/// The serdes a side's repartition topic needs.
pub(crate) fn repartition_serdes<K: 'static, V: 'static>(
    prefix: &str,
    key: &Option<SharedSerde<K>>,
    value: &Option<SharedSerde<V>>,
) -> Result<(SharedSerde<K>, SharedSerde<V>), TopologyError> {
    let missing = |part, type_name| TopologyError::MissingSerde {
        store: format!("{prefix}-repartition"),
        part,
        type_name,
    };
    Ok((
        key.clone()
            .ok_or_else(|| missing("key", std::any::type_name::<K>()))?,
        value
            .clone()
            .ok_or_else(|| missing("value", std::any::type_name::<V>()))?,
    ))
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the global table's value for the key
    /// `key_selector` computes; records with no match are dropped.
    pub fn join_global<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, &VG) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.join_global_with_key(table, key_selector, move |_, v, g| joiner(v, g), None)
    }

    /// [`KStream::join_global`] with a name for its processor: Kafka
    /// Streams' `join(GlobalKTable, KeyValueMapper, ValueJoiner, Named)`.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::StreamsBuilder;
    ///
    /// let builder = StreamsBuilder::new();
    /// let customers = builder.global_table::<String, String>("customers");
    /// builder
    ///     .stream::<String, String>("orders")
    ///     .join_global_named(
    ///         &customers,
    ///         |_order, customer_id| customer_id.clone(),
    ///         |customer_id, name| format!("{customer_id}|{name}"),
    ///         "with-customer",
    ///     )
    ///     .to("orders-with-names");
    /// let description = builder.build()?.describe().to_string();
    /// assert!(description.contains("Processor: with-customer (stores: [])"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_global_named<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, &VG) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, VR> {
        self.join_global_with_key(table, key_selector, move |_, v, g| joiner(v, g), named)
    }

    /// [`KStream::join_global_named`] with a joiner that also sees the
    /// record's key (read-only): Kafka Streams' `join(GlobalKTable,
    /// KeyValueMapper, ValueJoinerWithKey, Named)` (KIP-149). `named` may be
    /// `None` for a generated name.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// let customers = builder.global_table::<String, String>("customers");
    /// builder
    ///     .stream::<String, String>("orders")
    ///     .join_global_with_key(
    ///         &customers,
    ///         |_order, customer_id| customer_id.clone(),
    ///         |order, _customer_id, name| format!("{order} for {name}"),
    ///         None,
    ///     )
    ///     .to("orders-with-names");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let customer_input = driver.create_input_topic("customers", StringSerde, StringSerde);
    /// let order_input = driver.create_input_topic("orders", StringSerde, StringSerde);
    /// let out = driver.create_output_topic("orders-with-names", StringSerde, StringSerde);
    /// customer_input.pipe_input("c-1".to_string(), "Ada".to_string());
    /// order_input.pipe_input("order-7".to_string(), "c-1".to_string());
    /// assert_eq!(out.read_values_to_list(), vec!["order-7 for Ada".to_string()]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_global_with_key<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&K, &V, &VG) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, VR> {
        let joiner: GlobalJoiner<K, V, VG, VR> =
            Arc::new(move |k, v, g| g.map(|g| joiner(k, v, g)));
        self.global_join(table, Arc::new(key_selector), joiner, named.into_name())
    }

    /// Joins each record with the global table's value for the key
    /// `key_selector` computes, `None` when it has none.
    pub fn left_join_global<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, Option<&VG>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.left_join_global_with_key(table, key_selector, move |_, v, g| joiner(v, g), None)
    }

    /// [`KStream::left_join_global`] with a name for its processor: Kafka
    /// Streams' `leftJoin(GlobalKTable, KeyValueMapper, ValueJoiner, Named)`.
    pub fn left_join_global_named<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, Option<&VG>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, VR> {
        self.left_join_global_with_key(table, key_selector, move |_, v, g| joiner(v, g), named)
    }

    /// [`KStream::left_join_global_named`] with a joiner that also sees the
    /// record's key (read-only): Kafka Streams' `leftJoin(GlobalKTable,
    /// KeyValueMapper, ValueJoinerWithKey, Named)` (KIP-149). `named` may be
    /// `None` for a generated name.
    pub fn left_join_global_with_key<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&K, &V, Option<&VG>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, VR> {
        let joiner: GlobalJoiner<K, V, VG, VR> = Arc::new(move |k, v, g| Some(joiner(k, v, g)));
        self.global_join(table, Arc::new(key_selector), joiner, named.into_name())
    }

    fn global_join<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: KeySelector<K, V, KG>,
        joiner: GlobalJoiner<K, V, VG, VR>,
        named: Option<Named>,
    ) -> KStream<K, VR> {
        let mut s = self.state.borrow_mut();
        // Kafka Streams names inner and left global joins alike.
        let name = s.name_or_generate(named.map(|n| n.0), "KSTREAM-LEFTJOIN-");
        let table = table.clone();
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            name.clone(),
            Arc::new(move || GlobalJoin {
                store: table.store.clone(),
                key_serde: table.key_serde.clone(),
                value_serde: table.value_serde.clone(),
                key_selector: key_selector.clone(),
                joiner: joiner.clone(),
            }),
            &[self.node.as_str()],
        );
        s.record(added);
        drop(s);
        let mut out = KStream::new(self.state.clone(), name);
        out.key_serde = self.key_serde.clone();
        out.repartition_required = self.repartition_required;
        out
    }
}
