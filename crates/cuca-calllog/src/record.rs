//! `Record`, the one row a model call writes, and the small helpers every writer shares.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The value [`Record::phase`] carries on the row written as a call goes out.
///
/// There is deliberately no end phase: an end row omits the field, so the common case costs
/// nothing and "no phase" has exactly one meaning.
pub const PHASE_START: &str = "start";

/// How many characters [`clip_error`] keeps of a provider's message.
///
/// [`Record::error`] is a sentence beside a status code, not a report: the provider's own
/// words fit, and an upstream that answered with an HTML page does not get to own a line of
/// the log.
pub const MAX_ERROR_CHARS: usize = 400;

/// One model call as it happened: what was asked, what came back, and what the answer taught.
///
/// An attempt writes two rows paired by [`Record::id`]: a start row ([`Record::phase`] =
/// [`PHASE_START`]) the moment it goes out, and an end row (no phase) when it comes back or
/// is given up on. Every field is omitted from the JSON when it is empty, zero or false,
/// because the emptiness law applies to files as much as to screens: a call that never
/// reached an endpoint says nothing about tokens, and a `0` there would read as a
/// measurement. The one exception is [`Record::conn_reused`], whose `false` is the finding.
///
/// Build one with `..Default::default()`, so a field added later does not break the caller:
///
/// ```
/// use cuca_calllog::Record;
/// let row = Record { model: "gpt-x".into(), messages: 3, ..Default::default() };
/// assert_eq!(serde_json::to_string(&row).unwrap(), r#"{"model":"gpt-x","messages":3}"#);
/// ```
///
/// The prompts are never in a row: the record carries the *shape* of a request (how many
/// messages, how many tools, which knobs, which ceiling), and the bodies only under the
/// [`BODIES_ENV_VAR`](crate::BODIES_ENV_VAR) pin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    /// When this row was written, RFC 3339 UTC with milliseconds: the moment an attempt went
    /// out on a start row, the moment it came back on an end row. Filled in by
    /// [`CallLog::append`](crate::CallLog::append) when left empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ts: String,
    /// Pairs the two rows one attempt writes ([`new_id`]). Random rather than a counter,
    /// because several agents and processes append to one file and a counter would need a
    /// lock that says nothing a random token does not.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The invocation this call belongs to. It is what makes the file joinable: without it a
    /// reader can attribute rows only by clock, in a file several runs append to. It is on
    /// both rows of a pair, because the end row carries the cost and the finish, and a
    /// reader filtering by run must not have to pair rows first.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub run: String,
    /// [`PHASE_START`] on the row written the moment a call goes out, absent on the row
    /// written when it comes back. A start with no end beside it is a call still in flight,
    /// which is exactly the state that used to be invisible.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// What the call was for (`turn`, `leaf`, `compile`, `brief`), set by whoever made it.
    /// Empty for a call nobody located, which is honest: an untagged row is still a row.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tag: String,
    /// The work the call belongs to, where the caller knows one: a plan node or a task id.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// The model that was asked for.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The model the server says answered. Beside [`Record::model`] it is the difference
    /// between "this model is slow" and "one endpoint serving it is slow".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub served: String,
    /// The reasoning effort that actually travelled, in the wire's shape: a word,
    /// `"NNN tokens"` for a budget, or `"off"`. What was sent, not what the caller wanted,
    /// because the two differ on every endpoint that refuses a disable.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub effort: String,
    /// The caller's pinned effort word when the call carried something else; empty when
    /// there was no pin or the pin itself travelled, so an ordinary row gains nothing.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub effort_pin: String,
    /// The ceiling that travelled (the caller's answer plus the room a thinking pass is
    /// given), not the figure the caller started from: the gap between them is exactly the
    /// bug of a thinking pass eating the answer.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub max_tokens: u64,
    /// How many messages the request carried. A count, never content.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub messages: u64,
    /// How many tools the request offered. A count, never content.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub tools: u64,
    /// Whether the request asked for a streamed answer.
    #[serde(skip_serializing_if = "is_false")]
    pub stream: bool,
    /// 1-based over the transport's retry loop, so a call paced four times leaves four
    /// attempts that can be told apart.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub attempt: u32,
    /// Which rungs of the endpoint-refusal ladder this body had already climbed
    /// (`reasoning`, `max_tokens`, `tools`), so a degraded request is never mistaken for the
    /// one the caller wrote.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relaxed: Vec<String>,
    /// The HTTP status the server answered with.
    #[serde(skip_serializing_if = "is_zero_u16")]
    pub status: u16,
    /// How long the attempt took, in milliseconds.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub ms: u64,
    /// The finish reason the server gave (`stop`, `length`, `tool_calls`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub finish: String,
    /// Set only on an end row nobody on the call's path wrote, and says who closed it:
    /// `hopped` (another attempt began first), `cancelled` or `deadline` (the caller's own
    /// context ended it), `abandoned` (the call returned and nothing wrote the row). Every
    /// start row gets a row under it; without this, a forgotten end reads as a call in
    /// flight forever. See [`Ended`](crate::Ended).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ended: String,
    /// The wait before the first token, in milliseconds, on a streamed call. Absent on a
    /// call that was not streamed, where first and last token arrive together and absent is
    /// honest rather than instant.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub ttft_ms: u64,
    /// When the watch planned to start pricing a second request, derived at send time. It
    /// is never a deadline (it was once named `deadline_ms`, and readers took it for the
    /// bound that cut the call): nothing ends a call when it passes. The rows where it was
    /// set and not reached say it was set in the right place.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub hazard_ceiling_ms: u64,
    /// The bound that actually ended this attempt, in milliseconds. With
    /// [`Record::applied`] it says what happened, where [`Record::hazard_ceiling_ms`] says
    /// what was planned. Absent on every attempt no bound of ours ended.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub applied_ms: u64,
    /// What to call the bound in [`Record::applied_ms`]; absent when none ended the call.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub applied: String,
    /// Marks an arm cancelled because another arm of the same hedge answered first. It is
    /// the difference between exhaust and failure: the losing arm's row says `cancelled`
    /// like any abandoned call, yet it is the price of a race that was won.
    #[serde(skip_serializing_if = "is_false")]
    pub exhaust: bool,
    /// The machine the routing preference named; empty for an endpoint that is not a router
    /// or a request with no preference.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lane: String,
    /// Marks a call rescued by a second request to another lane; both halves leave rows,
    /// and this is what says they were a pair.
    #[serde(skip_serializing_if = "is_false")]
    pub hedged: bool,
    /// The comeback instruction a refusal carried, in seconds (`Retry-After`, or the wait
    /// the server named in its body). The one number that makes a same-machine retry legal:
    /// a log without it cannot say whether any paced retry obeyed it.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub retry_after: f64,
    /// Whether this attempt rode a connection the pool already had. A bool rather than
    /// inferred from a zero handshake, because "the pool was warm" and "nothing was
    /// measured" are different facts. `Some(false)` is written out (a cold connection is
    /// the finding); `None` means no trace was taken and omits the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn_reused: Option<bool>,
    /// DNS time of opening a connection, in milliseconds; absent on a reused connection
    /// because it did not happen.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub dns_ms: u64,
    /// TCP connect time, in milliseconds; absent on a reused connection.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub connect_ms: u64,
    /// TLS handshake time, in milliseconds; absent on a reused connection.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub tls_ms: u64,
    /// How long the stream had been silent when something was done about it.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub silence_ms: u64,
    /// What was done (`hedge`, `ask`, `report`, `escalate`, `commit`), in the controller's
    /// own words; absent on a call never acted on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// The controller's machine word for what it decided on; absent when nothing was acted on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Why a hedge the controller called for never reached the wire (`plan cannot pay`,
    /// `no alt`, `no room`); absent when nothing was refused.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub refused: String,
    /// How many requests this one question put on the wire, counting the original. One is
    /// the ordinary case and is left off the row (0 and 1 are both written as nothing, and
    /// read back as 0).
    #[serde(skip_serializing_if = "is_at_most_one_u32")]
    pub arms: u32,
    /// What the arms that did not answer cost, in US dollars.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub waste_usd: f64,
    /// The expected remaining wait, in seconds, that a decision was made on. A row that
    /// recorded the action without it could only confirm what somebody already suspected.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub wait_s: f64,
    /// What acting was expected to cost, in seconds, at the moment of the act.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub cost_s: f64,
    /// One sentence about something this call decided that no other field can say. Empty on
    /// almost every row; it is also where a value JSON cannot spell is named (a non-finite
    /// float is taken off the row and described here, never costing the row).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Prompt tokens, as the server counted them.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub prompt_tokens: u64,
    /// Completion tokens, as the server counted them.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub completion_tokens: u64,
    /// Reasoning tokens, where the server reports them.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub reasoning_tokens: u64,
    /// Prompt tokens served from the server's cache, where it reports them.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub cached_tokens: u64,
    /// Prompt tokens written to the server's cache (Anthropic's `cache_creation_input_tokens`),
    /// where it reports them.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cache_write_tokens: u64,
    /// What the call cost in USD: the server's own figure where it reports one, else priced
    /// from the call's token kinds by a price table; [`Record::cost_source`] says which.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub cost: f64,
    /// Where [`Record::cost`] came from: `provider` (the server's figure), the price table and
    /// its date (`LiteLLM model_prices_and_context_window.json, litellm 1.110.2 (2026-12-02)`),
    /// or `unknown: …` saying why the call has no cost (a model the table does not price), in
    /// which case `cost` is absent, never a 0 that means "free".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cost_source: String,
    /// The provider's own sentence, clipped by [`clip_error`]: a provider that answers with a
    /// stack trace or an HTML page would otherwise put a screenful into every line.
    ///
    /// A provider's sentence can quote the request, so without the bodies pin a writer puts
    /// it here through [`redact_error`](crate::redact_error), which keeps the sentence and
    /// replaces every stretch quoting what was sent with
    /// [`QUOTE_MARKER`](crate::QUOTE_MARKER). A stream's own bytes are the answer, not a
    /// sentence: without the pin a writer names their kind only (`cuca-client` does).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The quirks this answer taught the adapter, by their memo names. A list, because one
    /// refusal can name more than one field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub learned: Vec<String>,
    /// The thinking-ate-the-answer signature: no text, a `length` finish, and the whole
    /// ceiling spent.
    #[serde(skip_serializing_if = "is_false")]
    pub empty_at_ceiling: bool,
    /// How many values each redaction rule replaced in what this call recorded, by rule
    /// name (`{"openai-key":1}`): the recorder's redaction at write time. Counts only, never
    /// a value; absent when nothing was replaced or nothing redacts.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, u64>,
    /// The request body, whole and unclipped, present ONLY under the bodies pin: the reason
    /// to turn it on is that something in the exact bytes is wrong. Without the pin,
    /// [`CallLog::append`](crate::CallLog::append) drops it, because a transcript is the
    /// person's own data and a debug log that quietly accumulates it is a liability.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub request_body: String,
    /// The response body, whole and unclipped, under the same rule as
    /// [`Record::request_body`].
    #[serde(skip_serializing_if = "String::is_empty")]
    pub response_body: String,
}

impl Record {
    /// Whether this is a start row ([`Record::phase`] is [`PHASE_START`]).
    pub fn is_start(&self) -> bool {
        self.phase == PHASE_START
    }
}

/// Who closed an attempt whose own path did not write its end row; the word in
/// [`Record::ended`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ended {
    /// Another attempt of the same call began before this one's row was written.
    Hopped,
    /// The caller dropped or cancelled the call.
    Cancelled,
    /// The caller's (or the client's) deadline ended the call.
    Deadline,
    /// The call returned and nothing wrote its row: the default on a plain drop.
    Abandoned,
}

impl Ended {
    /// The word written into [`Record::ended`].
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Hopped => "hopped",
            Ended::Cancelled => "cancelled",
            Ended::Deadline => "deadline",
            Ended::Abandoned => "abandoned",
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Mints the token that pairs one attempt's two rows: four random bytes, eight lowercase hex
/// characters — enough that two live calls in one file will not collide, and short enough to
/// sit on a line a person is reading.
pub fn new_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// How a provider's message becomes [`Record::error`]: at most [`MAX_ERROR_CHARS`] characters
/// (Unicode scalar values, never cutting one in half), with a trailing `…` when anything was
/// cut. It lives here rather than at each call site so every writer clips the same way and a
/// reader can trust what a trailing ellipsis means.
pub fn clip_error(message: &str) -> String {
    let trimmed = message.trim();
    match trimmed.char_indices().nth(MAX_ERROR_CHARS) {
        None => trimmed.to_owned(),
        Some((cut, _)) => {
            // Keep MAX_ERROR_CHARS - 1 characters and the ellipsis, so a clipped error is
            // exactly MAX_ERROR_CHARS characters long.
            let keep = trimmed[..cut]
                .char_indices()
                .last()
                .map_or(0, |(last, _)| last);
            let mut clipped = String::with_capacity(keep + '…'.len_utf8());
            clipped.push_str(&trimmed[..keep]);
            clipped.push('…');
            clipped
        }
    }
}

fn is_zero_u64(value: &u64) -> bool {
    *value == 0
}

fn is_zero_u32(value: &u32) -> bool {
    *value == 0
}

/// The seed: "One is the ordinary case and is left off the row."
fn is_at_most_one_u32(value: &u32) -> bool {
    *value <= 1
}

fn is_zero_u16(value: &u16) -> bool {
    *value == 0
}

fn is_zero_f64(value: &f64) -> bool {
    *value == 0.0
}

fn is_false(value: &bool) -> bool {
    !*value
}
