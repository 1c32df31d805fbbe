//! `cuca export --format html`: one file that holds the viewer's session page — every turn,
//! tool calls and results, reasoning, failures, forks named, the commands that reproduce the
//! run — loads nothing from anywhere, keeps recorded markup as text, and opens offline in
//! Chromium with its search box filtering the turns.
//!
//! The browser test runs Debian's `chromium` through `chromium-driver` inside a network
//! namespace with only loopback (`unshare --net`, as `.ci/run` allows as root): this test
//! binary starts itself again in the namespace to drive the browser there. Without the browser
//! or `unshare` it says so and passes on a developer's machine, and fails under CI (`CI` set).
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

#[path = "../../cuca-view/tests/chromium/mod.rs"]
mod chromium;
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};
use fantoccini::{Client, Locator};

/// A prompt that would end the page's script and start markup if it were written as it is.
const HOSTILE_PROMPT: &str = "</script><b>bold</b><script>alert('prompt')</script> Plan a trip";
const SESSION: &str = "trip";

fn record(sequence: u64, event: SessionEvent) -> SessionRecord {
    SessionRecord {
        session_id: SESSION.to_owned(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence * 10,
        event,
    }
}

/// A directory with `trip` (three turns: a tool call, its result and an answer, then a call
/// cut short), a fork of it, and a call log with a failed call of it.
struct Recording {
    root: tempfile::TempDir,
    fork_id: String,
}

impl Recording {
    fn new() -> Recording {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sessions");
        std::fs::create_dir_all(&dir).unwrap();
        let backend = FileBackend::new(&dir).unwrap();
        let events = [
            SessionEvent::SystemPrompt {
                text: "You plan trips.".into(),
            },
            SessionEvent::Message(Message::user(HOSTILE_PROMPT)),
            SessionEvent::CallRequest {
                model: "planner-small".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 2,
            },
            SessionEvent::Reasoning {
                text: "REASONING the weather decides the route".into(),
            },
            SessionEvent::ToolCall {
                id: "call_7".into(),
                name: "lookup_weather".into(),
                arguments: r#"{"city":"Lisbon"}"#.into(),
            },
            SessionEvent::Latency { duration_ms: 120 },
            SessionEvent::TokenUsage {
                prompt_tokens: 30,
                completion_tokens: 8,
            },
            SessionEvent::ToolResult {
                tool_call_id: "call_7".into(),
                content: "TOOL RESULT sunny, 24 degrees".into(),
                is_error: false,
                stdout: Some("STDOUT of the weather tool".into()),
                stderr: None,
                exit_code: Some(0),
            },
            SessionEvent::Output {
                text: "ANSWER Lisbon is sunny: go by the coast".into(),
            },
            SessionEvent::Latency { duration_ms: 90 },
            SessionEvent::TokenUsage {
                prompt_tokens: 50,
                completion_tokens: 12,
            },
            SessionEvent::Message(Message::user("THIRD TURN and the way back?")),
            SessionEvent::Output {
                text: "Take the".into(),
            },
            SessionEvent::CallIncomplete {
                reason: "INCOMPLETE the upstream closed the stream".into(),
            },
        ];
        for (sequence, event) in events.into_iter().enumerate() {
            backend.append(record(sequence as u64, event)).unwrap();
        }
        let fork_id = backend.fork(SESSION, "trip:8").unwrap();
        drop(backend);
        // A call that failed before the upstream answered: only the call log has it. It ends
        // after every record (the fork's audit record is stamped now), so it has a box of its
        // own after the turns.
        let failed = serde_json::json!({
            "ts": "2099-01-01T00:00:00.000Z", "id": "fail0001", "run": "run-a", "node": SESSION,
            "model": "planner-small", "status": 502, "ms": 40,
            "error": "CALL LOG <i>bad gateway</i>",
        });
        std::fs::write(root.path().join("calls.jsonl"), format!("{failed}\n")).unwrap();
        Recording { root, fork_id }
    }

    fn calls(&self) -> PathBuf {
        self.root.path().join("calls.jsonl")
    }

    /// `cuca export --format html DIR SESSION --calls LOG`, run from the recording's root so
    /// the store is typed as `sessions`.
    fn export(&self, session: &str) -> String {
        let output = common::cuca()
            .current_dir(self.root.path())
            .args(["export", "--format", "html", "sessions", session, "--calls"])
            .arg(self.calls())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }
}

/// The value of every `name="…"` attribute in `page`.
fn attribute_values<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!(" {name}=\"");
    page.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &page[at + needle.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

#[test]
fn the_html_export_holds_every_turn_tool_failure_fork_and_the_reproduce_command() {
    let recording = Recording::new();
    let page = recording.export(SESSION);

    // Every turn's text, the tool call and its result, the reasoning.
    for text in [
        "You plan trips.",
        "Plan a trip",
        "REASONING the weather decides the route",
        "lookup_weather",
        "&quot;city&quot;: &quot;Lisbon&quot;",
        "TOOL RESULT sunny, 24 degrees",
        "STDOUT of the weather tool",
        "ANSWER Lisbon is sunny: go by the coast",
        "THIRD TURN and the way back?",
        "Take the",
    ] {
        assert!(page.contains(text), "{text:?} is missing");
    }
    for turn in ["id=\"turn-1\"", "id=\"turn-2\"", "id=\"turn-3\""] {
        assert!(page.contains(turn), "{turn} is missing");
    }
    // The failures: the call cut short in the session, the failed call only the log has.
    assert!(page.contains("INCOMPLETE the upstream closed the stream"));
    assert!(page.contains("CALL LOG &lt;i&gt;bad gateway&lt;/i&gt;"));
    assert!(page.contains("HTTP 502"));
    // The fork is named, with the point it was cut at as an anchor in the page.
    assert!(page.contains(&recording.fork_id), "the fork is not named");
    assert!(
        page.contains("href=\"#p-8\""),
        "the fork's point is not linked"
    );
    // The commands that reproduce the run.
    assert!(page.contains("cuca run --mode replay --store sessions --session trip -- "));
    assert!(page.contains("cuca replay sessions trip"));

    // The fork's own page names its parent.
    let fork_page = recording.export(&recording.fork_id);
    assert!(fork_page.contains("Branch of"), "the parent is not named");
    assert!(fork_page.contains(">trip<"), "the parent is not named");
}

#[test]
fn the_html_export_loads_nothing_and_keeps_recorded_markup_as_text() {
    let recording = Recording::new();
    let page = recording.export(SESSION);

    // One script and one stylesheet, both written in; nothing loaded from anywhere.
    assert_eq!(page.matches("<script").count(), 1, "one script element");
    assert_eq!(page.matches("</script>").count(), 1, "one script element");
    assert!(!page.contains("<link"), "a linked resource");
    assert!(!page.contains("@import"), "an imported stylesheet");
    for name in ["src", "href", "action", "srcset", "poster", "data"] {
        for value in attribute_values(&page, name) {
            assert!(
                value.starts_with('#') || value.starts_with("data:"),
                "{name}=\"{value}\" leads out of the page"
            );
        }
    }
    for url in page.match_indices("url(") {
        assert!(
            page[url.0..].starts_with("url(data:") || page[url.0..].starts_with("url(\"data:"),
            "a stylesheet loads {}",
            &page[url.0..url.0 + 40]
        );
    }
    let scheme = ["http:", "https:", "//"];
    for value in attribute_values(&page, "src")
        .into_iter()
        .chain(attribute_values(&page, "href"))
    {
        assert!(!scheme.iter().any(|s| value.starts_with(s)), "{value}");
    }
    let policy = attribute_values(&page, "content")
        .into_iter()
        .find(|value| value.starts_with("default-src"))
        .expect("the page carries a Content-Security-Policy");
    assert!(
        policy.starts_with("default-src 'none'; script-src 'sha256-"),
        "{policy}"
    );
    assert!(!policy.contains("unsafe-inline"), "{policy}");

    // The recorded markup is text: escaped, never an element.
    assert!(
        !page.contains(HOSTILE_PROMPT),
        "the prompt was written as markup"
    );
    assert!(
        !page.contains("<b>bold</b>"),
        "the prompt was written as markup"
    );
    assert!(page.contains(
        "&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;&lt;script&gt;alert('prompt')&lt;/script&gt; Plan a trip"
    ));
    // The page's one script element is the last thing before the body closes: nothing
    // recorded came after it or closed it early.
    let script_at = page.find("<script").unwrap();
    assert!(page[script_at..].contains("</script></body></html>"));
}

#[test]
fn the_html_export_writes_a_file_whole_or_not_at_all() {
    let recording = Recording::new();
    let file = recording.root.path().join("run.html");
    let output = common::cuca()
        .current_dir(recording.root.path())
        .args(["export", "--format", "html", "sessions", SESSION, "-o"])
        .arg(&file)
        .arg("--calls")
        .arg(recording.calls())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout.is_empty(), "-o writes nothing to stdout");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        recording.export(SESSION)
    );

    // A session that is not there writes no file, and names the session.
    let missing = recording.root.path().join("missing.html");
    let output = common::cuca()
        .current_dir(recording.root.path())
        .args(["export", "--format", "html", "sessions", "nope", "-o"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("nope"));
    assert!(!missing.exists(), "a failed export left a file");
    let left: Vec<_> = std::fs::read_dir(recording.root.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Set to the page's path when this binary runs again inside the network namespace.
const OFFLINE_PAGE: &str = "CUCA_TEST_EXPORT_HTML_OFFLINE_PAGE";
/// What the run in the namespace prints when it has checked the page, so the run outside
/// knows the browser test ran there (a filter that matched no test would also exit 0).
const CHECKED: &str = "offline page checked in the browser";

/// Whether this process may make a network namespace; under CI it must.
fn can_unshare() -> bool {
    let works = Command::new("unshare")
        .args(["--net", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but `unshare --net` fails: the page must be opened with only loopback (.ci/run runs as root)"
        );
        eprintln!("skipping: `unshare --net` is not allowed here (run as root)");
    }
    works
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_export_opens_offline_in_chromium_and_its_search_filters_the_turns() {
    if let Some(page) = std::env::var_os(OFFLINE_PAGE) {
        check_in_browser(Path::new(&page)).await;
        println!("{CHECKED}");
        return;
    }
    if !chromium::browser_available() || !can_unshare() {
        return;
    }
    let recording = Recording::new();
    let file = recording.root.path().join("run.html");
    std::fs::write(&file, recording.export(SESSION)).unwrap();
    // This very test, again, in a network namespace whose only interface is loopback (up,
    // for chromedriver): the browser has no network to reach.
    let output = Command::new("unshare")
        .arg("--net")
        .args(["sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(std::env::current_exe().unwrap())
        .args([
            "the_html_export_opens_offline_in_chromium_and_its_search_filters_the_turns",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OFFLINE_PAGE, &file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(CHECKED),
        "in the namespace: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The displayed turns' ids, in page order.
async fn shown_turns(client: &Client) -> Vec<String> {
    let mut shown = Vec::new();
    for turn in client
        .find_all(Locator::Css("main section.turn, main section.failed-call"))
        .await
        .unwrap()
    {
        if turn.is_displayed().await.unwrap() {
            shown.push(turn.attr("id").await.unwrap().unwrap_or_default());
        }
    }
    shown
}

/// Waits (up to 10 s) until the displayed turns are `want`.
async fn wait_for_turns(client: &Client, want: &[&str]) {
    let mut shown = Vec::new();
    for _ in 0..100 {
        shown = shown_turns(client).await;
        if shown == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("turns shown {shown:?}, want {want:?}");
}

async fn check_in_browser(page: &Path) {
    // Nothing but loopback: the namespace is what the test says it is.
    // The process's own network namespace's interfaces (`/sys/class/net` shows the mount's).
    let interfaces: Vec<String> = std::fs::read_to_string("/proc/self/net/dev")
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim().to_owned()))
        .collect();
    assert_eq!(
        interfaces,
        vec!["lo".to_owned()],
        "not an offline namespace"
    );
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = chromium::start_browser(profile.path()).await;
    client
        .goto(&format!("file://{}", page.display()))
        .await
        .unwrap();

    // The turns are on the page, the recorded markup as text, and nothing of it ran.
    let all = ["turn-1", "turn-2", "turn-3", "call-fail0001"];
    wait_for_turns(&client, &all).await;
    let prompt = chromium::text_of(&client, "#turn-1 .rec.message .text").await;
    assert!(prompt.contains("</script><b>bold</b>"), "{prompt}");
    assert!(
        client.get_alert_text().await.is_err(),
        "a recorded script ran"
    );
    let bold = client.find_all(Locator::Css("main b")).await.unwrap();
    assert!(bold.is_empty(), "recorded markup became an element");
    // The styles were written in and applied: a turn has its border.
    let border: String = client
        .execute(
            "return getComputedStyle(document.querySelector('section.turn')).borderTopStyle;",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(border, "solid", "the stylesheet did not apply");
    screenshot(&client, "export-html").await;

    // The search box keeps the turns that hold the words, and marks them.
    let search = client.find(Locator::Id("page-search")).await.unwrap();
    search.send_keys("lisbon").await.unwrap();
    wait_for_turns(&client, &["turn-1", "turn-2"]).await;
    let marks = client
        .find_all(Locator::Css("mark.page-hit"))
        .await
        .unwrap();
    assert!(!marks.is_empty(), "the matches are not marked");
    assert_eq!(marks[0].text().await.unwrap().to_lowercase(), "lisbon");
    let count = chromium::text_of(&client, "#page-search-count").await;
    assert_eq!(count, "2 of 4 turns");
    screenshot(&client, "export-html-search").await;

    // Words in collapsed reasoning open it.
    search.clear().await.unwrap();
    search.send_keys("decides the route").await.unwrap();
    wait_for_turns(&client, &["turn-1"]).await;
    let reasoning = client
        .find(Locator::Css("#turn-1 details.reasoning"))
        .await
        .unwrap();
    assert!(reasoning.attr("open").await.unwrap().is_some());

    // The call log's failure is found too; an empty box shows every turn again.
    search.clear().await.unwrap();
    search.send_keys("bad gateway").await.unwrap();
    wait_for_turns(&client, &["call-fail0001"]).await;
    search.clear().await.unwrap();
    search.send_keys(" ").await.unwrap();
    wait_for_turns(&client, &all).await;
    assert!(client
        .find_all(Locator::Css("mark.page-hit"))
        .await
        .unwrap()
        .is_empty());
    client.close().await.unwrap();
}

/// Writes the browser's view into `docs/view/NAME.png` when `CUCA_WRITE_SCREENSHOTS` is set
/// (what `docs/view.md` shows).
async fn screenshot(client: &Client, name: &str) {
    if std::env::var_os("CUCA_WRITE_SCREENSHOTS").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/view");
        let png = client.screenshot().await.unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}
