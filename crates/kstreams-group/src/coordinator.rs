//! Finding a group's coordinator (FindCoordinator) from the bootstrap brokers
//! and connecting to it.

use std::time::{Duration, Instant};

use kacrab_protocol::generated::find_coordinator_request::FindCoordinatorRequestData;
use kacrab_protocol::generated::ErrorCode;

use crate::connection::{Connection, ConnectionConfig};
use crate::error::{Error, Result};
use crate::wire::Rpc;

/// FindCoordinator's key type for a group (0; 1 is a transaction).
const GROUP_KEY_TYPE: i8 = 0;
/// First FindCoordinator from v4 on: keys are batched.
const BATCHED_VERSION: i16 = 4;
/// Pause between attempts while the coordinator is not available yet (on a
/// fresh cluster the offsets topic is created by the first lookup).
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// A connection to any one bootstrap broker that answers.
pub(crate) async fn bootstrap(config: &ConnectionConfig) -> Result<Connection> {
    let mut last = None;
    for address in config.bootstrap_addresses() {
        match Connection::open(address, config).await {
            Ok(connection) => return Ok(connection),
            // A refused authentication or TLS handshake is this client's
            // configuration, which another broker would refuse alike: said
            // as it is, not as "no broker could be used".
            Err(error) if error.is_fatal() => return Err(error),
            Err(error) => {
                log::debug!("bootstrap broker {address}: {error}");
                last = Some(error);
            }
        }
    }
    Err(Error::NoBroker {
        bootstrap: config.bootstrap.clone(),
        last: Box::new(
            last.unwrap_or_else(|| Error::Config("the bootstrap list is empty".to_owned())),
        ),
    })
}

/// A connection to `group`'s coordinator, retrying while the coordinator is
/// loading or not elected yet, for up to the request timeout.
pub(crate) async fn connect(config: &ConnectionConfig, group: &str) -> Result<Connection> {
    let deadline = Instant::now() + config.request_timeout;
    loop {
        let mut any = bootstrap(config).await?;
        match find(&mut any, group).await {
            Ok(address) if address == any.address() => return Ok(any),
            Ok(address) => return Connection::open(&address, config).await,
            Err(error) if retriable(&error) && Instant::now() < deadline => {
                log::debug!("coordinator of {group}: {error}; retrying");
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// `host:port` of `group`'s coordinator as `connection`'s broker knows it.
async fn find(connection: &mut Connection, group: &str) -> Result<String> {
    let version = connection.require::<FindCoordinatorRequestData>()?;
    let mut request = FindCoordinatorRequestData {
        key_type: GROUP_KEY_TYPE,
        ..Default::default()
    };
    if version >= BATCHED_VERSION {
        request.coordinator_keys = vec![group.to_owned().into()];
    } else {
        request.key = group.to_owned().into();
    }
    let response = connection.send(&request).await?;
    let api = FindCoordinatorRequestData::NAME;
    let (code, message, host, port) = if version >= BATCHED_VERSION {
        let coordinator = connection.first(response.coordinators, api, "coordinator")?;
        (
            coordinator.error_code,
            coordinator.error_message,
            coordinator.host,
            coordinator.port,
        )
    } else {
        (
            response.error_code,
            response.error_message,
            response.host,
            response.port,
        )
    };
    Error::check(api, code, message.as_ref())?;
    Ok(format!("{}:{port}", host.as_str()))
}

/// Whether a failed lookup is worth repeating: the coordinator is being
/// elected or loads its state.
pub(crate) fn retriable(error: &Error) -> bool {
    matches!(
        error.broker_code().map(ErrorCode::from),
        Some(
            ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::NotCoordinator
        )
    )
}

/// Whether a request failed because the connection is not to the group's
/// coordinator (any more).
pub(crate) fn moved(error: &Error) -> bool {
    matches!(
        error.broker_code().map(ErrorCode::from),
        Some(ErrorCode::CoordinatorNotAvailable | ErrorCode::NotCoordinator)
    )
}
