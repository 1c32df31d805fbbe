//! The quickstart's scripted model: a Chat Completions server on loopback that plays a model
//! fixing `check.sh`'s complaint, so the quickstart's fork has somewhere live to go with no
//! network and no weights. It reads only the conversation: no tool result yet, run the check;
//! the check failed saying what it expected, edit the file to that; the edit went in, run
//! the check again; the check passed, say so. Its answers are deterministic (ids and the
//! `created` time are fixed), so a recording made against it is the same every time.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::agent::MODEL;
use super::start::{CHECK, GREETING};
use crate::error::CliError;

/// The fixed `created` time of every answer (2026-01-01T00:00:00Z).
const CREATED: u64 = 1_767_225_600;

/// A running scripted model; stops when dropped.
pub(crate) struct ScriptedModel {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedModel {
    /// Starts it on a free loopback port.
    pub(crate) fn start() -> Result<ScriptedModel, CliError> {
        let failed = |error: std::io::Error| {
            CliError::Failed(format!("start the quickstart's scripted model: {error}"))
        };
        let listener =
            std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).map_err(failed)?;
        listener.set_nonblocking(true).map_err(failed)?;
        let url = format!("http://{}", listener.local_addr().map_err(failed)?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let app = axum::Router::new().fallback(handle);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Ok(ScriptedModel {
            url,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, as `cuca run --upstream` takes it.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn handle(uri: Uri, body: Bytes) -> Response {
    if !uri.path().ends_with("/chat/completions") {
        return (
            StatusCode::NOT_FOUND,
            "the quickstart model answers only /v1/chat/completions\n",
        )
            .into_response();
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("the request is not JSON: {error}\n"),
            )
                .into_response()
        }
    };
    if request["stream"].as_bool() == Some(true) {
        return (
            StatusCode::BAD_REQUEST,
            "the quickstart model does not stream\n",
        )
            .into_response();
    }
    let text = completion(&request).to_string();
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// The whole answer to `request`.
fn completion(request: &Value) -> Value {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let message = next_message(messages);
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    // Tokens as a tokenizer would roughly count them: enough for a cost report to show.
    let prompt_tokens = request["messages"].to_string().len() / 4;
    let completion_tokens = message.to_string().len() / 4;
    json!({
        "id": format!("chatcmpl-quickstart-{}", messages.len()),
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })
}

/// What the model says next, from the last tool result and the call it answered.
fn next_message(messages: &[Value]) -> Value {
    let id = format!("call_{}", messages.len());
    let run_check = || {
        tool_call(
            &id,
            "run_command",
            json!({"command": format!("sh {CHECK}")}),
        )
    };
    let Some(result) = messages.iter().rev().find(|m| m["role"] == "tool") else {
        return run_check();
    };
    let content = result["content"].as_str().unwrap_or("");
    let tool = called_tool(messages, result["tool_call_id"].as_str().unwrap_or(""));
    match tool.as_deref() {
        Some("run_command") if content.contains("exit status 0") => {
            say(&format!("Done: `sh {CHECK}` passes now."))
        }
        Some("run_command") => match complaint(content) {
            Some((have, want)) => tool_call(
                &id,
                "edit_file",
                json!({"path": GREETING, "old": have, "new": want}),
            ),
            None => say(&format!("I cannot tell what `sh {CHECK}` wants: {content}")),
        },
        Some("edit_file") if content.starts_with("edited") => run_check(),
        _ => say(&format!("I stop here; the last tool said: {content}")),
    }
}

/// The name of the tool the call `id` asked for.
fn called_tool(messages: &[Value], id: &str) -> Option<String> {
    messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .find(|call| call["id"] == id)
        .and_then(|call| call["function"]["name"].as_str())
        .map(str::to_owned)
}

/// `greeting.txt says 'HAVE', expected 'WANT'` in a check's output.
fn complaint(output: &str) -> Option<(String, String)> {
    let rest = &output[output.find("says '")? + "says '".len()..];
    let (have, rest) = rest.split_once("', expected '")?;
    let (want, _) = rest.split_once('\'')?;
    Some((have.to_owned(), want.to_owned()))
}

fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()},
        }],
    })
}

fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_result(id: &str, content: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": content})
    }

    #[test]
    fn it_runs_the_check_edits_what_the_check_wants_then_runs_it_again_then_stops() {
        let mut messages = vec![json!({"role": "user", "content": "fix it"})];
        let first = next_message(&messages);
        assert_eq!(first["tool_calls"][0]["function"]["name"], "run_command");
        messages.push(first);
        messages.push(tool_result(
            "call_1",
            "`sh check.sh`: exit status 1\nstderr:\ngreeting.txt says 'helo world', expected 'Hello, world!'\n",
        ));
        let edit = next_message(&messages);
        let arguments: Value = serde_json::from_str(
            edit["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            arguments,
            json!({"path": "greeting.txt", "old": "helo world", "new": "Hello, world!"})
        );
        messages.push(edit);
        messages.push(tool_result("call_3", "edited greeting.txt"));
        let again = next_message(&messages);
        assert_eq!(again["tool_calls"][0]["function"]["name"], "run_command");
        messages.push(again);
        messages.push(tool_result(
            "call_5",
            "`sh check.sh`: exit status 0\nstdout:\ngreeting ok\n",
        ));
        assert_eq!(
            next_message(&messages)["content"],
            "Done: `sh check.sh` passes now."
        );
    }
}
