//! The message model one provider turn speaks: roles, messages, content blocks, requests and responses.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions the model is given before the conversation.
    System,
    /// The person (or agent) driving the conversation.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, fed back to the model.
    Tool,
}

impl Role {
    /// The lowercase wire name (`"system"`, `"user"`, `"assistant"`, `"tool"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One block of content: what a message holds and what a stream yields.
///
/// Variant order is part of the `.cslog` format only through [`crate::SessionEvent`],
/// which does not embed this type; it is still kept append-only for the journal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MessageContentBlock {
    /// Visible answer text.
    Text {
        /// The text, verbatim.
        text: String,
    },
    /// A reasoning ("thinking") pass, streamed before the answer by reasoning models.
    Thinking {
        /// The reasoning text, verbatim.
        thinking: String,
    },
    /// A complete tool call the model asked for.
    ToolCall {
        /// The provider's id for the call, which a [`MessageContentBlock::ToolResult`] echoes.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments exactly as the model wrote them (normally a JSON object as text).
        arguments: String,
    },
    /// What a tool returned for a call.
    ToolResult {
        /// The id of the [`MessageContentBlock::ToolCall`] this answers.
        tool_call_id: String,
        /// The output the model is shown.
        content: String,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// An inline image.
    ImageBase64 {
        /// The media type, e.g. `image/png`.
        media_type: String,
        /// The base64-encoded bytes.
        data: String,
    },
}

impl MessageContentBlock {
    /// A [`MessageContentBlock::Text`] block.
    pub fn text(text: impl Into<String>) -> Self {
        MessageContentBlock::Text { text: text.into() }
    }

    /// A [`MessageContentBlock::Thinking`] block.
    pub fn thinking(thinking: impl Into<String>) -> Self {
        MessageContentBlock::Thinking {
            thinking: thinking.into(),
        }
    }

    /// The block's variant name, as the docs and the CLI print it.
    pub fn kind(&self) -> &'static str {
        match self {
            MessageContentBlock::Text { .. } => "Text",
            MessageContentBlock::Thinking { .. } => "Thinking",
            MessageContentBlock::ToolCall { .. } => "ToolCall",
            MessageContentBlock::ToolResult { .. } => "ToolResult",
            MessageContentBlock::ImageBase64 { .. } => "ImageBase64",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub content: Vec<MessageContentBlock>,
}

impl Message {
    /// A message of one text block.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![MessageContentBlock::text(text)],
        }
    }

    /// A system message of one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Message::new(Role::System, text)
    }

    /// A user message of one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, text)
    }

    /// An assistant message of one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, text)
    }

    /// The concatenation of the message's [`MessageContentBlock::Text`] blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let MessageContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What the tool does, in words the model reads.
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub parameters: serde_json::Value,
}

/// Whether the model must call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Named(String),
}

/// Who a call is for: set by the caller, carried into the call log and the journal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMetadata {
    /// The invocation this call belongs to; the client fills one in when it is empty.
    pub run: Option<String>,
    /// What the call was for ("turn", "compile", …).
    pub tag: Option<String>,
    /// The unit of work the call belongs to, where the caller knows one.
    pub node: Option<String>,
    /// The agent making the call, for multi-agent runs.
    pub agent: Option<String>,
    /// A per-call id the client mints before `on_request`, echoed on the response, so a
    /// plugin can pair the two hooks of one call when calls run concurrently.
    pub call_id: Option<String>,
    /// When the call began, in milliseconds since the Unix epoch, where its recorder knows
    /// it: a session log stamps the call's request records with it rather than with the time
    /// they are written, which for a call recorded once its answer came back (a proxy's
    /// non-streamed call) is the end of the call, not its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
}

/// One request to a model, as every provider sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnifiedRequest {
    /// The model asked for; empty means the client's default.
    pub model: String,
    /// The conversation so far, in order.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// Whether a tool call is required.
    pub tool_choice: Option<ToolChoice>,
    /// The answer ceiling in tokens.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// The reasoning effort word that should travel (`"low"`, `"high"`, `"off"`).
    pub reasoning_effort: Option<String>,
    /// Who the call is for.
    pub metadata: RequestMetadata,
}

impl UnifiedRequest {
    /// A request of these messages for the client's default model.
    pub fn new(messages: Vec<Message>) -> Self {
        UnifiedRequest {
            messages,
            ..UnifiedRequest::default()
        }
    }
}

/// Prompt and completion token counts of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens the prompt took.
    pub prompt_tokens: u64,
    /// Tokens the answer took, reasoning included.
    pub completion_tokens: u64,
}

/// The usage detail a provider reported, beyond the two counts every call has.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderUsage {
    /// Tokens the prompt took.
    pub prompt_tokens: u64,
    /// Tokens the answer took.
    pub completion_tokens: u64,
    /// Of the completion, tokens spent reasoning, where reported.
    pub reasoning_tokens: Option<u64>,
    /// What the provider says the call cost, where reported.
    pub cost: Option<f64>,
    /// Every count the usage report carried, kind by kind, as sent.
    #[serde(default)]
    pub detail: TokenDetail,
}

/// Every token count of one call's usage report, each `None` where the provider did not send
/// it. Nothing here is derived: a count is the number the provider put in its field, so a
/// provider's own meaning travels with the field it fills.
///
/// `prompt` and `input` are two fields because providers mean two things: OpenAI's
/// `prompt_tokens` / `input_tokens` count the whole prompt, cache reads included (`prompt`);
/// Anthropic's `input_tokens` counts only the prompt neither read from nor written to the
/// cache (`input`). [`TokenDetail::uncached_input`] gives the second from either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenDetail {
    /// The whole prompt, cache reads and writes included (OpenAI's `prompt_tokens`,
    /// Responses' `input_tokens`).
    pub prompt: Option<u64>,
    /// The prompt neither read from nor written to the cache (Anthropic's `input_tokens`).
    pub input: Option<u64>,
    /// The answer, reasoning included (`completion_tokens`, `output_tokens`).
    pub output: Option<u64>,
    /// Prompt tokens read from the cache (`cached_tokens`, `cache_read_input_tokens`).
    pub cache_read: Option<u64>,
    /// Prompt tokens written to the cache, all lifetimes (`cache_creation_input_tokens`,
    /// `cache_write_tokens`).
    pub cache_write: Option<u64>,
    /// Of the cache writes, those kept 5 minutes (`cache_creation.ephemeral_5m_input_tokens`).
    pub cache_write_5m: Option<u64>,
    /// Of the cache writes, those kept 1 hour (`cache_creation.ephemeral_1h_input_tokens`).
    pub cache_write_1h: Option<u64>,
    /// Of the answer, tokens spent reasoning (`reasoning_tokens`).
    pub reasoning: Option<u64>,
}

impl std::fmt::Display for TokenDetail {
    /// The counts the provider sent, in words (`26 input, 3401 cache read, 1201 cache write,
    /// 1000 cache write 5m, 201 cache write 1h, 57 output`); a count not sent is left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            (self.prompt, "prompt"),
            (self.input, "input"),
            (self.cache_read, "cache read"),
            (self.cache_write, "cache write"),
            (self.cache_write_5m, "cache write 5m"),
            (self.cache_write_1h, "cache write 1h"),
            (self.output, "output"),
            (self.reasoning, "reasoning"),
        ];
        let mut first = true;
        for (count, name) in parts {
            if let Some(count) = count {
                if !first {
                    f.write_str(", ")?;
                }
                write!(f, "{count} {name}")?;
                first = false;
            }
        }
        if first {
            f.write_str("no token counts")?;
        }
        Ok(())
    }
}

impl TokenDetail {
    /// Whether the report carried no count at all.
    pub fn is_empty(&self) -> bool {
        *self == TokenDetail::default()
    }

    /// The prompt tokens neither read from nor written to the cache: `input` where the
    /// provider sent it, else `prompt` less the cache reads and writes (saturating).
    pub fn uncached_input(&self) -> Option<u64> {
        self.input.or_else(|| {
            let cached = self.cache_read.unwrap_or(0) + self.cache_write.unwrap_or(0);
            self.prompt.map(|prompt| prompt.saturating_sub(cached))
        })
    }
}

/// How much of the prompt was served from the provider's cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCacheUsage {
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
}

/// One completed model call, aggregated from its stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnifiedResponse {
    /// The model that answered (the server's word, else the one asked for).
    pub model: String,
    /// The provider that served it (`"llamacpp"`, `"openai"`, …).
    pub provider: String,
    /// The blocks of the answer, in stream order.
    pub content: Vec<MessageContentBlock>,
    /// Why generation stopped (`"stop"`, `"length"`, `"tool_calls"`), where reported.
    pub finish_reason: Option<String>,
    /// The two token counts every response carries; zero when nothing was reported.
    pub token_usage: TokenUsage,
    /// The provider's own usage report, where one arrived.
    pub usage: Option<ProviderUsage>,
    /// Prompt-cache figures, where reported.
    pub prompt_cache_usage: Option<PromptCacheUsage>,
    /// Wall time from sending the request to the end of the stream.
    pub duration: Duration,
    /// The call id from [`RequestMetadata::call_id`], when the client minted one.
    pub call_id: Option<String>,
}

impl UnifiedResponse {
    /// The concatenation of the response's text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let MessageContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
}
