//! The record spans under OpenTelemetry (feature `opentelemetry`): when the
//! application's `tracing` subscriber has a `tracing-opentelemetry` layer,
//! a record's `kstreams.process` span *is* an OpenTelemetry span, so its
//! ids are the OpenTelemetry SDK's. The span is made a child of the
//! record's `traceparent` (a remote parent), and the ids the outputs carry
//! are read back from it: the trace id a backend shows for the span is the
//! one on the output records, and a processor's own spans (an HTTP client's
//! in an async call, say) nest under it.
//!
//! Without such a layer the span has no OpenTelemetry context and the ids
//! kstreams drew stay.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::TraceParent;

/// Makes `span` the child of `parent` (the record's `traceparent`, if any)
/// and, when an OpenTelemetry layer records it, sets `context` to the
/// span's own trace, span id and sampling decision.
pub(crate) fn adopt(span: &tracing::Span, parent: Option<&TraceParent>, context: &mut TraceParent) {
    if span.is_disabled() {
        return;
    }
    if let Some(parent) = parent {
        let flags = if parent.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let remote = SpanContext::new(
            TraceId::from_bytes(parent.trace_id),
            SpanId::from_bytes(parent.parent_id),
            flags,
            true,
            TraceState::default(),
        );
        // Fails only without an OpenTelemetry layer (nothing to adopt) or
        // once the span started, which it has not.
        if span
            .set_parent(opentelemetry::Context::new().with_remote_span_context(remote))
            .is_err()
        {
            return;
        }
    }
    let started = span.context();
    let own = started.span().span_context().clone();
    if own.is_valid() {
        context.trace_id = own.trace_id().to_bytes();
        context.parent_id = own.span_id().to_bytes();
        context.sampled = own.is_sampled();
    }
}
