//! A member of a streams group: the heartbeat loop on a tokio task and the
//! handle the application holds.

use std::time::{Duration, Instant};

use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::assignment::Assignment;
use crate::config::MemberConfig;
use crate::connection::Connection;
use crate::coordinator;
use crate::error::{Error, Result};
use crate::membership::{MemberEvent, MemberSnapshot, MemberState, Membership, Reaction};
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
}

/// One member of a streams group (`group.protocol=streams`): it heartbeats
/// to the group coordinator on its own tokio task, registers the topology,
/// and hands out the broker's assignment as [`MemberEvent`]s.
///
/// The application answers an [`MemberEvent::Assigned`] by closing revoked
/// tasks, creating new ones and then [`report_owned`](Self::report_owned):
/// the broker moves a task to another member only once its owner has said
/// it let go.
pub struct StreamsGroupMember {
    member_id: String,
    commands: mpsc::UnboundedSender<Command>,
    leave: Option<tokio::sync::oneshot::Sender<()>>,
    events: mpsc::UnboundedReceiver<MemberEvent>,
    snapshot: watch::Receiver<MemberSnapshot>,
    task: JoinHandle<Result<()>>,
}

impl StreamsGroupMember {
    /// Connects to the group's coordinator, checks that it serves the streams
    /// group protocol and starts heartbeating (the first heartbeat joins).
    ///
    /// Fails at once on a topology the broker would refuse, when no broker
    /// answers, or with [`Error::Unsupported`] on a broker without streams
    /// groups. Must be called inside a tokio runtime.
    pub async fn join(config: MemberConfig, topology: &Topology) -> Result<StreamsGroupMember> {
        let membership = Membership::new(&config, topology)?;
        let connection = coordinator::connect(&config.connection, &config.group_id).await?;
        connection.require::<StreamsGroupHeartbeatRequestData>()?;
        let member_id = membership.member_id().to_owned();
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (leave, leave_rx) = tokio::sync::oneshot::channel();
        let (event_tx, events) = mpsc::unbounded_channel();
        let (snapshot_tx, snapshot) = watch::channel(membership.snapshot());
        let heartbeats = Heartbeats {
            config,
            connection: Some(connection),
            membership,
            events: event_tx,
            snapshot: snapshot_tx,
        };
        let task = tokio::spawn(heartbeats.run(command_rx, leave_rx));
        Ok(StreamsGroupMember {
            member_id,
            commands,
            leave: Some(leave),
            events,
            snapshot,
            task,
        })
    }

    /// The member id this client generated (kept for the member's lifetime).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The next event; `None` once the member has stopped (closed, or failed:
    /// [`close`](Self::close) then returns why).
    pub async fn next_event(&mut self) -> Option<MemberEvent> {
        self.events.recv().await
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

    /// Asks every member of the application to shut down.
    pub fn request_application_shutdown(&self) -> Result<()> {
        self.command(Command::ShutdownApplication)
    }

    /// Leaves the group (epoch -1; -2 for a static member, whose tasks wait for
    /// its return until the session times out) and stops heartbeating.
    /// Returns the loop's error if it had failed before.
    pub async fn close(mut self) -> Result<()> {
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(_) => Err(Error::Stopped),
        }
    }

    fn command(&self, command: Command) -> Result<()> {
        self.commands.send(command).map_err(|_| Error::Stopped)
    }
}

impl Drop for StreamsGroupMember {
    fn drop(&mut self) {
        // The loop leaves the group: a dropped member must not hold its
        // tasks until its session times out.
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(());
        }
    }
}

/// The loop's state.
struct Heartbeats {
    config: MemberConfig,
    connection: Option<Connection>,
    membership: Membership,
    events: mpsc::UnboundedSender<MemberEvent>,
    snapshot: watch::Sender<MemberSnapshot>,
}

impl Heartbeats {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut leave: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<()> {
        let mut next = Instant::now();
        let mut backoff = MIN_BACKOFF;
        loop {
            let wake = tokio::time::sleep_until(next.into());
            tokio::select! {
                biased;
                _ = &mut leave => break,
                command = commands.recv() => {
                    match command {
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
                _ = wake => {}
            }
            match self.heartbeat().await {
                Ok(Reaction::Continue(events)) => {
                    backoff = MIN_BACKOFF;
                    self.publish(events);
                    next = Instant::now() + self.membership.heartbeat_interval();
                }
                Ok(Reaction::Rejoin(events)) => {
                    self.publish(events);
                    next = Instant::now();
                }
                Ok(Reaction::Retry) => {
                    next = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Ok(Reaction::Rediscover) => {
                    self.connection = None;
                    log::debug!("streams group {}: coordinator moved", self.config.group_id);
                    next = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Ok(Reaction::Fatal(error)) => {
                    log::error!(
                        "streams group {}: member {} refused: {error}",
                        self.config.group_id,
                        self.membership.member_id()
                    );
                    self.publish(Vec::new());
                    return Err(error);
                }
                Err(error) => {
                    log::warn!(
                        "streams group {}: heartbeat failed: {error}; retrying in {backoff:?}",
                        self.config.group_id
                    );
                    self.membership.on_request_failed();
                    next = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        self.leave().await;
        Ok(())
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
        }
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

    /// Best effort: a member that cannot say goodbye is dropped by the broker
    /// after its session timeout.
    async fn leave(&mut self) {
        if matches!(self.membership.state(), MemberState::Failed) {
            return;
        }
        let request = self.membership.leave();
        let result = match self.connect().await {
            Ok(mut connection) => connection.send(&request).await.map(drop),
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => {
                log::info!(
                    "streams group {}: member {} left",
                    self.config.group_id,
                    self.membership.member_id()
                );
            }
            Err(error) => log::warn!(
                "streams group {}: leaving failed: {error}",
                self.config.group_id
            ),
        }
        let _ = self.membership.on_response(Default::default());
        self.publish(Vec::new());
    }
}
