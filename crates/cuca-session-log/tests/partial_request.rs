//! A request cut while its records were written (the store refused after the first of them)
//! is closed before the session's next call, so that call is a turn of its own.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    BackendGauge, CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend,
    SessionEvent, SessionRecord, TokenUsage, UnifiedRequest, UnifiedResponse,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_mem::InMemoryBackend;
use futures::executor::block_on;

/// A store that takes `budget` more appends once armed, then refuses every one (a disk
/// that fills, a file size limit) until disarmed.
#[derive(Debug, Default)]
struct Filling {
    inner: InMemoryBackend,
    /// `usize::MAX`: not armed.
    budget: AtomicUsize,
}

impl Filling {
    fn new() -> Filling {
        Filling {
            inner: InMemoryBackend::new(),
            budget: AtomicUsize::new(usize::MAX),
        }
    }
}

impl SessionBackend for Filling {
    fn name(&self) -> &str {
        "filling"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        let allowed = self
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                usize::MAX => Some(n),
                0 => None,
                n => Some(n - 1),
            })
            .is_ok();
        if !allowed {
            return Err(PluginError::Backend {
                backend: "filling".into(),
                message: "no space left on device".into(),
                source: None,
            });
        }
        self.inner.append(record)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        self.inner.replay(session_id)
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.inner.fork(session_id, point_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.inner.sessions()
    }

    fn gauge(&self) -> BackendGauge {
        self.inner.gauge()
    }
}

fn call(plugin: &SessionLogPlugin, request: &UnifiedRequest) -> Result<(), PluginError> {
    block_on(async {
        let mut request = request.clone();
        plugin.on_request(&mut request).await?;
        plugin
            .on_stream_chunk(&MessageContentBlock::text("noted"))
            .await?;
        plugin
            .on_response_complete(&UnifiedResponse {
                model: "tiny".into(),
                finish_reason: Some("stop".into()),
                token_usage: TokenUsage {
                    prompt_tokens: 9,
                    completion_tokens: 1,
                },
                duration: Duration::from_millis(5),
                ..UnifiedResponse::default()
            })
            .await
    })
}

#[test]
fn a_request_cut_after_its_system_prompt_is_closed_before_the_next_call() {
    let backend = Arc::new(Filling::new());
    let log = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    let first = UnifiedRequest::new(vec![Message::system("Be brief."), Message::user("One?")]);
    call(&log, &first).unwrap();
    // A closed call is left as it is.
    assert!(!log.close_open_call("closed").unwrap());
    let n_first = backend.replay("s").unwrap().len();

    // The store takes the second request's system prompt and refuses its next record.
    let mut second = first.clone();
    second.messages.push(Message::assistant("noted"));
    second.messages.push(Message::user("Two?"));
    backend.budget.store(1, Ordering::SeqCst);
    assert!(call(&log, &second).is_err());
    backend.budget.store(usize::MAX, Ordering::SeqCst);
    let kinds = |from: usize| -> Vec<&'static str> {
        backend.replay("s").unwrap()[from..]
            .iter()
            .map(|r| r.event.kind())
            .collect()
    };
    assert_eq!(kinds(n_first), ["SystemPrompt"]);

    // A plugin new to the session (a restarted recorder) closes it, and only once.
    let resumed = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    assert!(resumed.close_open_call("the recorder stopped").unwrap());
    assert!(!resumed.close_open_call("again").unwrap());
    assert_eq!(
        kinds(n_first),
        [
            "SystemPrompt",
            "CallIncomplete",
            "CallFinish",
            "Latency",
            "TokenUsage"
        ]
    );
    let records = backend.replay("s").unwrap();
    let SessionEvent::CallIncomplete { reason } = &records[n_first + 1].event else {
        panic!("not a CallIncomplete: {:?}", records[n_first + 1]);
    };
    assert_eq!(
        reason,
        "the recorder stopped; only the first record of its request was written, and no CallRequest"
    );

    // A session of a recorder that writes no call metadata is left as it is: its request
    // records are never followed by a `CallRequest`.
    let plain = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("plain");
    block_on(plain.on_request(&mut first.clone())).unwrap();
    assert!(!plain.close_open_call("no").unwrap());
    assert_eq!(backend.replay("plain").unwrap().len(), 2);

    // The retried call is a turn of its own, with its request's records whole.
    call(&resumed, &second).unwrap();
    let n_closed = n_first + 5;
    assert_eq!(
        kinds(n_closed)[..5],
        [
            "SystemPrompt",
            "Message",
            "Message",
            "CallRequest",
            "RequestDigest"
        ]
    );
}

/// Closing records cut after their `CallIncomplete` (the store refused the `CallFinish` of a
/// call the proxy said in the session without recording it) are closed too, so the next call
/// does not carry that mark.
#[test]
fn a_call_incomplete_whose_closing_records_were_refused_is_closed() {
    let backend = Arc::new(Filling::new());
    let log = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    let request = UnifiedRequest::new(vec![Message::system("Be brief."), Message::user("One?")]);
    call(&log, &request).unwrap();
    let n_first = backend.replay("s").unwrap().len();
    backend.budget.store(1, Ordering::SeqCst);
    log.append_log(SessionEvent::CallIncomplete {
        reason: "not read".into(),
    })
    .unwrap();
    assert!(log
        .append_log(SessionEvent::CallFinish {
            finish_reason: None,
            model: String::new(),
        })
        .is_err());
    backend.budget.store(usize::MAX, Ordering::SeqCst);
    assert!(log.close_open_call("left open").unwrap());
    let kinds: Vec<&str> = backend.replay("s").unwrap()[n_first..]
        .iter()
        .map(|r| r.event.kind())
        .collect();
    assert_eq!(
        kinds,
        [
            "CallIncomplete",
            "CallIncomplete",
            "CallFinish",
            "Latency",
            "TokenUsage"
        ]
    );
}
