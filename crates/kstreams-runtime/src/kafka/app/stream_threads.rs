//! The stream threads of a running instance: those `start` makes, and
//! those added and removed later, Kafka Streams' `addStreamThread` and
//! `removeStreamThread`. One path makes every thread
//! ([`KafkaStreams::start_thread`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kstreams_dsl::Topology;

use super::super::config::StreamsConfig;
use super::super::instance::Instance;
use super::super::topics::SourceTopicIndex;
use super::super::RuntimeError;
use super::{spawn, KafkaStreams, State, ThreadRecipe};

/// One stream thread of the instance.
pub(super) struct StreamThreadHandle {
    /// Its index (0-based; its name ends in `StreamThread-<index + 1>`).
    pub(super) index: usize,
    pub(super) name: String,
    /// Stops this thread alone (`close` sets every thread's).
    pub(super) stop: Arc<AtomicBool>,
    pub(super) join: JoinHandle<()>,
    /// Removed, but it had not stopped when `remove_stream_thread` gave up
    /// waiting: no longer one of the instance's threads, joined at `close`.
    pub(super) retired: bool,
}

impl StreamThreadHandle {
    /// Whether it is one of the instance's threads now: not removed and
    /// not ended (a failed thread that was not replaced has ended).
    fn is_live(&self) -> bool {
        !self.retired && !self.join.is_finished()
    }
}

/// What every stream thread of an instance is made from, fixed at `start`.
#[derive(Clone)]
pub(super) struct ThreadFactory {
    pub(super) process_id: String,
    pub(super) config: StreamsConfig,
    /// The instance as the threads see it (with the standby listener that
    /// records positions).
    pub(super) instance: Instance,
    pub(super) topology: Arc<Topology>,
    pub(super) sources: Arc<SourceTopicIndex>,
}

impl ThreadFactory {
    /// The recipe of thread `index` when the instance runs `threads`
    /// threads: the record cache's budget is shared out among them, as
    /// Kafka Streams' `cacheSizePerThread` does.
    fn recipe(&self, index: usize, threads: usize) -> ThreadRecipe {
        let mut config = self.config.clone();
        config.num_stream_threads = threads.max(1);
        ThreadRecipe {
            index,
            process_id: self.process_id.clone(),
            config,
            instance: self.instance.clone(),
            topology: self.topology.clone(),
            sources: self.sources.clone(),
        }
    }
}

/// The lowest index no live thread has: the names of removed threads are
/// used again, as Kafka Streams' `nextThreadIndex` does.
fn lowest_free_index(live: &[usize]) -> usize {
    (0..).find(|i| !live.contains(i)).unwrap_or(live.len())
}

impl KafkaStreams {
    /// Makes stream thread `index` of an instance that runs `threads`
    /// threads with it, and starts it; `added`: one more than the instance
    /// counted (counted once its clients are made, as it starts, so that
    /// the instance neither waits for it nor counts it dead before). Its
    /// clients are built here, so a bad client setting fails the caller.
    pub(super) fn start_thread(
        &mut self,
        index: usize,
        threads: usize,
        added: bool,
    ) -> Result<String, RuntimeError> {
        let Some(factory) = &self.factory else {
            return Err(RuntimeError::IllegalState(self.state()));
        };
        let recipe = factory.recipe(index, threads);
        let thread = recipe.make()?;
        let name = thread.name().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        if added {
            self.shared.threads_total.fetch_add(1, Ordering::AcqRel);
        }
        let join = match spawn(thread, recipe, self.shared.clone(), stop.clone()) {
            Ok(join) => join,
            Err(e) => {
                if added {
                    self.shared.threads_total.fetch_sub(1, Ordering::AcqRel);
                }
                return Err(e);
            }
        };
        self.threads.push(StreamThreadHandle {
            index,
            name: name.clone(),
            stop,
            join,
            retired: false,
        });
        Ok(name)
    }

    /// The instance's live stream threads: not removed, not ended.
    fn live_threads(&self) -> impl Iterator<Item = &StreamThreadHandle> {
        self.threads.iter().filter(|t| t.is_live())
    }

    /// Adds a stream thread to the running instance: Kafka Streams'
    /// `KafkaStreams#addStreamThread`. The new thread joins the group and
    /// gets its share of the tasks at the rebalance that follows; the
    /// record cache (`statestore.cache.max.bytes`) is shared out among the
    /// threads: the new one gets the total divided by the live threads
    /// (the running threads keep the share they started with; Kafka Streams
    /// resizes theirs too).
    ///
    /// Only while RUNNING or REBALANCING; otherwise nothing is added and
    /// the answer is `Ok(None)`, as Kafka Streams answers an empty
    /// `Optional`. Returns the new thread's name,
    /// `<application.id>-<process id>-StreamThread-<n>` with the lowest `n`
    /// no live thread has (a removed thread's number is taken again). An
    /// error is a thread that could not be made (its clients' settings).
    ///
    /// ```no_run
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
    ///
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("in").group_by_key().count();
    /// let mut app = KafkaStreams::new(builder.build().unwrap(), StreamsConfig::new("app", "localhost:9092"));
    /// app.start().unwrap();
    /// // The input grew: one more thread takes a share of the tasks.
    /// if let Some(name) = app.add_stream_thread().unwrap() {
    ///     println!("added {name}");
    /// }
    /// ```
    pub fn add_stream_thread(&mut self) -> Result<Option<String>, RuntimeError> {
        let state = self.state();
        if !matches!(state, State::Running | State::Rebalancing) || self.factory.is_none() {
            log::warn!("cannot add a stream thread when the application is in state {state:?}");
            return Ok(None);
        }
        self.forget_ended_threads();
        let live: Vec<usize> = self.live_threads().map(|t| t.index).collect();
        let index = lowest_free_index(&live);
        let threads = live.len() + 1;
        log::info!(
            "adding StreamThread-{}; there will be {threads} live threads, each with a record \
             cache of {} bytes",
            index + 1,
            self.config.cache_max_bytes / threads as u64
        );
        let name = self.start_thread(index, threads, true)?;
        // A failure elsewhere may have begun a shutdown meanwhile: the new
        // thread goes too, as in Kafka Streams.
        let state = self.state();
        if !matches!(state, State::Running | State::Rebalancing) {
            log::warn!("stopping the new thread {name}: the application is in state {state:?}");
            if let Some(thread) = self.threads.iter_mut().find(|t| t.name == name) {
                thread.stop.store(true, Ordering::Release);
                thread.retired = true;
            }
            self.shared.threads_total.fetch_sub(1, Ordering::AcqRel);
            return Ok(None);
        }
        Ok(Some(name))
    }

    /// Removes a stream thread from the running instance: Kafka Streams'
    /// `KafkaStreams#removeStreamThread(Duration)`. The oldest live thread
    /// stops as at [`close`](Self::close) (it commits, closes its tasks and
    /// leaves the group, so that its tasks move to the other threads and
    /// instances), and this waits up to `timeout` for it. A thread added
    /// later gets the record cache's total shared out among the live
    /// threads; the running threads keep the share they started with
    /// (Kafka Streams resizes theirs too).
    ///
    /// A static member of a streams group (`consumer.group.instance.id`
    /// with `group.protocol=streams`) leaves for good too (epoch -1, not a
    /// restart's -2), so its tasks move now, as Kafka Streams removes the
    /// removed thread's static member from the group.
    ///
    /// Only while RUNNING or REBALANCING, and only with a live thread to
    /// remove; otherwise nothing is removed and the answer is `Ok(None)`.
    /// Returns the removed thread's name. If it does not stop within
    /// `timeout`, it is no longer counted as the instance's and the error
    /// is [`RuntimeError::ThreadRemovalTimedOut`] (Kafka Streams'
    /// `TimeoutException`); it goes on stopping, and `close` waits for it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
    ///
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("in").group_by_key().count();
    /// let config = StreamsConfig::new("app", "localhost:9092").num_stream_threads(4);
    /// let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    /// app.start().unwrap();
    /// // Give a core back: three threads take over the fourth's tasks.
    /// let removed = app.remove_stream_thread(Duration::from_secs(60)).unwrap();
    /// assert!(removed.is_some());
    /// ```
    pub fn remove_stream_thread(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<String>, RuntimeError> {
        let state = self.state();
        if !matches!(state, State::Running | State::Rebalancing) {
            log::warn!("cannot remove a stream thread when the application is in state {state:?}");
            return Ok(None);
        }
        self.forget_ended_threads();
        let Some(position) = self.threads.iter().position(StreamThreadHandle::is_live) else {
            log::warn!("there are no stream threads eligible for removal");
            return Ok(None);
        };
        let started = Instant::now();
        let name = self.threads[position].name.clone();
        log::info!("removing stream thread {name}");
        self.shared.threads_total.fetch_sub(1, Ordering::AcqRel);
        // Kafka Streams' removeStreamThread: the thread leaves the group,
        // a static member too, so that its tasks move now.
        self.instance.leave_operations.set(
            &self.threads[position].name,
            kstreams_group::LeaveOperation::LeaveGroup,
        );
        self.threads[position].stop.store(true, Ordering::Release);
        let deadline = started.checked_add(timeout);
        while !self.threads[position].join.is_finished()
            && deadline.is_none_or(|d| Instant::now() < d)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !self.threads[position].join.is_finished() {
            log::warn!("{name} did not shut down within {timeout:?}");
            self.threads[position].retired = true;
            return Err(RuntimeError::ThreadRemovalTimedOut {
                thread: name,
                timeout,
            });
        }
        let thread = self.threads.remove(position);
        let _ = thread.join.join();
        log::info!(
            "removed {name} in {} ms; {} live threads remain",
            started.elapsed().as_millis(),
            self.live_threads().count()
        );
        Ok(Some(name))
    }

    /// Joins the threads that ended (failed and not replaced, or retired
    /// and done), so their numbers can be taken again.
    fn forget_ended_threads(&mut self) {
        let (ended, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.threads)
            .into_iter()
            .partition(|t| t.join.is_finished());
        self.threads = running;
        for thread in ended {
            let _ = thread.join.join();
        }
    }

    /// Tells every stream thread to stop and waits up to `timeout` (without
    /// one, until they have) for them, then the global thread; the state
    /// ends NOT_RUNNING (ERROR after a failure). Returns whether all
    /// stopped in time.
    pub(super) fn stop_and_wait(&mut self, timeout: Option<Duration>) -> bool {
        if self.state() != State::Error && self.state() != State::PendingError {
            self.shared.transition(State::PendingShutdown);
        }
        self.shared.stop.store(true, Ordering::Release);
        for thread in &self.threads {
            thread.stop.store(true, Ordering::Release);
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        while self.threads.iter().any(|t| !t.join.is_finished())
            && deadline.is_none_or(|d| Instant::now() < d)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let all_stopped = self.threads.iter().all(|t| t.join.is_finished());
        if all_stopped {
            for t in self.threads.drain(..) {
                let _ = t.join.join();
            }
            // The global stores close last, as in Kafka Streams.
            self.shared.global_stop.store(true, Ordering::Release);
            if let Some(global) = self.global.take() {
                let _ = global.join();
            }
            // No thread uses the state directory any more: another instance
            // may take it.
            self.state_cleaner = None;
            self.process = None;
            *self
                .lag_consumer
                .get_mut()
                .unwrap_or_else(|p| p.into_inner()) = None;
            let end = if self.state() == State::PendingError {
                State::Error
            } else {
                State::NotRunning
            };
            self.shared.transition(end);
        }
        all_stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_thread_takes_the_lowest_number_no_live_thread_has() {
        assert_eq!(lowest_free_index(&[]), 0);
        assert_eq!(lowest_free_index(&[0, 1, 2]), 3);
        assert_eq!(lowest_free_index(&[1, 2]), 0);
        assert_eq!(lowest_free_index(&[2, 0]), 1);
    }
}
