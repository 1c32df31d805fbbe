//! What the agent tests share (`agents.rs`, `agents_workspace.rs`): where the clients are,
//! whether they may run, and one agent recorded then replayed inside its own network namespace
//! by `record_replay.sh`.
// Each test file uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const SESSION: &str = "agent";

pub(crate) fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// The path in `variable`, or `None` (skip, with a line) outside CI; under CI its absence
/// fails the test.
pub(crate) fn installed(variable: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(variable) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "{variable}={} does not exist; .ci/run installs {what}",
                path.display()
            );
            Some(path)
        }
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {variable} is not: the agents' proof needs {what}, which .ci/run installs")
        }
        None => {
            eprintln!("skipping: {variable} is not set (.ci/run sets it to {what})");
            None
        }
    }
}

pub(crate) fn node_modules() -> Option<PathBuf> {
    installed(
        "CUCA_TEST_NODE_MODULES",
        "the pinned npm agents under target/agents-node/node_modules",
    )
}

pub(crate) fn python() -> Option<PathBuf> {
    installed(
        "CUCA_TEST_PYTHON",
        "the venv target/py-venv with openai, anthropic and openai-agents",
    )
}

/// Whether this process may make a network namespace (root, or a user namespace allowed);
/// outside CI a machine that cannot is skipped with a line.
pub(crate) fn can_unshare() -> bool {
    let works = Command::new("unshare")
        .args(["--net", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but `unshare --net` fails: the agents must run with only loopback (.ci/run runs as root)"
        );
        eprintln!("skipping: `unshare --net` is not allowed here (run as root)");
    }
    works
}

/// What one record-then-replay left behind.
pub(crate) struct Run {
    pub(crate) out: tempfile::TempDir,
}

impl Run {
    pub(crate) fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.path().join(name)).unwrap_or_default()
    }

    pub(crate) fn sessions(&self) -> PathBuf {
        self.out.path().join("sessions")
    }

    /// Everything a failure message needs: both runs' output and errors (the proxy's
    /// included) and the paths the upstream was asked for.
    pub(crate) fn story(&self) -> String {
        let mut story = String::new();
        for name in [
            "record.status",
            "record.out",
            "record.err",
            "replay.status",
            "replay.out",
            "replay.err",
            "upstream.log",
        ] {
            story.push_str(&format!("--- {name}\n{}\n", self.read(name)));
        }
        story
    }

    pub(crate) fn cuca(&self, args: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_cuca"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cuca {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            self.story()
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// Runs `client` recorded then replayed inside a fresh network namespace, with `env` and
/// the working directory `work` (the same for both runs: the agents put it in their prompt).
pub(crate) fn record_then_replay(client: &[&str], env: &[(&str, String)]) -> Run {
    record_then_replay_in(client, env, |_| {})
}

/// [`record_then_replay`] with the working directory made ready by `prepare` first (the
/// files the agent finds there).
pub(crate) fn record_then_replay_in(
    client: &[&str],
    env: &[(&str, String)],
    prepare: impl FnOnce(&Path),
) -> Run {
    let out = tempfile::tempdir().unwrap();
    let work = out.path().join("work");
    std::fs::create_dir(&work).unwrap();
    prepare(&work);
    let status = Command::new("unshare")
        .arg("--net")
        .arg("sh")
        .arg(agents_dir().join("record_replay.sh"))
        .arg(out.path())
        .arg(SESSION)
        .arg("--")
        .args(client)
        .current_dir(&work)
        .env("CUCA", env!("CARGO_BIN_EXE_cuca"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        // As on a CI machine, where no login shell set it: an agent left to choose its own
        // shell (Claude Code picks zsh when there is one) must still replay as recorded.
        .env_remove("SHELL")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .status()
        .unwrap();
    let run = Run { out };
    assert!(
        status.success(),
        "record_replay.sh failed: {status}\n{}",
        run.story()
    );
    run
}

pub(crate) fn home(run_dir: &Path, name: &str) -> String {
    let home = run_dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    home.display().to_string()
}

/// Claude Code's environment: a fresh home, a key the upstream never checks, and its
/// telemetry, update checks and error reports off ("with their telemetry and update checks
/// off").
pub(crate) fn claude_env(scratch: &Path, max_output_tokens: u32) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", home(scratch, "home")),
        ("ANTHROPIC_API_KEY", "sk-test".to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("DISABLE_ERROR_REPORTING", "1".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        (
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            max_output_tokens.to_string(),
        ),
    ]
}

/// Codex's environment: a fresh home and `CODEX_HOME`, a key the upstream never checks.
pub(crate) fn codex_env(scratch: &Path) -> Vec<(&'static str, String)> {
    let codex_home = home(scratch, "codex-home");
    vec![
        ("HOME", codex_home.clone()),
        ("CODEX_HOME", codex_home),
        ("OPENAI_API_KEY", "sk-test".to_owned()),
    ]
}

/// `codex exec PROMPT` with the arguments every run takes. Unmodified: `cuca run` gives
/// Codex its model provider (Codex reads no base URL from the environment). An explicit
/// model: under its default one Codex offers a custom provider no tools; analytics off, or
/// each run waits seconds on exit to upload them.
pub(crate) fn codex_args(codex: &Path, prompt: &str) -> Vec<String> {
    [
        codex.to_str().unwrap(),
        "-m",
        "gpt-5.5-codex",
        "-c",
        "analytics.enabled=false",
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    .map(str::to_owned)
    .to_vec()
}
