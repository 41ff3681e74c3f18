//! librdkafka's names of its error codes: Kafka's protocol names
//! (`MSG_SIZE_TOO_LARGE`) and, with a leading underscore, librdkafka's own
//! (`_MSG_TIMED_OUT`), which production handlers match on as Kafka Streams'
//! handlers match on exception classes.

use std::ffi::CStr;

use rdkafka::bindings as rd;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};

/// librdkafka's name of `code`.
pub(crate) fn error_name(code: RDKafkaErrorCode) -> String {
    let Ok(err) = RDKafkaRespErr::try_from(code as i32) else {
        return format!("{code:?}");
    };
    // SAFETY: `rd_kafka_err2name` takes any error value and returns a
    // non-null, NUL-terminated string: an entry of librdkafka's static
    // table, or, for a value outside it, a buffer of the calling thread
    // that only its next call overwrites. Either stays valid while it is
    // copied here, before anything else runs on this thread.
    let name = unsafe { CStr::from_ptr(rd::rd_kafka_err2name(err)) };
    name.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kafkas_and_librdkafkas_own_start_with_an_underscore() {
        assert_eq!(
            error_name(RDKafkaErrorCode::MessageSizeTooLarge),
            "MSG_SIZE_TOO_LARGE"
        );
        assert_eq!(
            error_name(RDKafkaErrorCode::NotEnoughReplicas),
            "NOT_ENOUGH_REPLICAS"
        );
        assert_eq!(
            error_name(RDKafkaErrorCode::MessageTimedOut),
            "_MSG_TIMED_OUT"
        );
    }
}
