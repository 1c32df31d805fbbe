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

    /// A signed integer attribute (an exit code may be negative on some systems).
    pub(crate) fn signed(mut self, key: &str, value: i64) -> SpanBuilder {
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

    /// A span event at `time_ms` with typed attributes.
    pub(crate) fn event_kv(
        mut self,
        name: &str,
        time_ms: u64,
        attributes: Vec<KeyValue>,
    ) -> SpanBuilder {
        self.span.events.push(span::Event {
            time_unix_nano: ms_to_nanos(time_ms),
            name: name.to_owned(),
            attributes,
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

/// Whether `OTEL_SEMCONV_STABILITY_OPT_IN` asks for the latest experimental GenAI
/// conventions: a comma-separated list holding `gen_ai_latest_experimental`.
pub(crate) fn gen_ai_latest_experimental(opt_in: Option<&str>) -> bool {
    opt_in.is_some_and(|list| {
        list.split(',')
            .any(|value| value.trim() == crate::conventions::GEN_AI_LATEST_EXPERIMENTAL)
    })
}

/// Read once: the process's `OTEL_SEMCONV_STABILITY_OPT_IN`.
pub(crate) fn latest_from_env() -> bool {
    static LATEST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LATEST.get_or_init(|| {
        gen_ai_latest_experimental(
            std::env::var(crate::conventions::SEMCONV_STABILITY_OPT_IN)
                .ok()
                .as_deref(),
        )
    })
}

/// Every token kind a call's answer reported, and its cost, in the GenAI keys and
/// OpenInference's: cache reads and writes (`gen_ai.usage.cache_read.input_tokens`,
/// `…cache_creation.input_tokens`, `llm.token_count.prompt_details.cache_read`/`cache_write`),
/// reasoning (`llm.token_count.completion_details.reasoning`, and with `latest`, the newest
/// experimental `gen_ai.usage.reasoning.output_tokens`), and `llm.cost.total`/`prompt`/
/// `completion` priced by the configured table, which `cuca.cost.priced_by` names; a model
/// the table does not price gets `cuca.cost.unknown` and no cost, never a 0.
pub(crate) fn token_detail(
    mut span: SpanBuilder,
    detail: &cuca_events::TokenDetail,
    model: &str,
    latest: bool,
) -> SpanBuilder {
    use crate::conventions as c;
    let usage = cuca_cost::Usage::from_detail(detail);
    let written = usage.cache_write_5m + usage.cache_write_1h;
    if detail.cache_read.is_some() {
        span = span
            .int(c::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read)
            .int(c::LLM_TOKEN_COUNT_PROMPT_CACHE_READ, usage.cache_read);
    }
    if detail.cache_write.is_some() || detail.cache_write_5m.is_some() {
        span = span
            .int(c::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, written)
            .int(c::LLM_TOKEN_COUNT_PROMPT_CACHE_WRITE, written);
    }
    if let Some(reasoning) = detail.reasoning {
        span = span.int(c::LLM_TOKEN_COUNT_COMPLETION_REASONING, reasoning);
        if latest {
            span = span.int(c::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, reasoning);
        }
    }
    if usage.total() == 0 {
        return span;
    }
    match cuca_cost::configured() {
        Ok(table) => match table.price(model) {
            Some(price) => {
                let cost = price.cost(&usage);
                span = span
                    .float(
                        c::LLM_COST_PROMPT,
                        cost.input + cost.cache_read + cost.cache_write_5m + cost.cache_write_1h,
                    )
                    .float(c::LLM_COST_COMPLETION, cost.output + cost.reasoning)
                    .float(c::LLM_COST_TOTAL, cost.total())
                    .str(c::CUCA_COST_PRICED_BY, table.source().to_string());
            }
            None => {
                span = span.str(
                    c::CUCA_COST_UNKNOWN,
                    format!("no price for model {model:?} in {}", table.source()),
                );
            }
        },
        Err(error) => span = span.str(c::CUCA_COST_UNKNOWN, error.to_string()),
    }
    span
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
