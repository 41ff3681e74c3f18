//! A member of a streams group: the heartbeat loop on a tokio task and the
//! handle the application holds.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::assignment::Assignment;
use crate::commit::{self, CommitOffset, OFFSET_COMMIT_VERSION};
use crate::config::MemberConfig;
use crate::connection::Connection;
use crate::coordinator;
use crate::error::{Error, Result};
use crate::membership::{
    LeaveOperation, MemberEvent, MemberSnapshot, MemberState, Membership, Reaction,
};
use crate::task_offset::TaskOffset;
use crate::topology::Topology;

/// First pause after a failed heartbeat; doubled up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What the handle asks of the loop.
enum Command {
    Owned(Assignment),
    TaskOffsets(Vec<TaskOffset>, Vec<TaskOffset>),
    ShutdownApplication,
    Commit(Vec<CommitOffset>, oneshot::Sender<Result<()>>),
}

/// When the application last polled, shared by the handle (which records
/// polls, many a second, so without a channel message each) and the loop
/// (which leaves when the polls stop).
struct PollClock {
    start: Instant,
    /// Milliseconds from `start` to the latest poll.
    last_ms: AtomicU64,
    /// Set by the loop once it left for a missed poll: only then does a poll
    /// wake it.
    stale: AtomicBool,
    polled: Notify,
}

impl PollClock {
    fn new() -> PollClock {
        PollClock {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            stale: AtomicBool::new(false),
            polled: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn record(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Release);
        if self.stale.load(Ordering::Acquire) {
            self.polled.notify_one();
        }
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms())
    }

    fn last_ms(&self) -> u64 {
        self.last_ms.load(Ordering::Acquire)
    }
}

/// One member of a streams group (`group.protocol=streams`): it heartbeats
/// to the group coordinator on a tokio task, registers the topology, and
/// hands out the broker's assignment as [`MemberEvent`]s.
///
/// The application answers an [`MemberEvent::Assigned`] by closing revoked
/// tasks, creating new ones and then [`report_owned`](Self::report_owned).
/// The broker gives a revoked task to its next owner only once this member
/// has reported that it let go, or once it fences this member for taking
/// longer than [`MemberConfig::rebalance_timeout`] (then the events say
/// [`MemberEvent::TasksLost`]).
///
/// The application must also call [`record_poll`](Self::record_poll) at
/// least every [`MemberConfig::max_poll_interval`], as a Kafka consumer
/// polls: a member whose application stopped polling leaves the group.
///
/// # From a blocking thread
///
/// [`join_blocking`](Self::join_blocking) gives the member a tokio runtime
/// of its own on a thread of its own, so that a stream thread without any
/// runtime can use it: [`try_next_event`](Self::try_next_event) never
/// blocks, [`close_blocking`](Self::close_blocking) waits a bounded time for
/// the leave, and dropping the member still leaves the group.
///
/// # Committing offsets as the member
///
/// A streams group accepts an offset commit only from one of its members at
/// its current epoch ([`member_epoch`](Self::member_epoch), with
/// [`member_id`](Self::member_id)); one with member epoch -1 is refused
/// (UNKNOWN_MEMBER_ID) as long as the group has members. The broker's
/// `StreamsGroup.validateOffsetCommit` also wants OffsetCommit v9 or newer.
/// The exception is a transactional commit (TxnOffsetCommit) that names no
/// member at all, which is accepted unchecked. So:
/// - under exactly-once, the runtime's producer commits with librdkafka's
///   `send_offsets_to_transaction` and the group metadata of a consumer that
///   is not a member (no member id, generation -1) — accepted as is; or
///   with this member's id and epoch (`rd_kafka_consumer_group_metadata_new_with_genid`),
///   which the broker then checks;
/// - under at-least-once, librdkafka's own `commit` on a manually assigned
///   consumer sends generation -1 and no member id, which the broker
///   refuses, so the runtime commits through
///   [`commit_offsets`](Self::commit_offsets), which sends OffsetCommit as
///   this member at its current epoch.
pub struct StreamsGroupMember {
    member_id: String,
    commands: mpsc::UnboundedSender<Command>,
    leave: Option<oneshot::Sender<LeaveOperation>>,
    events: mpsc::UnboundedReceiver<MemberEvent>,
    snapshot: watch::Receiver<MemberSnapshot>,
    poll: Arc<PollClock>,
    /// The loop's end and why.
    done: oneshot::Receiver<Result<()>>,
    /// Where the loop runs: the caller's runtime, or the member's own.
    runtime: Handle,
    /// The thread that drives the member's own runtime (from
    /// [`join_blocking`](Self::join_blocking)).
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StreamsGroupMember {
    /// Connects to the group's coordinator, checks that it serves the streams
    /// group protocol and starts heartbeating on the caller's tokio runtime
    /// (the first heartbeat joins).
    ///
    /// Fails at once on a topology the broker would refuse, when no broker
    /// answers, or with [`Error::Unsupported`] on a broker without streams
    /// groups. Must be called inside a tokio runtime.
    pub async fn join(config: MemberConfig, topology: &Topology) -> Result<StreamsGroupMember> {
        let heartbeats = Heartbeats::prepare(config, topology).await?;
        let (member, run) = heartbeats.start(Handle::current());
        tokio::spawn(run);
        Ok(member)
    }

    /// [`join`](Self::join) for a thread without a tokio runtime (a blocking
    /// stream thread): the member gets a runtime of its own, on a thread of
    /// its own that ends once the member has left. Blocks until the
    /// coordinator is connected. Panics inside an async context (use `join`
    /// there).
    pub fn join_blocking(config: MemberConfig, topology: &Topology) -> Result<StreamsGroupMember> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let name = format!("kstreams-group-{}", config.group_id);
        let heartbeats = runtime.block_on(Heartbeats::prepare(config, topology))?;
        let (mut member, run) = heartbeats.start(runtime.handle().clone());
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || runtime.block_on(run))
            .map_err(Error::Runtime)?;
        member.thread = Some(thread);
        Ok(member)
    }

    /// The member id this client generated (kept for the member's lifetime).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The member epoch as of the latest heartbeat answer: what an offset
    /// commit must carry. 0 while joining, -1 once out of the group (left,
    /// or stale after a missed poll).
    pub fn member_epoch(&self) -> i32 {
        self.snapshot.borrow().epoch
    }

    /// The next event; `None` once the member has stopped (closed, or failed:
    /// [`close`](Self::close) then returns why).
    pub async fn next_event(&mut self) -> Option<MemberEvent> {
        self.events.recv().await
    }

    /// The next event if one is waiting; never blocks, needs no runtime.
    /// `Err(Error::Stopped)` once the member has stopped and every event has
    /// been taken.
    pub fn try_next_event(&mut self) -> Result<Option<MemberEvent>> {
        match self.events.try_recv() {
            Ok(event) => Ok(Some(event)),
            Err(mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(Error::Stopped),
        }
    }

    /// The application is alive (a Kafka consumer's poll): refreshes the
    /// [`MemberConfig::max_poll_interval`] deadline, and joins the group
    /// again when the member left for a missed one. Cheap: no message to the
    /// heartbeat loop unless it is waiting for this.
    pub fn record_poll(&self) {
        self.poll.record();
    }

    /// The member as of its latest heartbeat answer.
    pub fn snapshot(&self) -> MemberSnapshot {
        self.snapshot.borrow().clone()
    }

    /// A receiver that sees every new snapshot.
    pub fn watch(&self) -> watch::Receiver<MemberSnapshot> {
        self.snapshot.clone()
    }

    /// The application owns exactly `owned` now; a heartbeat says so at once.
    /// Pass the [`Assignment`] of the event being answered (or one with its
    /// [`generation`](Assignment::generation)): a report for an assignment
    /// that has since been replaced or lost is ignored.
    pub fn report_owned(&self, owned: Assignment) -> Result<()> {
        self.command(Command::Owned(owned))
    }

    /// The tasks' changelog offsets and end offsets, for the broker's warm-up
    /// decisions; sent with the first heartbeat after the broker's task
    /// offset interval has passed.
    pub fn report_task_offsets(
        &self,
        offsets: Vec<TaskOffset>,
        end_offsets: Vec<TaskOffset>,
    ) -> Result<()> {
        self.command(Command::TaskOffsets(offsets, end_offsets))
    }

    /// Commits `offsets` for the group as this member at its current epoch
    /// (OffsetCommit v9, between two heartbeats, on the coordinator
    /// connection). The broker refuses it with STALE_MEMBER_EPOCH or
    /// UNKNOWN_MEMBER_ID once the member has been fenced or has left: the
    /// tasks are someone else's then.
    pub async fn commit_offsets(&self, offsets: Vec<CommitOffset>) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Commit(offsets, reply))?;
        answer.await.unwrap_or(Err(Error::Stopped))
    }

    /// [`commit_offsets`](Self::commit_offsets) for a thread without a
    /// runtime, waiting up to `timeout` for the broker's answer
    /// ([`Error::Timeout`] after that). Panics inside an async context.
    pub fn commit_offsets_blocking(
        &self,
        offsets: Vec<CommitOffset>,
        timeout: Duration,
    ) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.command(Command::Commit(offsets, reply))?;
        let waited = self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, answer).await });
        match waited {
            Ok(result) => result.unwrap_or(Err(Error::Stopped)),
            Err(_) => Err(Error::Timeout {
                address: "the group coordinator".to_owned(),
                api: "OffsetCommit",
                timeout,
            }),
        }
    }

    /// Asks every member of the application to shut down.
    pub fn request_application_shutdown(&self) -> Result<()> {
        self.command(Command::ShutdownApplication)
    }

    /// Leaves the group (epoch -1; -2 for a static member, whose tasks wait for
    /// its return until the session times out) and stops heartbeating.
    /// Returns the loop's error if it had failed before.
    pub async fn close(self) -> Result<()> {
        self.close_with(LeaveOperation::Default).await
    }

    /// [`close`](Self::close), with the membership `operation` Kafka's
    /// `CloseOptions` names: a static member that leaves for good, or a
    /// member that remains in the group until its session times out.
    pub async fn close_with(mut self, operation: LeaveOperation) -> Result<()> {
        self.signal_leave(operation);
        let result = (&mut self.done).await.unwrap_or(Err(Error::Stopped));
        self.join_thread();
        result
    }

    /// [`close`](Self::close) for a thread without a runtime: waits up to
    /// `timeout` for the leave heartbeat's answer
    /// ([`Error::CloseTimedOut`] after that; the member still tries to leave
    /// in the background). Panics inside an async context.
    pub fn close_blocking(self, timeout: Duration) -> Result<()> {
        self.close_blocking_with(timeout, LeaveOperation::Default)
    }

    /// [`close_blocking`](Self::close_blocking) with the membership
    /// `operation` of [`close_with`](Self::close_with).
    pub fn close_blocking_with(
        mut self,
        timeout: Duration,
        operation: LeaveOperation,
    ) -> Result<()> {
        self.signal_leave(operation);
        let runtime = self.runtime.clone();
        // The timer is made inside the runtime: it needs its time driver.
        let done = &mut self.done;
        let waited = runtime.block_on(async { tokio::time::timeout(timeout, done).await });
        match waited {
            Ok(result) => {
                self.join_thread();
                result.unwrap_or(Err(Error::Stopped))
            }
            Err(_) => Err(Error::CloseTimedOut(timeout)),
        }
    }

    fn signal_leave(&mut self, operation: LeaveOperation) {
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(operation);
        }
    }

    /// The member's own runtime thread ends right after the loop; waiting for
    /// it leaves no thread behind a closed member.
    fn join_thread(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn command(&self, command: Command) -> Result<()> {
        self.commands.send(command).map_err(|_| Error::Stopped)
    }
}

impl Drop for StreamsGroupMember {
    fn drop(&mut self) {
        // The loop leaves the group: a dropped member must not hold its
        // tasks until its session times out. It runs on, on the caller's
        // runtime or on the member's own thread (not waited for here), until
        // the leave is answered.
        self.signal_leave(LeaveOperation::Default);
    }
}

/// The loop's state.
struct Heartbeats {
    config: MemberConfig,
    connection: Option<Connection>,
    membership: Membership,
    events: mpsc::UnboundedSender<MemberEvent>,
    snapshot: watch::Sender<MemberSnapshot>,
    poll: Arc<PollClock>,
    /// When (on the poll clock) the member left for a missed poll.
    stale_since_ms: u64,
}

/// Consecutive failed attempts, for the pause before the next one.
#[derive(Default)]
struct Backoff {
    /// Pauses taken since the last accepted heartbeat.
    pauses: u32,
    /// Whether the one attempt without a pause has been used.
    went_at_once: bool,
}

impl Backoff {
    /// The pause before a retry: doubling from [`MIN_BACKOFF`] up to
    /// [`MAX_BACKOFF`].
    fn retry(&mut self) -> Duration {
        let pause = MIN_BACKOFF
            .saturating_mul(1 << self.pauses.min(5))
            .min(MAX_BACKOFF);
        self.pauses += 1;
        pause
    }

    /// The pause before joining again or looking for the coordinator again:
    /// none the first time, as Kafka's client (a fenced member rejoins at
    /// once; a moved coordinator is looked up at once), but a member fenced
    /// or sent away again and again backs off rather than spin.
    fn again(&mut self) -> Duration {
        if self.went_at_once {
            self.retry()
        } else {
            self.went_at_once = true;
            Duration::ZERO
        }
    }

    fn reset(&mut self) {
        *self = Backoff::default();
    }
}

impl Heartbeats {
    /// A member's loop with its coordinator connected.
    async fn prepare(config: MemberConfig, topology: &Topology) -> Result<Heartbeats> {
        let membership = Membership::new(&config, topology)?;
        let connection = coordinator::connect(&config.connection, &config.group_id).await?;
        connection.require::<StreamsGroupHeartbeatRequestData>()?;
        let (events, _) = mpsc::unbounded_channel();
        let (snapshot, _) = watch::channel(membership.snapshot());
        Ok(Heartbeats {
            config,
            connection: Some(connection),
            membership,
            events,
            snapshot,
            poll: Arc::new(PollClock::new()),
            stale_since_ms: 0,
        })
    }

    /// The handle, and the loop to run on `runtime`.
    fn start(
        mut self,
        runtime: Handle,
    ) -> (
        StreamsGroupMember,
        impl Future<Output = ()> + Send + 'static,
    ) {
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (leave, leave_rx) = oneshot::channel();
        let (event_tx, events) = mpsc::unbounded_channel();
        let (snapshot_tx, snapshot) = watch::channel(self.membership.snapshot());
        let (done_tx, done) = oneshot::channel();
        self.events = event_tx;
        self.snapshot = snapshot_tx;
        let member = StreamsGroupMember {
            member_id: self.membership.member_id().to_owned(),
            commands,
            leave: Some(leave),
            events,
            snapshot,
            poll: self.poll.clone(),
            done,
            runtime,
            thread: None,
        };
        let run = async move {
            let result = self.run(command_rx, leave_rx).await;
            let _ = done_tx.send(result);
        };
        (member, run)
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut leave: oneshot::Receiver<LeaveOperation>,
    ) -> Result<()> {
        let mut next = Instant::now();
        let mut backoff = Backoff::default();
        let mut leave_with = LeaveOperation::Default;
        let max_poll_interval = self.config.max_poll_interval;
        loop {
            let stale = self.membership.state() == MemberState::Stale;
            let poll_deadline = self.poll.last() + max_poll_interval;
            // An idle coordinator connection authenticates again before the
            // broker's session ends (KIP-368); a busy one does so before its
            // next request.
            let reauthenticate_at = self
                .connection
                .as_ref()
                .and_then(Connection::reauthenticate_at);
            tokio::select! {
                biased;
                operation = &mut leave => {
                    leave_with = operation.unwrap_or_default();
                    break;
                }
                command = commands.recv() => {
                    match command {
                        Some(Command::Commit(offsets, reply)) => {
                            let _ = reply.send(self.commit(&offsets).await);
                        }
                        Some(command) => {
                            if self.apply(command) {
                                next = Instant::now();
                            }
                        }
                        // The handle is gone without close(): leave.
                        None => break,
                    }
                    continue;
                }
                _ = self.poll.polled.notified(), if stale => {
                    // A wake-up left over from a poll before the leave is
                    // not a new poll.
                    if self.polled_since_stale() {
                        self.rejoin_after_poll();
                        next = Instant::now();
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(poll_deadline.into()), if !stale => {
                    // A poll may have come in meanwhile: look again.
                    if self.poll.last() + max_poll_interval <= Instant::now() {
                        self.leave_stale().await;
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(
                    reauthenticate_at.unwrap_or(next).into()
                ), if reauthenticate_at.is_some_and(|at| at < next) => {
                    if let Err(error) = self.reauthenticate().await {
                        if error.is_fatal() {
                            return Err(self.fail(error));
                        }
                        // The connection is gone; the next request makes
                        // (and authenticates) a new one.
                        log::warn!(
                            "streams group {}: re-authentication failed: {error}",
                            self.config.group_id
                        );
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(next.into()), if !stale => {}
            }
            match self.heartbeat().await {
                Ok(Reaction::Continue(events)) => {
                    backoff.reset();
                    self.publish(events);
                    next = Instant::now() + self.membership.heartbeat_interval();
                }
                Ok(Reaction::Rejoin(events)) => {
                    self.publish(events);
                    next = Instant::now() + backoff.again();
                }
                Ok(Reaction::Retry) => {
                    next = Instant::now() + backoff.retry();
                }
                Ok(Reaction::Report(events)) => {
                    self.publish(events);
                    next = Instant::now() + backoff.retry();
                }
                Ok(Reaction::Rediscover) => {
                    self.connection = None;
                    log::debug!("streams group {}: coordinator moved", self.config.group_id);
                    next = Instant::now() + backoff.again();
                }
                Ok(Reaction::Fatal(error, events)) => {
                    log::error!(
                        "streams group {}: member {} refused: {error}",
                        self.config.group_id,
                        self.membership.member_id()
                    );
                    self.publish(events);
                    return Err(error);
                }
                // A refused authentication or TLS handshake, or a setting
                // that cannot work: retrying would fail alike, forever.
                Err(error) if error.is_fatal() => return Err(self.fail(error)),
                Err(error) => {
                    let pause = backoff.retry();
                    log::warn!(
                        "streams group {}: heartbeat failed: {error}; retrying in {pause:?}",
                        self.config.group_id
                    );
                    self.membership.on_request_failed();
                    next = Instant::now() + pause;
                }
            }
        }
        self.leave(leave_with).await;
        Ok(())
    }

    /// Stops for good on `error`: the application hears that its tasks are
    /// lost, then the loop ends with the error.
    fn fail(&mut self, error: Error) -> Error {
        log::error!(
            "streams group {}: member {} stops: {error}",
            self.config.group_id,
            self.membership.member_id()
        );
        let events = self.membership.stop();
        self.publish(events);
        error
    }

    /// Re-authenticates the coordinator connection (KIP-368); on an error
    /// it is dropped.
    async fn reauthenticate(&mut self) -> Result<()> {
        if let Some(mut connection) = self.connection.take() {
            connection.reauthenticate_if_due().await?;
            self.connection = Some(connection);
        }
        Ok(())
    }

    /// The application stopped polling: leave (so that its tasks move) and
    /// tell it its tasks are lost. Joins again at once if it polled while
    /// the leave was under way.
    async fn leave_stale(&mut self) {
        log::warn!(
            "streams group {}: member {} saw no poll for {:?} (max poll interval); leaving",
            self.config.group_id,
            self.membership.member_id(),
            self.config.max_poll_interval
        );
        // Set before leaving, so that a poll from now on wakes the loop.
        self.stale_since_ms = self.poll.now_ms();
        self.poll.stale.store(true, Ordering::Release);
        let (request, events) = self.membership.leave_stale();
        self.send_leave(&request).await;
        self.publish(events);
        if self.polled_since_stale() {
            self.rejoin_after_poll();
        }
    }

    fn polled_since_stale(&self) -> bool {
        self.poll.last_ms() >= self.stale_since_ms
    }

    fn rejoin_after_poll(&mut self) {
        self.poll.stale.store(false, Ordering::Release);
        log::info!(
            "streams group {}: member {} polled again; rejoining",
            self.config.group_id,
            self.membership.member_id()
        );
        self.membership.rejoin();
        self.publish(Vec::new());
    }

    /// Applies a command; returns whether a heartbeat should go out now.
    fn apply(&mut self, command: Command) -> bool {
        match command {
            Command::Owned(owned) => self.membership.set_owned(owned),
            Command::TaskOffsets(offsets, end) => {
                self.membership.set_task_offsets(offsets, end);
                false
            }
            Command::ShutdownApplication => {
                self.membership.request_shutdown_application();
                true
            }
            // Answered in the loop: it waits for the broker.
            Command::Commit(_, reply) => {
                let _ = reply.send(Err(Error::Stopped));
                false
            }
        }
    }

    /// One OffsetCommit as the member at its current epoch.
    async fn commit(&mut self, offsets: &[CommitOffset]) -> Result<()> {
        let request = commit::request(
            &self.config.group_id,
            self.membership.member_id(),
            self.membership.epoch(),
            self.config.instance_id.as_deref(),
            offsets,
        );
        let mut connection = self.connect().await?;
        let response = connection
            .send_version(&request, OFFSET_COMMIT_VERSION)
            .await?;
        let result = commit::check(&response);
        // A coordinator that moved is looked up again by the next request.
        if !result.as_ref().is_err_and(coordinator::moved) {
            self.connection = Some(connection);
        }
        result
    }

    /// One heartbeat round trip; an error means no answer came.
    async fn heartbeat(&mut self) -> Result<Reaction> {
        let mut connection = self.connect().await?;
        let request = self.membership.heartbeat(Instant::now());
        let response = connection.send(&request).await?;
        self.connection = Some(connection);
        Ok(self.membership.on_response(response))
    }

    /// The coordinator connection, found again when there is none. Taken out
    /// of `self` while in use, so that a failed request leaves none behind.
    async fn connect(&mut self) -> Result<Connection> {
        match self.connection.take() {
            Some(connection) => Ok(connection),
            None => coordinator::connect(&self.config.connection, &self.config.group_id).await,
        }
    }

    fn publish(&mut self, events: Vec<MemberEvent>) {
        for event in events {
            // Nobody listening is fine: the snapshot carries the same news.
            let _ = self.events.send(event);
        }
        self.snapshot.send_replace(self.membership.snapshot());
    }

    /// Leaves for good on close. Best effort: a member that cannot say
    /// goodbye is dropped by the broker after its session timeout.
    async fn leave(&mut self, operation: LeaveOperation) {
        // A failed member is not in the group; a stale one has left already.
        let state = self.membership.state();
        let request = self.membership.leave(operation);
        match request {
            Some(request) if !matches!(state, MemberState::Failed | MemberState::Stale) => {
                self.send_leave(&request).await;
            }
            Some(_) => {}
            None => log::info!(
                "streams group {}: member {} stops heartbeating and remains in the group until \
                 its session times out",
                self.config.group_id,
                self.membership.member_id()
            ),
        }
        let _ = self.membership.on_response(Default::default());
        self.publish(Vec::new());
    }

    /// Sends a leave heartbeat once; its answer does not matter (the member
    /// is out whatever the broker says).
    async fn send_leave(&mut self, request: &StreamsGroupHeartbeatRequestData) {
        let result = match self.connect().await {
            Ok(mut connection) => {
                let sent = connection.send(request).await.map(drop);
                if sent.is_ok() {
                    self.connection = Some(connection);
                }
                sent
            }
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => log::info!(
                "streams group {}: member {} left with epoch {}",
                self.config.group_id,
                self.membership.member_id(),
                request.member_epoch
            ),
            Err(error) => log::warn!(
                "streams group {}: leaving failed: {error}",
                self.config.group_id
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_rejoin_or_lookup_is_at_once_and_repeated_ones_back_off() {
        let mut backoff = Backoff::default();
        assert_eq!(backoff.again(), Duration::ZERO, "Kafka's client: at once");
        assert_eq!(backoff.again(), MIN_BACKOFF, "no spinning when it repeats");
        assert_eq!(backoff.again(), MIN_BACKOFF * 2);
        for _ in 0..10 {
            backoff.retry();
        }
        assert_eq!(backoff.retry(), MAX_BACKOFF);
        backoff.reset();
        assert_eq!(
            backoff.again(),
            Duration::ZERO,
            "an accepted heartbeat resets"
        );
        backoff.reset();
        assert_eq!(backoff.retry(), MIN_BACKOFF);
    }
}
