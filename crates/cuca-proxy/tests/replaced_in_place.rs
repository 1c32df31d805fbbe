//! A session file replaced in place under a replaying proxy — another recording copied over
//! it (`cp other.cslog s.cslog` keeps the inode), with frames that line up byte for byte — is
//! indexed anew: the proxy answers from the new content, never from the index of the old.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_events::{Message, MessageContentBlock, SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;
use support::*;

async fn post(url: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let response = client().post(url).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// Every ASCII letter's case swapped: another text of the same length.
fn swapped(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_lowercase() {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// The other recording's question: the same length as the first's.
fn other_question(text: &str) -> String {
    text.replace("Lisbon", "Berlin")
}

/// Another recording of the session (its records `shift_ms` later) copied over it in place,
/// after a replaying proxy indexed it: the old question is refused, the new one answered
/// with the new answer.
async fn copied_over_in_place(shift_ms: u64) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    {
        let proxy = recording(&upstream, dir.path()).await;
        let (status, _) = post(&proxy.chat_url(Some("demo")), request("stream-basic")).await;
        assert_eq!(status, 200);
        proxy.proxy.settled("demo").await;
    }
    upstream.stop().await;
    let path = dir.path().join("sessions/demo.cslog");

    // Another recording of the session, record for record the same length: its question
    // names another city, its answer is another text.
    let elsewhere = tempfile::tempdir().unwrap();
    let other_path = elsewhere.path().join("demo.cslog");
    {
        let original = FileBackend::new(dir.path().join("sessions")).unwrap();
        let other = FileBackend::new(elsewhere.path()).unwrap();
        for mut record in original.replay("demo").unwrap() {
            record.timestamp_ms += shift_ms;
            record.event = match record.event {
                SessionEvent::Message(message) => SessionEvent::Message(Message {
                    role: message.role,
                    content: message
                        .content
                        .into_iter()
                        .map(|block| match block {
                            MessageContentBlock::Text { text } => MessageContentBlock::Text {
                                text: other_question(&text),
                            },
                            other => other,
                        })
                        .collect(),
                }),
                SessionEvent::Output { text } => SessionEvent::Output {
                    text: swapped(&text),
                },
                SessionEvent::Reasoning { text } => SessionEvent::Reasoning {
                    text: swapped(&text),
                },
                other => other,
            };
            other.append(record).unwrap();
        }
    }
    assert_eq!(
        std::fs::metadata(&other_path).unwrap().len(),
        std::fs::metadata(&path).unwrap().len(),
        "the frames line up"
    );

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("demo"));
    let (status, body) = post(&url, request("stream-basic")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = blocks_of_sse(&body);
    assert_eq!(answer, blocks_of_sse(&fixture("stream-basic.body")));

    #[cfg(unix)]
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&path).unwrap().ino()
    };
    std::fs::copy(&other_path, &path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().ino(),
            inode,
            "copied in place"
        );
    }

    // The first recording's question is no longer recorded: never its answer, nor the new one.
    let (status, body) = post(&url, request("stream-basic")).await;
    let text = String::from_utf8_lossy(&body);
    if shift_ms == 0 {
        // Chosen by the old index, refused when the turn read did not hold what it keyed.
        assert_eq!(status, 500, "{text}");
        assert!(
            text.contains("changed while turn 0 was read from it; ask again"),
            "{text}"
        );
    } else {
        // The marks were stale: indexed anew, and the old question diverges from it.
        assert_eq!(status, 409, "{text}");
        assert!(text.contains("The vault is in Berlin."), "{text}");
    }
    // The new recording's question is answered with the new recording's answer.
    let question = other_question(&String::from_utf8(request("stream-basic")).unwrap());
    let (status, body) = post(&url, question.into_bytes()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let expected: Vec<MessageContentBlock> = answer
        .into_iter()
        .map(|block| match block {
            MessageContentBlock::Text { text } => MessageContentBlock::Text {
                text: swapped(&text),
            },
            MessageContentBlock::Thinking { thinking } => MessageContentBlock::Thinking {
                thinking: swapped(&thinking),
            },
            other => other,
        })
        .collect();
    assert_eq!(blocks_of_sse(&body), expected);
}

/// Another recording, made later: its first frame and the bytes before every mark differ, so
/// the store's marks say the file was replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_recording_copied_over_the_session_in_place_is_answered_from_its_own_content() {
    copied_over_in_place(1_000).await;
}

/// A file changed in place where the marks cannot see it (its first and last records the same
/// to the millisecond, only the text between them changed): the turn read to answer from does
/// not hold what the index keyed, so the call is refused and the session indexed anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_in_place_between_its_marks_is_never_answered_from_the_old_index() {
    copied_over_in_place(0).await;
}
