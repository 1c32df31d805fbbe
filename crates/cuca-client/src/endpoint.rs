//! `ProviderEndpoint` and the API key that never prints.

use std::fmt;

/// Which kind of server a client talks to. All three speak `POST /v1/chat/completions`
/// with server-sent events; they differ in defaults, in the key they need and in the
/// provider word a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ProviderEndpoint {
    /// llama.cpp's `llama-server` (default base URL `http://127.0.0.1:1234`, no key).
    #[default]
    LlamaCpp,
    /// OpenAI's API (base URL `https://api.openai.com`, key from `OPENAI_API_KEY` or
    /// [`crate::CucaClientBuilder::with_api_key`]).
    OpenAi,
    /// Any other OpenAI-compatible server (vLLM, LM Studio, a gateway). It needs a base URL;
    /// a key is sent only when one is given with [`crate::CucaClientBuilder::with_api_key`].
    OpenAiCompatible,
}

impl ProviderEndpoint {
    /// The provider word a [`cuca_events::UnifiedResponse`] carries.
    pub fn provider_word(self) -> &'static str {
        match self {
            ProviderEndpoint::LlamaCpp => "llamacpp",
            ProviderEndpoint::OpenAi => "openai",
            ProviderEndpoint::OpenAiCompatible => "openai-compatible",
        }
    }

    /// The base URL used when the builder is given none.
    ///
    /// Port 1234 is where the seeds' examples expect a local server; `llama-server` itself
    /// defaults to 8080, so start it with `--port 1234` or set `CUCA_BASE_URL`.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderEndpoint::LlamaCpp => Some("http://127.0.0.1:1234"),
            ProviderEndpoint::OpenAi => Some("https://api.openai.com"),
            ProviderEndpoint::OpenAiCompatible => None,
        }
    }

    /// What a person should have running at the base URL, for connection errors.
    pub(crate) fn expected_server(self) -> &'static str {
        match self {
            ProviderEndpoint::LlamaCpp => "a llama.cpp llama-server",
            ProviderEndpoint::OpenAi => "the OpenAI API",
            ProviderEndpoint::OpenAiCompatible => "an OpenAI-compatible server",
        }
    }
}

impl fmt::Display for ProviderEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.provider_word())
    }
}

/// An API key. Its `Debug` and `Display` never show the key, so a client can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the `Authorization` header and nothing else.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}
