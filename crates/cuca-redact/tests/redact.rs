//! Redaction of every default kind in prompts, tool outputs and JSON; user rules; disabling;
//! idempotence, determinism and the borrowed no-secret path; scans; every event field.

// Test helpers outside `#[test]` functions: a failure is the test failing.
#![allow(clippy::unwrap_used)]

mod common;

use std::borrow::Cow;

use common::{assert_gone, FAKES, PEM};
use cuca_events::{Message, MessageContentBlock, Role, SessionEvent};
use cuca_redact::{
    Config, Counts, Error, Finding, RuleSpec, Rules, DEFAULT_RULES, REDACTED_FIELDS,
};
use serde_json::json;

fn defaults() -> Rules {
    Rules::defaults().unwrap()
}

fn marker(rule: &str) -> String {
    format!("[REDACTED:{rule}]")
}

/// Every text of an event, as JSON (escaped) and as Rust's debug form, for the byte checks.
fn event_text(event: &SessionEvent) -> String {
    format!("{}\n{event:?}", serde_json::to_string(event).unwrap())
}

#[test]
fn every_default_kind_in_a_prompt_is_replaced_by_its_marker() {
    let rules = defaults();
    for fake in FAKES {
        let mut event = SessionEvent::Message(Message::user(format!(
            "Please debug this, my config says {}\nand the call fails.",
            fake.text
        )));
        let counts = rules.redact_event(&mut event);
        let text = event_text(&event);
        assert_gone(fake, &text, "prompt");
        assert!(text.contains(&marker(fake.rule)), "{}: {text}", fake.rule);
        assert_eq!(counts.get(fake.rule), 1, "{}: {counts}", fake.rule);
        assert!(
            text.contains("Please debug this, my config says "),
            "{text}"
        );
        assert!(text.contains("and the call fails."), "{text}");
    }
}

#[test]
fn every_default_kind_in_a_tool_output_is_replaced() {
    let rules = defaults();
    for fake in FAKES {
        let output = format!(
            "$ env | sort\nHOME=/root\nKEY={}\nPATH=/usr/bin\n",
            fake.text
        );
        let mut event = SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: output.clone(),
            is_error: false,
            stdout: Some(output.clone()),
            stderr: Some(format!("warning: {}", fake.text)),
            exit_code: Some(0),
        };
        let counts = rules.redact_event(&mut event);
        assert_gone(fake, &event_text(&event), "tool output");
        assert_eq!(counts.get(fake.rule), 3, "{}: {counts}", fake.rule);

        let mut block = SessionEvent::Message(Message {
            role: Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: "call_1".into(),
                content: output,
                is_error: false,
            }],
        });
        rules.redact_event(&mut block);
        assert_gone(fake, &event_text(&block), "tool result block");
    }
}

#[test]
fn every_default_kind_in_json_is_replaced_in_values_keys_and_json_text() {
    let rules = defaults();
    for fake in FAKES {
        let mut body = json!({
            "model": "gpt-5",
            "messages": [{"role": "user", "content": format!("key {}", fake.text)}],
            "env": {"X": fake.text, "nested": [[fake.text]]},
            "map": {(fake.text): 1},
        });
        let counts = rules.redact_json(&mut body);
        let text = body.to_string();
        assert_gone(fake, &text, "JSON document");
        assert_eq!(counts.get(fake.rule), 4, "{}: {counts}", fake.rule);
        assert_eq!(body["model"], "gpt-5");

        // JSON text: a tool call's arguments, a request's parameters, a wire object. The
        // serializer escapes the PEM's line breaks as `\n`, the password field's quotes as
        // `\"`: the rules find them escaped too.
        let arguments = serde_json::to_string(&json!({"command": fake.text})).unwrap();
        for mut event in [
            SessionEvent::ToolCall {
                id: "call_1".into(),
                name: "shell".into(),
                arguments: arguments.clone(),
            },
            SessionEvent::CallRequest {
                model: "gpt-5".into(),
                parameters: arguments.clone(),
                tools: format!("[{arguments}]"),
                messages: 1,
            },
            SessionEvent::CallWire {
                format: "responses".into(),
                wire: arguments.clone(),
            },
        ] {
            let counts = rules.redact_event(&mut event);
            assert_gone(fake, &event_text(&event), event.kind());
            assert!(!counts.is_empty(), "{}", event.kind());
        }
    }
}

#[test]
fn password_like_keys_have_their_string_values_replaced_whatever_the_value() {
    let rules = defaults();
    let mut body = json!({
        "password": "hunter2",
        "DB_PASSWORD": "s3cret value with spaces",
        "clientSecret": "abc",
        "api-key": "k",
        "access_token": "tok",
        "credentials": {"user": "ada", "passphrase": "open sesame"},
        "max_tokens": 512,
        "token": 7,
        "tokenizer": "cl100k",
        "empty_secret": "",
    });
    let counts = rules.redact_json(&mut body);
    let field = marker("password-field");
    assert_eq!(
        body,
        json!({
            "password": field,
            "DB_PASSWORD": field,
            "clientSecret": field,
            "api-key": field,
            "access_token": field,
            "credentials": {"user": "ada", "passphrase": field},
            "max_tokens": 512,
            "token": 7,
            "tokenizer": "cl100k",
            "empty_secret": "",
        })
    );
    assert_eq!(counts.to_string(), "password-field=6");
    assert!(rules.redact_json(&mut body).is_empty());
}

#[test]
fn overlapping_rules_leave_one_marker_named_for_the_first_rule() {
    let rules = defaults();
    let (text, counts) = rules.redact_text(
        "Authorization: Bearer sk-ant-api03-Xb8Kq2Wm5Rz9Tn4Lc7Vp1Hs6Jd3Fg0Ay2Ue8 and {\"token\": \"Bearer ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i\"}",
    );
    assert_eq!(
        text,
        "Authorization: Bearer [REDACTED:anthropic-key] and {\"token\": \"[REDACTED:password-field]\"}"
    );
    assert_eq!(counts.to_string(), "anthropic-key=1, password-field=1");
}

#[test]
fn near_misses_are_left_alone_and_borrowed() {
    let rules = defaults();
    for text in [
        "",
        "hello",
        "Bearer tokens go in the Authorization header",
        "risk-assessment-framework-2024-Final-Draft",
        "pip install sk-learn-pipeline-tutorials",
        "{\"max_tokens\": 512, \"temperature\": 0.2}",
        "AKIA is how AWS access key ids start",
        "the marker [REDACTED:openai-key] stays as it is",
        "{\"password\": \"[REDACTED:password-field]\"}",
        "{\"password\": \"\"}",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
        "ключ: значение, 鍵は秘密ではありません",
    ] {
        let (out, counts) = rules.redact_text(text);
        match out {
            Cow::Borrowed(out) => assert_eq!(out.as_ptr(), text.as_ptr(), "{text}"),
            Cow::Owned(out) => panic!("{text:?} was rewritten as {out:?}"),
        }
        assert!(counts.is_empty(), "{text}: {counts}");
        assert!(rules.scan(text).is_empty(), "{text}");
    }
}

#[test]
fn redacting_is_idempotent_and_deterministic() {
    let rules = defaults();
    let mut all = String::new();
    for fake in FAKES {
        all.push_str(fake.text);
        all.push_str(" | ");
    }
    let (once, counts) = rules.redact_text(&all);
    let (again, counts_again) = rules.redact_text(&all);
    assert_eq!(once, again);
    assert_eq!(counts, counts_again);
    assert_eq!(counts.total(), FAKES.len() as u64, "{counts}");
    let (twice, second_counts) = rules.redact_text(&once);
    assert!(matches!(twice, Cow::Borrowed(_)), "{twice}");
    assert!(second_counts.is_empty());
    assert_eq!(rules.scan(&once), Vec::<Finding>::new());
    for fake in FAKES {
        assert_gone(fake, &once, "all together");
    }

    // A rebuilt set of rules gives the same bytes: markers depend on the rule only.
    let (rebuilt, _) = defaults().redact_text(&all);
    assert_eq!(once, rebuilt);
}

#[test]
fn a_secret_cut_short_at_the_end_of_a_streamed_chunk_is_still_replaced() {
    let rules = defaults();
    let cut = &PEM[..PEM.find("-----END").unwrap() - 10];
    let (out, counts) = rules.redact_text(cut);
    assert_eq!(out, "[REDACTED:private-key]");
    assert_eq!(counts.get("private-key"), 1);
    let (out, _) = rules.redact_text("{\"password\": \"correct-horse-batt");
    assert_eq!(out, "{\"password\": \"[REDACTED:password-field]");
}

#[test]
fn a_custom_regex_rule_replaces_its_matches_and_a_secret_group_only_that_group() {
    let mut config = Config::default();
    config.add_regex_flag("employee=EMP-[0-9]{6}").unwrap();
    config.rules.push(RuleSpec::regex(
        "db-url",
        r"postgres://[^:/\s]+:(?P<secret>[^@\s]+)@",
    ));
    let rules = Rules::new(&config).unwrap();
    let (out, counts) =
        rules.redact_text("EMP-004211 connects to postgres://ada:pa55-w0rd@db:5432/app");
    assert_eq!(
        out,
        "[REDACTED:employee] connects to postgres://ada:[REDACTED:db-url]@db:5432/app"
    );
    assert_eq!(counts.to_string(), "db-url=1, employee=1");
    assert!(matches!(rules.redact_text(&out).0, Cow::Borrowed(_)));
}

#[test]
fn a_json_path_rule_replaces_the_values_it_selects_in_documents_and_json_fields() {
    let mut config = Config::default();
    config
        .add_json_path_flag("request-id=$.metadata.request_id")
        .unwrap();
    config
        .rules
        .push(RuleSpec::json_path("contents", "$.messages[*].content"));
    let rules = Rules::new(&config).unwrap();
    assert!(rules.has_json_paths());

    let mut body = json!({
        "metadata": {"request_id": "req-8f2a", "user": "ada"},
        "messages": [{"content": "one"}, {"content": {"parts": ["two"]}}, {"content": null}],
    });
    let counts = rules.redact_json(&mut body);
    assert_eq!(
        body,
        json!({
            "metadata": {"request_id": "[REDACTED:request-id]", "user": "ada"},
            "messages": [
                {"content": "[REDACTED:contents]"},
                {"content": "[REDACTED:contents]"},
                {"content": null},
            ],
        })
    );
    assert_eq!(counts.to_string(), "contents=2, request-id=1");
    assert!(rules.redact_json(&mut body).is_empty(), "idempotent");

    let mut wire = SessionEvent::CallWire {
        format: "responses".into(),
        wire: r#"{"metadata": {"request_id": "req-1"}, "id": "resp_1"}"#.into(),
    };
    let findings = rules.scan_event(&wire);
    assert_eq!(
        findings,
        [Finding {
            rule: "request-id".into(),
            field: "CallWire.wire/metadata/request_id".into(),
            range: None,
        }]
    );
    let counts = rules.redact_event(&mut wire);
    assert_eq!(counts.to_string(), "request-id=1");
    let SessionEvent::CallWire { wire: text, .. } = &wire else {
        unreachable!()
    };
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text).unwrap(),
        json!({"metadata": {"request_id": "[REDACTED:request-id]"}, "id": "resp_1"})
    );
    // A JSON field the paths select nothing in keeps its bytes, spacing and all.
    let mut untouched = SessionEvent::CallWire {
        format: "responses".into(),
        wire: r#"{ "id" : "resp_1" }"#.into(),
    };
    let before = untouched.clone();
    assert!(rules.redact_event(&mut untouched).is_empty());
    assert_eq!(untouched, before);
    assert!(rules.scan_event(&wire).is_empty());
}

#[test]
fn disabling_a_default_rule_is_explicit_and_leaves_the_others_on() {
    let jwt = FAKES.iter().find(|fake| fake.rule == "jwt").unwrap();
    let config = Config::from_json_str(r#"{"disable": ["jwt"]}"#).unwrap();
    let rules = Rules::new(&config).unwrap();
    assert!(!rules.names().any(|name| name == "jwt"));
    let text = format!("{} and AKIAZ7Q3X9M2P5L8N4R6", jwt.text);
    let (out, counts) = rules.redact_text(&text);
    assert_eq!(
        out,
        format!("{} and [REDACTED:aws-access-key-id]", jwt.text)
    );
    assert_eq!(counts.to_string(), "aws-access-key-id=1");
    assert_eq!(defaults().redact_text(&text).1.get("jwt"), 1);

    // Without the password-field rule, the JSON walk leaves password-like keys alone too.
    let config = Config::from_toml_str("disable = [\"password-field\"]").unwrap();
    let mut body = json!({"password": "hunter2"});
    assert!(Rules::new(&config)
        .unwrap()
        .redact_json(&mut body)
        .is_empty());
    assert_eq!(body, json!({"password": "hunter2"}));

    let misspelt = Config::from_toml_str("disable = [\"jwts\"]").unwrap();
    match Rules::new(&misspelt) {
        Err(Error::UnknownDefaultRule { name }) => assert_eq!(name, "jwts"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rules_files_load_from_toml_and_json_and_bad_rules_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let toml_path = dir.path().join("rules.toml");
    std::fs::write(
        &toml_path,
        "disable = [\"bearer\"]\n\n[[rules]]\nname = \"ticket\"\nregex = \"TCK-[0-9]+\"\n\n[[rules]]\nname = \"rid\"\njson_path = \"$.rid\"\n",
    )
    .unwrap();
    let json_path = dir.path().join("rules.json");
    std::fs::write(
        &json_path,
        r#"{"disable": ["bearer"], "rules": [{"name": "ticket", "regex": "TCK-[0-9]+"}, {"name": "rid", "json_path": "$.rid"}]}"#,
    )
    .unwrap();
    let from_toml = Config::load(&toml_path).unwrap();
    assert_eq!(from_toml, Config::load(&json_path).unwrap());
    assert_eq!(
        from_toml,
        Config {
            disable: vec!["bearer".into()],
            rules: vec![
                RuleSpec::regex("ticket", "TCK-[0-9]+"),
                RuleSpec::json_path("rid", "$.rid"),
            ],
        }
    );
    let mut config = from_toml;
    config.extend(
        Config::from_json_str(r#"{"rules": [{"name": "emp", "regex": "EMP-[0-9]+"}]}"#).unwrap(),
    );
    let rules = Rules::new(&config).unwrap();
    assert_eq!(
        rules.redact_text("TCK-1 EMP-2").0,
        "[REDACTED:ticket] [REDACTED:emp]"
    );

    let yaml = dir.path().join("rules.yaml");
    std::fs::write(&yaml, "disable: []").unwrap();
    assert!(matches!(Config::load(&yaml), Err(Error::ConfigFormat { path }) if path == yaml));
    let missing = dir.path().join("missing.toml");
    assert!(
        matches!(Config::load(&missing), Err(Error::ReadConfig { path, .. }) if path == missing)
    );
    let big = dir.path().join("big.json");
    std::fs::write(&big, vec![b' '; cuca_redact::MAX_CONFIG_BYTES as usize + 1]).unwrap();
    match Config::load(&big) {
        Err(Error::ConfigTooLarge { len, max, .. }) => {
            assert_eq!((len, max), (max + 1, cuca_redact::MAX_CONFIG_BYTES))
        }
        other => panic!("{other:?}"),
    }
    let unknown_field = dir.path().join("typo.toml");
    std::fs::write(&unknown_field, "disabled = [\"jwt\"]\n").unwrap();
    match Config::load(&unknown_field) {
        Err(error @ Error::ParseToml { .. }) => {
            assert!(error.to_string().contains("typo.toml"), "{error}")
        }
        other => panic!("{other:?}"),
    }

    let refused = |spec: RuleSpec| {
        Rules::new(&Config {
            disable: vec![],
            rules: vec![spec],
        })
        .unwrap_err()
    };
    assert!(
        matches!(refused(RuleSpec::regex("bad", "(unclosed")), Error::InvalidRegex { rule, .. } if rule == "bad")
    );
    assert!(
        matches!(refused(RuleSpec::regex("empty", "x*")), Error::MatchesEmpty { rule } if rule == "empty")
    );
    assert!(
        matches!(refused(RuleSpec::regex("has space", "x")), Error::InvalidRuleName { name } if name == "has space")
    );
    assert!(
        matches!(refused(RuleSpec::regex("jwt", "x")), Error::DuplicateRule { name } if name == "jwt")
    );
    match refused(RuleSpec::json_path("p", "$.a..b")) {
        Error::InvalidJsonPath { rule, source } => assert_eq!((rule.as_str(), source.at), ("p", 4)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        refused(RuleSpec { name: "both".into(), regex: Some("x".into()), json_path: Some("$.x".into()) }),
        Error::RuleKind { rule } if rule == "both"
    ));
    let mut twice = Config::default();
    twice.add_regex_flag("a=x").unwrap();
    twice.add_regex_flag("a=y").unwrap();
    assert!(matches!(Rules::new(&twice), Err(Error::DuplicateRule { name }) if name == "a"));
    for flag in ["no-equals", "=x", "name="] {
        match Config::default().add_regex_flag(flag) {
            Err(Error::InvalidFlag { flag: given }) => assert_eq!(given, flag),
            other => panic!("{flag}: {other:?}"),
        }
    }
}

#[test]
fn counts_merge_and_display_in_name_order_and_serialize_as_an_object() {
    let mut counts = Counts::new();
    assert!(counts.is_empty());
    assert_eq!(counts.to_string(), "");
    counts.add("openai-key", 2);
    let mut other = Counts::new();
    other.add("jwt", 1);
    other.add("openai-key", 1);
    other.add("never", 0);
    counts.merge(&other);
    assert_eq!(counts.to_string(), "jwt=1, openai-key=3");
    assert_eq!(counts.total(), 4);
    assert_eq!(counts.get("never"), 0);
    assert_eq!(
        serde_json::to_string(&counts).unwrap(),
        r#"{"jwt":1,"openai-key":3}"#
    );
}

#[test]
fn scan_names_the_rule_and_the_place_never_the_value() {
    let rules = defaults();
    let text = "a AKIAZ7Q3X9M2P5L8N4R6 b ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i";
    let findings = rules.scan(text);
    assert_eq!(
        findings,
        [
            Finding {
                rule: "aws-access-key-id".into(),
                field: String::new(),
                range: Some(2..22)
            },
            Finding {
                rule: "github-token".into(),
                field: String::new(),
                range: Some(25..65)
            },
        ]
    );
    assert_eq!(
        findings[0].to_string(),
        "text bytes 2..22: aws-access-key-id"
    );

    let body = json!({"a": [{"password": "x"}, "sk_live_51Hq8Wm2Zx7Rt4Lp9Nv3Yc6Hb1Jf5Gs0Dk"]});
    let findings: Vec<String> = rules
        .scan_json(&body)
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        findings,
        [
            "/a/0/password: password-field",
            "/a/1 bytes 0..42: stripe-key"
        ]
    );

    let event = SessionEvent::Message(Message {
        role: Role::Assistant,
        content: vec![
            MessageContentBlock::text("fine"),
            MessageContentBlock::ToolCall {
                id: "c".into(),
                name: "curl".into(),
                arguments: r#"{"header": "Bearer q7Wm2Xz9Rt4Lp8Nv3Yc6Hb1Kd5Fg0Sa"}"#.into(),
            },
        ],
    });
    let findings: Vec<String> = rules
        .scan_event(&event)
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        findings,
        ["Message.content[1].arguments bytes 19..50: bearer"]
    );
    for finding in &findings {
        assert!(!finding.contains("q7Wm2Xz9"), "{finding}");
    }
}

/// One event of every kind with a key in every text field; an identifier field holds none.
fn one_of_each_kind(secret: &str) -> Vec<SessionEvent> {
    let json_text = serde_json::to_string(&json!({ "value": secret })).unwrap();
    vec![
        SessionEvent::SystemPrompt {
            text: format!("system {secret}"),
        },
        SessionEvent::Message(Message {
            role: Role::Assistant,
            content: vec![
                MessageContentBlock::text(format!("text {secret}")),
                MessageContentBlock::thinking(format!("thinking {secret}")),
                MessageContentBlock::ToolCall {
                    id: "call_1".into(),
                    name: "shell".into(),
                    arguments: json_text.clone(),
                },
                MessageContentBlock::ToolResult {
                    tool_call_id: "call_1".into(),
                    content: format!("result {secret}"),
                    is_error: false,
                },
                MessageContentBlock::ImageBase64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            ],
        }),
        SessionEvent::Reasoning {
            text: format!("reasoning {secret}"),
        },
        SessionEvent::Output {
            text: format!("output {secret}"),
        },
        SessionEvent::ToolCall {
            id: "call_2".into(),
            name: "shell".into(),
            arguments: json_text.clone(),
        },
        SessionEvent::ToolResult {
            tool_call_id: "call_2".into(),
            content: format!("content {secret}"),
            is_error: true,
            stdout: Some(format!("stdout {secret}")),
            stderr: Some(format!("stderr {secret}")),
            exit_code: Some(1),
        },
        SessionEvent::Latency { duration_ms: 12 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 2,
        },
        SessionEvent::ModelSwap {
            from: "a".into(),
            to: "b".into(),
            reason: format!("reason {secret}"),
        },
        SessionEvent::Fork {
            from_point: "s:1".into(),
            to_session: "s:fork:1".into(),
        },
        SessionEvent::CallRequest {
            model: "gpt-5".into(),
            parameters: json_text.clone(),
            tools: format!("[{json_text}]"),
            messages: 2,
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "gpt-5".into(),
        },
        SessionEvent::CallIncomplete {
            reason: format!("upstream said {secret}"),
        },
        SessionEvent::CallWire {
            format: "messages".into(),
            wire: json_text,
        },
        SessionEvent::RequestDigest {
            sha256: "0".repeat(64),
        },
        SessionEvent::TokenDetail(cuca_events::TokenDetail {
            input: Some(26),
            ..cuca_events::TokenDetail::default()
        }),
        SessionEvent::Scrubbed {
            replaced: vec![("openai-key".into(), 2)],
        },
        SessionEvent::WorkspaceSnapshot {
            snapshot: format!("sha256:{}", "0".repeat(64)),
            changes: vec![cuca_events::FileChange {
                path: "src/main.rs".into(),
                kind: cuca_events::FileChangeKind::Modified,
                added_lines: 1,
                removed_lines: 0,
                binary: false,
            }],
            skipped: vec![format!("keys/{secret}.bin: over the cap")],
        },
        SessionEvent::ShellCommand {
            command: format!("curl -H 'Authorization: {secret}' x"),
            cwd: ".".into(),
            origin: "bash -c".into(),
            exit_status: Some(1),
            duration_ms: 3,
            stdout: cuca_events::CapturedStream {
                sha256: format!("sha256:{}", "1".repeat(64)),
                bytes: 9,
                tail: format!("out {secret}"),
                cut: 0,
            },
            stderr: cuca_events::CapturedStream {
                sha256: format!("sha256:{}", "2".repeat(64)),
                bytes: 9,
                tail: format!("err {secret}"),
                cut: 0,
            },
        },
    ]
}

#[test]
fn every_text_field_of_every_event_kind_is_redacted() {
    let rules = defaults();
    let events = one_of_each_kind(FAKES[0].text);
    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, SessionEvent::KINDS, "the test builds every kind");
    let listed: Vec<&str> = REDACTED_FIELDS.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(
        listed,
        SessionEvent::KINDS,
        "REDACTED_FIELDS places every kind"
    );
    for (mut event, (_, fields)) in events.into_iter().zip(REDACTED_FIELDS) {
        let found = rules.scan_event(&event).len();
        let counts = rules.redact_event(&mut event);
        assert_gone(&FAKES[0], &event_text(&event), event.kind());
        assert_eq!(
            counts.get("openai-key") as usize,
            fields.len(),
            "{}: {counts}",
            event.kind()
        );
        assert_eq!(found, fields.len(), "{}", event.kind());
        assert!(rules.scan_event(&event).is_empty());
    }
}

#[test]
fn every_default_rule_is_in_force_and_has_a_fake() {
    let rules = defaults();
    let names: Vec<&str> = rules.names().collect();
    let defaults: Vec<&str> = DEFAULT_RULES.iter().map(|rule| rule.name).collect();
    assert_eq!(names, defaults);
    for rule in DEFAULT_RULES {
        assert!(
            FAKES.iter().any(|fake| fake.rule == rule.name),
            "{} has no fake",
            rule.name
        );
        assert!(!rule.finds.is_empty());
    }
}
