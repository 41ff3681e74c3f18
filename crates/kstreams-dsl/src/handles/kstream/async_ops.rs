//! The async operators of `KStream`: a call per record on the runtime's
//! tokio runtime, results forwarded as calls finish (see
//! [`crate::async_processing`]).

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use crate::async_processing::AsyncOptions;
use crate::graph::{EdgeType, NodeKind};
use crate::handles::types::KStream;
use crate::operators::async_call::{async_node_factory, records_call, CallFuture, SharedCall};
use crate::ProcessorError;

impl<K, V> KStream<K, V>
where
    K: Clone + Hash + Eq + Send + 'static,
    V: Clone + Send + 'static,
{
    /// A new value for each record from an async call (an HTTP request, a
    /// database read), run on the application's tokio runtime while the
    /// stream thread goes on with other records; the key stays.
    ///
    /// Records of one key are called one after the other, in input order;
    /// records of different keys are called at the same time, up to the
    /// in-flight bounds of the configuration. A call that fails (after the
    /// retries of `options`) goes to the processing exception handler as
    /// any processing error. Offsets are committed only past records whose
    /// results went out.
    ///
    /// ```
    /// use kstreams_dsl::{AsyncOptions, StreamsBuilder};
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, String>("orders")
    ///     .map_values_async(
    ///         |_key, order| async move { Ok::<_, std::io::Error>(order.to_uppercase()) },
    ///         AsyncOptions::new(),
    ///     )
    ///     .to("enriched");
    /// ```
    pub fn map_values_async<V2, F, Fut, E>(&self, call: F, options: AsyncOptions) -> KStream<K, V2>
    where
        V2: Clone + Send + 'static,
        F: Fn(K, V) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<V2, E>> + Send + 'static,
        E: Into<ProcessorError> + 'static,
    {
        let call: SharedCall<K, V, K, V2> = Arc::new(move |key: K, value| {
            let future = call(key.clone(), value);
            Box::pin(async move {
                future
                    .await
                    .map(|value| vec![(key, value)])
                    .map_err(Into::into)
            }) as CallFuture<K, V2>
        });
        let out = self.add_async(call, options);
        KStream {
            key_serde: self.key_serde.clone(),
            repartition_required: self.repartition_required,
            ..out
        }
    }

    /// Zero or more records for each record from an async call: the
    /// Processor-API form of [`KStream::map_values_async`] (keys may
    /// change; records keep the input's timestamp and headers). Order,
    /// bounds and failures as there; the order is that of the input keys.
    pub fn process_async<K2, V2, F, Fut, E>(
        &self,
        call: F,
        options: AsyncOptions,
    ) -> KStream<K2, V2>
    where
        K2: Clone + Send + 'static,
        V2: Clone + Send + 'static,
        F: Fn(K, V) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<(K2, V2)>, E>> + Send + 'static,
        E: Into<ProcessorError> + 'static,
    {
        let call = records_call(call);
        let out = self.add_async(call, options);
        KStream {
            repartition_required: true,
            ..out
        }
    }

    fn add_async<K2, V2>(
        &self,
        call: SharedCall<K, V, K2, V2>,
        options: AsyncOptions,
    ) -> KStream<K2, V2>
    where
        K2: Clone + Send + 'static,
        V2: Clone + Send + 'static,
    {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(options.name.clone(), "KSTREAM-ASYNC-");
        let factory = async_node_factory(call, options);
        let added = state.topology.graph.add_node(
            name.clone(),
            NodeKind::Processor { factory },
            &[self.node.as_str()],
            Some(EdgeType::of::<K, V>()),
            Some(EdgeType::of::<K2, V2>()),
        );
        state.record(added);
        KStream::new(self.state.clone(), name)
    }
}
