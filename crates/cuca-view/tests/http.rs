//! The viewer over HTTP: what each page holds, its headers, and that it never executes or
//! changes what was recorded.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

mod support;

use support::{Fixture, HOSTILE_MESSAGE, HOSTILE_OUTPUT};

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

#[tokio::test]
async fn the_list_shows_every_session_most_recent_first_with_status_and_a_filter_box() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, headers, body) = get(&format!("{base}/")).await;
    assert_eq!(status, 200);
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(body.contains(r#"id="filter""#));
    // "most recent first": the hostile session was stamped last.
    let hostile = body.find(">hostile<").unwrap();
    let demo = body.find(">demo<").unwrap();
    assert!(hostile < demo);
    assert!(body.contains(&format!(">{}<", fixture.fork_id)));
    assert!(body.contains("status-clean"));
}

#[tokio::test]
async fn recorded_markup_renders_as_text_never_as_script_image_or_link() {
    // An Output containing <script>, <img onerror> and a javascript: link renders as text.
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, body) = get(&format!("{base}/sessions/hostile")).await;
    assert_eq!(status, 200);
    assert!(!body.contains("<script>alert"), "{body}");
    assert!(!body.contains("<img src=x"), "{body}");
    assert!(!body.contains("href=\"javascript:"), "{body}");
    assert!(!body.contains("</div><script>"), "{body}");
    assert!(
        body.contains("&lt;script&gt;alert('output')&lt;/script&gt;"),
        "{body}"
    );
    assert!(
        body.contains("&lt;img src=x onerror=&quot;alert('img')&quot;&gt;"),
        "{body}"
    );
    assert!(body.contains("&lt;/div&gt;&lt;script&gt;alert('message')&lt;/script&gt;"));
    // The only script the page loads is the viewer's own.
    assert_eq!(body.matches("<script").count(), 1, "{body}");
    let _ = (HOSTILE_OUTPUT, HOSTILE_MESSAGE);
}

#[tokio::test]
async fn a_session_is_a_conversation_with_reasoning_collapsed_and_tool_arguments_pretty() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (_, _, body) = get(&format!("{base}/sessions/hostile")).await;
    assert!(body.contains(r#"<details class="reasoning">"#), "{body}");
    assert!(!body.contains("<details class=\"reasoning\" open"));
    assert!(body.contains("secret reasoning text"));
    assert!(
        body.contains("&quot;city&quot;: &quot;Lisbon&quot;"),
        "{body}"
    );
    assert!(body.contains("412 ms"));
    assert!(body.contains("31 prompt / 9 completion tokens"));
    // One turn numbering, from 1, in the text and in the anchors.
    assert!(body.contains(r#"id="turn-1""#) && body.contains(r#"id="p-3""#));
    assert!(!body.contains(r#"id="turn-0""#));
    // The call metadata (model, parameters, finish reason) is shown where it was recorded.
    assert!(body.contains("<code>gemma-tiny</code>"), "{body}");
    assert!(body.contains("&quot;temperature&quot;: 0.5"), "{body}");
    assert!(body.contains("tools offered"), "{body}");
    assert!(
        body.contains("finish reason <code>tool_calls</code>"),
        "{body}"
    );
    assert!(
        body.contains("answered by <code>gemma-tiny-q4</code>"),
        "{body}"
    );

    // The recorded reasoning session: one turn per call, its streamed blocks as one text.
    let (status, _, body) = get(&format!("{base}/sessions/reasoning")).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("Turn 1") && body.contains("reasoning · #"),
        "{body}"
    );
}

#[tokio::test]
async fn forks_link_both_ways_and_a_point_redirects_to_its_turn() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let fork_href = format!("/sessions/{}", fixture.fork_id.replace(':', "%3A"));
    let (_, _, parent) = get(&format!("{base}/sessions/demo")).await;
    assert!(parent.contains(&fork_href), "{parent}");
    // The fork audit record after the last turn is a note, not a call that never finished.
    assert!(parent.contains("Notes after turn 2"), "{parent}");
    assert!(!parent.contains("unfinished"), "{parent}");
    let (status, _, branch) = get(&format!("{base}{fork_href}")).await;
    assert_eq!(status, 200);
    assert!(
        branch.contains(r#"id="parent-link" href="/sessions/demo""#),
        "{branch}"
    );
    assert!(branch.contains("/points/demo%3A1"), "{branch}");
    // The tree from the root down, this branch in bold.
    assert!(
        branch.contains(r#"<a class="tree-link" href="/sessions/demo">demo</a>"#),
        "{branch}"
    );
    assert!(
        branch.contains(&format!(
            r#"<strong class="current">{}</strong>"#,
            fixture.fork_id
        )),
        "{branch}"
    );

    let (status, headers, _) = get(&format!("{base}/points/demo:1")).await;
    assert_eq!(status, 303);
    // `?turn=N` names a turn from 1: the page holding it.
    assert_eq!(headers["location"], "/sessions/demo?turn=1#p-1");
    let (status, _, body) = get(&format!("{base}/points/demo:999999")).await;
    assert_eq!(status, 404);
    assert!(body.contains("has no record 999999"), "{body}");
}

#[tokio::test]
async fn the_viewer_is_read_only_and_unknown_pages_are_404() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let client = reqwest::Client::new();
    for path in ["/", "/sessions/demo", "/api/sessions/demo/records"] {
        let response = client.post(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 405, "{path}");
        let response = client.delete(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 405, "{path}");
    }
    let (status, headers, body) = get(&format!("{base}/sessions/nope")).await;
    assert_eq!(status, 404);
    assert!(headers.contains_key("content-security-policy"));
    assert!(body.contains("no session &quot;nope&quot;"), "{body}");
    let (status, _, _) = get(&format!("{base}/no/such/page")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_live_poll_returns_records_appended_after_the_page_was_read() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let last = fixture.demo_len() - 1;
    let url = format!("{base}/api/sessions/demo/records?after={last}");
    let (_, headers, body) = get(&url).await;
    assert_eq!(headers["content-type"], "application/json");
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value["records"].as_array().unwrap().len(), 0);
    fixture.append_live(last + 1, "a new <b>record</b>");
    let (_, _, body) = get(&url).await;
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value["records"][0]["sequence"], last + 1);
    assert_eq!(value["records"][0]["kind"], "Output");
    assert_eq!(value["records"][0]["text"], "a new <b>record</b>");
}

#[tokio::test]
async fn the_call_log_page_shows_calls_in_flight_failures_and_latency_per_model() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, body) = get(&format!("{base}/calls")).await;
    assert_eq!(status, 200);
    assert!(body.contains("<code>inflight</code>"), "{body}");
    assert!(body.contains("2m"), "the in-flight call's age: {body}");
    for status in ["429", "500", "no response"] {
        assert!(
            body.contains(&format!("<td>{status}</td>")),
            "{status}: {body}"
        );
    }
    assert!(body.contains("&lt;b&gt;server&lt;/b&gt; error"));
    // gemma: ten successes 100..1000 ms and one 429 at 12 ms → p50 400 (nearest rank 6 of 11
    // sorted [12,100,…]), p90 900, p99 1000.
    assert!(
        body.contains(
            "<td>gemma</td><td class=\"num\">11</td><td class=\"num\">1</td><td class=\"num\">500</td><td class=\"num\">900</td><td class=\"num\">1,000</td>"
        ),
        "{body}"
    );
}

#[tokio::test]
async fn journal_runs_show_their_agents_inputs_and_outcome() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, list) = get(&format!("{base}/runs")).await;
    assert_eq!(status, 200);
    assert!(list.contains("href=\"/runs/run-1\""), "{list}");
    assert!(list.contains("journal-session"));
    let (status, _, run) = get(&format!("{base}/runs/run-1")).await;
    assert_eq!(status, 200);
    assert!(run.contains("planner"), "{run}");
    assert!(
        run.contains("<td>clock</td><td class=\"num\">2</td>"),
        "{run}"
    );
    assert!(run.contains("complete"), "{run}");
    // The timeline: both clock reads, in order, by the root agent.
    assert!(
        run.contains(r#"<tr><td class="num">0</td><td><code>root</code></td><td>clock</td><td><a class="entry-link" href="/runs/run-1/entries/0">content</a></td></tr><tr><td class="num">1</td><td><code>root</code></td><td>clock</td><td><a class="entry-link" href="/runs/run-1/entries/1">content</a></td></tr>"#),
        "{run}"
    );
    let (status, _, _) = get(&format!("{base}/runs/..%2Fsessions")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_symlinked_run_directory_is_refused_as_symlinked_sessions_are() {
    // The viewer refuses a symlinked run directory, as it refuses symlinked sessions.
    let fixture = Fixture::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = elsewhere.path().join("outside-run");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(
        fixture
            .runs
            .join("run-1")
            .join(cuca_view::runs::RECORD_FILE),
        outside.join(cuca_view::runs::RECORD_FILE),
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, fixture.runs.join("linked")).unwrap();
    let base = support::serve(fixture.config()).await;
    let (status, _, list) = get(&format!("{base}/runs")).await;
    assert_eq!(status, 200);
    assert!(list.contains("href=\"/runs/run-1\""), "{list}");
    assert!(!list.contains("linked"), "{list}");
    let (status, _, run) = get(&format!("{base}/runs/linked")).await;
    assert_eq!(status, 404, "{run}");
    assert!(!run.contains("planner"), "{run}");
}

#[tokio::test]
async fn a_viewer_without_a_call_log_says_how_to_give_it_one() {
    let fixture = Fixture::new();
    let base = support::serve(cuca_view::ViewConfig::new(vec![fixture.sessions.clone()])).await;
    let (status, _, body) = get(&format!("{base}/calls")).await;
    assert_eq!(status, 404);
    assert!(body.contains("--calls FILE"), "{body}");
}

#[tokio::test]
async fn a_long_session_has_a_summary_total_pages_a_last_page_and_turns_sorted_by_latency() {
    use support::{AGENT, AGENT_TURNS, SLOWEST_TURN};
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, body) = get(&format!("{base}/sessions/{AGENT}")).await;
    assert_eq!(status, 200);
    assert!(
        body.contains(r#"<dd id="summary-models"><code>qwen-small</code></dd>"#),
        "{body}"
    );
    assert!(
        body.contains(&format!("page 1 of 3 · turns 1–20 of {AGENT_TURNS}")),
        "{body}"
    );
    assert!(
        body.contains(r#"<a class="last" href="/sessions/agent?turn=41">"#),
        "{body}"
    );
    // A turn past the end is the last page, not an empty one.
    let (_, _, last) = get(&format!("{base}/sessions/{AGENT}?turn=9999")).await;
    assert!(
        last.contains(&format!(
            "page 3 of 3 · turns 41–{AGENT_TURNS} of {AGENT_TURNS}"
        )),
        "{last}"
    );
    let (status, _, sorted) = get(&format!("{base}/sessions/{AGENT}/turns?sort=latency")).await;
    assert_eq!(status, 200);
    let first_row = sorted.find("<tbody><tr>").unwrap();
    assert!(
        sorted[first_row..].starts_with(&format!(
            r#"<tbody><tr><td class="num"><a class="turn-link" href="/sessions/agent?turn={SLOWEST_TURN}#turn-{SLOWEST_TURN}">{SLOWEST_TURN}</a>"#
        )),
        "{sorted}"
    );
}

#[tokio::test]
async fn a_failed_call_in_the_call_log_shows_on_its_session_and_the_call_table_filters() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (_, _, body) = get(&format!("{base}/sessions/{}", support::AGENT)).await;
    assert!(
        body.contains(r#"<section class="failed-call" id="call-ctx00001">"#),
        "{body}"
    );
    assert!(body.contains("the request exceeds the available context size"));
    let (status, _, calls) = get(&format!("{base}/calls?session=agent")).await;
    assert_eq!(status, 200);
    assert!(calls.contains("1 call matches"), "{calls}");
    assert!(
        calls.contains(r#"<a class="session-link" href="/sessions/agent">agent</a>"#),
        "{calls}"
    );
    let (_, _, failed) = get(&format!("{base}/calls?status=failed&model=qwen")).await;
    assert!(failed.contains("2 calls match"), "{failed}");
    let (_, _, run_b) = get(&format!("{base}/calls?run=run-b")).await;
    assert!(run_b.contains("1 call matches"), "{run_b}");
}

#[tokio::test]
async fn the_timeline_holds_every_conversation_of_the_session() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    // From either conversation, the same lanes.
    for id in ["agent", "agent%3Aconv%3A2"] {
        let (status, _, body) = get(&format!("{base}/sessions/{id}/timeline")).await;
        assert_eq!(status, 200);
        assert!(
            body.contains(r#"<g class="lane" data-session="agent" "#),
            "{body}"
        );
        assert!(
            body.contains(r#"<g class="lane" data-session="agent:conv:2" "#),
            "{body}"
        );
        assert!(body.contains("2 conversations"), "{body}");
    }
}

#[tokio::test]
async fn a_fork_compares_with_its_parent_and_a_journal_entry_shows_its_content() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let fork = fixture.fork_id.replace(':', "%3A");
    let (status, _, body) = get(&format!("{base}/compare/{fork}")).await;
    assert_eq!(status, 200);
    assert!(body.contains("They share their first 2 records."), "{body}");
    assert!(body.contains("goes on."), "{body}");
    let (status, _, _) = get(&format!("{base}/compare/demo")).await;
    assert_eq!(status, 404);
    let (status, _, entry) = get(&format!("{base}/runs/run-1/entries/2")).await;
    assert_eq!(status, 200);
    assert!(
        entry.contains(r#"<code id="command">cargo test --quiet</code>"#),
        "{entry}"
    );
    assert!(entry.contains("exit status 101"), "{entry}");
    assert!(entry.contains("test result: FAILED"), "{entry}");
    // A model call's request and response, resolved from the pools.
    let (status, _, call) = get(&format!("{base}/runs/run-1/entries/3")).await;
    assert_eq!(status, 200);
    assert!(call.contains("Where is the vault?"), "{call}");
    assert!(call.contains("In Lisbon."), "{call}");
    assert!(call.contains("412 ms"), "{call}");
    let (status, _, clock) = get(&format!("{base}/runs/run-1/entries/0")).await;
    assert_eq!(status, 200);
    assert!(clock.contains("entry-json"), "{clock}");
    let (status, _, _) = get(&format!("{base}/runs/run-1/entries/99")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_journal_runs_tool_results_and_failures_read_in_words() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    // A tool result: its name, arguments and output from the text pool, not pool indices.
    let (status, _, tool) = get(&format!("{base}/runs/run-1/entries/4")).await;
    assert_eq!(status, 200);
    assert!(
        tool.contains(r#"<code id="tool-name">read_file</code>"#),
        "{tool}"
    );
    assert!(tool.contains("vault.txt"), "{tool}");
    assert!(
        tool.contains(r#"<pre id="output">no such file: vault.txt</pre>"#),
        "{tool}"
    );
    assert!(tool.contains("the tool reported failure"), "{tool}");
    assert!(!tool.contains("entry-json"), "{tool}");
    // A model error's class in words.
    let (status, _, error) = get(&format!("{base}/runs/run-1/entries/5")).await;
    assert_eq!(status, 200);
    assert!(
        error.contains("the call failed: fatal status: the provider answered a status"),
        "{error}"
    );
    assert!(!error.contains("fatalstatus"), "{error}");
    assert!(error.contains("HTTP 400"), "{error}");
    // The timeline marks the failed command, the failed tool and the failed call.
    let (_, _, run) = get(&format!("{base}/runs/run-1")).await;
    assert!(
        run.contains(r#"<tr class="failed"><td class="num">2</td><td><code>root</code></td><td>shell <span class="badge error entry-failed">failed · exit status 101</span>"#),
        "{run}"
    );
    assert!(
        run.contains(r#"<td>tool result <span class="badge error entry-failed">failed · the tool reported failure</span>"#),
        "{run}"
    );
    assert!(
        run.contains(
            r#"<td>model error <span class="badge error entry-failed">failed · fatal status"#
        ),
        "{run}"
    );
    // The model call that answered is not marked.
    assert!(
        run.contains(r#"<tr><td class="num">3</td><td><code>root</code></td><td>model io</td>"#),
        "{run}"
    );
}

#[tokio::test]
async fn search_finds_text_across_sessions_and_links_to_the_point() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, body) = get(&format!("{base}/search?q=Lisbon")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"href="/points/hostile%3A5""#), "{body}");
    assert!(body.contains("<mark>Lisbon</mark>"), "{body}");
    let (status, _, body) = get(&format!("{base}/search?q=%28&re=1")).await;
    assert_eq!(status, 400, "{body}");
    let (status, _, body) = get(&format!("{base}/search?q=answer+4%5Cb&re=1")).await;
    assert_eq!(status, 200);
    assert!(body.contains("<mark>answer 4</mark>"), "{body}");
}

#[tokio::test]
async fn search_pages_past_its_first_hits_and_lists_a_forks_copied_hit_once() {
    use cuca_events::{Message, SessionBackend, SessionEvent};
    let root = tempfile::tempdir().unwrap();
    let backend = cuca_store_file::FileBackend::new(root.path()).unwrap();
    let records: Vec<_> = (0..450u64)
        .map(|i| {
            let text = format!("needle number {i}");
            let event = if i % 2 == 0 {
                SessionEvent::Message(Message::user(text))
            } else {
                SessionEvent::Output { text }
            };
            cuca_testkit::record("haystack", i, event)
        })
        .collect();
    cuca_testkit::append_all(&backend, &records);
    let fork = backend.fork("haystack", "haystack:9").unwrap();
    drop(backend);
    let base = support::serve(cuca_view::ViewConfig::new(vec![root.path().to_owned()])).await;

    let (status, _, first) = get(&format!("{base}/search?q=needle")).await;
    assert_eq!(status, 200);
    let rows = |body: &str| body.matches(r#"<a class="hit-link""#).count();
    assert_eq!(rows(&first), 200, "{first}");
    assert!(first.contains("hits 1–200 for"), "{first}");
    // The fork's copies of the parent's first ten records are listed once, the parent's.
    assert!(!first.contains(&format!(">{fork}</a>")), "{first}");
    assert!(
        first.contains(r#"<span class="pill also-in-forks" "#)
            && first.contains(">also in 1 fork</span>"),
        "{first}"
    );
    assert_eq!(first.matches(">also in 1 fork</span>").count(), 10);
    let next = r#"<a class="next" href="/search?q=needle&amp;offset=200">"#;
    assert!(first.contains(next), "{first}");

    let (status, _, second) = get(&format!("{base}/search?q=needle&offset=200")).await;
    assert_eq!(status, 200);
    assert_eq!(rows(&second), 200);
    assert!(second.contains("hits 201–400 for"), "{second}");
    assert!(second.contains("</mark> number 200<"), "{second}");
    assert!(!second.contains("</mark> number 199<"), "{second}");
    assert!(second.contains(r#"href="/search?q=needle">"#), "{second}");

    let (_, _, last) = get(&format!("{base}/search?q=needle&offset=400")).await;
    assert_eq!(rows(&last), 50);
    assert!(last.contains("</mark> number 449<"), "{last}");
    assert!(!last.contains(r#"<a class="next""#), "{last}");
}

#[tokio::test]
async fn the_live_poll_lists_the_forks_so_a_new_fork_appears() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (_, _, before) = get(&format!("{base}/api/sessions/agent/records?after=999999")).await;
    let before: serde_json::Value = serde_json::from_str(&before).unwrap();
    assert_eq!(before["forks"], serde_json::json!([]));
    let fork = fixture.fork("agent", "agent:3");
    let (_, _, after) = get(&format!("{base}/api/sessions/agent/records?after=999999")).await;
    let after: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(after["forks"][0]["id"], fork.as_str());
    assert_eq!(after["forks"][0]["point"], "agent:3");
}

/// The viewer over a store that is not a directory (`cuca view --store postgres://…`)
/// searches it too, after the directories: here a second sessions directory handed over as
/// a store, read through the `SessionBackend` trait as a PostgreSQL store is.
#[tokio::test]
async fn search_reads_the_stores_that_are_not_directories_too() {
    let fixture = Fixture::new();
    let other = tempfile::tempdir().unwrap();
    let store = cuca_store_file::FileBackend::new(other.path()).unwrap();
    cuca_events::SessionBackend::append(
        &store,
        cuca_testkit::record(
            "fleet-s1",
            0,
            cuca_events::SessionEvent::Message(cuca_events::Message::user(
                "a zebra in the fleet store",
            )),
        ),
    )
    .unwrap();
    let config = fixture
        .config()
        .with_store("the fleet store", std::sync::Arc::new(store));
    let base = support::serve(config).await;
    let (status, _, body) = get(&format!("{base}/search?q=zebra")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"href="/points/fleet-s1%3A0""#), "{body}");
    assert!(body.contains("<mark>zebra</mark>"), "{body}");
    let (_, _, body) = get(&format!("{base}/search?q=Lisbon")).await;
    assert!(body.contains(r#"href="/points/hostile%3A5""#), "{body}");
}

#[tokio::test]
async fn the_pager_of_a_forked_parent_counts_its_turns_not_its_notes_block() {
    // Forking `demo` appends a fork audit to it: a notes block after its last turn, shown but
    // never counted as a turn.
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (status, _, body) = get(&format!("{base}/sessions/demo")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"id="notes-after""#), "{body}");
    let turns: usize = between(&body, r#"id="summary-turns">"#, " ")
        .parse()
        .unwrap();
    let page_of = between(&body, r#"class="muted page-of">"#, "<");
    assert_eq!(page_of, format!("page 1 of 1 · turns 1–{turns} of {turns}"));
}

/// The text of `body` after the first `start` up to the next `end`.
fn between<'a>(body: &'a str, start: &str, end: &str) -> &'a str {
    let from = body.find(start).unwrap() + start.len();
    let len = body[from..].find(end).unwrap();
    &body[from..from + len]
}

#[tokio::test]
async fn a_call_cut_short_is_one_call_and_one_error_in_its_turn_with_unknown_tokens_left_off() {
    let root = tempfile::tempdir().unwrap();
    let (sessions, calls) = support::cut_call(root.path());
    let config = cuca_view::ViewConfig::new(vec![sessions]).with_call_log(&calls);
    let base = support::serve(config).await;
    let (status, _, body) = get(&format!("{base}/sessions/cut")).await;
    assert_eq!(status, 200);
    assert!(
        !body.contains(r#"class="failed-call""#),
        "shown twice: {body}"
    );
    assert_eq!(
        between(&body, r#"id="summary-errors">"#, " "),
        "1",
        "{body}"
    );
    // The call log's words are in the turn itself.
    let turn = between(&body, r#"id="turn-2""#, "</section>");
    assert!(turn.contains("upstream stream ended early"), "{turn}");
    assert!(turn.contains("no response"), "{turn}");
    assert_eq!(turn.matches(r#"class="badge error""#).count(), 1, "{turn}");
    assert!(!body.contains("0 prompt / 0 completion"), "{body}");
    assert!(body.contains("12 prompt / 3 completion"), "{body}");
    let (_, _, sorted) = get(&format!("{base}/sessions/cut/turns?sort=tokens")).await;
    assert!(!sorted.contains("0 / 0"), "{sorted}");
    // The live view leaves them off too.
    let (_, _, live) = get(&format!("{base}/api/sessions/cut/records?after=9")).await;
    let live: serde_json::Value = serde_json::from_str(&live).unwrap();
    let usage = &live["records"][0];
    assert_eq!(usage["kind"], "TokenUsage");
    assert!(usage.get("tokens").is_none(), "{usage}");
    assert_eq!(usage["text"], "tokens not known");
}

#[tokio::test]
async fn recent_failures_name_their_session_and_say_no_response_on_one_line() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (_, _, body) = get(&format!("{base}/calls")).await;
    let table = between(&body, r#"id="recent-failures""#, "</table>");
    assert!(table.contains("<th>Session</th>"), "{table}");
    // The proxy's failed call links to the session it was recorded in.
    assert!(
        table.contains(&format!(
            r#"<a class="session-link" href="/sessions/{0}">{0}</a>"#,
            support::AGENT
        )),
        "{table}"
    );
    // A call that got no answer says so, never status 0.
    assert!(
        table.contains(r#"<td class="num">no response</td>"#),
        "{table}"
    );
    assert!(!table.contains(r#"<td class="num">0</td>"#), "{table}");
    // Timestamps are cells that do not wrap.
    assert!(table.contains(r#"<td class="when">"#), "{table}");
    assert!(body.contains(r#"<td class="num">no response</td>"#));
}

#[tokio::test]
async fn the_sessions_list_has_errors_duration_and_models_and_says_file_integrity_as_such() {
    let fixture = Fixture::new();
    let base = support::serve(fixture.config()).await;
    let (_, _, body) = get(&format!("{base}/")).await;
    for header in ["Errors", "Duration", "Models"] {
        assert!(
            body.contains(&format!(">{header}</th>")),
            "{header}: {body}"
        );
    }
    assert!(body.contains(">File</th>"), "{body}");
    let row = between(
        &body,
        &format!(r#"data-filter="{} clean""#, support::AGENT),
        "</tr>",
    );
    assert!(row.contains("file intact"), "{row}");
    // One turn's tool result failed (exit code 2).
    assert!(
        row.contains(r#"<td class="num errors"><span class="error">1</span></td>"#),
        "{row}"
    );
    // 47 turns a second apart, the last taking 200 + 47·7 % 300 ms.
    assert!(
        row.contains(">46s 229ms<") || row.contains(">46s<"),
        "{row}"
    );
    assert!(row.contains("<code>qwen-small</code>"), "{row}");
    // Numbers have thousands separators: 47 turns of 100 + n prompt tokens.
    assert!(row.contains("5,828 / "), "{row}");
}

#[tokio::test]
async fn a_big_run_s_timeline_draws_every_call_by_columns_and_pages_its_table() {
    const TURNS: usize = 3_000;
    let root = tempfile::tempdir().unwrap();
    let backend = cuca_store_file::FileBackend::new(root.path()).unwrap();
    cuca_testkit::append_all(
        &backend,
        &support::agent_session("big", TURNS, support::AGENT_T0, 0),
    );
    let base = support::serve(cuca_view::ViewConfig::new(vec![root.path().to_owned()])).await;
    let (status, _, body) = get(&format!("{base}/sessions/big/timeline")).await;
    assert_eq!(status, 200);
    assert!(!body.contains("not drawn"), "{body}");
    let lane = between(&body, r#"<g class="lane" data-session="big""#, "</g>");
    assert!(
        lane.starts_with(&format!(r#" data-calls="{TURNS}""#)),
        "{lane}"
    );
    // Denser than the drawing: columns, never more than the plot is wide, and the last column
    // holds the last call.
    let n_columns = lane.matches("<rect").count();
    assert!(n_columns > 0 && n_columns <= 820, "{n_columns}");
    assert!(
        lane.contains(&format!(r#"data-last-turn="{TURNS}""#)),
        "the last call is drawn"
    );
    assert!(
        lane.contains(r#"class="bar column error""#),
        "a failed tool shows"
    );
    // The axis ends at the run's end: the last call starts at (TURNS - 1) s and takes
    // 200 + TURNS·7 % 300 ms.
    let end_ms = (TURNS as u64 - 1) * support::TURN_MS + 200 + (TURNS as u64 * 7) % 300;
    let end_words =
        humantime::format_duration(std::time::Duration::from_millis(end_ms - end_ms % 1000))
            .to_string();
    assert!(
        body.contains(&format!(r#"text-anchor="end">{end_words}</text>"#)),
        "{end_words}: {body}"
    );
    // The table is a page of 100 calls, and the last page holds the last call.
    let table = between(&body, r#"id="timeline-calls""#, "</table>");
    assert_eq!(table.matches("<tr data-session").count(), 100);
    assert!(
        body.contains("page 1 of 30 · calls 1–100 of 3,000"),
        "{body}"
    );
    let (_, _, last) = get(&format!("{base}/sessions/big/timeline?page=30")).await;
    let table = between(&last, r#"id="timeline-calls""#, "</table>");
    assert_eq!(table.matches("<tr data-session").count(), 100);
    assert!(table.contains(">3,000</a>"), "{table}");
    // A column's link opens a window where the calls are drawn one by one.
    let window = between(lane, r#"<a href=""#, r#"""#).replace("&amp;", "&");
    let (status, _, zoomed) = get(&format!("{base}{window}")).await;
    assert_eq!(status, 200);
    assert!(zoomed.contains("a window of the run"), "{zoomed}");
    let lane = between(&zoomed, r#"<g class="lane" data-session="big""#, "</g>");
    assert!(lane.contains(r#"<rect class="bar""#), "{lane}");
    assert!(!lane.contains("column"), "{lane}");
}

#[tokio::test]
async fn several_forks_compare_side_by_side_with_their_parent() {
    use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord};
    let fixture = Fixture::new();
    // A recording on model-a, forked twice after its first call: one fork goes on with
    // model-a, the other with model-b.
    let backend = cuca_store_file::FileBackend::new(&fixture.sessions).unwrap();
    let append = |session: &str, sequence: u64, event: SessionEvent| {
        backend
            .append(SessionRecord {
                session_id: session.to_owned(),
                sequence,
                timestamp_ms: sequence,
                event,
            })
            .unwrap();
    };
    let call = |model: &str| SessionEvent::CallRequest {
        model: model.into(),
        parameters: "{}".into(),
        tools: "[]".into(),
        messages: 1,
    };
    append(
        "m",
        0,
        SessionEvent::Message(Message::user("Where is the vault?")),
    );
    append("m", 1, call("model-a"));
    append(
        "m",
        2,
        SessionEvent::Output {
            text: "In Lisbon.".into(),
        },
    );
    append("m", 3, call("model-a"));
    let first = backend.fork("m", "m:2").unwrap();
    let second = backend.fork("m", "m:2").unwrap();
    append(&first, 3, call("model-a"));
    append(&second, 3, call("model-b"));
    drop(backend);
    let base = support::serve(fixture.config()).await;
    let (status, _, page) = get(&format!("{base}/sessions/m")).await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"id="compare-all""#), "{page}");
    assert!(page.contains("Compare 2 forks side by side"), "{page}");
    let (a, b) = (first.replace(':', "%3A"), second.replace(':', "%3A"));
    let (status, _, body) = get(&format!("{base}/compare/{a}?and={b}")).await;
    assert_eq!(status, 200);
    assert!(body.contains("2 sessions compared with"), "{body}");
    assert!(body.contains(r#"class="compare cols-2""#), "{body}");
    assert!(body.contains(&first) && body.contains(&second), "{body}");
    assert_eq!(body.matches(r#"<div class="side">"#).count(), 2, "{body}");
    // The model switch is named on the fork that made one, and only there.
    assert_eq!(body.matches("model switched: ").count(), 1, "{body}");
    assert!(body.contains("<code>model-b</code>"), "{body}");
    assert!(body.contains("the same"), "{body}");
}

#[tokio::test]
async fn a_turn_shows_its_file_changes_with_diffs_and_its_shell_commands_and_the_timeline_marks_them(
) {
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    support::workspace_session(&sessions, "ws");
    let base = support::serve(cuca_view::ViewConfig::new(vec![sessions.clone()])).await;
    let (status, _, body) = get(&format!("{base}/sessions/ws")).await;
    assert_eq!(status, 200);
    // Turn 2's head counts what happened before its call.
    assert!(
        body.contains("2 files changed · 1 command, 1 failed"),
        "{body}"
    );
    // The file changes, with a diff behind a <details>.
    let turn2 = &body[body.find(r#"id="turn-2""#).unwrap()..];
    assert!(
        turn2.contains(r#"<li class="file-change" data-kind="modified"><details class="diff">"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<code class="path">notes.txt</code>"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<span class="add">+two</span>"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<span class="hunk">@@ -1,2 +1,3 @@</span>"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<li class="file-change" data-kind="deleted">"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<span class="binary">binary</span>"#),
        "{turn2}"
    );
    // The first snapshot changed nothing: it is where the session's files start.
    let turn1 = &body[body.find(r#"id="turn-1""#).unwrap()..body.find(r#"id="turn-2""#).unwrap()];
    assert!(
        turn1.contains("no file changed (the session's first snapshot)"),
        "{turn1}"
    );
    // The command: its line, status, duration, directory and failing stderr, open.
    assert!(
        turn2.contains(r#"class="rec shell-command" data-exit="101""#),
        "{turn2}"
    );
    assert!(
        turn2.contains("<pre class=\"command\">$ cargo test --quiet</pre>"),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<span class="exit-status error">exit 101</span>"#),
        "{turn2}"
    );
    assert!(
        turn2.contains(r#"<span class="duration">1s</span>"#),
        "{turn2}"
    );
    assert!(turn2.contains(r#"<code class="cwd">.</code>"#), "{turn2}");
    assert!(
        turn2.contains(r#"<details class="stream stderr" open>"#),
        "{turn2}"
    );
    assert!(
        turn2.contains("cannot find value `two` in this scope"),
        "{turn2}"
    );

    // The timeline marks the command (failed: red) and the snapshots that changed files.
    let (status, _, timeline) = get(&format!("{base}/sessions/ws/timeline")).await;
    assert_eq!(status, 200);
    assert!(
        timeline.contains(r#"<rect class="command error" data-sequence="6""#),
        "{timeline}"
    );
    assert!(
        timeline.contains(r#"<circle class="files" data-sequence="7""#),
        "{timeline}"
    );
    assert!(
        timeline.contains("2 files · 1 command, 1 failed"),
        "{timeline}"
    );

    // A command after the last call opens no turn: it is shown after the turns.
    let backend = cuca_store_file::FileBackend::new(&sessions).unwrap();
    let mut last = cuca_testkit::record(
        "ws",
        13,
        cuca_events::SessionEvent::ShellCommand {
            command: "git status".into(),
            cwd: "src".into(),
            origin: "bash -lc".into(),
            exit_status: Some(0),
            duration_ms: 12,
            stdout: cuca_events::CapturedStream::default(),
            stderr: cuca_events::CapturedStream::default(),
        },
    );
    last.timestamp_ms = 1_700_000_004_000;
    cuca_events::SessionBackend::append(&backend, last).unwrap();
    let (_, _, body) = get(&format!("{base}/sessions/ws")).await;
    assert!(
        body.contains(r#"<dd id="summary-turns">2 · 14 records"#),
        "{body}"
    );
    let after = &body[body.find(r#"id="notes-after""#).unwrap()..];
    assert!(
        after.contains("<pre class=\"command\">$ git status</pre>"),
        "{after}"
    );

    // Without the object store beside the sessions, the page says so and still lists them.
    std::fs::remove_dir_all(sessions.join(".cuca-workspace")).unwrap();
    let (_, _, body) = get(&format!("{base}/sessions/ws")).await;
    assert!(
        body.contains("Diffs are not shown: no workspace objects at"),
        "{body}"
    );
    assert!(
        body.contains(r#"<code class="path">notes.txt</code>"#),
        "{body}"
    );
    assert!(!body.contains(r#"<span class="add">+two</span>"#), "{body}");
}

#[test]
fn a_saved_page_holds_the_turns_diffs_and_commands() {
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    support::workspace_session(&sessions, "ws");
    let config = cuca_view::ViewConfig::new(vec![sessions.clone()]);
    let mut out = Vec::new();
    cuca_view::standalone::write_session(&config, "ws", "sessions", &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    // The diff was read when the file was written: the file holds it.
    assert!(page.contains(r#"<span class="add">+two</span>"#), "{page}");
    assert!(
        page.contains("<pre class=\"command\">$ cargo test --quiet</pre>"),
        "{page}"
    );
    assert!(page.contains(support::FAILED_STDERR), "{page}");
    assert!(
        page.contains("2 files changed · 1 command, 1 failed"),
        "{page}"
    );
}

/// A conversation's first snapshot, counted by the proxy against the last one it took (its
/// base session's), shows its diffs when that snapshot gives exactly the record's changes,
/// and none (saying why) when it does not.
#[tokio::test]
async fn a_conversations_first_snapshot_is_diffed_against_its_siblings_when_it_gives_its_changes() {
    use cuca_events::{Message, SessionBackend, SessionEvent};
    use cuca_workspace::{DirObjects, SnapshotConfig, Snapshotter};
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "one\n").unwrap();
    let objects = std::sync::Arc::new(DirObjects::beside(&sessions));
    let mut snapshotter =
        Snapshotter::new(workspace.path(), objects, SnapshotConfig::default()).unwrap();
    let first = snapshotter.snapshot(None).unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "one\ntwo\n").unwrap();
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    let backend = cuca_store_file::FileBackend::new(&sessions).unwrap();
    let turn = |id: &str, snapshot: SessionEvent, at: u64| {
        let events = [
            snapshot,
            SessionEvent::Message(Message::user("go")),
            SessionEvent::Output { text: "ok".into() },
            SessionEvent::Latency { duration_ms: 10 },
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        ];
        for (sequence, event) in events.into_iter().enumerate() {
            let mut record = cuca_testkit::record(id, sequence as u64, event);
            record.timestamp_ms = at + sequence as u64;
            backend.append(record).unwrap();
        }
    };
    turn("agent", first.event(), 1_700_000_000_000);
    turn("agent:conv:1", second.event(), 1_700_000_001_000);
    // A conversation whose recorded changes the sibling's snapshot does not give.
    let mut wrong = second.event();
    if let SessionEvent::WorkspaceSnapshot { changes, .. } = &mut wrong {
        changes[0].path = "other.txt".into();
    }
    turn("agent:conv:2", wrong, 1_700_000_002_000);
    let base = support::serve(cuca_view::ViewConfig::new(vec![sessions])).await;

    let (status, _, body) = get(&format!("{base}/sessions/agent:conv:1")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"<span class="add">+two</span>"#), "{body}");
    assert!(!body.contains("does not hold"), "{body}");

    let (_, _, body) = get(&format!("{base}/sessions/agent:conv:2")).await;
    assert!(
        body.contains("counted against a snapshot this session does not hold"),
        "{body}"
    );
    assert!(!body.contains(r#"<span class="add">+two</span>"#), "{body}");
}

/// A store that is not a directory (a fleet's database) shows its turns' diffs from the
/// object store it is given with it, and says why there are none without one.
#[tokio::test]
async fn a_store_that_is_not_a_directory_reads_diffs_from_the_objects_given_with_it() {
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("fleet");
    std::fs::create_dir_all(&sessions).unwrap();
    support::workspace_session(&sessions, "ws");
    let store = || {
        std::sync::Arc::new(cuca_store_file::FileBackend::new(&sessions).unwrap())
            as std::sync::Arc<dyn cuca_events::SessionBackend>
    };
    let objects = std::sync::Arc::new(cuca_workspace::DirObjects::beside(&sessions));
    let with = cuca_view::ViewConfig::new(Vec::new())
        .with_store("the fleet", store())
        .with_store_objects("the fleet", objects);
    let base = support::serve(with).await;
    let (status, _, body) = get(&format!("{base}/sessions/ws")).await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"<span class="add">+two</span>"#), "{body}");

    let without = cuca_view::ViewConfig::new(Vec::new()).with_store("the fleet", store());
    let base = support::serve(without).await;
    let (_, _, body) = get(&format!("{base}/sessions/ws")).await;
    assert!(
        body.contains("Diffs are not shown: the viewer was given no workspace objects"),
        "{body}"
    );
    assert!(!body.contains(r#"<span class="add">+two</span>"#), "{body}");
}
