//! Unit tests and properties of `redact_error`: the provider's sentence kept, the request's
//! text and keys gone.

use proptest::prelude::*;

use super::*;
use crate::MAX_ERROR_CHARS;

/// The real llama-server's envelope (fixtures' README: `{"error":{"code":400,"message":…,
/// "type":"invalid_request_error"}}`), with the message a parse failure carries.
fn error_message(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap();
    value["error"]["message"].as_str().unwrap().to_owned()
}

/// Every stretch of `out` between markers: where request text must not be.
fn between_markers(out: &str) -> Vec<&str> {
    out.split(QUOTE_MARKER).collect()
}

/// Asserts no run of `MIN_QUOTED_BYTES` of `secret` survives between markers in `out`.
fn assert_no_run_of(out: &str, secret: &str) {
    for window in secret.as_bytes().windows(MIN_QUOTED_BYTES) {
        for piece in between_markers(out) {
            assert!(
                !piece
                    .as_bytes()
                    .windows(MIN_QUOTED_BYTES)
                    .any(|w| w == window),
                "{:?} of {secret:?} survives in {out:?}",
                String::from_utf8_lossy(window)
            );
        }
    }
}

#[test]
fn a_missing_role_quote_of_a_card_is_replaced_and_the_sentence_kept() {
    // A real llama-server answers a message without `role` with `Failed to parse messages:
    // Missing 'role' in message: {"content":"my card is 4111-…"}`, quoting the request.
    let request =
        r#"{"model":"tiny","messages":[{"content":"my card is 4111-1111-1111-1111, exp 09/29"}]}"#;
    let body = r#"{"error":{"code":500,"message":"Failed to parse messages: Missing 'role' in message: {\"content\":\"my card is 4111-1111-1111-1111, exp 09/29\"}","type":"server_error"}}"#;
    let out = redact_error(
        &error_message(body),
        &Quoted::new().body(request.as_bytes()),
    );
    assert_eq!(
        out,
        r#"Failed to parse messages: Missing 'role' in message: {"content":"[quoted]"}"#
    );
    assert_no_run_of(&out, "my card is 4111-1111-1111-1111, exp 09/29");
}

#[test]
fn the_whole_conversation_dumped_pretty_after_the_sentence_is_replaced() {
    // llama.cpp appends "; messages = " and the conversation as `dump(2)`: other spacing,
    // the same strings.
    let request = r#"{"messages":[{"role":"system","content":"You are Ana's banking agent"},{"content":"pin 4321, card 4111111111111111"}]}"#;
    let message = "Failed to parse messages: Missing 'role' in message: {\"content\":\"pin 4321, card 4111111111111111\"}; messages = [\n  {\n    \"content\": \"You are Ana's banking agent\",\n    \"role\": \"system\"\n  },\n  {\n    \"content\": \"pin 4321, card 4111111111111111\"\n  }\n]";
    let out = redact_error(message, &Quoted::new().body(request.as_bytes()));
    assert!(out.starts_with("Failed to parse messages: Missing 'role' in message: {\"content\":\"[quoted]\"}; messages = ["), "{out}");
    assert_no_run_of(&out, "You are Ana's banking agent");
    assert_no_run_of(&out, "pin 4321, card 4111111111111111");
    assert!(
        out.contains("\"role\": \"system\""),
        "short wire words stay: {out}"
    );
}

#[test]
fn the_real_llama_server_errors_keep_their_sentences_whole() {
    // The fixtures' real bodies and the requests that caused them: nothing in these
    // sentences quotes the request, so every word stays.
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/llama-server/");
    let cases = [
        (
            "error-context-overflow",
            "request (15014 tokens) exceeds the available context size (2048 tokens), try increasing it",
        ),
        ("error-no-messages", "'messages' is required"),
        (
            "error-bad-json",
            "[json.exception.parse_error.101] parse error at line 2, column 1: syntax error while parsing object key - unexpected end of input; expected string literal",
        ),
    ];
    for (name, sentence) in cases {
        let request = std::fs::read(format!("{fixtures}{name}.request.json")).unwrap();
        let body = std::fs::read_to_string(format!("{fixtures}{name}.body")).unwrap();
        let message = error_message(&body);
        assert_eq!(message, sentence);
        let out = redact_error(&message, &Quoted::new().body(&request));
        assert_eq!(out, sentence, "{name}");
    }
}

#[test]
fn an_echoed_key_leaves_no_eight_byte_run_of_it() {
    // An upstream echoing a key never leaves any 8+ char run of it in the log.
    let authorization = "Bearer sk-proj-Zk3vQ9xW2mN8pL4tR7yU";
    let api_key = "azure-key-5f2c9d1e7a3b";
    let quoted = Quoted::new()
        .header(authorization.as_bytes())
        .header(api_key.as_bytes());
    let message = format!(
        "invalid credentials: authorization={authorization:?} api-key={api_key} (key sk-proj-Zk3vQ9xW2 \
         truncated); retry later"
    );
    let out = redact_error(&message, &quoted);
    assert_no_run_of(&out, authorization);
    assert_no_run_of(&out, api_key);
    assert!(
        out.starts_with("invalid credentials: authorization="),
        "{out}"
    );
    assert!(out.ends_with("truncated); retry later"), "{out}");
}

#[test]
fn a_prefix_the_server_cut_is_replaced() {
    // "catch a quote that is a *prefix* of a long value the server cut".
    let prompt = "tell me about the vault in lisbon ".repeat(40);
    let request = serde_json::json!({"messages": [{"role": "user", "content": prompt}]});
    let message = format!("prompt too long: '{}...' (1200 tokens)", &prompt[..100]);
    let out = redact_error(
        &message,
        &Quoted::new().body(request.to_string().as_bytes()),
    );
    assert_eq!(out, "prompt too long: '[quoted]...' (1200 tokens)");
}

#[test]
fn escaped_forms_of_a_value_are_replaced() {
    // "the server echoes `{"content":"my \"card\""}` with escapes".
    let content = "my \"card\" is\n4111 1111 — café";
    let request = serde_json::json!({"messages": [{"content": content}]}).to_string();
    let quoted = Quoted::new().body(request.as_bytes());
    let serde = serde_json::to_string(content).unwrap();
    let python = "\"my \\\"card\\\" is\\n4111 1111 \\u2014 caf\\u00e9\"";
    let collapsed = "my \"card\" is 4111 1111 — café";
    for echoed in [serde.as_str(), python, collapsed, content] {
        let out = redact_error(&format!("bad message: {echoed} here"), &quoted);
        assert!(out.starts_with("bad message: "), "{out}");
        assert!(out.ends_with(" here"), "{out}");
        assert!(out.contains(QUOTE_MARKER), "{out}");
        for piece in between_markers(&out) {
            assert!(!piece.contains("4111"), "{out}");
        }
    }
}

#[test]
fn a_tool_calls_arguments_re_serialised_are_replaced() {
    // Tool arguments are a JSON string inside the JSON: a server that parses them echoes
    // their strings with its own spacing.
    let request = r#"{"messages":[{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"4111111111111111\",\"cvv\":\"123\"}"}}]}]}"#;
    let message = r#"invalid tool call arguments {"card": "4111111111111111", "cvv": "123"} for function pay"#;
    let out = redact_error(message, &Quoted::new().body(request.as_bytes()));
    assert!(!out.contains("4111111111111111"), "{out}");
    assert!(out.starts_with("invalid tool call arguments "), "{out}");
    assert!(out.ends_with("for function pay"), "{out}");
}

#[test]
fn short_strings_and_keys_do_not_eat_the_sentence() {
    // "substrings shorter than a few characters must not be replaced (a message text "a"
    // would eat the sentence)"; object keys are the grammar, not anyone's text.
    let request = r#"{"model":"tiny","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"hi"}],"max_tokens":8}"#;
    let message = "'messages' must alternate user and assistant roles; the assistant message is a";
    let out = redact_error(message, &Quoted::new().body(request.as_bytes()));
    assert_eq!(out, message);
}

#[test]
fn a_broken_body_still_yields_its_strings() {
    // A body cut off mid-string (the bad-JSON fixture's kind of request) still quotes.
    let request =
        br#"{"model":"tiny","messages":[{"role":"user","content":"my password is hunter2hunter2"#;
    let message = "parse error near 'my password is hunter2hunter2'";
    let out = redact_error(message, &Quoted::new().body(request));
    assert_eq!(out, "parse error near '[quoted]'");
}

#[test]
fn a_body_that_is_not_json_is_looked_for_whole() {
    let request = b"plain text prompt with a secret 0xDEADBEEF";
    let out = redact_error(
        "cannot parse body: plain text prompt with a secret 0xDEADBEEF",
        &Quoted::new().body(request),
    );
    assert_eq!(out, "cannot parse body: [quoted]");
}

#[test]
fn multi_byte_text_is_never_cut_in_a_character() {
    // "multi-byte text (never cut a char)": "é" and "è" share their first byte, so the run
    // "abcdefg" + that byte is a quote that ends inside the message's "è"; the whole
    // character goes with the marker.
    let request = serde_json::json!({"messages": [
        {"content": "abcdefgé"},
        {"content": "日本語のプロンプト"}
    ]});
    let quoted = request.to_string();
    let quoted = Quoted::new().body(quoted.as_bytes());
    assert_eq!(redact_error("x abcdefgè y", &quoted), "x [quoted] y");
    assert_eq!(
        redact_error("échec: 日本語のプロンプトé fin", &quoted),
        "échec: [quoted]é fin"
    );
}

#[test]
fn overlapping_quotes_become_one_marker() {
    let request = serde_json::json!({"messages": [
        {"content": "alpha beta gamma delta"},
        {"content": "gamma delta epsilon zeta"}
    ]})
    .to_string();
    let message = "seen: alpha beta gamma delta epsilon zeta; done";
    let out = redact_error(message, &Quoted::new().body(request.as_bytes()));
    assert_eq!(out, "seen: [quoted]; done");
}

#[test]
fn the_result_is_clipped_with_its_ellipsis() {
    // "keep the provider's own sentence, clipped by `clip_error` (ending in its ellipsis)".
    let message = format!("server said: {}", "word ".repeat(200));
    let out = redact_error(&message, &Quoted::new().body(b"{}"));
    assert_eq!(out.chars().count(), MAX_ERROR_CHARS);
    assert!(out.ends_with('…'));
    let huge = "x".repeat(MAX_REDACTED_BYTES + 10);
    let request = serde_json::json!({"messages": [{"content": huge}]}).to_string();
    let out = redact_error(
        &format!("echo {huge}"),
        &Quoted::new().body(request.as_bytes()),
    );
    assert_eq!(out, "echo [quoted]…");
}

#[test]
fn a_sixteen_mebibyte_request_is_read_once() {
    // "a request of 16 MiB: the redaction must not be quadratic". A bound on work, not on
    // time: the scan stops the moment every window of the message is found, and otherwise
    // reads each byte of each form once; this checks the answer on a request that a
    // quadratic search (message × request) would take hours over.
    let prompt: String = (0..(16 << 20) / 16).map(|n| format!("{n:015x} ")).collect();
    let request = serde_json::json!({"messages": [{"content": prompt}]}).to_string();
    let quote = &prompt[(8 << 20)..(8 << 20) + 4096];
    let message = format!("{} rejected: {quote} and more", "context ".repeat(4000));
    let full = redact(&message, &Quoted::new().body(request.as_bytes()));
    // The space before the quote goes too: " 0000000" is a run of the prompt.
    assert!(
        full.ends_with("context  rejected:[quoted] and more"),
        "{}",
        &full[full.len().saturating_sub(80)..]
    );
}

#[test]
fn wire_words_and_nothing_quoted_leave_the_message_alone() {
    let request = r#"{"messages":[{"role":"assistant","content":"application/json"}]}"#;
    let message = "assistant message must be application/json";
    assert_eq!(
        redact_error(message, &Quoted::new().body(request.as_bytes())),
        message
    );
    assert_eq!(redact_error("  short  ", &Quoted::new()), "short");
}

/// Strings as a request may carry them: ASCII words, JSON's awkward characters, and
/// multi-byte text; no `[` or `]`, since the marker is made of them.
fn request_string() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9 \"\\\\\n\té日ü—{}:,]{0,40}").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// "no request string of ≥ the minimum length survives in the output": whatever the
    /// server wraps around whatever it quotes, and however it escapes it.
    #[test]
    fn no_run_of_a_request_string_survives(
        contents in proptest::collection::vec(request_string(), 1..5),
        key in "[A-Za-z0-9_-]{8,40}",
        pieces in proptest::collection::vec((0usize..8, 0usize..64, 0usize..64, 0u8..3), 0..6),
        words in proptest::collection::vec("[a-z ():,']{0,20}", 0..6),
    ) {
        let messages: Vec<_> = contents
            .iter()
            .map(|c| serde_json::json!({"role": "user", "content": c}))
            .collect();
        let request = serde_json::json!({"model": "m", "messages": messages}).to_string();
        let authorization = format!("Bearer {key}");
        let strings: Vec<&str> = contents
            .iter()
            .map(String::as_str)
            .chain([authorization.as_str()])
            .collect();
        // The message: the server's words with quotes of request strings in between, each a
        // slice (at character boundaries) of one string, raw or JSON-escaped.
        let mut message = String::new();
        for (n, (which, from, len, form)) in pieces.iter().enumerate() {
            message.push_str(words.get(n).map_or("", String::as_str));
            let source = strings[which % strings.len()];
            let chars: Vec<char> = source.chars().collect();
            let from = from % (chars.len() + 1);
            let slice: String = chars[from..(from + len).min(chars.len())].iter().collect();
            match form {
                0 => message.push_str(&slice),
                1 => message.push_str(&serde_json::to_string(&slice).unwrap()),
                _ => message.push_str(&serde_json::to_string(&serde_json::json!({"content": slice})).unwrap()),
            }
        }
        let quoted = Quoted::new().body(request.as_bytes()).header(authorization.as_bytes());
        let out = redact(&message, &quoted);
        for source in &strings {
            let escaped = serde_json::to_string(source).unwrap();
            for form in [source.to_string(), escaped[1..escaped.len() - 1].to_owned()] {
                for window in form.as_bytes().windows(MIN_QUOTED_BYTES) {
                    for piece in out.split(QUOTE_MARKER) {
                        prop_assert!(
                            !piece.as_bytes().windows(MIN_QUOTED_BYTES).any(|w| w == window),
                            "{:?} survives in {:?}", String::from_utf8_lossy(window), out
                        );
                    }
                }
            }
        }
        // And what is kept is the message's own text, in order, markers aside.
        let kept: String = out.split(QUOTE_MARKER).collect();
        let mut rest = message.as_str();
        for c in kept.chars() {
            let at = rest.find(c);
            prop_assert!(at.is_some(), "{:?} is not from {:?}", out, message);
            rest = &rest[at.unwrap_or(0) + c.len_utf8()..];
        }
    }
}
