//! The CI recipe of docs/ci.md, run as people copy it: docs/ci/conftest.py and
//! docs/ci/test_example.py under a real pytest with the `openai` SDK, recorded through
//! `cuca run` in front of the scripted upstream, then replayed with the replay command of
//! docs/ci/github-actions.yml (`--strict --report`): it passes; a test changed to skip a call
//! fails the run although pytest passes, and a changed prompt fails it; the JUnit file names
//! each. docs/ci.md must quote the two Python files and the workflow as they are.
//!
//! Needs `CUCA_TEST_PYTHON` (the venv `.ci/run` makes, with openai and pytest pinned); without
//! it the test says so and passes, except under CI, where it fails.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap()
}

fn python() -> Option<PathBuf> {
    match std::env::var_os("CUCA_TEST_PYTHON") {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but CUCA_TEST_PYTHON is not: .ci/run makes the venv with openai and pytest")
        }
        None => {
            eprintln!("skipping: CUCA_TEST_PYTHON is not set (.ci/run sets it to the venv with openai and pytest)");
            None
        }
    }
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

/// The workflow's replay command, word by word, with `pytest` run from the venv.
fn replay_command(python: &Path) -> Vec<String> {
    let workflow = doc("docs/ci/github-actions.yml");
    let line = workflow
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("run: cuca run --mode replay"))
        .unwrap();
    let mut words: Vec<String> = ["--mode", "replay"]
        .into_iter()
        .map(str::to_owned)
        .chain(line.split_whitespace().map(str::to_owned))
        .collect();
    let at = words.iter().position(|w| w == "pytest").unwrap();
    words.splice(
        at..=at,
        [python.display().to_string(), "-m".into(), "pytest".into()],
    );
    words
}

/// A project laid out as docs/ci.md says: tests/conftest.py and tests/test_example.py.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    for file in ["conftest.py", "test_example.py"] {
        std::fs::write(tests.join(file), doc(&format!("docs/ci/{file}"))).unwrap();
    }
    dir
}

/// `cuca run ARGS` in `dir`, with `key` as the caller's `OPENAI_API_KEY` (recording needs
/// one, as with a real provider; a replay gets cuca's placeholder).
fn cuca_in(dir: &Path, args: &[String], key: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    match key {
        Some(key) => command.env("OPENAI_API_KEY", key),
        None => command.env_remove("OPENAI_API_KEY"),
    };
    command
        .current_dir(dir)
        .env_remove("CUCA_CALL_LOG")
        .env_remove("OPENAI_BASE_URL")
        .env("NO_COLOR", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("run")
        .args(args)
        .output()
        .unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Each testcase of a JUnit file: its name, and its failure's type and message.
fn junit(path: &Path) -> Vec<(String, Option<(String, String)>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let xml = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    xml.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|case| {
            let failure = case
                .children()
                .find(|n| n.has_tag_name("failure"))
                .map(|f| {
                    (
                        f.attribute("type").unwrap().to_owned(),
                        f.attribute("message").unwrap().to_owned(),
                    )
                });
            (case.attribute("name").unwrap().to_owned(), failure)
        })
        .collect()
}

fn edit(dir: &Path, from: &str, to: &str) {
    let path = dir.join("tests/test_example.py");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from:?} is not in test_example.py");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn the_documented_pytest_recipe_records_once_and_replays_strictly() {
    let Some(python) = python() else { return };
    let project = project();
    let dir = project.path();

    let upstream = scripted_upstream();
    let record: Vec<String> = [
        "--mode",
        "record",
        "--session",
        "tests",
        "--store",
        "tests/recordings",
        "--upstream",
        &upstream.1,
        "--",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([
        python.display().to_string(),
        "-m".into(),
        "pytest".into(),
        "-q".into(),
        "tests".into(),
    ])
    .collect();
    let recorded = cuca_in(dir, &record, Some("sk-scripted-upstream"));
    assert_eq!(recorded.status.code(), Some(0), "{}", said(&recorded));
    assert!(said(&recorded).contains("2 passed"), "{}", said(&recorded));
    drop(upstream);

    // Replayed with the workflow's own command, the upstream gone.
    let replay = replay_command(&python);
    let passed = cuca_in(dir, &replay, None);
    assert_eq!(passed.status.code(), Some(0), "{}", said(&passed));
    assert!(
        said(&passed).contains("strict replay passed: all 3 recorded calls consumed"),
        "{}",
        said(&passed)
    );
    let report = dir.join("cuca-replay.xml");
    let cases = junit(&report);
    // Three recorded calls, and the recording's age under the workflow's `--max-age`.
    assert_eq!(cases.len(), 4, "{cases:?}");
    assert_eq!(cases[3].0, "recording age");
    assert!(
        cases.iter().all(|(_, failure)| failure.is_none()),
        "{cases:?}"
    );
    assert!(
        cases[0]
            .0
            .starts_with("turn 1 of tests:conv:tests-test_example.py-test_a_follow_up (")
            && cases[1]
                .0
                .starts_with("turn 2 of tests:conv:tests-test_example.py-test_a_follow_up (")
            && cases[2]
                .0
                .starts_with("turn 1 of tests:conv:tests-test_example.py-test_one_question ("),
        "{cases:?}"
    );

    // A test changed to skip its second call: pytest passes, the strict replay does not.
    edit(
        dir,
        "second = ask(openai_client, messages)",
        "second = \"skipped\"",
    );
    let skipped = cuca_in(dir, &replay, None);
    assert!(said(&skipped).contains("2 passed"), "{}", said(&skipped));
    assert_eq!(skipped.status.code(), Some(1), "{}", said(&skipped));
    let cases = junit(&report);
    let failed: Vec<_> = cases.iter().filter(|(_, f)| f.is_some()).collect();
    assert_eq!(failed.len(), 1, "{cases:?}");
    let (name, failure) = failed[0];
    assert!(
        name.starts_with("turn 2 of tests:conv:tests-test_example.py-test_a_follow_up"),
        "{name}"
    );
    let (kind, message) = failure.as_ref().unwrap();
    assert_eq!(kind, "unconsumed");
    assert!(message.contains("was never asked for"), "{message}");
    edit(
        dir,
        "second = \"skipped\"",
        "second = ask(openai_client, messages)",
    );

    // A changed prompt: the SDK raises the 409, pytest fails, and the report says where.
    edit(
        dir,
        "Name the capital of Portugal.",
        "Name the capital of Spain.",
    );
    let changed = cuca_in(dir, &replay, None);
    assert_eq!(changed.status.code(), Some(1), "{}", said(&changed));
    assert!(
        said(&changed).contains("1 failed, 1 passed"),
        "{}",
        said(&changed)
    );
    let cases = junit(&report);
    let failed: Vec<_> = cases.iter().filter(|(_, f)| f.is_some()).collect();
    assert_eq!(failed.len(), 1, "{cases:?}");
    let (name, failure) = failed[0];
    assert!(
        name.starts_with("turn 1 of tests:conv:tests-test_example.py-test_one_question ("),
        "{name}"
    );
    let point = name.split_once('(').unwrap().1.trim_end_matches(')');
    let (kind, message) = failure.as_ref().unwrap();
    assert_eq!(kind, "diverged");
    assert_eq!(
        message,
        &format!(
            "{point}: first difference at messages[0].content[0].text, character 20: expected \"Name the capital of Portugal.\", got \"Name the capital of Spain.\""
        )
    );
}

/// docs/ci.md quotes the files a test runs, so what people copy is what was proven.
#[test]
fn the_ci_page_quotes_the_files_it_is_proven_with() {
    let page = doc("docs/ci.md");
    for file in ["conftest.py", "test_example.py", "github-actions.yml"] {
        let text = doc(&format!("docs/ci/{file}"));
        assert!(
            page.contains(&text),
            "docs/ci.md does not quote docs/ci/{file} as it is"
        );
    }
}
