//! Trace context carried through a task: a record's W3C `traceparent`
//! header (<https://www.w3.org/TR/trace-context/>) continues in the
//! records it causes, under a span of its own per task that processes it.
//!
//! With [`TracingConfig::enabled`], each record a task processes runs in a
//! `tracing` span `kstreams.process` (fields: task, topic, partition,
//! offset, trace id, span id, parent span id), child of the context in the
//! record's `traceparent`; every record its processing sends through a
//! sink (output and repartition topics; caches and suppression keep
//! headers, so a record they emit later carries the context of the record
//! that last updated it) carries `traceparent` with the same trace id and
//! this span's id as parent. A record without one starts a trace when
//! [`TracingConfig::start_traces`] says so, sampled at
//! [`TracingConfig::sample_ratio`]; a record with one keeps its sampled
//! flag (parent-based sampling). Records of a sampled-out trace still
//! carry the trace on, flagged not sampled, and open no span.
//!
//! With the feature `opentelemetry` and a `tracing-opentelemetry` layer in
//! the application's subscriber, the span is an OpenTelemetry span, child
//! of the record's `traceparent`, and its ids are what the outputs carry
//! (see `otel_bridge`); `kstreams::otlp` exports them over OTLP.
//!
//! Off (the default), a task asks one boolean per record and nothing else.

use kstreams_dsl::__private::ProducedRecord;
use kstreams_record::Headers;

#[cfg(feature = "opentelemetry")]
mod otel_bridge;

/// The W3C header name.
pub const TRACEPARENT: &str = "traceparent";

/// A parsed `traceparent`: `00-<trace id>-<parent span id>-<flags>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace, 16 bytes, not all zero.
    pub trace_id: [u8; 16],
    /// The span that caused the record, 8 bytes, not all zero.
    pub parent_id: [u8; 8],
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceParent {
    /// Parses a header value; `None` when it is not a valid traceparent
    /// (a later version's value is read by its version-00 prefix, as the
    /// specification asks).
    pub fn parse(value: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(value).ok()?.trim();
        let mut parts = text.splitn(5, '-');
        let version = parts.next()?;
        let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        if version.len() != 2 || version == "ff" || !is_lower_hex(version) {
            return None;
        }
        // Version 00 has exactly four parts; later ones may append more.
        if version == "00" && rest.is_some() {
            return None;
        }
        let trace_id: [u8; 16] = decode_hex(trace)?;
        let parent_id: [u8; 8] = decode_hex(parent)?;
        let [flags]: [u8; 1] = decode_hex(flags)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            parent_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The record's traceparent, if it has a valid one (the last header of
    /// that name).
    pub fn from_headers(headers: &Headers) -> Option<Self> {
        Self::parse(headers.last(TRACEPARENT)?.value.as_deref()?)
    }

    /// The header value, version 00.
    pub fn to_header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            u8::from(self.sampled)
        )
    }

    /// The trace id in hex, as tracing backends show it.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn decode_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !is_lower_hex(s) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// How tasks trace records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TracingConfig {
    /// Whether records are traced at all (`kstreams.tracing.enabled`,
    /// default false).
    pub enabled: bool,
    /// Whether a record without a `traceparent` starts a trace
    /// (`kstreams.tracing.start.traces`, default true once enabled).
    pub start_traces: bool,
    /// The share of the traces started here that are sampled, 0 to 1
    /// (`kstreams.tracing.sample.ratio`, default 1).
    pub sample_ratio: f64,
}

impl Default for TracingConfig {
    /// Off.
    fn default() -> Self {
        Self {
            enabled: false,
            start_traces: true,
            sample_ratio: 1.0,
        }
    }
}

impl TracingConfig {
    /// Tracing on, starting traces for records without one, all sampled.
    pub fn enabled() -> Self {
        Self {
            enabled: true,
            ..Self::default()
        }
    }
}

/// Random ids, from the process' random source (each id is fresh).
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    loop {
        let mut filled = 0;
        while filled < N {
            let random = *uuid::Uuid::new_v4().as_bytes();
            let take = (N - filled).min(random.len());
            out[filled..filled + take].copy_from_slice(&random[..take]);
            filled += take;
        }
        // All-zero ids are invalid.
        if out.iter().any(|b| *b != 0) {
            return out;
        }
    }
}

/// One record's trace in a task, from before its processing to its
/// outputs.
pub(crate) struct RecordTrace {
    /// What the outputs carry: the trace, this task's span as parent.
    context: TraceParent,
    /// Outputs already pending before the record: not its own.
    outputs_before: usize,
    span: Option<tracing::span::EnteredSpan>,
}

/// Starts the trace of a record about to be processed by `task`, or
/// `None` when tracing is off or the record is not traced. The record's
/// `traceparent` becomes its span's, as a consumer's instrumentation
/// injects its own context: what the processors see and every output
/// they make from the record's headers (an async call's, finished later,
/// too) continue the trace from this span.
pub(crate) fn begin(
    config: &TracingConfig,
    task: impl std::fmt::Display,
    record: &mut kstreams_dsl::__private::ConsumedRecord,
    outputs_before: usize,
) -> Option<RecordTrace> {
    if !config.enabled {
        return None;
    }
    let parent = TraceParent::from_headers(&record.headers);
    let (trace_id, sampled) = match &parent {
        Some(p) => (p.trace_id, p.sampled),
        None if config.start_traces => {
            let draw = u64::from_be_bytes(random_bytes::<8>()) as f64 / u64::MAX as f64;
            (random_bytes::<16>(), draw < config.sample_ratio)
        }
        None => return None,
    };
    #[allow(unused_mut)] // set from the span under OpenTelemetry
    let mut context = TraceParent {
        trace_id,
        parent_id: random_bytes::<8>(),
        sampled,
    };
    let span = sampled.then(|| {
        // A root in `tracing`'s tree: the record's trace is its own (or its
        // traceparent's), not that of a span the stream thread is in.
        let span = tracing::info_span!(
            parent: None,
            "kstreams.process",
            // OpenTelemetry's messaging conventions, for its backends.
            otel.kind = "consumer",
            messaging.system = "kafka",
            task_id = %task,
            topic = &*record.topic,
            partition = record.partition,
            offset = record.offset,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
            parent_span_id = parent.map(|p| hex(&p.parent_id)).as_deref(),
        );
        #[cfg(feature = "opentelemetry")]
        otel_bridge::adopt(&span, parent.as_ref(), &mut context);
        span.record("trace_id", context.trace_id_hex().as_str());
        span.record("span_id", hex(&context.parent_id).as_str());
        span.entered()
    });
    record.headers.remove(TRACEPARENT);
    record
        .headers
        .add(TRACEPARENT, Some(context.to_header().as_bytes()));
    Some(RecordTrace {
        context,
        outputs_before,
        span,
    })
}

impl RecordTrace {
    /// The record was processed: its outputs (`outputs`, the task's pending
    /// ones, those from `outputs_before` on) carry the trace on.
    pub(crate) fn finish(self, outputs: &mut [ProducedRecord]) {
        let header = self.context.to_header();
        // Sink outputs only (repartition topics included): changelog
        // records keep the bytes Kafka Streams writes, and dead-letter and
        // late-record outputs keep the failed record's own headers.
        for output in outputs
            .iter_mut()
            .skip(self.outputs_before)
            .filter(|o| o.sink.is_some())
        {
            output.headers.remove(TRACEPARENT);
            output.headers.add(TRACEPARENT, Some(header.as_bytes()));
        }
        drop(self.span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_examples_parse_and_print_back() {
        let parsed = TraceParent::parse(EXAMPLE.as_bytes()).unwrap();
        assert_eq!(parsed.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(parsed.sampled);
        assert_eq!(parsed.to_header(), EXAMPLE);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!TraceParent::parse(unsampled.as_bytes()).unwrap().sampled);
        // A later version is read by its version-00 fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(TraceParent::parse(later.as_bytes()), Some(parsed));
    }

    #[test]
    fn invalid_traceparents_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad}");
        }
    }
}
