//! Unit tests of the memo of messages read: the same reading as anew, redaction counts and
//! keys handed back, errors never kept, and what is kept bounded.

// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::matching::Matching;
use cuca_wire::Format;

fn memo(rules: Option<Arc<Rules>>) -> Memo {
    Memo::new(
        rules,
        Arc::new(Keys::new(Matching::new(&[], false).unwrap())),
        true,
        false,
    )
}

/// A memo that lends its messages, as a replaying proxy's does.
fn lending(rules: Option<Arc<Rules>>) -> Memo {
    Memo::new(
        rules,
        Arc::new(Keys::new(Matching::new(&[], false).unwrap())),
        true,
        true,
    )
}

/// How many kept elements hold their messages (not lent to a request).
fn holding(memo: &Memo) -> usize {
    let kept = memo.lock();
    kept.current
        .values()
        .chain(kept.previous.values())
        .filter(|kept| kept.messages.len() == kept.n_messages)
        .count()
}

fn chat(messages: &[serde_json::Value]) -> Vec<u8> {
    serde_json::json!({"model": "m", "messages": messages})
        .to_string()
        .into_bytes()
}

/// What reading `body` through `memo` gives: the request, and what was read there.
fn read(memo: &Memo, format: Format, body: &[u8]) -> (cuca_wire::WireRequest, RequestRead) {
    let reader = memo.reader();
    let request = format.parse_request_with(body, &reader).unwrap();
    (request, reader.finish())
}

#[test]
fn a_request_read_through_the_memo_is_the_request_read_anew() {
    let memo = memo(None);
    let first = chat(&[
        serde_json::json!({"role": "system", "content": "Be terse."}),
        serde_json::json!({"role": "user", "content": "hi"}),
    ]);
    let second = chat(&[
        serde_json::json!({"role": "system", "content": "Be terse."}),
        serde_json::json!({"role": "user", "content": "hi"}),
        serde_json::json!({"role": "assistant", "content": "hello", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}),
        serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"}),
    ]);
    for body in [&first, &second, &first, &second] {
        let (through, read) = read(&memo, Format::Chat, body);
        let anew = Format::Chat.parse_request(body).unwrap();
        assert_eq!(through.unified, anew.unified);
        assert_eq!(read.n_messages(), anew.unified.messages.len());
    }
    // Four distinct elements were read once each and kept.
    assert_eq!(memo.lock().current.len(), 4);
}

#[test]
fn the_messages_format_reads_system_itself_and_each_message_through_the_memo() {
    let memo = memo(None);
    let body = serde_json::json!({"model": "m", "max_tokens": 8, "system": "Be terse.",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                {"type": "text", "text": "and?"}]},
        ]})
    .to_string();
    for _ in 0..2 {
        let (through, read) = read(&memo, Format::Messages, body.as_bytes());
        let anew = Format::Messages.parse_request(body.as_bytes()).unwrap();
        assert_eq!(through.unified, anew.unified);
        // The system prompt, then 1 + 1 + 2 messages from the three elements.
        assert_eq!(anew.unified.messages.len(), 5);
        assert_eq!(read.n_messages(), 4);
    }
}

#[test]
fn a_kept_element_is_handed_back_redacted_with_its_counts() {
    let rules = Rules::new(&cuca_redact::Config::default()).unwrap();
    let memo = memo(Some(Arc::new(rules)));
    let key = format!("sk-proj-{}", "a1B2c3D4e5".repeat(5));
    let body = chat(&[serde_json::json!({"role": "user", "content": format!("my key is {key}")})]);
    for _ in 0..3 {
        let (request, read) = read(&memo, Format::Chat, &body);
        let text = request.unified.messages[0].text();
        assert!(!text.contains(&key), "{text}");
        assert_eq!(read.counts().total(), 1, "{:?}", read.counts());
    }
}

#[test]
fn kept_keys_are_the_keys_the_match_computes() {
    let memo = memo(None);
    let keys = Arc::clone(&memo.keys);
    let other = Keys::new(Matching::new(&[], false).unwrap());
    let body = chat(&[
        serde_json::json!({"role": "system", "content": "Be terse."}),
        serde_json::json!({"role": "user", "content": "hi"}),
    ]);
    for _ in 0..2 {
        let (request, read) = read(&memo, Format::Chat, &body);
        let known = read.keys(&keys, &keys, request.unified.messages.len());
        let m = &request.unified.messages;
        assert_eq!(
            known,
            vec![Some(keys.text(&m[0].text())), Some(keys.message(&m[1]))]
        );
        // Keys made by other keys are never taken for these.
        assert_eq!(read.keys(&other, &keys, 2), vec![None, None]);
    }
}

#[test]
fn an_element_that_is_not_a_message_is_refused_every_time_and_not_kept() {
    let memo = memo(None);
    let body = chat(&[serde_json::json!({"role": "wizard", "content": "hi"})]);
    for _ in 0..2 {
        let reader = memo.reader();
        let error = Format::Chat.parse_request_with(&body, &reader).unwrap_err();
        assert_eq!(error, Format::Chat.parse_request(&body).unwrap_err());
        assert!(error.contains("messages[0]"), "{error}");
    }
    assert!(memo.lock().current.is_empty());
}

#[test]
fn what_is_kept_stays_within_two_generations() {
    let memo = memo(None);
    let filler = "x".repeat(200 * 1024);
    // 100 distinct elements of 200 KiB: 20 MiB read, at most two generations kept.
    for n in 0..100 {
        let body = chat(&[serde_json::json!({"role": "user", "content": format!("{n} {filler}")})]);
        read(&memo, Format::Chat, &body);
    }
    let kept = memo.lock();
    assert!(kept.current_bytes <= GENERATION_BYTES);
    let n_kept = kept.current.len() + kept.previous.len();
    assert!(n_kept * 200 * 1024 <= 2 * GENERATION_BYTES, "{n_kept} kept");
    assert!(n_kept >= 40, "{n_kept} kept");
}

#[test]
fn an_element_over_the_limit_is_read_every_time_and_never_kept() {
    let memo = memo(None);
    let big = "y".repeat(MAX_ELEMENT_BYTES + 1);
    let body = chat(&[serde_json::json!({"role": "user", "content": big})]);
    let (request, read) = read(&memo, Format::Chat, &body);
    assert_eq!(
        request.unified.messages[0].text().len(),
        MAX_ELEMENT_BYTES + 1
    );
    assert_eq!(read.n_messages(), 1);
    assert!(memo.lock().current.is_empty());
}

#[test]
fn a_memo_that_does_not_key_reads_alike_and_knows_no_key() {
    let keys = Arc::new(Keys::new(Matching::new(&[], false).unwrap()));
    let memo = Memo::new(None, Arc::clone(&keys), false, false);
    let body = chat(&[serde_json::json!({"role": "user", "content": "hi"})]);
    for _ in 0..2 {
        let (request, read) = read(&memo, Format::Chat, &body);
        assert_eq!(
            request.unified,
            Format::Chat.parse_request(&body).unwrap().unified
        );
        assert_eq!(read.n_messages(), 1);
        assert_eq!(read.keys(&keys, &keys, 1), vec![None]);
    }
}

#[test]
fn many_tiny_elements_are_bounded_by_their_count_too() {
    let memo = memo(None);
    // 100,000 distinct elements of ~40 bytes: 4 MB of bytes, but far more in entries.
    for n in 0..100_000 {
        let body = chat(&[serde_json::json!({"role": "user", "content": n.to_string()})]);
        read(&memo, Format::Chat, &body);
    }
    let kept = memo.lock();
    let n_kept = kept.current.len() + kept.previous.len();
    assert!(
        n_kept <= 2 * GENERATION_BYTES / ENTRY_BYTES,
        "{n_kept} kept"
    );
}

fn loop_body(turns: usize) -> Vec<u8> {
    let mut messages = vec![serde_json::json!({"role": "system", "content": "Be terse."})];
    for turn in 0..turns {
        messages
            .push(serde_json::json!({"role": "user", "content": format!("key sk-{turn:0>40}")}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!("noted {turn}")}));
    }
    chat(&messages)
}

#[test]
fn lent_messages_come_back_and_are_lent_again_as_read() {
    let rules = Some(Arc::new(
        Rules::new(&cuca_redact::Config::default()).unwrap(),
    ));
    let memo = lending(rules.clone());
    let plain = self::memo(rules);
    for turns in [1, 2, 3, 3] {
        let body = loop_body(turns);
        let (request, read) = read(&memo, Format::Chat, &body);
        let (expected, expected_read) = self::read(&plain, Format::Chat, &body);
        assert_eq!(request.unified, expected.unified, "turn {turns}");
        assert_eq!(read.counts(), expected_read.counts());
        assert_eq!(read.n_messages(), request.unified.messages.len());
        // While the request holds them, no kept element holds its messages.
        assert_eq!(holding(&memo), 0, "turn {turns}");
        memo.give_back(&read, request.unified.messages);
        assert_eq!(holding(&memo), memo.lock().current.len(), "turn {turns}");
    }
}

#[test]
fn an_element_lent_to_another_request_is_read_anew_and_both_come_back_whole() {
    let memo = lending(None);
    let body = loop_body(2);
    let anew = Format::Chat.parse_request(&body).unwrap();
    let (first, first_read) = read(&memo, Format::Chat, &body);
    // Asked again before the first was answered: read anew, each element kept again.
    let (second, second_read) = read(&memo, Format::Chat, &body);
    assert_eq!(second.unified, anew.unified);
    memo.give_back(&first_read, first.unified.messages);
    memo.give_back(&second_read, second.unified.messages);
    // Whichever came back first is kept; the third reading is the reading anew.
    let (third, _) = read(&memo, Format::Chat, &body);
    assert_eq!(third.unified, anew.unified);
}

#[test]
fn an_element_never_given_back_is_read_anew_and_kept_again() {
    let memo = lending(None);
    let body = loop_body(2);
    let anew = Format::Chat.parse_request(&body).unwrap();
    // A call that failed: its request dropped, never given back.
    drop(read(&memo, Format::Chat, &body));
    let (again, read_again) = read(&memo, Format::Chat, &body);
    assert_eq!(again.unified, anew.unified);
    memo.give_back(&read_again, again.unified.messages);
    assert_eq!(holding(&memo), memo.lock().current.len());
}

#[test]
fn only_what_was_read_through_the_memo_is_given_back() {
    let memo = lending(None);
    // The Messages format reads `system` itself: it comes first, is not the memo's, and is
    // dropped, not given to an element.
    let body = serde_json::json!({"model": "m", "max_tokens": 8, "system": "Be terse.",
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string()
    .into_bytes();
    let (request, read) = read(&memo, Format::Messages, &body);
    assert_eq!(request.unified.messages.len(), 2);
    memo.give_back(&read, request.unified.messages);
    let (again, _) = self::read(&memo, Format::Messages, &body);
    assert_eq!(
        again.unified,
        Format::Messages.parse_request(&body).unwrap().unified
    );
}
