//! A small builder over the `opentelemetry-proto` span message, so the mappings read as attribute lists.

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span, status, Span, Status};

use crate::ids::{SpanId, TraceId};

/// A proto [`Span`] being filled in.
#[derive(Debug, Clone)]
pub(crate) struct SpanBuilder {
    span: Span,
}

impl SpanBuilder {
    /// A span of `kind` named `name` in `trace`, with its own id and, where it has one, its
    /// parent's.
    pub(crate) fn new(
        trace: TraceId,
        id: SpanId,
        parent: Option<SpanId>,
        name: String,
        kind: span::SpanKind,
    ) -> SpanBuilder {
        SpanBuilder {
            span: Span {
                trace_id: trace.to_vec(),
                span_id: id.to_vec(),
                parent_span_id: parent.map(|p| p.to_vec()).unwrap_or_default(),
                name,
                kind: kind as i32,
                ..Span::default()
            },
        }
    }

    /// Start and end, in milliseconds since the epoch; an end before the start is clamped to
    /// the start, because a backend rejects a negative duration and the clocks that stamped
    /// the records are only as good as the host's.
    pub(crate) fn times_ms(mut self, start_ms: u64, end_ms: u64) -> SpanBuilder {
        self.span.start_time_unix_nano = ms_to_nanos(start_ms);
        self.span.end_time_unix_nano = ms_to_nanos(end_ms.max(start_ms));
        self
    }

    pub(crate) fn str(mut self, key: &str, value: impl Into<String>) -> SpanBuilder {
        self.span
            .attributes
            .push(kv(key, string_value(value.into())));
        self
    }

    /// A string attribute, left off when empty: an empty field in a record means "not
    /// recorded", and an empty attribute would read as a value.
    pub(crate) fn str_nonempty(self, key: &str, value: &str) -> SpanBuilder {
        if value.is_empty() {
            self
        } else {
            self.str(key, value)
        }
    }

    pub(crate) fn int(mut self, key: &str, value: u64) -> SpanBuilder {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.span
            .attributes
            .push(kv(key, any_value::Value::IntValue(value)));
        self
    }

    /// An integer attribute, left off when zero (the call log's "not measured").
    pub(crate) fn int_nonzero(self, key: &str, value: u64) -> SpanBuilder {
        if value == 0 {
            self
        } else {
            self.int(key, value)
        }
    }

    pub(crate) fn float(mut self, key: &str, value: f64) -> SpanBuilder {
        self.span
            .attributes
            .push(kv(key, any_value::Value::DoubleValue(value)));
        self
    }

    pub(crate) fn bool(mut self, key: &str, value: bool) -> SpanBuilder {
        self.span
            .attributes
            .push(kv(key, any_value::Value::BoolValue(value)));
        self
    }

    pub(crate) fn str_array(mut self, key: &str, values: &[&str]) -> SpanBuilder {
        let values = values
            .iter()
            .map(|v| AnyValue {
                value: Some(string_value((*v).to_owned())),
            })
            .collect();
        self.span
            .attributes
            .push(kv(key, any_value::Value::ArrayValue(ArrayValue { values })));
        self
    }

    /// The error status, with `message` as its description.
    pub(crate) fn error(mut self, message: impl Into<String>) -> SpanBuilder {
        self.span.status = Some(Status {
            message: message.into(),
            code: status::StatusCode::Error as i32,
        });
        self
    }

    /// The OK status: the operation ended well. The conventions leave a success unset, but a
    /// native OpenInference instrumentor sets OK, and Phoenix shows an unset status as
    /// neither; cuca sets it only where the records say the call ended well.
    pub(crate) fn ok(mut self) -> SpanBuilder {
        self.span.status = Some(Status {
            message: String::new(),
            code: status::StatusCode::Ok as i32,
        });
        self
    }

    /// A span event at `time_ms` with string attributes.
    pub(crate) fn event(
        mut self,
        name: &str,
        time_ms: u64,
        attributes: &[(&str, &str)],
    ) -> SpanBuilder {
        self.span.events.push(span::Event {
            time_unix_nano: ms_to_nanos(time_ms),
            name: name.to_owned(),
            attributes: attributes
                .iter()
                .map(|(k, v)| kv(k, string_value((*v).to_owned())))
                .collect(),
            ..span::Event::default()
        });
        self
    }

    /// A link to a span in another trace (a call a fork copied from its parent), saying
    /// what it links to in `cuca.link.kind`.
    pub(crate) fn link(mut self, trace: TraceId, id: SpanId, kind: &str) -> SpanBuilder {
        self.span.links.push(span::Link {
            trace_id: trace.to_vec(),
            span_id: id.to_vec(),
            attributes: vec![kv(
                crate::conventions::CUCA_LINK_KIND,
                string_value(kind.to_owned()),
            )],
            ..span::Link::default()
        });
        self
    }

    /// Whether an attribute `key` is already set.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.span.attributes.iter().any(|kv| kv.key == key)
    }

    pub(crate) fn build(self) -> Span {
        self.span
    }
}

/// OpenInference's token counts (`llm.token_count.prompt`, `.completion`, `.total`) beside
/// the GenAI ones: Phoenix derives them from the GenAI keys too, but only fills what a span
/// does not carry, and other OpenInference readers know only these.
pub(crate) fn openinference_tokens(span: SpanBuilder, prompt: u64, completion: u64) -> SpanBuilder {
    if prompt == 0 && completion == 0 {
        return span;
    }
    span.int(crate::conventions::LLM_TOKEN_COUNT_PROMPT, prompt)
        .int(crate::conventions::LLM_TOKEN_COUNT_COMPLETION, completion)
        .int(
            crate::conventions::LLM_TOKEN_COUNT_TOTAL,
            prompt.saturating_add(completion),
        )
}

fn string_value(value: String) -> any_value::Value {
    any_value::Value::StringValue(value)
}

pub(crate) fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// Milliseconds to the nanoseconds OTLP counts in, saturating rather than wrapping.
pub(crate) fn ms_to_nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}
