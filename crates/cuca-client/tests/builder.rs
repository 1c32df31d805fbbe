//! `build()` validation, URL shapes, and an API key that never prints.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cuca_client::{ClientError, CucaClient, ProviderEndpoint, RetryPolicy, Timeouts};

#[test]
fn the_base_url_gets_the_chat_completions_path() {
    for (base, url) in [
        (
            "http://127.0.0.1:1234",
            "http://127.0.0.1:1234/v1/chat/completions",
        ),
        (
            "http://127.0.0.1:1234/",
            "http://127.0.0.1:1234/v1/chat/completions",
        ),
        (
            "http://host:8080/v1",
            "http://host:8080/v1/chat/completions",
        ),
        (
            "https://gw.example/openai/v1/",
            "https://gw.example/openai/v1/chat/completions",
        ),
    ] {
        let client = CucaClient::builder().with_base_url(base).build().unwrap();
        assert_eq!(client.url(), url, "base {base}");
    }
}

#[test]
fn llama_cpp_defaults_to_port_1234() {
    let client = CucaClient::builder().build().unwrap();
    assert_eq!(client.endpoint(), ProviderEndpoint::LlamaCpp);
    assert_eq!(client.url(), "http://127.0.0.1:1234/v1/chat/completions");
}

#[test]
fn an_unusable_base_url_is_a_typed_error_naming_it() {
    for (base, expected) in [
        ("not a url", "base url \"not a url\" is not usable: relative URL without a base; a base url looks like http://127.0.0.1:1234"),
        ("ftp://host", "base url \"ftp://host\" is not usable: the scheme is \"ftp\"; only http and https are spoken"),
        ("http://host/?a=1", "base url \"http://host/?a=1\" is not usable: a base url carries no query or fragment"),
    ] {
        let err = CucaClient::builder().with_base_url(base).build().unwrap_err();
        assert!(matches!(err, ClientError::InvalidBaseUrl { .. }));
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn an_openai_compatible_endpoint_needs_a_base_url() {
    let err = CucaClient::builder()
        .with_provider(ProviderEndpoint::OpenAiCompatible)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "base url \"\" is not usable: openai-compatible has no default base url; call with_base_url or set CUCA_BASE_URL"
    );
}

#[test]
fn the_api_key_is_never_in_debug_output() {
    let client = CucaClient::builder()
        .with_provider(ProviderEndpoint::OpenAi)
        .with_api_key("sk-very-secret")
        .with_model("gpt-4o-mini")
        .build()
        .unwrap();
    let debug = format!("{client:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(debug.contains("ApiKey([redacted])"), "{debug}");
    assert_eq!(client.url(), "https://api.openai.com/v1/chat/completions");
    let builder = format!("{:?}", CucaClient::builder().with_api_key("sk-very-secret"));
    assert!(!builder.contains("sk-very-secret"), "{builder}");
}

#[test]
fn timeouts_and_retries_are_validated() {
    let err = CucaClient::builder()
        .with_idle_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid Timeouts::idle: a timeout of zero would fail every call; give a positive duration"
    );
    let err = RetryPolicy::new(
        2,
        Duration::from_secs(10),
        Duration::from_secs(1),
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid RetryPolicy::initial_backoff: 10s is longer than max_backoff 1s"
    );
    assert_eq!(Timeouts::default().validate().ok(), Some(()));
}

#[test]
fn a_build_error_converts_to_a_validation_plugin_error() {
    let err: cuca_events::PluginError = CucaClient::builder()
        .with_base_url("ftp://x")
        .build()
        .unwrap_err()
        .into();
    assert!(
        matches!(err, cuca_events::PluginError::Validation { ref schema, .. } if schema == "CucaClient")
    );
}
