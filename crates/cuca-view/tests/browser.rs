//! The viewer in a real browser: headless Chromium driven through WebDriver (chromedriver),
//! as a person uses it: open the list, click into a session, expand reasoning, follow a fork
//! to its parent, see a live record appear, open the call log and a journal run. The tests
//! assert on what the page shows, not only on HTTP status.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them). Without them the
//! test says so and passes on a developer's machine, and fails under CI (`CI` set), where a
//! missing browser is a broken setup, not a skip. `CUCA_WRITE_SCREENSHOTS=1` also writes each
//! page's screenshot into `docs/view/` (what `docs/view.md` shows).
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

mod chromium;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chromium::{browser_available, start_browser, text_of};
use fantoccini::{Client, Locator};

fn screenshots_dir() -> Option<PathBuf> {
    std::env::var_os("CUCA_WRITE_SCREENSHOTS")
        .map(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/view"))
}

async fn shot(client: &Client, name: &str) {
    if let Some(dir) = screenshots_dir() {
        std::fs::create_dir_all(&dir).unwrap();
        let png = client.screenshot().await.unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_walks_through_sessions_forks_live_records_calls_and_runs() {
    if !browser_available() {
        return;
    }
    let fixture = support::Fixture::new();
    let base = support::serve(fixture.config()).await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = start_browser(profile.path()).await;
    let waiting = Duration::from_secs(20);

    // The list, most recent first, and its filter box.
    client.goto(&format!("{base}/")).await.unwrap();
    let first = text_of(&client, "#sessions tbody tr:first-child td.id").await;
    assert_eq!(first, "hostile");
    shot(&client, "sessions").await;
    let filter = client.find(Locator::Id("filter")).await.unwrap();
    filter.send_keys("reason").await.unwrap();
    let rows = client
        .find_all(Locator::Css("#sessions tbody tr"))
        .await
        .unwrap();
    let mut shown = Vec::new();
    for row in rows {
        if row.is_displayed().await.unwrap() {
            shown.push(
                row.find(Locator::Css("td.id"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap(),
            );
        }
    }
    assert_eq!(shown, vec!["reasoning"]);
    filter.clear().await.unwrap();

    // Into a session: recorded markup is text, and nothing ran.
    client.goto(&format!("{base}/")).await.unwrap();
    client
        .find(Locator::LinkText("hostile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let output = text_of(&client, ".rec.output .text").await;
    assert!(
        output.contains("<script>alert('output')</script>"),
        "{output}"
    );
    assert!(output.contains("<img src=x onerror="), "{output}");
    assert!(
        client.get_alert_text().await.is_err(),
        "a recorded script raised an alert"
    );
    let images = client.find_all(Locator::Css("main img")).await.unwrap();
    assert!(images.is_empty(), "recorded markup became an image");

    // Reasoning is collapsed until asked for.
    let details = client
        .find(Locator::Css("details.reasoning"))
        .await
        .unwrap();
    assert_eq!(details.attr("open").await.unwrap(), None);
    let hidden = details.find(Locator::Css("div.text")).await.unwrap();
    assert!(!hidden.is_displayed().await.unwrap());
    details
        .find(Locator::Css("summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(details.attr("open").await.unwrap().is_some());
    assert!(hidden.is_displayed().await.unwrap());
    assert_eq!(hidden.text().await.unwrap(), "secret reasoning text");
    shot(&client, "session").await;

    // A fork, and back to its parent.
    client.goto(&format!("{base}/sessions/demo")).await.unwrap();
    client
        .find(Locator::Css("a.child-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let heading = text_of(&client, "h1").await;
    assert!(heading.contains(&fixture.fork_id), "{heading}");
    let branch_of = text_of(&client, "#forks").await;
    assert!(branch_of.contains("cut at demo:1"), "{branch_of}");
    shot(&client, "fork").await;
    client
        .find(Locator::Id("parent-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(client
        .current_url()
        .await
        .unwrap()
        .path()
        .ends_with("/sessions/demo"));

    // Live: a record appended while the page is open appears in it.
    let next = fixture.demo_len();
    fixture.append_live(next, "live <b>text</b> from the agent");
    let appeared = client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Css(&format!(".rec:has(> #p-{next})")))
        .await
        .unwrap();
    let live_text = appeared.text().await.unwrap();
    assert!(
        live_text.contains("live <b>text</b> from the agent"),
        "{live_text}"
    );
    shot(&client, "live").await;

    // The call log.
    client
        .find(Locator::LinkText("Call log"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let in_flight = text_of(&client, "#in-flight").await;
    assert!(
        in_flight.contains("inflight") && in_flight.contains("qwen"),
        "{in_flight}"
    );
    let per_model = text_of(&client, "#per-model").await;
    assert!(per_model.contains("gemma"), "{per_model}");
    shot(&client, "calls").await;

    // A journal run.
    client
        .find(Locator::LinkText("Journal runs"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .find(Locator::LinkText("run-1"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let agents = text_of(&client, "#agents").await;
    assert!(agents.contains("planner"), "{agents}");
    // Plain words, not `Debug` text.
    assert_eq!(
        text_of(&client, "#outcome").await,
        "complete: the journal ended with its closing line"
    );
    shot(&client, "run").await;

    client.close().await.unwrap();
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// A person's path through the viewer, in the browser: the summary, paging to the last page
/// and to a turn, a failed call on its session, the live view streaming into a turn and a
/// fork appearing, a tool result's exit code, a journal entry's content, with the timeline of
/// two conversations and a fork against its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_finds_the_slowest_turn_the_failed_call_and_watches_a_call_stream_into_its_turn() {
    use support::{AGENT, AGENT_TURNS, FAILED_AFTER_TURN, SLOWEST_TURN, TOOL_TURN};
    if !browser_available() {
        return;
    }
    let fixture = support::Fixture::new();
    let base = support::serve(fixture.config()).await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = start_browser(profile.path()).await;
    let waiting = Duration::from_secs(20);

    // The summary header.
    client
        .goto(&format!("{base}/sessions/{AGENT}"))
        .await
        .unwrap();
    assert_eq!(text_of(&client, "#summary-models").await, "qwen-small");
    assert!(text_of(&client, "#summary-turns")
        .await
        .starts_with(&format!("{AGENT_TURNS} · ")));
    let tokens: u64 = (1..=AGENT_TURNS as u64).map(|t| 100 + t).sum();
    let out: u64 = (1..=AGENT_TURNS as u64).map(|t| 10 + t).sum();
    assert_eq!(
        text_of(&client, "#summary-tokens").await,
        format!("{} / {}", thousands(tokens), thousands(out))
    );
    // One failed tool, one failed call from the call log.
    assert!(text_of(&client, "#summary-errors").await.starts_with("2"));
    assert!(text_of(&client, "#summary-start")
        .await
        .starts_with("2065-"));
    let pager = text_of(&client, ".page-of").await;
    assert_eq!(pager, format!("page 1 of 3 · turns 1–20 of {AGENT_TURNS}"));
    // Timestamps on turns: turn 1 started at AGENT_T0, 00:00:00.000 UTC of that day plus…
    let at = text_of(&client, "#turn-1 time.at").await;
    assert_eq!(at.len(), 12, "{at}");
    shot(&client, "summary").await;

    // A tool result's exit code and streams, and the error badge on its turn.
    let result_turn = format!("#turn-{}", TOOL_TURN + 1);
    let exit = text_of(&client, &format!("{result_turn} .tool-result .exit-code")).await;
    assert_eq!(exit, "exit code 2");
    let stderr = text_of(&client, &format!("{result_turn} details.stderr pre")).await;
    assert_eq!(stderr, "ls: cannot access 'missing'");
    let badge = text_of(&client, &format!("{result_turn} .turn-head .badge.error")).await;
    assert_eq!(badge, "error");
    // Each message once: the echoed previous answer is folded, the output shown.
    let echo = client
        .find(Locator::Css("#turn-3 details.echo"))
        .await
        .unwrap();
    assert_eq!(echo.attr("open").await.unwrap(), None);
    assert!(text_of(&client, "#turn-3 .rec.output .text")
        .await
        .contains("answer 3 of conversation 0"));
    shot(&client, "tool-result").await;

    // Copy buttons: the session id and the fork command.
    let fork_command = client
        .find(Locator::Css("#turn-2 button.copy:nth-of-type(2)"))
        .await
        .unwrap();
    let command = fork_command.attr("data-copy").await.unwrap().unwrap();
    assert!(command.starts_with("cuca fork "), "{command}");
    assert!(command.contains(&format!(" {AGENT}:")), "{command}");
    fork_command.click().await.unwrap();
    client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Css("#turn-2 button.copy.copied"))
        .await
        .unwrap();

    // The failed call, at its place: after turn FAILED_AFTER_TURN, before the next.
    let failed = client
        .find(Locator::Css("section.failed-call"))
        .await
        .unwrap();
    let failed_text = failed.text().await.unwrap();
    assert!(failed_text.contains("HTTP 400"), "{failed_text}");
    assert!(
        failed_text.contains("exceeds the available context size"),
        "{failed_text}"
    );
    let before: String = client
        .execute(
            "return document.querySelector('section.failed-call').previousElementSibling.id",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(before, format!("turn-{FAILED_AFTER_TURN}"));
    client
        .goto(&format!("{base}/sessions/{AGENT}#call-ctx00001"))
        .await
        .unwrap();
    shot(&client, "failed-call").await;

    // The last page, then go to turn N.
    click(&client, "nav.pager a.last").await;
    let pager = text_of(&client, ".page-of").await;
    assert_eq!(
        pager,
        format!("page 3 of 3 · turns 41–{AGENT_TURNS} of {AGENT_TURNS}")
    );
    let goto = client.find(Locator::Css("input.goto-turn")).await.unwrap();
    goto.send_keys("27").await.unwrap();
    click(&client, "button.goto-button").await;
    client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Id("turn-27"))
        .await
        .unwrap();
    let url = client.current_url().await.unwrap();
    assert_eq!(url.query(), Some("turn=27"));
    assert_eq!(url.fragment(), Some("turn-27"));
    assert_eq!(
        text_of(&client, ".page-of").await,
        format!("page 2 of 3 · turns 21–40 of {AGENT_TURNS}")
    );
    // `:target` is highlighted.
    let outline: String = client
        .execute(
            "return getComputedStyle(document.getElementById('turn-27')).outlineStyle",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(outline, "solid");

    // The slowest turn, by sorting.
    client
        .goto(&format!("{base}/sessions/{AGENT}"))
        .await
        .unwrap();
    click(&client, "#slowest-link").await;
    let first = text_of(&client, "#sorted-turns tbody tr:first-child").await;
    assert!(first.starts_with(&format!("{SLOWEST_TURN} ")), "{first}");
    assert!(first.contains("9,000"), "{first}");
    shot(&client, "sorted").await;
    click(&client, "#sorted-turns tbody tr:first-child a.turn-link").await;
    assert!(text_of(&client, &format!("#turn-{SLOWEST_TURN} .latency")).await == "9,000 ms");

    // The timeline: the session and its second conversation side by side.
    click(&client, "#timeline-link").await;
    let lanes = client
        .find_all(Locator::Css("svg#timeline g.lane"))
        .await
        .unwrap();
    assert_eq!(lanes.len(), 2);
    assert_eq!(
        lanes[1].attr("data-session").await.unwrap().unwrap(),
        format!("{AGENT}:conv:2")
    );
    let bars = client
        .find_all(Locator::Css("svg#timeline rect.bar"))
        .await
        .unwrap();
    assert_eq!(bars.len(), AGENT_TURNS + 3);
    // In start order the second conversation's first call comes between turns 2 and 3.
    let third = text_of(&client, "#timeline-calls tbody tr:nth-child(3)").await;
    assert!(third.contains(&format!("{AGENT}:conv:2")), "{third}");
    shot(&client, "timeline").await;

    // A fork against its parent, from the fork tree: the fork answered differently.
    fixture.append_to(&fixture.fork_id, 2, "a different answer");
    client.goto(&format!("{base}/sessions/demo")).await.unwrap();
    click(&client, "#fork-list a.compare-link").await;
    let common = text_of(&client, "#common").await;
    assert!(
        common.starts_with("They share their first 2 records"),
        "{common}"
    );
    let first_difference = text_of(&client, "#first-difference").await;
    assert!(first_difference.contains("demo:2"), "{first_difference}");
    assert!(text_of(&client, "#tails .side:nth-child(2)")
        .await
        .contains("a different answer"));
    let sides = client.find_all(Locator::Css("#tails .side")).await.unwrap();
    assert_eq!(sides.len(), 2);
    shot(&client, "compare").await;

    // A journal entry's content: the command, its exit status, its streams.
    client.goto(&format!("{base}/runs/run-1")).await.unwrap();
    let agents = text_of(&client, "#agents").await;
    assert!(
        agents.contains("the root agent") && !agents.contains("Root"),
        "{agents}"
    );
    click(&client, "#timeline tbody tr:nth-child(3) a.entry-link").await;
    assert_eq!(text_of(&client, "#command").await, "cargo test --quiet");
    assert_eq!(text_of(&client, "#exit-status").await, "exit status 101");
    assert!(text_of(&client, "#stderr").await.contains("test failed"));
    shot(&client, "entry").await;

    // Search: a text remembered, across every session, to its point.
    let search = client.find(Locator::Id("search")).await.unwrap();
    search.send_keys("CANNOT ACCESS\u{E007}").await.unwrap();
    client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Id("search-hits"))
        .await
        .unwrap();
    let summary = text_of(&client, "#search-summary").await;
    // The tool result's content and its stderr.
    assert!(summary.starts_with("2 hits for CANNOT ACCESS"), "{summary}");
    let first_hit = text_of(&client, "#search-hits tbody tr:first-child").await;
    assert!(
        first_hit.starts_with(&format!("{AGENT} {}", TOOL_TURN + 1)),
        "{first_hit}"
    );
    assert_eq!(
        text_of(&client, "#search-hits tbody tr:first-child mark").await,
        "cannot access"
    );
    shot(&client, "search").await;
    click(&client, "#search-hits tbody tr:first-child a.hit-link").await;
    let url = client.current_url().await.unwrap();
    assert!(url.fragment().is_some_and(|f| f.starts_with("p-")), "{url}");
    let target_kind: String = client
        .execute(
            "return document.querySelector('.point:target').parentElement.className",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert!(target_kind.contains("tool-result"), "{target_kind}");

    // Live: a call streams into its turn, and a fork made now appears.
    client
        .goto(&format!("{base}/sessions/{AGENT}?turn={AGENT_TURNS}"))
        .await
        .unwrap();
    client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Id("live-status"))
        .await
        .unwrap();
    let next = AGENT_TURNS + 1;
    let pieces = fixture.append_live_turn(AGENT, 40);
    let turn = client
        .wait()
        .at_most(waiting)
        .for_element(Locator::Css(&format!("#turn-{next}[data-complete='true']")))
        .await
        .unwrap();
    let outputs = turn
        .find_all(Locator::Css(".rec.kind-Output"))
        .await
        .unwrap();
    assert_eq!(outputs.len(), 1, "one output box, not one per token");
    let streamed = outputs[0]
        .find(Locator::Css(".text"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(streamed, pieces.concat());
    let fork = fixture.fork(AGENT, &format!("{AGENT}:3"));
    let link = client
        .wait()
        .at_most(waiting)
        .for_element(Locator::LinkText(&fork))
        .await
        .unwrap();
    assert_eq!(
        link.attr("class").await.unwrap().as_deref(),
        Some("child-link")
    );
    shot(&client, "live-turn").await;
    // Joined as a reload shows it: the same turn, the same text.
    client.refresh().await.unwrap();
    let reloaded = text_of(&client, &format!("#turn-{next} .rec.output .text")).await;
    assert_eq!(reloaded.trim_end(), streamed.trim_end());

    client.close().await.unwrap();
}

/// `n` as the pages print counts: `5,828`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A big run drawn whole (a 12,392-turn session: every call in the drawing, by columns, the
/// table a page at a time, a column opening a window drawn call by call), a call cut short
/// shown once in its turn, and the call log's recent failures naming their session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_reads_a_big_run_whole_and_a_call_cut_short_once() {
    const TURNS: usize = 12_392;
    if !browser_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (sessions, calls) = support::cut_call(root.path());
    let backend = cuca_store_file::FileBackend::new(&sessions).unwrap();
    cuca_testkit::append_all(
        &backend,
        &support::agent_session("big", TURNS, support::AGENT_T0, 0),
    );
    let config = cuca_view::ViewConfig::new(vec![sessions]).with_call_log(&calls);
    let base = support::serve(config).await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = start_browser(profile.path()).await;

    client
        .goto(&format!("{base}/sessions/big/timeline"))
        .await
        .unwrap();
    let lane = client
        .find(Locator::Css("svg#timeline g.lane"))
        .await
        .unwrap();
    assert_eq!(
        lane.attr("data-calls").await.unwrap().unwrap(),
        TURNS.to_string()
    );
    let columns = client
        .find_all(Locator::Css("svg#timeline rect.column"))
        .await
        .unwrap();
    assert!(
        !columns.is_empty() && columns.len() <= 820,
        "{}",
        columns.len()
    );
    let last = columns.last().unwrap();
    assert_eq!(
        last.attr("data-last-turn").await.unwrap().unwrap(),
        TURNS.to_string()
    );
    assert!(text_of(&client, "#timeline-density")
        .await
        .contains("denser"));
    assert_eq!(
        text_of(&client, ".timeline-pager .page-of").await,
        "page 1 of 124 · calls 1–100 of 12,392"
    );
    let rows = client
        .find_all(Locator::Css("#timeline-calls tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 100);
    shot(&client, "timeline-big").await;
    click(&client, ".timeline-pager a.last").await;
    let last_row = text_of(&client, "#timeline-calls tbody tr:last-child").await;
    assert!(last_row.contains("12,392"), "{last_row}");
    // A column opens a window of the run where each call is a bar of its own.
    client
        .goto(&format!("{base}/sessions/big/timeline"))
        .await
        .unwrap();
    click(&client, "svg#timeline a:nth-of-type(40)").await;
    assert!(text_of(&client, "#timeline-span")
        .await
        .contains("a window of the run"));
    let bars = client
        .find_all(Locator::Css("svg#timeline rect.bar"))
        .await
        .unwrap();
    let columns = client
        .find_all(Locator::Css("svg#timeline rect.column"))
        .await
        .unwrap();
    assert!(!bars.is_empty() && columns.is_empty());
    shot(&client, "timeline-window").await;

    // The call cut short: one call, one error, in its turn; its unknown tokens left off.
    client.goto(&format!("{base}/sessions/cut")).await.unwrap();
    assert!(client
        .find_all(Locator::Css("section.failed-call"))
        .await
        .unwrap()
        .is_empty());
    assert!(text_of(&client, "#summary-errors").await.starts_with("1 "));
    assert_eq!(
        text_of(&client, "#turn-2 .turn-head .badge.error").await,
        "no response"
    );
    assert!(text_of(&client, "#turn-2 .call-log-failure")
        .await
        .contains("upstream stream ended early"));
    assert!(!text_of(&client, "#turn-2")
        .await
        .contains("0 prompt / 0 completion"));
    shot(&client, "cut-call").await;

    // Recent failures name their session; no status 0.
    client.goto(&format!("{base}/calls")).await.unwrap();
    let row = text_of(&client, "#recent-failures tbody tr").await;
    assert!(row.contains("cut") && row.contains("no response"), "{row}");
    click(&client, "#recent-failures a.session-link").await;
    assert_eq!(text_of(&client, "#session-id").await, "cut");

    // The list: errors, duration and models, and the file's integrity in words.
    client.goto(&format!("{base}/")).await.unwrap();
    let row = text_of(&client, "#sessions tbody tr[data-filter='cut clean']").await;
    assert!(row.contains("file intact") && row.contains("qwen"), "{row}");
    shot(&client, "sessions-list").await;
}

/// `text_of(css)` once it satisfies `ok`, waiting up to 20 seconds for the live poll.
async fn wait_for_text(client: &Client, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = text_of(client, css).await;
        if ok(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where the top of `css`'s first element is in the window, in CSS pixels.
async fn top_of(client: &Client, css: &str) -> f64 {
    let script = "return document.querySelector(arguments[0]).getBoundingClientRect().top;";
    client
        .execute(script, vec![serde_json::json!(css)])
        .await
        .unwrap()
        .as_f64()
        .unwrap()
}

/// A parent and its fork that asked another model: the comparison names the model switch and
/// dims the records after the difference that are the same on both sides.
fn switched_fork(dir: &Path) -> String {
    use cuca_events::{Message, SessionBackend, SessionEvent};
    let backend = cuca_store_file::FileBackend::new(dir).unwrap();
    let call = |model: &str, answer: &str, question: &str, latency: u64, out: u64| {
        vec![
            SessionEvent::CallRequest {
                model: model.into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 2,
            },
            SessionEvent::Output {
                text: answer.into(),
            },
            SessionEvent::CallFinish {
                finish_reason: Some("stop".into()),
                model: model.into(),
            },
            SessionEvent::Latency {
                duration_ms: latency,
            },
            SessionEvent::TokenUsage {
                prompt_tokens: 10,
                completion_tokens: out,
            },
            SessionEvent::Message(Message::user(question)),
        ]
    };
    let closing = |model: &str| {
        let mut events = call(model, "the same closing words", "", 100, 5);
        events.pop();
        events
    };
    let mut parent = vec![
        SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        },
        SessionEvent::Message(Message::user("first question")),
    ];
    parent.extend(call(
        "qwen-small",
        "first answer",
        "second question",
        100,
        5,
    ));
    parent.extend(closing("qwen-small"));
    let records: Vec<_> = parent
        .into_iter()
        .enumerate()
        .map(|(i, e)| cuca_testkit::record("chat", i as u64, e))
        .collect();
    cuca_testkit::append_all(&backend, &records);
    let fork = backend.fork("chat", "chat:1").unwrap();
    let mut tail = call(
        "llama-big",
        "another first answer",
        "second question",
        200,
        6,
    );
    tail.extend(closing("llama-big"));
    let records: Vec<_> = tail
        .into_iter()
        .enumerate()
        .map(|(i, e)| cuca_testkit::record(&fork, 2 + i as u64, e))
        .collect();
    cuca_testkit::append_all(&backend, &records);
    fork
}

/// The comparison of a fork that switched model, a link's target in view under the top edge,
/// a fork command that names the store by its absolute directory when the viewer was given a
/// relative one, and a live page whose header and pager count a turn that arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_compares_a_fork_that_switched_model_and_watches_the_header_count_live() {
    if !browser_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let fork = switched_fork(&sessions);
    let backend = cuca_store_file::FileBackend::new(&sessions).unwrap();
    cuca_testkit::append_all(
        &backend,
        &support::agent_session("long", 30, support::AGENT_T0, 0),
    );
    // The viewer is given the directory relative to its working directory.
    let cwd = std::env::current_dir().unwrap();
    let mut relative = PathBuf::new();
    for _ in cwd.components().skip(1) {
        relative.push("..");
    }
    relative.push(sessions.strip_prefix("/").unwrap());
    assert!(relative.is_relative());
    let base = support::serve(cuca_view::ViewConfig::new(vec![relative])).await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = start_browser(profile.path()).await;

    // The comparison: the model switch named, the equal tail records dimmed and marked.
    client
        .goto(&format!("{base}/compare/{}", fork.replace(':', "%3A")))
        .await
        .unwrap();
    assert_eq!(
        text_of(&client, "#model-switch").await,
        "model switched: qwen-small → llama-big"
    );
    for side in [1, 2] {
        let same = client
            .find_all(Locator::Css(&format!(
                "#tails .side:nth-child({side}) .same"
            )))
            .await
            .unwrap();
        // The user's second question, the closing words, their latency and their tokens.
        assert_eq!(same.len(), 4, "side {side}");
    }
    let right = text_of(&client, "#tails .side:nth-child(2) .same .rec.output").await;
    assert!(right.contains("the same closing words"), "{right}");
    let different = client
        .find_all(Locator::Css("#tails .side:nth-child(2) .same"))
        .await
        .unwrap();
    for same in different {
        assert!(!same.text().await.unwrap().contains("another first answer"));
    }
    let opacity = client
        .execute(
            "return getComputedStyle(document.querySelector('#tails .same')).opacity;",
            vec![],
        )
        .await
        .unwrap();
    assert!(opacity.as_str().unwrap().parse::<f64>().unwrap() < 1.0);
    assert!(text_of(&client, "#equal-tail")
        .await
        .starts_with("4 records"));
    shot(&client, "compare-model-switch").await;

    // A link's target stops short of the top edge: its label and outline are in view.
    client
        .goto(&format!("{base}/sessions/long#turn-12"))
        .await
        .unwrap();
    let top = top_of(&client, "#turn-12 .turn-head").await;
    assert!((10.0..200.0).contains(&top), "turn 12's label at {top}px");
    client
        .goto(&format!("{base}/points/long%3A100"))
        .await
        .unwrap();
    let top = top_of(&client, ".rec:has(> .point:target)").await;
    assert!((4.0..200.0).contains(&top), "the record's box at {top}px");

    // The fork command names the store by its absolute directory.
    let command = client
        .find(Locator::Css("#turn-2 button.copy:nth-of-type(2)"))
        .await
        .unwrap()
        .attr("data-copy")
        .await
        .unwrap()
        .unwrap();
    let absolute = std::fs::canonicalize(&sessions).unwrap();
    assert!(
        command.starts_with(&format!("cuca fork {} long:", absolute.display())),
        "{command}"
    );

    // The live page: a turn that arrives is counted in the header and the pager.
    client
        .goto(&format!("{base}/sessions/long?turn=21"))
        .await
        .unwrap();
    assert_eq!(
        text_of(&client, ".page-of").await,
        "page 2 of 2 · turns 21–30 of 30"
    );
    let before = text_of(&client, "#summary-turns").await;
    assert!(before.starts_with("30 · "), "{before}");
    let tokens_before = text_of(&client, "#summary-tokens").await;
    {
        use cuca_events::{Message, SessionBackend, SessionEvent};
        let first = backend.replay("long").unwrap().len() as u64;
        for (sequence, event) in (first..).zip([
            SessionEvent::Message(Message::user("one more")),
            SessionEvent::Output {
                text: "live answer".into(),
            },
            SessionEvent::Latency { duration_ms: 321 },
            SessionEvent::TokenUsage {
                prompt_tokens: 1_000,
                completion_tokens: 7,
            },
        ]) {
            backend
                .append(cuca_testkit::record("long", sequence, event))
                .unwrap();
        }
    }
    let pager = wait_for_text(&client, ".page-of", |t| t.ends_with("of 31")).await;
    assert_eq!(pager, "page 2 of 2 · turns 21–31 of 31");
    let turns = text_of(&client, "#summary-turns").await;
    assert!(turns.starts_with("31 · "), "{turns}");
    let n_records = |t: &str| -> u64 {
        t.split(" · ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    assert_eq!(n_records(&turns), n_records(&before) + 4);
    let tokens = text_of(&client, "#summary-tokens").await;
    let prompt = |t: &str| -> u64 {
        t.split(" / ")
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    assert_eq!(prompt(&tokens), prompt(&tokens_before) + 1_000, "{tokens}");
    client.close().await.unwrap();
}

/// A person reads what an agent's turn did to its files and shell: the turn's head counts
/// them, a file's diff opens on a click, the failed command shows its exit status and its
/// stderr, and the timeline marks the command and the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_opens_a_turns_diff_and_reads_the_command_that_failed() {
    if !browser_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    support::workspace_session(&sessions, "ws");
    let base = support::serve(cuca_view::ViewConfig::new(vec![sessions])).await;
    let profile = tempfile::tempdir().unwrap();
    let (_driver, client) = start_browser(profile.path()).await;

    client.goto(&format!("{base}/sessions/ws")).await.unwrap();
    let head = text_of(&client, "#turn-2 .workspace-summary").await;
    assert_eq!(head, "2 files changed · 1 command, 1 failed");
    // The diff is there on demand: collapsed until its file is clicked.
    let diff = client
        .find(Locator::Css("#turn-2 li[data-kind=modified] details.diff"))
        .await
        .unwrap();
    let pre = diff.find(Locator::Css("pre.diff")).await.unwrap();
    assert!(!pre.is_displayed().await.unwrap());
    click(
        &client,
        "#turn-2 li[data-kind=modified] details.diff > summary",
    )
    .await;
    assert!(pre.is_displayed().await.unwrap());
    assert_eq!(
        pre.text().await.unwrap(),
        "@@ -1,2 +1,3 @@\n one\n+two\n three"
    );
    // The failed command: its line, its status, its stderr shown without a click.
    let status = text_of(&client, "#turn-2 .shell-command .exit-status.error").await;
    assert_eq!(status, "exit 101");
    let stderr = text_of(&client, "#turn-2 .shell-command details.stderr pre").await;
    assert_eq!(stderr, support::FAILED_STDERR);
    client
        .execute("document.getElementById('turn-2').scrollIntoView()", vec![])
        .await
        .unwrap();
    shot(&client, "workspace").await;

    // The timeline marks them; a mark leads to its record.
    client
        .goto(&format!("{base}/sessions/ws/timeline"))
        .await
        .unwrap();
    let marks = client
        .find_all(Locator::Css("svg.timeline rect.command.error"))
        .await
        .unwrap();
    assert_eq!(marks.len(), 1);
    let dots = client
        .find_all(Locator::Css("svg.timeline circle.files"))
        .await
        .unwrap();
    assert_eq!(dots.len(), 1);
    shot(&client, "workspace-timeline").await;
    client.close().await.unwrap();
}
