//! The stateless DSL operators, each a `Processor` like a user's.

use std::sync::Arc;

use kstreams_record::Record;

use crate::options::{PrintMapper, PrintSink};
use crate::Processor;

use crate::{ProcessorContext, ProcessorError};

/// A shared record predicate.
pub(crate) type SharedPredicate<K, V> = Arc<dyn Fn(&K, &V) -> bool + Send + Sync>;

pub(crate) type Ctx<'a, K, V> = ProcessorContext<'a, K, V>;

/// `filter` and `filter_not`.
pub(crate) struct Filter<F> {
    pub predicate: Arc<F>,
    pub keep_when: bool,
}

impl<K: Clone + 'static, V: Clone + 'static, F: Fn(&K, &V) -> bool + 'static> Processor<K, V, K, V>
    for Filter<F>
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        if (self.predicate)(&record.key, &record.value) == self.keep_when {
            ctx.forward(record)?;
        }
        Ok(())
    }
}

/// `map`: a new key and value.
pub(crate) struct Map<F> {
    pub mapper: Arc<F>,
}

impl<K: 'static, V: 'static, K2: Clone + 'static, V2: Clone + 'static, F> Processor<K, V, K2, V2>
    for Map<F>
where
    F: Fn(K, V) -> (K2, V2) + 'static,
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K2, V2>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let Record {
            key,
            value,
            timestamp,
            headers,
        } = record;
        let (key, value) = (self.mapper)(key, value);
        ctx.forward(Record {
            key,
            value,
            timestamp,
            headers,
        })?;
        Ok(())
    }
}

/// `map_values` (with or without the key in view).
pub(crate) struct MapValues<F> {
    pub mapper: Arc<F>,
}

impl<K: Clone + 'static, V: 'static, V2: Clone + 'static, F> Processor<K, V, K, V2> for MapValues<F>
where
    F: Fn(&K, V) -> V2 + 'static,
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V2>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let value = (self.mapper)(&record.key, record.value);
        ctx.forward(Record {
            key: record.key,
            value,
            timestamp: record.timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// `flat_map`: zero or more new records per record.
pub(crate) struct FlatMap<F> {
    pub mapper: Arc<F>,
}

impl<K: 'static, V: 'static, K2: Clone + 'static, V2: Clone + 'static, F, I> Processor<K, V, K2, V2>
    for FlatMap<F>
where
    F: Fn(K, V) -> I + 'static,
    I: IntoIterator<Item = (K2, V2)>,
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K2, V2>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let Record {
            key,
            value,
            timestamp,
            headers,
        } = record;
        for (key, value) in (self.mapper)(key, value) {
            ctx.forward(Record {
                key,
                value,
                timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// `flat_map_values`: zero or more new values per record, same key.
pub(crate) struct FlatMapValues<F> {
    pub mapper: Arc<F>,
}

impl<K: Clone + 'static, V: 'static, V2: Clone + 'static, F, I> Processor<K, V, K, V2>
    for FlatMapValues<F>
where
    F: Fn(&K, V) -> I + 'static,
    I: IntoIterator<Item = V2>,
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V2>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        for value in (self.mapper)(&record.key, record.value) {
            ctx.forward(Record {
                key: record.key.clone(),
                value,
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// `select_key`: a new key computed from key and value.
pub(crate) struct SelectKey<F> {
    pub selector: Arc<F>,
}

impl<K: 'static, V: Clone + 'static, K2: Clone + 'static, F> Processor<K, V, K2, V> for SelectKey<F>
where
    F: Fn(&K, &V) -> K2 + 'static,
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K2, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let key = (self.selector)(&record.key, &record.value);
        ctx.forward(record.with_key(key))?;
        Ok(())
    }
}

/// `peek` (forwards) and `foreach` (terminal).
pub(crate) struct Peek<F> {
    pub action: Arc<F>,
    pub forward: bool,
}

impl<K: Clone + 'static, V: Clone + 'static, F: Fn(&K, &V) + 'static> Processor<K, V, K, V>
    for Peek<F>
{
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        (self.action)(&record.key, &record.value);
        if self.forward {
            ctx.forward(record)?;
        }
        Ok(())
    }
}

/// Forwards every record unchanged: `merge` and the branches of `split`.
pub(crate) struct PassThrough;

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for PassThrough {
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        ctx.forward(record)?;
        Ok(())
    }
}

/// Drops records with a null key (before a repartition topic: a null key
/// has no partition).
pub(crate) struct DropNullKeys<K> {
    pub is_null: Arc<dyn Fn(&K) -> bool + Send + Sync>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for DropNullKeys<K> {
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        if !(self.is_null)(&record.key) {
            ctx.forward(record)?;
        }
        Ok(())
    }
}

/// One branch of a `split`: a predicate and the child it routes to.
pub(crate) struct Branch<K, V> {
    pub predicate: SharedPredicate<K, V>,
    pub child: String,
}

/// `split`: each record goes to the first branch whose predicate holds,
/// else to the default branch, else nowhere.
pub(crate) struct Split<K, V> {
    pub branches: Arc<Vec<Branch<K, V>>>,
    pub default_child: Option<String>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for Split<K, V> {
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let chosen = self
            .branches
            .iter()
            .find(|b| (b.predicate)(&record.key, &record.value))
            .map(|b| b.child.as_str())
            .or(self.default_child.as_deref());
        if let Some(child) = chosen {
            ctx.forward_to(child, record)?;
        }
        Ok(())
    }
}

/// `print`: `[label]: text` per record.
pub(crate) struct Print<K, V> {
    pub label: Option<String>,
    pub mapper: PrintMapper<K, V>,
    pub sink: PrintSink,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for Print<K, V> {
    fn process(
        &mut self,
        ctx: &mut Ctx<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let label = self.label.as_deref().unwrap_or(ctx.node_name());
        let line = format!("[{label}]: {}", (self.mapper)(&record.key, &record.value));
        match &self.sink {
            PrintSink::Stdout => println!("{line}"),
            PrintSink::Writer(w) => {
                let mut w = w
                    .lock()
                    .map_err(|_| "print writer poisoned by an earlier panic")?;
                writeln!(w, "{line}")?;
            }
        }
        Ok(())
    }
}

impl<K, V> Branch<K, V> {
    pub(crate) fn clone_branch(&self) -> Self {
        Self {
            predicate: self.predicate.clone(),
            child: self.child.clone(),
        }
    }
}
