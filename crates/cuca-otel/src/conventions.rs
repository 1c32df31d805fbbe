//! The attribute keys and values cuca sends: the OpenTelemetry GenAI semantic conventions, and cuca's own `cuca.*` keys.
//!
//! The GenAI keys are spelled out here rather than taken from
//! `opentelemetry-semantic-conventions`, because that crate marks them deprecated: they moved
//! to the conventions' own GenAI repository, which ships no Rust constants. The names follow
//! the GenAI span conventions (semantic conventions 1.37 and later: `gen_ai.provider.name`,
//! the opt-in `gen_ai.input.messages`/`gen_ai.output.messages`/`gen_ai.system_instructions`).
//! `gen_ai.system`, the name before 1.37, is sent beside `gen_ai.provider.name` with the same
//! value, so backends that read either one see the provider.

/// Required: what the span does (`chat` for every model call cuca records).
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The provider (`openai`, `llamacpp`, …), where the record names one.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The provider under its name before semantic conventions 1.37.
pub const GEN_AI_SYSTEM: &str = "gen_ai.system";
/// The model asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// The model that answered.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// The answer ceiling that travelled.
pub const GEN_AI_REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// The sampling temperature asked for.
pub const GEN_AI_REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
/// Prompt tokens.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Completion tokens.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Of the input tokens, those read from the provider's cache (a part of
/// [`GEN_AI_USAGE_INPUT_TOKENS`], which counts every prompt token).
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Of the input tokens, those written to the provider's cache.
pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str =
    "gen_ai.usage.cache_creation.input_tokens";
/// Of the output tokens, those spent reasoning: the newest experimental name, sent only when
/// `OTEL_SEMCONV_STABILITY_OPT_IN` holds [`GEN_AI_LATEST_EXPERIMENTAL`].
pub const GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// The environment variable the GenAI conventions' transition plan names.
pub const SEMCONV_STABILITY_OPT_IN: &str = "OTEL_SEMCONV_STABILITY_OPT_IN";
/// The value of [`SEMCONV_STABILITY_OPT_IN`] asking for the latest experimental GenAI
/// conventions and not the older ones.
pub const GEN_AI_LATEST_EXPERIMENTAL: &str = "gen_ai_latest_experimental";
/// Why generation stopped, as a string array.
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// The conversation (for cuca: the session id) a call belongs to.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// The agent making the call, where the request names one.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// Opt-in content: the system prompts, as a JSON array of parts.
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// Opt-in content: the conversation sent, as a JSON array of messages.
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// Opt-in content: the answer, as a JSON array of messages.
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// The class of error that ended the operation (an HTTP status code, or a cuca word).
pub const ERROR_TYPE: &str = "error.type";
/// The `error.type` of a call whose records say it was cut short (its `CallIncomplete`).
pub const ERROR_TYPE_INCOMPLETE: &str = "incomplete";
/// OpenInference: the prefix of `llm.tools.{i}.tool.json_schema`, one tool the request
/// offered, as the JSON of an OpenAI function definition.
pub const LLM_TOOLS_PREFIX: &str = "llm.tools";
/// The HTTP status the server answered with.
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// The resource's service name.
pub const SERVICE_NAME: &str = "service.name";

/// OpenInference (Arize Phoenix's conventions): what a span is, `LLM`, `CHAIN` or `AGENT`.
/// Phoenix shows a span without it as `unknown`, and counts tokens only on `LLM` spans.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
/// OpenInference: the resource attribute naming the Phoenix project the spans go to.
pub const OPENINFERENCE_PROJECT_NAME: &str = "openinference.project.name";
/// OpenInference: the session a span belongs to; Phoenix's Sessions tab groups traces by it.
pub const SESSION_ID: &str = "session.id";
/// OpenInference: what a trace's root shows as its input (with content only).
pub const INPUT_VALUE: &str = "input.value";
/// OpenInference: the MIME type of [`INPUT_VALUE`].
pub const INPUT_MIME_TYPE: &str = "input.mime_type";
/// OpenInference: what a trace's root shows as its output (with content only).
pub const OUTPUT_VALUE: &str = "output.value";
/// OpenInference: the MIME type of [`OUTPUT_VALUE`].
pub const OUTPUT_MIME_TYPE: &str = "output.mime_type";
/// OpenInference: the model, as Phoenix reads it for an LLM span.
pub const LLM_MODEL_NAME: &str = "llm.model_name";
/// OpenInference: prompt tokens of an LLM span.
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
/// OpenInference: completion tokens of an LLM span.
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
/// OpenInference: all tokens of an LLM span.
pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";
/// OpenInference: prompt tokens read from the cache (Phoenix shows them as cache hits).
pub const LLM_TOKEN_COUNT_PROMPT_CACHE_READ: &str = "llm.token_count.prompt_details.cache_read";
/// OpenInference: prompt tokens written to the cache.
pub const LLM_TOKEN_COUNT_PROMPT_CACHE_WRITE: &str = "llm.token_count.prompt_details.cache_write";
/// OpenInference: completion tokens spent reasoning.
pub const LLM_TOKEN_COUNT_COMPLETION_REASONING: &str =
    "llm.token_count.completion_details.reasoning";
/// OpenInference: the call's cost in USD.
pub const LLM_COST_TOTAL: &str = "llm.cost.total";
/// OpenInference: the prompt's cost in USD (uncached input, cache reads and writes).
pub const LLM_COST_PROMPT: &str = "llm.cost.prompt";
/// OpenInference: the completion's cost in USD (output and reasoning).
pub const LLM_COST_COMPLETION: &str = "llm.cost.completion";
/// Which price table priced the `llm.cost.*` figures, and its date.
pub const CUCA_COST_PRICED_BY: &str = "cuca.cost.priced_by";
/// Why a call carries no `llm.cost.*`: a model the price table does not know.
pub const CUCA_COST_UNKNOWN: &str = "cuca.cost.unknown";
/// OpenInference span kind of a model call.
pub const KIND_LLM: &str = "LLM";
/// OpenInference span kind of a step that is not itself a model call (an attempt on the wire).
pub const KIND_CHAIN: &str = "CHAIN";
/// The MIME type of plain text values.
pub const MIME_TEXT: &str = "text/plain";
/// The MIME type of JSON values.
pub const MIME_JSON: &str = "application/json";

/// The one operation cuca records: an OpenAI-compatible chat completion.
pub const OPERATION_CHAT: &str = "chat";

/// The session id, on the session's root span.
pub const CUCA_SESSION_ID: &str = "cuca.session.id";
/// The point this session was forked from, on every span of a fork.
pub const CUCA_SESSION_FORKED_FROM: &str = "cuca.session.forked_from";
/// Calls a fork copied from its parent: linked (to the spans their own session sent), not sent again.
pub const CUCA_FORK_INHERITED_CALLS: &str = "cuca.fork.inherited_calls";
/// On a link: what it links to (`inherited_call`: a call a fork copied from its parent).
pub const CUCA_LINK_KIND: &str = "cuca.link.kind";
/// A session call that is also a call-log call: the call log's row id of its attempt.
pub const CUCA_CALL_LOG_ID: &str = "cuca.call_log.id";
/// The turn number of a model call in its session, from 1, as `cuca replay --turn`, its
/// `--json` and the viewer number turns: one turn numbering everywhere.
pub const CUCA_TURN_NUMBER: &str = "cuca.turn.number";
/// The sequence of the turn's first record.
pub const CUCA_SEQUENCE_FIRST: &str = "cuca.sequence.first";
/// The sequence of the turn's last record.
pub const CUCA_SEQUENCE_LAST: &str = "cuca.sequence.last";
/// Why the call's records do not hold the whole call, from its `CallIncomplete` record (cut
/// short, a record that could not be written, …); absent for a call recorded whole.
pub const CUCA_CALL_INCOMPLETE: &str = "cuca.call.incomplete";
/// The recorded wall time of a call in milliseconds.
pub const CUCA_DURATION_MS: &str = "cuca.duration_ms";
/// Blocks the answer streamed.
pub const CUCA_BLOCKS: &str = "cuca.blocks";
/// Tool calls the answer held.
pub const CUCA_TOOL_CALLS: &str = "cuca.tool_calls";
/// The run id a call belongs to.
pub const CUCA_RUN: &str = "cuca.run";
/// What a call was for (`turn`, `compile`, …).
pub const CUCA_TAG: &str = "cuca.tag";
/// The unit of work a call belongs to.
pub const CUCA_NODE: &str = "cuca.node";
/// Attempts a call took on the wire.
pub const CUCA_ATTEMPTS: &str = "cuca.attempts";
/// The 1-based attempt number.
pub const CUCA_ATTEMPT: &str = "cuca.attempt";
/// The call log's row id pairing an attempt's two rows.
pub const CUCA_ATTEMPT_ID: &str = "cuca.attempt.id";
/// Who closed an attempt its own path did not end (`hopped`, `cancelled`, `deadline`, `abandoned`).
pub const CUCA_ENDED: &str = "cuca.ended";
/// Time to first token in milliseconds.
pub const CUCA_TTFT_MS: &str = "cuca.ttft_ms";
/// Reasoning tokens, where the server reported them.
pub const CUCA_USAGE_REASONING_TOKENS: &str = "cuca.usage.reasoning_tokens";
/// Prompt tokens served from the cache, where reported.
pub const CUCA_USAGE_CACHED_TOKENS: &str = "cuca.usage.cached_tokens";
/// What the provider said the call cost.
pub const CUCA_COST: &str = "cuca.cost";
/// The reasoning effort that travelled.
pub const CUCA_EFFORT: &str = "cuca.effort";
/// The thinking-ate-the-answer signature.
pub const CUCA_EMPTY_AT_CEILING: &str = "cuca.empty_at_ceiling";
/// The provider's clipped error sentence.
pub const CUCA_ERROR: &str = "cuca.error";
/// Opt-in content: the call log's recorded request body (only under the bodies pin).
pub const CUCA_REQUEST_BODY: &str = "cuca.request.body";
/// Opt-in content: the call log's recorded response body (only under the bodies pin).
pub const CUCA_RESPONSE_BODY: &str = "cuca.response.body";

/// The span event a [`cuca_events::SessionEvent::ModelSwap`] becomes.
pub const EVENT_MODEL_SWAP: &str = "cuca.model_swap";
/// The span event a [`cuca_events::SessionEvent::Fork`] audit record becomes.
pub const EVENT_FORK: &str = "cuca.fork";

/// OpenInference's span kind of a tool's execution: what a shell command's span is.
pub const KIND_TOOL: &str = "TOOL";
/// The name of a shell command's span.
pub const SPAN_SHELL: &str = "shell";
/// The command line a process ran (OpenTelemetry's process conventions).
pub const PROCESS_COMMAND_LINE: &str = "process.command_line";
/// Where it ran: relative to the workspace when inside it, as recorded.
pub const PROCESS_WORKING_DIRECTORY: &str = "process.working_directory";
/// The process's exit code.
pub const PROCESS_EXIT_CODE: &str = "process.exit.code";
/// Who ran the command (`bash -c`, `sh -c`), as the shell shim recorded it.
pub const CUCA_SHELL_ORIGIN: &str = "cuca.shell.origin";
/// The record's sequence.
pub const CUCA_SEQUENCE: &str = "cuca.sequence";
/// Bytes the command wrote on standard output.
pub const CUCA_SHELL_STDOUT_BYTES: &str = "cuca.shell.stdout.bytes";
/// Bytes it wrote on standard error.
pub const CUCA_SHELL_STDERR_BYTES: &str = "cuca.shell.stderr.bytes";
/// Opt-in content: the recorded tail of its standard output.
pub const CUCA_SHELL_STDOUT: &str = "cuca.shell.stdout";
/// Opt-in content: the recorded tail of its standard error.
pub const CUCA_SHELL_STDERR: &str = "cuca.shell.stderr";
/// The workspace snapshot a call's request reflects (its tree's address).
pub const CUCA_WORKSPACE_SNAPSHOT: &str = "cuca.workspace.snapshot";
/// Files the snapshot says changed since the previous one (all of them, whether or not
/// each has its event).
pub const CUCA_WORKSPACE_FILES_CHANGED: &str = "cuca.workspace.files_changed";
/// The span event one changed file becomes.
pub const EVENT_FILE_CHANGE: &str = "cuca.file_change";
/// A changed file's path, relative to the workspace.
pub const CUCA_FILE_PATH: &str = "cuca.file.path";
/// What happened to it: `added`, `modified`, `deleted`.
pub const CUCA_FILE_CHANGE: &str = "cuca.file.change";
/// Lines added.
pub const CUCA_FILE_ADDED_LINES: &str = "cuca.file.added_lines";
/// Lines removed.
pub const CUCA_FILE_REMOVED_LINES: &str = "cuca.file.removed_lines";
/// Whether either side is binary (no line counts then).
pub const CUCA_FILE_BINARY: &str = "cuca.file.binary";
