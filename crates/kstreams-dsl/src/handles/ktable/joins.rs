//! Table-table joins on the primary key (inner, left, outer, with old
//! values and tombstones).

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::change::Change;
use crate::handles::types::{KTable, OldValues};
use crate::materialized::{add_store, StoreSpec};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::getters::lazy_store_getter;
use crate::operators::getters::TableGetter;
use crate::operators::stateless::PassThrough;
use crate::operators::table_table_join::joined_getter;
use crate::operators::table_table_join::MaterializedJoinMerge;
use crate::operators::table_table_join::TableJoiner;
use crate::operators::table_table_join::{TableJoinKind, TableJoinSide};
use crate::operators::LazyStoreName;
use crate::options::IntoName;
use crate::Materialized;
use crate::TopologyError;

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// A table of the keys both tables have, with `joiner` of their values;
    /// updates on either side update the result (a key leaving either side
    /// is deleted).
    pub fn join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.join_with(other, joiner, None, None)
    }

    /// A table of this table's keys, joined with the other's value when it
    /// has one.
    pub fn left_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.left_join_with(other, joiner, None, None)
    }

    /// A table of the keys either table has.
    pub fn outer_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.outer_join_with(other, joiner, None, None)
    }

    /// [`KTable::join`] with a name (`<name>` for the merge node,
    /// `<name>-join-this` and `<name>-join-other` for the two sides).
    pub fn join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        self.join_with(other, joiner, named, None)
    }

    /// [`KTable::left_join`] with a name, as [`KTable::join_named`].
    pub fn left_join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        self.left_join_with(other, joiner, named, None)
    }

    /// [`KTable::outer_join`] with a name, as [`KTable::join_named`].
    pub fn outer_join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        self.outer_join_with(other, joiner, named, None)
    }

    /// [`KTable::join`] with a name (as [`KTable::join_named`]; `None` for
    /// generated names) and, to materialize the result, a store: Kafka
    /// Streams' `join(other, joiner, Named, Materialized)`. As in Kafka
    /// Streams, a `Materialized` without a store name keeps the result in a
    /// store under a generated name, `KTABLE-MERGE-STATE-STORE-<index>`.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::{Materialized, StreamsBuilder};
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    /// use kstreams_state::TimestampedKeyValueStoreHandle;
    ///
    /// let builder = StreamsBuilder::new();
    /// let names = builder.table::<String, String>("names");
    /// let emails = builder.table::<String, String>("emails");
    /// let contacts = names.join_with(
    ///     &emails,
    ///     |name, email| format!("{name} <{email}>"),
    ///     "contacts",
    ///     Some(Materialized::as_("contacts-store")),
    /// );
    /// assert_eq!(contacts.queryable_store_name().as_deref(), Some("contacts-store"));
    /// contacts.to_stream().to("contacts");
    /// let topology = builder.build()?;
    /// assert!(topology
    ///     .describe()
    ///     .to_string()
    ///     .contains("Processor: contacts (stores: [contacts-store])"));
    /// let driver = TopologyTestDriver::new(topology)?;
    /// driver
    ///     .create_input_topic("names", StringSerde, StringSerde)
    ///     .pipe_input("u1".to_string(), "Ada".to_string());
    /// driver
    ///     .create_input_topic("emails", StringSerde, StringSerde)
    ///     .pipe_input("u1".to_string(), "ada@example.org".to_string());
    /// let store: TimestampedKeyValueStoreHandle<String, String> = driver
    ///     .get_state_store("contacts-store")?
    ///     .expect("the join's store");
    /// assert_eq!(
    ///     store.borrow().get(&"u1".to_string())?.map(|v| v.value),
    ///     Some("Ada <ada@example.org>".to_string())
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, VR>>,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match (a, b) {
            (Some(a), Some(b)) => joiner(a, b),
            _ => unreachable!("an inner join calls its joiner with both values"),
        });
        self.table_join(
            other,
            joiner,
            TableJoinKind::Inner,
            named.into_name().map(|n| n.0),
            materialized,
        )
    }

    /// [`KTable::left_join`] with a name and a store, as
    /// [`KTable::join_with`]: Kafka Streams' `leftJoin(other, joiner,
    /// Named, Materialized)`.
    pub fn left_join_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, VR>>,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match a {
            Some(a) => joiner(a, b),
            None => unreachable!("a left join calls its joiner with a left value"),
        });
        self.table_join(
            other,
            joiner,
            TableJoinKind::Left,
            named.into_name().map(|n| n.0),
            materialized,
        )
    }

    /// [`KTable::outer_join`] with a name and a store, as
    /// [`KTable::join_with`]: Kafka Streams' `outerJoin(other, joiner,
    /// Named, Materialized)`.
    pub fn outer_join_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, VR>>,
    ) -> KTable<K, VR> {
        self.table_join(
            other,
            Arc::new(joiner),
            TableJoinKind::Outer,
            named.into_name().map(|n| n.0),
            materialized,
        )
    }

    fn table_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: TableJoiner<V, VO, VR>,
        kind: TableJoinKind,
        named: Option<String>,
        materialized: Option<Materialized<K, VR>>,
    ) -> KTable<K, VR> {
        // Each side needs the value its updates replace, to retract join
        // results (Kafka Streams materializes and asks both sources).
        self.enable_old_values(true);
        other.enable_old_values(true);
        let this_getter = (self.getter)();
        let other_getter = (other.getter)();
        let mut s = self.state.borrow_mut();
        // The store's name comes first (Kafka Streams settles the
        // Materialized before the join's names): a named one draws no
        // index, an unnamed one is materialized under a generated name.
        let spec = materialized.and_then(|m| {
            let spec = StoreSpec::settle(
                m,
                || s.new_name("KTABLE-MERGE-STATE-STORE-"),
                self.key_serde.clone(),
                None,
            );
            s.record(spec)
        });
        if spec
            .as_ref()
            .is_some_and(|spec| spec.versioned_history.is_some())
        {
            s.record::<()>(Err(TopologyError::InvalidOperator {
                operator: "table-table join".to_string(),
                message: "a versioned store for a join's result is not supported".to_string(),
            }));
        }
        // Kafka Streams names both sides JOINTHIS/JOINOTHER whatever the
        // join kind.
        let merge = s.name_or_generate(named.clone(), "KTABLE-MERGE-");
        let this_name = s.name_or_generate(
            named.as_ref().map(|n| format!("{n}-join-this")),
            "KTABLE-JOINTHIS-",
        );
        let other_name = s.name_or_generate(
            named.as_ref().map(|n| format!("{n}-join-other")),
            "KTABLE-JOINOTHER-",
        );
        let this_flag: OldValuesFlag = Arc::default();
        let other_flag: OldValuesFlag = Arc::default();
        let merge_flag: OldValuesFlag = Arc::default();
        let store: LazyStoreName = Arc::new(OnceLock::new());
        let result_getter: TableGetter<K, VR>;
        {
            let (Some(this_getter), Some(other_getter)) = (this_getter, other_getter) else {
                s.record::<()>(Err(TopologyError::InvalidOperator {
                    operator: format!("join {merge}"),
                    message: "both tables must be readable by a join (not windowed or \
                              suppressed, and with serdes for their stores)"
                        .to_string(),
                }));
                drop(s);
                return joined_table(
                    self,
                    merge,
                    crate::operators::getters::no_getter(),
                    OldValues::own(this_flag),
                );
            };
            // This side's changes look up the other side, and the other way.
            let joiner_this = joiner.clone();
            let make_other = other_getter.make.clone();
            let flag = this_flag.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<V>, K, Change<VR>, _>(
                    this_name.clone(),
                    Arc::new(move || TableJoinSide::<K, V, VO, VR> {
                        joiner: {
                            let j = joiner_this.clone();
                            Arc::new(move |mine: Option<&V>, theirs: Option<&VO>| j(mine, theirs))
                        },
                        make: make_other.clone(),
                        getter: None,
                        mine_required: kind != TableJoinKind::Outer,
                        theirs_required: kind == TableJoinKind::Inner,
                        send_old: flag.clone(),
                    }),
                    &[self.node.as_str()],
                );
            s.record(added);
            let joiner_other = joiner.clone();
            let make_this = this_getter.make.clone();
            let flag = other_flag.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<VO>, K, Change<VR>, _>(
                    other_name.clone(),
                    Arc::new(move || TableJoinSide::<K, VO, V, VR> {
                        joiner: {
                            let j = joiner_other.clone();
                            Arc::new(move |mine: Option<&VO>, theirs: Option<&V>| j(theirs, mine))
                        },
                        make: make_this.clone(),
                        getter: None,
                        mine_required: kind == TableJoinKind::Inner,
                        theirs_required: kind != TableJoinKind::Outer,
                        send_old: flag.clone(),
                    }),
                    &[other.node.as_str()],
                );
            s.record(added);
            let parents = [this_name.as_str(), other_name.as_str()];
            let added = match &spec {
                Some(spec) => {
                    let store_name = spec.name.clone();
                    let flag = merge_flag.clone();
                    s.topology
                        .add_typed_processor::<K, Change<VR>, K, Change<VR>, _>(
                            merge.clone(),
                            Arc::new(move || MaterializedJoinMerge::<K, VR> {
                                store_name: store_name.clone(),
                                send_old: flag.clone(),
                                store: None,
                            }),
                            &parents,
                        )
                }
                None => s
                    .topology
                    .add_typed_processor::<K, Change<VR>, K, Change<VR>, _>(
                        merge.clone(),
                        Arc::new(|| PassThrough),
                        &parents,
                    ),
            };
            s.record(added);
            if let Some(spec) = &spec {
                let added = add_store(&mut s.topology, spec.key_value_store(), &merge);
                s.record(added);
                let _ = store.set(spec.name.clone());
            }
            for (node, stores) in [
                (&this_name, &other_getter.stores),
                (&other_name, &this_getter.stores),
            ] {
                let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
                let connected = s
                    .topology
                    .connect_processor_and_state_stores(node, &stores)
                    .map(|_| ());
                s.record(connected);
            }
            s.topology
                .graph
                .copartition(&[self.node.as_str(), other.node.as_str()]);
            result_getter = if spec.is_some() {
                lazy_store_getter(&store)
            } else {
                let getter = joined_getter(this_getter, other_getter, joiner, kind);
                Rc::new(move || Some(getter.clone()))
            };
        }
        drop(s);
        // Old values of the result need old values from both sides.
        let this_parent = self.old_values.clone();
        let other_parent = other.old_values.clone();
        let old_values = OldValues {
            enable: Rc::new(move |force| {
                let this_ok = (this_parent.enable)(force);
                let other_ok = (other_parent.enable)(force);
                if this_ok && other_ok {
                    this_flag.store(true, Ordering::Relaxed);
                    other_flag.store(true, Ordering::Relaxed);
                    merge_flag.store(true, Ordering::Relaxed);
                    true
                } else {
                    false
                }
            }),
        };
        let mut table = joined_table(self, merge, result_getter, old_values);
        if let Some(spec) = spec {
            table.store = store;
            table.value_serde = Some(spec.value_serde);
        }
        table
    }
}

pub(crate) fn joined_table<K: Clone + 'static, V: Clone + 'static, VR>(
    this: &KTable<K, V>,
    node: String,
    getter: TableGetter<K, VR>,
    old_values: OldValues,
) -> KTable<K, VR> {
    KTable {
        state: this.state.clone(),
        node,
        store: Arc::new(OnceLock::new()),
        key_serde: this.key_serde.clone(),
        value_serde: None,
        old_values,
        getter,
        window: None,
        types: PhantomData,
    }
}
