//! `cuca run` starts the proxy on a free loopback port, runs COMMAND with the environment
//! each client reads pointed at it, stops the proxy when COMMAND exits (with COMMAND's exit
//! status), and prints the session and the `cuca view` / `cuca replay` line.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command.env_remove("NO_COLOR").env_remove("CUCA_CALL_LOG");
    command
}

fn run(dir: &Path, args: &[&str], script: &str) -> Output {
    cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Kills the scripted upstream when the test ends, whichever way it ends.
struct Upstream(std::process::Child, String);

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scripted_upstream() -> Upstream {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/scripted_upstream.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg("0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    Upstream(child, url)
}

#[test]
fn run_exits_with_the_commands_status_and_128_plus_the_signal_that_ended_it() {
    let dir = tempfile::tempdir().unwrap();
    let up = ["--upstream", "http://127.0.0.1:9"];
    assert_eq!(run(dir.path(), &up, "exit 0").status.code(), Some(0));
    assert_eq!(run(dir.path(), &up, "exit 3").status.code(), Some(3));
    assert_eq!(run(dir.path(), &up, "exit 255").status.code(), Some(255));
    let killed = run(dir.path(), &up, "kill -KILL $$");
    assert_eq!(killed.status.code(), Some(128 + 9), "{}", stderr(&killed));
    // COMMAND's failure is its own to report: cuca adds no error line of its own.
    assert!(
        !stderr(&killed).contains("cuca: error"),
        "{}",
        stderr(&killed)
    );
}

#[test]
fn run_passes_sigterm_on_to_the_command_and_exits_as_it_does() {
    let dir = tempfile::tempdir().unwrap();
    // The command says it is ready once its trap is set, then waits for the signal.
    let mut child = cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir.path())
        .args(["--upstream", "http://127.0.0.1:9", "--", "sh", "-c"])
        // Unsignalled, it gives up after about ten seconds with another status.
        .arg("trap 'exit 7' TERM; echo ready; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 3")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert_eq!(child.wait().unwrap().code(), Some(7));
}

#[test]
fn run_points_openai_and_anthropic_sdks_at_the_proxy_under_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("env.txt");
    let script = format!(
        "printf '%s\\n' \"$OPENAI_BASE_URL\" \"$ANTHROPIC_BASE_URL\" \"$CUCA_PROXY_URL\" \"$CUCA_SESSION\" \"$OPENAI_API_KEY\" > {}",
        out.display()
    );
    let output = cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir.path())
        .args(["--upstream", "http://127.0.0.1:9", "--session", "agent-1"])
        .args(["--", "sh", "-c", &script])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let base = lines[2];
    let port: u16 = base
        .strip_prefix("http://127.0.0.1:")
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(port, 0);
    assert_eq!(lines[0], format!("{base}/s/agent-1/v1"));
    assert_eq!(lines[1], format!("{base}/s/agent-1"));
    assert_eq!(lines[3], "agent-1");
    // Record mode forwards the caller's own key: none is invented for it.
    assert_eq!(lines[4], "");
    let said = stderr(&output);
    let dir_shown = dir.path().display();
    assert!(said.contains("session agent-1"), "{said}");
    assert!(said.contains(&format!("cuca view {dir_shown}")), "{said}");
    assert!(
        said.contains(&format!("cuca replay {dir_shown} agent-1")),
        "{said}"
    );
}

/// A stand-in `codex` that writes the arguments it was given, one a line, into `out`.
fn fake_codex(dir: &Path, out: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let codex = bin.join("codex");
    std::fs::write(
        &codex,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n", out.display()),
    )
    .unwrap();
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    codex
}

#[test]
fn run_gives_codex_a_model_provider_at_the_proxy_since_it_reads_no_base_url() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("args.txt");
    let codex = fake_codex(dir.path(), &out);
    let output = cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir.path())
        .args(["--mode", "replay", "--session", "cx", "--"])
        .arg(&codex)
        .args(["exec", "hello"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let args = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = args.lines().collect();
    assert_eq!(lines.len(), 6, "{args}");
    assert_eq!(lines[..2], ["-c", "model_provider=cuca"]);
    assert_eq!(lines[2], "-c");
    let port = stderr(&output)
        .split("proxy on http://127.0.0.1:")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(
        lines[3],
        format!(
            r#"model_providers.cuca={{name="cuca",base_url="http://127.0.0.1:{port}/s/cx/v1",wire_api="responses",env_key="OPENAI_API_KEY",request_max_retries=0,stream_max_retries=0}}"#
        ),
        "replayed, Codex is told to retry nothing: the same request gets the same refusal"
    );
    // Codex's own arguments follow, untouched.
    assert_eq!(lines[4..], ["exec", "hello"]);
    assert!(
        stderr(&output).contains("Codex reads no base URL from the environment"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn run_leaves_a_codex_that_chooses_its_provider_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("args.txt");
    let codex = fake_codex(dir.path(), &out);
    let output = cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir.path())
        .args(["--mode", "replay", "--session", "cx", "--"])
        .arg(&codex)
        .args(["-c", "model_provider=mine", "exec", "hello"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "-c\nmodel_provider=mine\nexec\nhello\n"
    );
}

#[test]
fn run_in_replay_mode_gives_an_sdk_that_has_no_key_a_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("keys.txt");
    let script = format!(
        "printf '%s\\n' \"$OPENAI_API_KEY\" \"$ANTHROPIC_API_KEY\" > {}",
        out.display()
    );
    let output = cuca()
        .arg("run")
        .arg("--dir")
        .arg(dir.path())
        .args(["--mode", "replay", "--session", "s"])
        .args(["--", "sh", "-c", &script])
        .env_remove("OPENAI_API_KEY")
        .env("ANTHROPIC_API_KEY", "sk-ant-mine")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "sk-cuca-replay\nsk-ant-mine\n"
    );
}

#[test]
fn run_stops_the_proxy_once_the_command_has_exited() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("proxy.txt");
    // While COMMAND runs, the proxy accepts connections on the port it was given.
    let script = format!(
        "echo \"$CUCA_PROXY_URL\" > {out}; python3 -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1].rsplit(\":\",1)[1])), 2).close()' \"$CUCA_PROXY_URL\" && echo reached >> {out}",
        out = out.display()
    );
    let output = run(dir.path(), &["--upstream", "http://127.0.0.1:9"], &script);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with("reached\n"), "{text}");
    let address = text
        .lines()
        .next()
        .unwrap()
        .strip_prefix("http://")
        .unwrap();
    let refused = TcpStream::connect(address).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
fn run_refuses_replay_and_auto_without_a_session_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for mode in ["replay", "auto"] {
        let output = run(
            dir.path(),
            &["--mode", mode, "--upstream", "http://127.0.0.1:9"],
            &format!("touch {}", marker.display()),
        );
        assert_eq!(output.status.code(), Some(2), "{mode}");
        let said = stderr(&output);
        assert!(
            said.starts_with(&format!(
                "cuca: error: {mode} mode replays a recorded session: name it with --session"
            )),
            "{said}"
        );
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(
            !marker.exists(),
            "COMMAND ran in {mode} mode without a session"
        );
    }
}

#[test]
fn run_refuses_record_mode_without_an_upstream_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &[], "exit 0");
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert!(said.starts_with("cuca: error: "), "{said}");
    assert!(said.contains("upstream"), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
}

fn chat_call(dir: &Path, args: &[&str]) -> Output {
    // The stdlib client reads the base URL cuca run set, as an SDK would.
    let script = "python3 -c 'import json,os,urllib.request as u; r=u.Request(os.environ[\"OPENAI_BASE_URL\"]+\"/chat/completions\", json.dumps({\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}).encode(), {\"Content-Type\":\"application/json\"}); print(json.load(u.urlopen(r))[\"choices\"][0][\"message\"][\"content\"])'";
    run(dir, args, script)
}

#[test]
fn run_records_a_call_then_replays_it_with_the_upstream_gone() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted_upstream();
    let recorded = chat_call(
        dir.path(),
        &["--upstream", &upstream.1, "--session", "chat-1"],
    );
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    assert_eq!(
        String::from_utf8_lossy(&recorded.stdout),
        "Hello from the scripted upstream.\n"
    );
    drop(upstream);
    let replayed = chat_call(dir.path(), &["--mode", "replay", "--session", "chat-1"]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    assert_eq!(replayed.stdout, recorded.stdout);
    let verify = cuca()
        .arg("verify")
        .arg(dir.path())
        .arg("chat-1")
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
    let shown = cuca()
        .arg("replay")
        .arg(dir.path())
        .arg("chat-1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("Hello from the scripted upstream."),
        "{}",
        String::from_utf8_lossy(&shown.stdout)
    );
    assert!(sessions(dir.path()).contains(&"chat-1.cslog".to_owned()));
}

fn sessions(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| PathBuf::from(entry.unwrap().file_name()))
        .map(|name| name.display().to_string())
        .collect()
}
