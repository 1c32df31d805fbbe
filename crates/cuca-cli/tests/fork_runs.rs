//! Fork mode run by one process after another and at once: a changed run another process
//! recorded replays free, fork ids stay bounded over many variants, and onto another model
//! (`cuca run --mode fork --from POINT --model MODEL`), `cuca compare` and `cuca diff`'s word
//! on a model switch — against a scripted upstream that answers as the model each request
//! names and logs every call it gets, on files and (with `CUCA_PG_URL`) on PostgreSQL.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command
        .env_remove("NO_COLOR")
        .env_remove("CUCA_CALL_LOG")
        .env("CUCA_CALL_LOG", "off");
    command
}

/// A store as the commands name it: a directory, or a PostgreSQL URL and a schema.
struct Store {
    word: OsString,
    schema: Option<String>,
    /// The throwaway schema, dropped with it.
    _pg: Option<cuca::PostgresBackend>,
}

impl Store {
    fn dir(dir: &Path) -> Store {
        Store {
            word: dir.join("store").into_os_string(),
            schema: None,
            _pg: None,
        }
    }

    /// A schema of its own on the test server `CUCA_PG_URL` names; `None` (the test skips)
    /// without one, unless `CI` is set.
    fn postgres() -> Option<Store> {
        let Some(url) = std::env::var("CUCA_PG_URL").ok().filter(|u| !u.is_empty()) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but CUCA_PG_URL is not"
            );
            eprintln!("skipped: CUCA_PG_URL is unset (bash .ci/postgres.sh start env; . ./env)");
            return None;
        };
        let config = cuca::PostgresConfig::new(&url)
            .unwrap()
            .with_throwaway_schema();
        let backend = cuca::PostgresBackend::connect(config).unwrap();
        Some(Store {
            word: url.into(),
            schema: Some(backend.schema().to_owned()),
            _pg: Some(backend),
        })
    }
}

/// `cuca` on `store`: with its `--schema` when it has one.
fn on(store: &Store) -> Command {
    let mut command = cuca();
    if let Some(schema) = &store.schema {
        command.args(["--schema", schema]);
    }
    command
}

fn agents() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// Kills the upstream when the test ends, whichever way it ends.
struct Upstream {
    child: std::process::Child,
    url: String,
    log: PathBuf,
}

impl Upstream {
    fn start(dir: &Path) -> Upstream {
        let log = dir.join("upstream.log");
        let mut child = Command::new("python3")
            .arg(agents().join("per_model_upstream.py"))
            .arg(&log)
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
        Upstream { child, url, log }
    }

    /// The calls that reached it since the last look, as `MODEL N` (N: the user messages the
    /// call carried, so the call's number), and forgets them.
    fn calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text.lines().map(str::to_owned).collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What `cuca verify` said: each session's finding (stdout), then the sum (stderr), so a
/// failed check names the session and the finding.
fn findings(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(output)
    )
}

/// `cuca run --store STORE --session s ARGS -- python3 three_calls.py` in `work`.
fn run_agent(store: &Store, work: &Path, args: &[&str]) -> Output {
    run_variant(store, work, args, None)
}

/// [`run_agent`] with the agent changed from its second call on (`VARIANT`).
fn run_variant(store: &Store, work: &Path, args: &[&str], variant: Option<&str>) -> Output {
    let mut command = on(store);
    command
        .arg("run")
        .arg("--store")
        .arg(&store.word)
        .args(["--session", "s"])
        .args(args)
        .arg("--")
        .arg("python3")
        .arg(agents().join("three_calls.py"))
        .current_dir(work)
        .env_remove("VARIANT");
    if let Some(variant) = variant {
        command.env("VARIANT", variant);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

/// The run's answer.txt, read where the agent ran: the copy of the recorded start `cuca run`
/// restored a replay or fork into (it says where on stderr; removed once read), else `work`
/// (a recording without workspace snapshots, as on PostgreSQL, runs where it is).
fn answer(output: &Output, work: &Path) -> String {
    let said = stderr(output);
    let copy = said
        .lines()
        .find_map(|line| line.split("restored into ").nth(1))
        .map(|dir| PathBuf::from(dir.trim()));
    let text = std::fs::read_to_string(copy.as_deref().unwrap_or(work).join("answer.txt"))
        .unwrap_or_else(|error| panic!("no answer.txt ({error}): {said}"));
    if let Some(copy) = copy {
        let _ = std::fs::remove_dir_all(copy);
    }
    text
}

fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn records(store: &Store, session: &str) -> Vec<serde_json::Value> {
    let output = on(store)
        .args(["--no-pager", "show", "--json"])
        .arg(&store.word)
        .arg(session)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    json_lines(&output)
}

fn sessions(store: &Store) -> Vec<String> {
    let output = on(store)
        .args(["--no-pager", "sessions", "--json", "--sort", "name"])
        .arg(&store.word)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    json_lines(&output)
        .iter()
        .map(|row| row["session"].as_str().unwrap().to_owned())
        .collect()
}

/// The original's records, less the `Fork` audit records a fork leaves in its parent.
fn own_records(store: &Store, session: &str) -> Vec<serde_json::Value> {
    records(store, session)
        .into_iter()
        .filter(|record| record["event"].get("Fork").is_none())
        .collect()
}

/// Records session `s` in `store`: three calls, all to model a.
fn record(store: &Store, work: &Path, upstream: &Upstream) {
    run_agent(store, work, &["--upstream", &upstream.url]);
    assert_eq!(upstream.calls(), ["a 1", "a 2", "a 3"]);
}

#[test]
fn a_fork_onto_another_model_replays_before_the_point_and_sends_the_rest_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, work) = (Store::dir(dir.path()), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir.path());
    record(&store, &work, &upstream);
    let before = records(&store, "s");

    let swap = [
        "--mode",
        "fork",
        "--from",
        "2",
        "--model",
        "b",
        "--upstream",
    ];
    let forked = run_agent(
        &store,
        &work,
        &[&swap[..], &[upstream.url.as_str()]].concat(),
    );
    // The first call was replayed; the second and third went to model b, and only they.
    assert_eq!(upstream.calls(), ["b 2", "b 3"], "{}", stderr(&forked));
    assert_eq!(answer(&forked, &work), "b-answer-3\n");

    let forks: Vec<String> = sessions(&store)
        .into_iter()
        .filter(|id| id.starts_with("s:fork:"))
        .collect();
    assert_eq!(forks.len(), 1, "{forks:?}");
    let fork = &forks[0];
    let prefix = &before[..before
        .iter()
        .position(|r| r["event"].get("CallRequest").is_some())
        .unwrap()];
    let events: Vec<serde_json::Value> = records(&store, fork)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect();
    // The fork begins with the recording's records up to the point, then says which model
    // it goes on with, before the first call it sent live.
    let swap_at = events
        .iter()
        .position(|e| e.get("ModelSwap").is_some())
        .expect("a ModelSwap record");
    assert_eq!(events[swap_at]["ModelSwap"]["from"], "a");
    assert_eq!(events[swap_at]["ModelSwap"]["to"], "b");
    assert!(swap_at > prefix.len());
    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| e.get("CallRequest"))
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    // The recorded requests show the model actually sent.
    assert_eq!(asked, ["a", "b", "b"]);
    // The recording itself is as it was: only the fork's audit record was added.
    assert_eq!(own_records(&store, "s"), before);

    // The same swap again, from a new process: every call is replayed, from the recording up
    // to the point and from the fork after it; the upstream gets none.
    std::fs::remove_file(work.join("answer.txt")).unwrap();
    let again = run_agent(
        &store,
        &work,
        &[&swap[..], &[upstream.url.as_str()]].concat(),
    );
    assert_eq!(upstream.calls(), Vec::<String>::new(), "{}", stderr(&again));
    assert_eq!(answer(&again, &work), "b-answer-3\n");
    assert_eq!(
        sessions(&store)
            .iter()
            .filter(|id| id.starts_with("s:fork:"))
            .count(),
        1
    );

    // `cuca diff` names the switch.
    let diff = on(&store)
        .args(["--no-pager", "diff"])
        .arg(&store.word)
        .args(["s", fork])
        .output()
        .unwrap();
    assert!(diff.status.success(), "{}", stderr(&diff));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        text.contains(&format!("model switch: s asked for a, {fork} for b")),
        "{text}"
    );
    let diff_json = on(&store)
        .args(["--no-pager", "diff", "--json"])
        .arg(&store.word)
        .args(["s", fork])
        .output()
        .unwrap();
    let lines = json_lines(&diff_json);
    let b_tail = lines.iter().find_map(|l| l.get("b_tail")).unwrap();
    assert_eq!(b_tail["model"], "b");
    assert_eq!(b_tail["model_switched"], true);

    let verify = on(&store).arg("verify").arg(&store.word).output().unwrap();
    assert!(verify.status.success(), "{}", findings(&verify));
}

#[test]
fn a_call_that_differs_before_the_point_is_a_divergence_and_reaches_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let (store, work) = (Store::dir(dir.path()), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir.path());
    record(&store, &work, &upstream);
    // A point past the first call: the first two calls must match the recording, and the
    // agent's calls do; one that asks something else before the point is refused.
    let output = on(&store)
        .arg("run")
        .arg("--store")
        .arg(&store.word)
        .args(["--session", "s", "--mode", "fork", "--from", "3", "--model", "b"])
        .args(["--upstream", &upstream.url, "--", "sh", "-c"])
        .arg(format!(
            "curl -s -o /dev/null -w '%{{http_code}}' \"$OPENAI_BASE_URL/chat/completions\" -H 'content-type: application/json' -d '{}'",
            r#"{"model":"a","messages":[{"role":"system","content":"You do three steps."},{"role":"user","content":"something else"}]}"#
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "409",
        "{}",
        stderr(&output)
    );
    assert_eq!(upstream.calls(), Vec::<String>::new());
    // `--from` needs `--model`, and a swap needs fork mode.
    for args in [
        &["--mode", "fork", "--from", "2"][..],
        &["--mode", "record", "--from", "2", "--model", "b"][..],
        &["--mode", "fork", "--from", "1", "--model", "b"][..],
    ] {
        let refused = on(&store)
            .arg("run")
            .arg("--store")
            .arg(&store.word)
            .args(["--session", "s", "--upstream", &upstream.url])
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&refused)
        );
        let proxy = on(&store)
            .arg("proxy")
            .arg("--store")
            .arg(&store.word)
            .args(["--listen", "127.0.0.1:0", "--upstream", &upstream.url])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(proxy.status.code(), Some(2), "{args:?}: {}", stderr(&proxy));
    }
    // `cuca proxy` takes the same swap, and says so.
    let mut proxy = on(&store)
        .arg("proxy")
        .arg("--store")
        .arg(&store.word)
        .args(["--listen", "127.0.0.1:0", "--upstream", &upstream.url])
        .args(["--mode", "fork", "--from", "2", "--model", "b"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(proxy.stdout.take().unwrap()).lines();
    let listening = lines.next().unwrap().unwrap();
    let said = lines.next().unwrap().unwrap();
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(listening.starts_with("listening on "), "{listening}");
    assert!(
        said.starts_with("mode fork, calls from 2 on sent to b, "),
        "{said}"
    );
}

#[test]
fn compare_runs_each_model_in_its_own_copy_and_grades_it() {
    let dir = tempfile::tempdir().unwrap();
    compare_grades_each_model(&Store::dir(dir.path()), dir.path());
}

#[test]
fn compare_runs_each_model_in_its_own_copy_and_grades_it_on_postgres() {
    let Some(store) = Store::postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    compare_grades_each_model(&store, dir.path());
}

/// `cuca compare … --models a,b --verify …` on `store`: a table with one pass and one fail,
/// each model's fork recorded, the recording untouched; `--json` the same, replayed free.
fn compare_grades_each_model(store: &Store, dir: &Path) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("task.md"), "three steps\n").unwrap();
    let upstream = Upstream::start(dir);
    record(store, &work, &upstream);
    std::fs::remove_file(work.join("answer.txt")).unwrap();
    // Today's files are not the recorded start: each model starts from the start.
    std::fs::write(work.join("task.md"), "changed since\n").unwrap();
    let before = records(store, "s");

    let compare = |json: bool| {
        let mut command = on(store);
        command
            .args(["--no-pager", "compare"])
            .arg(&store.word)
            .args(["s", "--from", "2", "--models", "a,b", "--jobs", "2"])
            .args(["--verify", "grep -q b-answer answer.txt && test -f task.md"])
            .args(["--upstream", &upstream.url])
            // The copies are kept under the temporary directory: this test's own.
            .env("TMPDIR", dir);
        if json {
            command.arg("--json");
        }
        let output = command
            .arg("--")
            .arg("python3")
            .arg(agents().join("three_calls.py"))
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        output
    };
    let shown = compare(false);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    let mut calls = upstream.calls();
    calls.sort();
    // Each model got the calls from the point on, and nothing before it.
    assert_eq!(calls, ["a 2", "a 3", "b 2", "b 3"], "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("model"), "{text}");
    for word in [
        "verdict",
        "turns",
        "tokens in",
        "tokens out",
        "cost",
        "wall",
        "fork",
    ] {
        assert!(lines[0].contains(word), "{text}");
    }
    let row = |model: &str| {
        *lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(model))
            .unwrap_or_else(|| panic!("no row for {model}: {text}"))
    };
    let (a, b) = (row("a"), row("b"));
    assert_eq!(a.split_whitespace().nth(1), Some("fail"), "{text}");
    assert_eq!(b.split_whitespace().nth(1), Some("pass"), "{text}");
    // Models the price table does not know cost "unknown", never 0.
    assert!(a.contains("unknown") && b.contains("unknown"), "{text}");
    assert!(b.contains("s:fork:s:"), "{text}");
    // The working directory the compare ran from is left as it was.
    assert!(!work.join("answer.txt").exists());
    assert_eq!(
        std::fs::read_to_string(work.join("task.md")).unwrap(),
        "changed since\n"
    );

    let rows = json_lines(&compare(true));
    assert_eq!(rows.len(), 2);
    // The second compare replays each model's fork: nothing reaches the upstream.
    assert_eq!(upstream.calls(), Vec::<String>::new());
    for row in &rows {
        let model = row["model"].as_str().unwrap();
        assert_eq!(row["verdict"], if model == "b" { "pass" } else { "fail" });
        assert_eq!(row["turns"], 2, "{row}");
        assert_eq!(row["prompt_tokens"], 50, "{row}");
        assert_eq!(row["completion_tokens"], 6, "{row}");
        assert!(row["cost_usd"].is_null(), "{row}");
        let fork = row["fork"].as_str().unwrap();
        let swapped = records(store, fork)
            .into_iter()
            .find_map(|r| r["event"].get("ModelSwap").cloned())
            .unwrap();
        assert_eq!(swapped["to"], model);
        let answer = std::fs::read_to_string(
            Path::new(row["workspace"].as_str().unwrap()).join("answer.txt"),
        )
        .unwrap();
        assert_eq!(answer, format!("{model}-answer-3\n"));
        let task =
            std::fs::read_to_string(Path::new(row["workspace"].as_str().unwrap()).join("task.md"))
                .unwrap();
        assert_eq!(task, "three steps\n", "restored from the recorded start");
    }
    assert_eq!(own_records(store, "s"), before);
    // A point that leaves nothing to replay, or a model named twice, is refused before
    // anything runs.
    for (from, models) in [("1", "a,b"), ("2", "a,a"), ("two", "a")] {
        let refused = on(store)
            .args(["--no-pager", "compare"])
            .arg(&store.word)
            .args([
                "s",
                "--from",
                from,
                "--models",
                models,
                "--upstream",
                &upstream.url,
            ])
            .args(["--", "true"])
            .current_dir(&work)
            .output()
            .unwrap();
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{from} {models}: {}",
            stderr(&refused)
        );
    }
    assert_eq!(upstream.calls(), Vec::<String>::new());
    let verify = on(store).arg("verify").arg(&store.word).output().unwrap();
    assert!(verify.status.success(), "{}", findings(&verify));
}

/// A changed run (the agent's second call differs) recorded by one `cuca run --mode fork`
/// process replays, free, in the next: the upstream gets no call.
fn a_changed_run_replays_free_in_the_next_process(store: &Store, dir: &Path) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir);
    record(store, &work, &upstream);
    let fork = ["--mode", "fork", "--upstream", upstream.url.as_str()];
    let changed = run_variant(store, &work, &fork, Some("changed"));
    assert_eq!(upstream.calls(), ["a 2", "a 3"]);
    let first = answer(&changed, &work);
    assert_eq!(first, "a-answer-3 (changed)\n");
    let again = run_variant(store, &work, &fork, Some("changed"));
    assert_eq!(upstream.calls(), Vec::<String>::new(), "{}", stderr(&again));
    assert_eq!(answer(&again, &work), first);
    let forks = sessions(store)
        .into_iter()
        .filter(|id| id.contains(":fork:"))
        .count();
    assert_eq!(forks, 1);
}

#[test]
fn a_changed_run_one_process_recorded_replays_free_in_the_next_on_files() {
    let dir = tempfile::tempdir().unwrap();
    a_changed_run_replays_free_in_the_next_process(&Store::dir(dir.path()), dir.path());
}

#[test]
fn a_changed_run_one_process_recorded_replays_free_in_the_next_on_postgres() {
    let Some(store) = Store::postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    a_changed_run_replays_free_in_the_next_process(&store, dir.path());
}

/// Twenty variants of a run one after another, then eight at once, each its own process:
/// every fork id stays within the 200 bytes a session id may have, every agent gets its own
/// answers, a variant run again replays free, and the store verifies clean.
fn many_variants_keep_ids_bounded(store: &Store, dir: &Path) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir);
    record(store, &work, &upstream);
    let fork = ["--mode", "fork", "--upstream", upstream.url.as_str()];
    for n in 0..20 {
        let variant = format!("v{n}");
        let ran = run_variant(store, &work, &fork, Some(&variant));
        assert_eq!(upstream.calls(), ["a 2", "a 3"], "variant {n}");
        assert_eq!(answer(&ran, &work), format!("a-answer-3 ({variant})\n"));
    }
    let works: Vec<PathBuf> = (20..28)
        .map(|n| {
            let work = dir.join(format!("work-{n}"));
            std::fs::create_dir_all(&work).unwrap();
            work
        })
        .collect();
    let ran: Vec<Output> = std::thread::scope(|scope| {
        let runs: Vec<_> = (20..28)
            .zip(&works)
            .map(|(n, work)| {
                let fork = &fork;
                scope.spawn(move || run_variant(store, work, fork, Some(&format!("v{n}"))))
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let mut calls = upstream.calls();
    calls.sort();
    assert_eq!(calls.len(), 16, "{calls:?}");
    for ((n, work), ran) in (20..28).zip(&works).zip(&ran) {
        assert_eq!(
            answer(ran, work),
            format!("a-answer-3 (v{n})\n"),
            "every answer its caller's"
        );
    }
    // A variant already tried replays from its branch.
    run_variant(store, &work, &fork, Some("v7"));
    assert_eq!(upstream.calls(), Vec::<String>::new());
    let ids = sessions(store);
    let forks: Vec<&String> = ids.iter().filter(|id| id.contains(":fork:")).collect();
    assert_eq!(forks.len(), 28, "{forks:?}");
    let longest = ids.iter().map(String::len).max().unwrap();
    assert!(
        longest <= 200,
        "the longest id has {longest} bytes: {ids:?}"
    );
    let verify = on(store).arg("verify").arg(&store.word).output().unwrap();
    assert!(verify.status.success(), "{}", findings(&verify));
}

#[test]
fn twenty_variants_then_eight_at_once_keep_fork_ids_bounded_on_files() {
    let dir = tempfile::tempdir().unwrap();
    many_variants_keep_ids_bounded(&Store::dir(dir.path()), dir.path());
}

#[test]
fn twenty_variants_then_eight_at_once_keep_fork_ids_bounded_on_postgres() {
    let Some(store) = Store::postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    many_variants_keep_ids_bounded(&store, dir.path());
}
