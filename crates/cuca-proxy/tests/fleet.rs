//! Two proxies recording into one PostgreSQL schema (`CUCA_PG_URL`), as two machines of a
//! fleet do: "Several `cuca proxy` processes … record into one schema at once;
//! sessions, conversations … and forks are consistent".
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use cuca_calllog::CallLog;
use cuca_events::{Role, SessionBackend, SessionEvent};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_postgres::{Durability, PostgresBackend, PostgresConfig};
use serde_json::{json, Value};
use support::*;

fn url() -> Option<String> {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    match (set("CUCA_PG_URL"), set("CI")) {
        (Some(url), _) => Some(url),
        (None, Some(_)) => panic!("CI is set but CUCA_PG_URL is not"),
        (None, None) => {
            eprintln!("skipped: CUCA_PG_URL is unset");
            None
        }
    }
}

/// A proxy on its own connection to `schema`, as a process of its own would be.
async fn proxy_on(
    url: &str,
    schema: &str,
    upstream: &Upstream,
) -> (String, Arc<dyn SessionBackend>) {
    let config = PostgresConfig::new(url)
        .unwrap()
        .with_schema(schema)
        .unwrap()
        .with_durability(Durability::Pipelined);
    let backend: Arc<dyn SessionBackend> = Arc::new(PostgresBackend::connect(config).unwrap());
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    config.answer_unrecorded = true;
    let proxy = Proxy::with_call_log(config, Arc::clone(&backend), CallLog::off()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        proxy
            .serve(listener, std::future::pending::<()>())
            .await
            .unwrap();
    });
    (
        format!("http://{address}/s/shared/v1/chat/completions"),
        backend,
    )
}

/// One conversation's messages so far: a system prompt, then its questions and answers.
struct Conversation {
    name: String,
    messages: Vec<Value>,
}

impl Conversation {
    fn new(name: &str) -> Self {
        Conversation {
            name: name.to_owned(),
            messages: vec![json!({"role": "system", "content": "Be brief."})],
        }
    }

    /// Asks its next question through `url` and keeps the answer.
    async fn ask(&mut self, url: &str) {
        let question = format!("Name {} part {}", self.name, self.messages.len() / 2 + 1);
        self.messages
            .push(json!({"role": "user", "content": question}));
        let body = json!({"model": "m", "stream": true, "messages": self.messages});
        let response = client()
            .post(url)
            .header(DELAY_HEADER, "5")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        self.messages
            .push(json!({"role": "assistant", "content": answer_to(&question, 1)}));
    }
}

/// The user and assistant messages each conversation session of `shared` holds.
fn recorded(backend: &dyn SessionBackend) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for id in backend.sessions().unwrap() {
        if id != "shared" && !id.starts_with("shared:conv:") {
            continue;
        }
        let users = backend
            .replay(&id)
            .unwrap()
            .into_iter()
            .filter_map(|record| match record.event {
                SessionEvent::Message(message) if message.role != Role::System => {
                    Some(message.text())
                }
                _ => None,
            })
            .collect();
        out.insert(id, users);
    }
    out
}

/// Each conversation in a session of its own, whole and in order, whichever proxy took each
/// of its calls: conversations begun on two proxies at once on the same base session, each
/// continued on the other proxy than the one that began it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_schema_keep_every_conversation_in_a_session_of_its_own() {
    let Some(url) = url() else { return };
    let upstream = upstream().await;
    let owner =
        PostgresBackend::connect(PostgresConfig::new(&url).unwrap().with_throwaway_schema())
            .unwrap();
    let schema = owner.schema().to_owned();
    let (a, _a_backend) = proxy_on(&url, &schema, &upstream).await;
    let (b, _b_backend) = proxy_on(&url, &schema, &upstream).await;

    // Six conversations begin at once, three on each proxy; then each continues on the
    // other proxy, and back, all six at a time.
    let mut conversations: Vec<Conversation> = ["u", "v", "w", "x", "y", "z"]
        .iter()
        .map(|name| Conversation::new(name))
        .collect();
    for round in 0..3 {
        let asks = conversations
            .iter_mut()
            .enumerate()
            .map(|(index, conversation)| {
                let on_a = (index % 2 == 0) ^ (round % 2 == 1);
                let url = if on_a { a.clone() } else { b.clone() };
                async move { conversation.ask(&url).await }
            });
        futures::future::join_all(asks).await;
    }

    let sessions = recorded(&owner);
    assert_eq!(
        sessions.len(),
        6,
        "six conversations, six sessions: {sessions:#?}"
    );
    for conversation in &conversations {
        let asked: Vec<String> = conversation
            .messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect();
        // A session holds each of its conversation's messages once, in order (the last
        // answer is the last call's output, not a message yet).
        let mut expected: Vec<String> = conversation
            .messages
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect();
        expected.pop();
        let holding: Vec<&String> = sessions
            .iter()
            .filter(|(_, users)| users.iter().any(|u| asked.contains(u)))
            .map(|(id, _)| id)
            .collect();
        assert_eq!(
            holding.len(),
            1,
            "{} is in one session: {sessions:#?}",
            conversation.name
        );
        assert_eq!(
            sessions[holding[0]], expected,
            "{} whole and in order",
            conversation.name
        );
    }
}
