//! The quickstart's example agent: a small coding agent with two tools, `run_command` and
//! `edit_file`, in a Chat Completions tool loop against `$OPENAI_BASE_URL` (which `cuca run`
//! points at its proxy). It does what the real ones do to a workspace — edits a file, runs
//! commands through `$SHELL` — so a recording of it holds the model's half and the files' and
//! commands' half of a run, and a replay re-runs it for real with no model.

use std::path::{Component, Path};
use std::process::Command;

use serde_json::{json, Value};

use crate::error::CliError;

/// The model the agent asks for; the scripted model answers any name.
pub(crate) const MODEL: &str = "quickstart-model";

/// The task, as the agent's first user message.
pub(crate) const TASK: &str = "Make `sh check.sh` pass in this directory.";

/// More calls than the task needs: a model that never stops does not loop forever.
const MAX_CALLS: usize = 8;

/// The most bytes of a command's stdout or stderr put into a tool result.
const MAX_STREAM_BYTES: usize = 4_096;

/// Runs the agent in the current directory: prints each step on stdout and the model's last
/// answer as `agent: done: …`. A model server that refuses a call (a replay divergence: 409)
/// ends it with that answer as the error.
pub(crate) fn run() -> Result<(), CliError> {
    let base = std::env::var("OPENAI_BASE_URL").map_err(|_| {
        CliError::Usage("quickstart-agent: OPENAI_BASE_URL is not set (`cuca run` sets it)".into())
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start a runtime: {error}")))?;
    runtime.block_on(tool_loop(base.trim_end_matches('/')))
}

async fn tool_loop(base: &str) -> Result<(), CliError> {
    let client = reqwest::Client::new();
    let key = std::env::var("OPENAI_API_KEY").unwrap_or_default();
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent. Use the tools; say when you are done."}),
        json!({"role": "user", "content": TASK}),
    ];
    for _ in 0..MAX_CALLS {
        let request = json!({"model": MODEL, "messages": messages, "tools": tools()});
        let response = client
            .post(format!("{base}/chat/completions"))
            .bearer_auth(&key)
            .json(&request)
            .send()
            .await
            .map_err(|error| {
                CliError::Failed(format!("quickstart-agent: the model call: {error}"))
            })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| CliError::Failed(format!("quickstart-agent: the answer: {error}")))?;
        if !status.is_success() {
            return Err(CliError::Failed(format!(
                "quickstart-agent: the model server answered {status}: {text}"
            )));
        }
        let answer: Value = serde_json::from_str(&text).map_err(|error| {
            CliError::Failed(format!("quickstart-agent: the answer is not JSON: {error}"))
        })?;
        let message = answer["choices"][0]["message"].clone();
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        messages.push(message.clone());
        if calls.is_empty() {
            println!("agent: done: {}", message["content"].as_str().unwrap_or(""));
            return Ok(());
        }
        for call in calls {
            let name = call["function"]["name"].as_str().unwrap_or("");
            let arguments: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}"))
                    .unwrap_or(Value::Null);
            let result = use_tool(name, &arguments);
            println!("agent: {}", result.lines().next().unwrap_or(""));
            messages.push(json!({
                "role": "tool",
                "tool_call_id": call["id"],
                "content": result,
            }));
        }
    }
    Err(CliError::Failed(format!(
        "quickstart-agent: no answer without a tool call in {MAX_CALLS} calls"
    )))
}

/// The tools offered, in Chat Completions' shape.
fn tools() -> Value {
    json!([
        {"type": "function", "function": {
            "name": "run_command",
            "description": "Run a shell command in the project directory.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        }},
        {"type": "function", "function": {
            "name": "edit_file",
            "description": "Replace the first occurrence of `old` with `new` in a file of the project.",
            "parameters": {"type": "object", "properties": {
                "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}
            }, "required": ["path", "old", "new"]},
        }},
    ])
}

/// Runs one tool call and words its result as the model reads it; a bad call is a result
/// that says so, as real agents answer it.
fn use_tool(name: &str, arguments: &Value) -> String {
    let text = |key: &str| arguments[key].as_str();
    match (
        name,
        text("command"),
        text("path"),
        text("old"),
        text("new"),
    ) {
        ("run_command", Some(command), ..) => run_command(command),
        ("edit_file", _, Some(path), Some(old), Some(new)) => edit_file(path, old, new),
        _ => format!("error: no tool {name} taking {arguments}"),
    }
}

/// Through `$SHELL -c` (the shell `cuca run` records commands from), else `sh -c`.
fn run_command(command: &str) -> String {
    let shell = std::env::var_os("SHELL").unwrap_or_else(|| "sh".into());
    match Command::new(&shell).arg("-c").arg(command).output() {
        Ok(output) => {
            let code = output
                .status
                .code()
                .map_or("a signal".to_owned(), |c| c.to_string());
            let mut result = format!("`{command}`: exit status {code}\n");
            for (name, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
                if !bytes.is_empty() {
                    let shown = &bytes[..bytes.len().min(MAX_STREAM_BYTES)];
                    result.push_str(&format!("{name}:\n{}", String::from_utf8_lossy(shown)));
                }
            }
            result
        }
        Err(error) => format!(
            "`{command}`: could not start {}: {error}",
            Path::new(&shell).display()
        ),
    }
}

/// Only a relative path inside the working directory is edited.
fn edit_file(path: &str, old: &str, new: &str) -> String {
    let inside = Path::new(path)
        .components()
        .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    if !inside || path.is_empty() {
        return format!("error: {path} is not a path inside the project");
    }
    let before = match std::fs::read_to_string(path) {
        Ok(before) => before,
        Err(error) => return format!("error: read {path}: {error}"),
    };
    if old.is_empty() || !before.contains(old) {
        return format!("error: {path} does not contain {old:?}");
    }
    let after = before.replacen(old, new, 1);
    match std::fs::write(path, after) {
        Ok(()) => format!("edited {path}: {old:?} -> {new:?}"),
        Err(error) => format!("error: write {path}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_outside_the_project_is_refused_and_a_missing_text_is_said() {
        assert!(edit_file("../x", "a", "b").starts_with("error: ../x is not"));
        assert!(edit_file("/etc/passwd", "a", "b").starts_with("error: /etc/passwd is not"));
        assert!(edit_file("", "a", "b").starts_with("error"));
        assert_eq!(
            use_tool("edit_file", &json!({"path": "f.txt"})),
            "error: no tool edit_file taking {\"path\":\"f.txt\"}"
        );
    }
}
