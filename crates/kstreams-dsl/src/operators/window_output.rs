//! What the windowed aggregations (time, session and sliding windows)
//! share besides their store: stream time, late records, and how a
//! window's update leaves the processor: forwarded at once, through the
//! store's cache at flush, or held until the window closes (KIP-825).

use kstreams_record::{Headers, Record, Timestamp};
use kstreams_state::{CachedChange, FlushListener, Window, Windowed};
use kstreams_time::EmitStrategy;

use crate::change::Change;
use crate::operators::forwarder::{sends_old, CacheForwarder, OldValuesFlag};
use crate::operators::late_records::{reject_late, LateRecordSink};
use crate::{ProcessorContext, ProcessorError};

type Ctx<'a, 'b, K, A> = &'a mut ProcessorContext<'b, Windowed<K>, Change<A>>;

/// Turns what a store's cache writes down into the record to forward.
type CachedToRecord<K, A, SV> = fn(CachedChange<Windowed<K>, SV>) -> Record<Windowed<K>, Change<A>>;

/// How a windowed aggregation is set up, whatever its windows.
pub(crate) struct WindowedSetup<K, V> {
    pub(crate) emit: EmitStrategy,
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) late: Option<LateRecordSink<K, V>>,
}

impl<K, V> Clone for WindowedSetup<K, V> {
    fn clone(&self) -> Self {
        WindowedSetup {
            emit: self.emit,
            store_name: self.store_name.clone(),
            send_old: self.send_old.clone(),
            late: self.late.clone(),
        }
    }
}

/// The per-task state a windowed aggregation keeps besides its store. `SV`
/// is what the store holds per window (the aggregate, with its timestamp
/// for time windows); `cached` turns what the store's cache writes down
/// into the record to forward.
pub(crate) struct WindowedOutput<K, V, A, SV> {
    setup: WindowedSetup<K, V>,
    observed_stream_time: Timestamp,
    /// Final results were emitted for windows that closed up to this time.
    last_emitted_close: Timestamp,
    forwarder: Option<CacheForwarder<Windowed<K>, SV>>,
    cached: CachedToRecord<K, A, SV>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static, SV: 'static>
    WindowedOutput<K, V, A, SV>
{
    pub(crate) fn new(setup: WindowedSetup<K, V>, cached: CachedToRecord<K, A, SV>) -> Self {
        WindowedOutput {
            setup,
            observed_stream_time: -1,
            last_emitted_close: -1,
            forwarder: None,
            cached,
        }
    }

    pub(crate) fn store_name(&self) -> &str {
        &self.setup.store_name
    }

    /// At init, when every update is emitted: the store's cache, if it has
    /// one, hands what it writes down back to this processor to forward.
    /// Final results are read back from the store when windows close, so
    /// nothing is forwarded on flush then.
    pub(crate) fn attach(
        &mut self,
        set_listener: impl FnOnce(FlushListener<Windowed<K>, SV>, bool) -> bool,
    ) {
        if self.setup.emit == EmitStrategy::OnWindowUpdate {
            let send_old = sends_old(&self.setup.send_old);
            self.forwarder = Some(CacheForwarder::attach(|l| set_listener(l, send_old)));
        }
    }

    /// The stream time once a record of `timestamp` has arrived.
    pub(crate) fn observe(&mut self, timestamp: Timestamp) -> Timestamp {
        self.observed_stream_time = self.observed_stream_time.max(timestamp);
        self.observed_stream_time
    }

    /// Drops (and counts, logs, and maybe sends aside) a record for a
    /// window that has closed.
    pub(crate) fn reject_late<KO, VO>(
        &self,
        ctx: &mut ProcessorContext<'_, KO, VO>,
        record: &Record<K, V>,
        window: Window,
        grace_ms: i64,
    ) -> Result<(), ProcessorError> {
        reject_late(
            ctx,
            self.setup.late.as_ref(),
            record,
            window,
            self.observed_stream_time,
            grace_ms,
        )
    }

    /// Whether [`Self::update`] forwards each update at once (no cache, and
    /// not final results only), and so needs the window's key.
    pub(crate) fn forwards_each_update(&self) -> bool {
        matches!(&self.forwarder, Some(f) if !f.caching())
    }

    /// A window's new aggregate (`new`; `None` when the window is gone):
    /// forwarded at once, or left to the store's cache, or (final results
    /// only) held in the store until the window closes.
    ///
    /// `key` is the window's key where [`Self::forwards_each_update`],
    /// else `None`: the caller builds it only when it is sent.
    pub(crate) fn update(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        key: Option<Windowed<K>>,
        new: Option<A>,
        old: Option<A>,
        timestamp: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        match &self.forwarder {
            Some(f) if f.caching() => f.drain(ctx, self.cached)?,
            Some(_) => {
                let key = key.ok_or("a window update to forward came without its key")?;
                let old = if sends_old(&self.setup.send_old) {
                    old
                } else {
                    None
                };
                ctx.forward(Record {
                    key,
                    value: Change::new(new, old),
                    timestamp,
                    headers: headers.clone(),
                })?;
            }
            None => {}
        }
        Ok(())
    }

    /// At flush: a caching store writes its dirty windows down
    /// (`flush_cache`), and they are forwarded.
    pub(crate) fn flush<E>(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        flush_cache: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), ProcessorError>
    where
        ProcessorError: From<E>,
    {
        if let Some(f) = &self.forwarder {
            if f.caching() {
                flush_cache()?;
                f.drain(ctx, self.cached)?;
            }
        }
        Ok(())
    }

    /// With final results only (else `None`): moves the close time on to
    /// `close_time` (and the one committed with the task's offsets), and
    /// returns the close time of the last emission, from which the windows
    /// that closed since are to be emitted; `None` if none closed.
    ///
    /// Every record that moves the close time checks, in production as in
    /// the test driver. Kafka Streams throttles this check to once per
    /// `__emit.interval.ms.kstreams.windowed.aggregation__` (1000 ms) of
    /// wall-clock time outside its driver, to save store scans. We do not:
    /// a window store keeps `size + grace` behind its stream time, exactly
    /// to the close time, and our engines expire per window (Kafka's RocksDB
    /// segments keep a minute or more beyond retention, which is what lets
    /// its throttled emission still find the windows). A check delayed past
    /// later records would find the windows that closed in between already
    /// expired and lose their final results. Throttling would first need a
    /// retention that holds closed windows until they are emitted, and it
    /// would make when results leave depend on wall-clock time.
    pub(crate) fn closing(
        &mut self,
        ctx: Ctx<'_, '_, K, A>,
        close_time: Timestamp,
    ) -> Option<Timestamp> {
        if self.setup.emit != EmitStrategy::OnWindowClose {
            return None;
        }
        if let Some(committed) = ctx.last_emitted_close(&self.setup.store_name) {
            self.last_emitted_close = self.last_emitted_close.max(committed);
        }
        if close_time <= self.last_emitted_close {
            return None;
        }
        let from = self.last_emitted_close;
        self.last_emitted_close = close_time;
        ctx.set_last_emitted_close(&self.setup.store_name, close_time);
        Some(from)
    }

    /// Forwards the final results of closed windows, in the order given:
    /// (window, aggregate, timestamp).
    pub(crate) fn emit_final(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        closed: impl IntoIterator<Item = (Windowed<K>, A, Timestamp)>,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        for (key, value, timestamp) in closed {
            ctx.forward(Record {
                key,
                value: Change::new(Some(value), None),
                timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}
