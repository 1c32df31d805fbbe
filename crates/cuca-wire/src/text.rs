//! Quoting a server's words: clipped, and an error body's human part.

/// The longest piece of a server's bytes quoted in an error message: enough to recognise
/// the payload, short enough to keep a log line readable.
pub const SERVER_WORDS_CHARS: usize = 240;

/// `text` (a server's words, or a cause's, quoted in an error message) cut to
/// [`SERVER_WORDS_CHARS`] characters, marked `… (N bytes in all)` when cut.
pub fn clip_server_words(text: &str) -> String {
    match text.char_indices().nth(SERVER_WORDS_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
    }
}

/// The human part of an error body: `error.message` from a JSON error (llama.cpp and
/// OpenAI both send `{"error":{"message":…}}`), the text of an HTML page with its tags
/// stripped, or the body itself; whitespace-collapsed and clipped.
pub fn server_message(body: &str) -> String {
    clip_server_words(&server_text(body))
}

/// [`server_message`] unclipped: what the call log clips once, its own way.
pub fn server_text(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".to_owned();
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(message) = value.get("error").and_then(error_value_text) {
            return message;
        }
        if let Some(message) = error_value_text(&value) {
            return message;
        }
    }
    let text = if body.starts_with('<') {
        strip_tags(body)
    } else {
        body.to_owned()
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Enough of `text` for the call log's `clip_error` to clip it the same way it would clip
/// the whole (one character past its bound), so a huge payload is not held for a row.
pub(crate) fn for_clip_error(text: String) -> String {
    let text = text.trim_start();
    match text.char_indices().nth(cuca_calllog::MAX_ERROR_CHARS + 1) {
        None => text.to_owned(),
        Some((cut, _)) => text[..cut].to_owned(),
    }
}

pub(crate) fn error_value_text(value: &serde_json::Value) -> Option<String> {
    if let Some(text) = value.as_str() {
        return Some(text.to_owned());
    }
    ["message", "detail", "error"]
        .iter()
        .find_map(|key| value.get(key).and_then(|v| v.as_str()))
        .map(str::to_owned)
}

fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len().min(4096));
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}
