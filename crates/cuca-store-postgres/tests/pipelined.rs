//! `Durability::Pipelined` against a real server (`CUCA_PG_URL`): blocks return once queued,
//! everything else waits for its commit and the commit of what was queued before it, and a
//! block accepted but not stored is reported by its session's next append.

// A test binary: its helpers panic on failure like its tests do.
#![allow(clippy::unwrap_used)]

mod common;

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_postgres::{Durability, Error, PostgresBackend, PostgresConfig};
use cuca_testkit::record;

fn pipelined(url: &str) -> PostgresBackend {
    PostgresBackend::connect(common::throwaway(url).with_durability(Durability::Pipelined)).unwrap()
}

fn output(session: &str, sequence: u64) -> cuca_events::SessionRecord {
    record(
        session,
        sequence,
        SessionEvent::Output {
            text: format!("block {sequence}"),
        },
    )
}

/// "Appends of one call are pipelined or group-committed so that recording never falls
/// behind a stream, without weakening what an acknowledged record means": once the closing
/// record is acknowledged, every block before it is stored, in order, and a second backend
/// (another process) sees them.
#[test]
fn a_closing_record_acknowledges_every_block_queued_before_it() {
    let Some(url) = common::url() else { return };
    let backend = pipelined(&url);
    backend
        .append(record(
            "call",
            0,
            SessionEvent::SystemPrompt { text: "s".into() },
        ))
        .unwrap();
    for sequence in 1..=1000 {
        backend.append(output("call", sequence)).unwrap();
    }
    backend
        .append(record(
            "call",
            1001,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        ))
        .unwrap();
    let other = PostgresBackend::connect(
        PostgresConfig::new(&url)
            .unwrap()
            .with_schema(backend.schema())
            .unwrap(),
    )
    .unwrap();
    let records = other.replay("call").unwrap();
    assert_eq!(records.len(), 1002);
    assert!(records
        .iter()
        .enumerate()
        .all(|(index, record)| record.sequence == index as u64));
    assert_eq!(backend.queued(), 0);
    drop(other);
}

/// A sequence this backend already sent is refused at once, as in every store.
#[test]
fn a_block_at_or_below_the_last_sent_is_refused_at_once() {
    let Some(url) = common::url() else { return };
    let backend = pipelined(&url);
    backend.append(output("s", 0)).unwrap();
    backend.append(output("s", 1)).unwrap();
    let error = backend.append(output("s", 1)).unwrap_err();
    assert!(
        matches!(
            error,
            PluginError::SequenceTaken {
                sequence: 1,
                last: 1,
                ..
            }
        ),
        "{error:?}"
    );
}

/// A block another process's record got to first is lost: the session's next append names
/// it and is refused, and nothing lands after the hole until then.
#[test]
fn a_block_accepted_but_not_stored_is_reported_by_the_next_append() {
    let Some(url) = common::url() else { return };
    let backend = pipelined(&url);
    backend.append(output("s", 0)).unwrap();
    let other = PostgresBackend::connect(
        PostgresConfig::new(&url)
            .unwrap()
            .with_schema(backend.schema())
            .unwrap(),
    )
    .unwrap();
    other.append(output("s", 1)).unwrap();
    other.append(output("s", 2)).unwrap();
    // Accepted (this backend last sent 0), then refused by the server. The loss is told by
    // the session's next append after the connection thread met it: the second block's, if
    // the first went in a batch of its own, else the closing record's.
    let closing = record(
        "s",
        3,
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    );
    let mut refused = None;
    for (sequence, next) in [(1, output("s", 1)), (2, output("s", 2)), (3, closing)] {
        if let Err(error) = backend.append(next) {
            refused = Some((sequence, error));
            break;
        }
    }
    let (at, error) = refused.expect("the loss is reported by an append");
    assert!(at >= 2, "the first block was accepted: {error}");
    let PluginError::Backend { source, .. } = &error else {
        panic!("{error:?}")
    };
    let typed = source.as_ref().unwrap().downcast_ref::<Error>().unwrap();
    assert!(
        matches!(
            typed,
            Error::NotStored { first: 1, last, count, .. } if *last == at - 1 && *count == at - 1
        ),
        "refused at {at}: {typed:?}"
    );
    assert!(error.to_string().contains("another writer"), "{error}");
    // Only the other writer's records and the first block are there: the TokenUsage was refused.
    let texts: Vec<u64> = other
        .replay("s")
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(texts, [0, 1, 2]);
    // Reported once: the writer carries on after the real tail.
    backend
        .append(record(
            "s",
            3,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        ))
        .unwrap();
    assert_eq!(other.replay("s").unwrap().len(), 4);
    drop(other);
}

/// Fifty sessions written at once from fifty threads share batches (group commit) and each
/// keeps its order.
#[test]
fn fifty_concurrent_sessions_each_keep_their_order() {
    let Some(url) = common::url() else { return };
    let backend = pipelined(&url);
    std::thread::scope(|scope| {
        for n in 0..50 {
            let backend = &backend;
            scope.spawn(move || {
                let session = format!("s{n}");
                for sequence in 0..200 {
                    backend.append(output(&session, sequence)).unwrap();
                }
                backend
                    .append(record(
                        &session,
                        200,
                        SessionEvent::TokenUsage {
                            prompt_tokens: 1,
                            completion_tokens: 1,
                        },
                    ))
                    .unwrap();
            });
        }
    });
    for n in 0..50 {
        let records = backend.replay(&format!("s{n}")).unwrap();
        assert_eq!(records.len(), 201);
        assert!(records
            .iter()
            .enumerate()
            .all(|(index, record)| record.sequence == index as u64));
    }
}

/// "nothing it acknowledged is lost", and a loss is told to the call that owned it: when the
/// statement carrying a call's last blocks and its closing record fails, the closing record's
/// error names those blocks, and the session's next call is not refused for them. (Before, the
/// closing record got a bare batch error and the blocks' loss waited for the session's next
/// append: the next call's first record was refused, and the proxy recorded that call into
/// the previous call's open turn.)
#[test]
fn a_failed_batch_reports_its_lost_blocks_to_the_record_that_waited_behind_them() {
    let Some(url) = common::url() else { return };
    let backend = pipelined(&url);
    let schema = backend.schema().to_owned();
    let mut admin = common::admin(&url);
    // The server refuses the call's closing record (a trigger standing in for a disk that is
    // full or a role that lost its grant), so its statement fails as a whole.
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION \"{schema}\".refuse() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON \"{schema}\".cuca_session_records
                 FOR EACH ROW WHEN (NEW.kind = 'TokenUsage') EXECUTE FUNCTION \"{schema}\".refuse();"
        ))
        .unwrap();
    backend
        .append(record(
            "s",
            0,
            SessionEvent::SystemPrompt { text: "s".into() },
        ))
        .unwrap();
    for sequence in 1..=2000 {
        backend.append(output("s", sequence)).unwrap();
    }
    let closing = |sequence| {
        record(
            "s",
            sequence,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        )
    };
    let error = backend.append(closing(2001)).unwrap_err();
    let PluginError::Backend { source, .. } = &error else {
        panic!("{error:?}")
    };
    let typed = source.as_ref().unwrap().downcast_ref::<Error>().unwrap();
    let stored: Vec<u64> = backend
        .replay("s")
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect();
    // Whatever went in the refused statement is named by the error, up to the closing record.
    match typed {
        Error::NotStored {
            first, last, count, ..
        } => {
            assert_eq!(*last, 2001, "{typed:?}");
            assert_eq!(*count, 2002 - *first, "{typed:?}");
            assert_eq!(stored, (0..*first).collect::<Vec<_>>());
        }
        Error::BatchFailed { .. } => assert_eq!(stored, (0..=2000).collect::<Vec<_>>()),
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("refused by the test"), "{error}");
    // The next call's records are taken: the loss was reported once, to its own call.
    admin
        .batch_execute(&format!(
            "DROP TRIGGER refuse ON \"{schema}\".cuca_session_records"
        ))
        .unwrap();
    let next = stored.last().copied().unwrap_or(0) + 1;
    backend
        .append(record(
            "s",
            next,
            SessionEvent::Message(cuca_events::Message::user("the next call")),
        ))
        .unwrap();
    backend.append(closing(next + 1)).unwrap();
    assert_eq!(backend.replay("s").unwrap().len(), stored.len() + 2);
}

/// Waits until the connection thread has written everything queued, without a job (a replay
/// would make the blocks durable first).
fn drained(backend: &PostgresBackend) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while backend.queued() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "still {} queued",
            backend.queued()
        );
        std::thread::yield_now();
    }
}

/// A server crash as the backend sees it: its connection goes (exactly its one), and with it
/// the `blocks` rows of `session` past its first that no flush covered.
fn crash(admin: &mut postgres::Client, app: &str, schema: &str, session: &str, blocks: u64) {
    let terminated: i64 = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    assert_eq!(terminated, 1, "exactly the backend's one connection");
    let lost = admin
        .execute(
            &format!("DELETE FROM \"{schema}\".cuca_session_records WHERE session_id = $1 AND sequence > 0"),
            &[&session],
        )
        .unwrap();
    assert_eq!(lost, blocks);
}

/// "without weakening what an acknowledged record means (document precisely when a record is
/// durable, per `Durability`)": a batch of blocks alone commits without waiting for the disk,
/// so a server crash may lose it after the backend saw it committed. Those blocks are kept
/// and, once the connection broke, sent again before the next waiting record (or replay) is
/// answered. The test plays the crash: it cuts the backend's connection and deletes the
/// blocks behind its back; the call must still be stored whole when its closing record is
/// acknowledged, and a replay alone must bring them back too. A trigger records the
/// `synchronous_commit` of each insert, to show that the blocks' commits did not wait and
/// the closing record's did.
#[test]
fn blocks_committed_without_waiting_are_sent_again_after_the_connection_broke() {
    let Some(url) = common::url() else { return };
    let config = common::throwaway(&url).with_durability(Durability::Pipelined);
    let app = config.application_name().unwrap().to_owned();
    let backend = PostgresBackend::connect(config).unwrap();
    let schema = backend.schema().to_owned();
    let mut admin = common::admin(&url);
    admin
        .batch_execute(&format!(
            "CREATE TABLE \"{schema}\".commits (kind text, sync text);
             CREATE FUNCTION \"{schema}\".note() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN INSERT INTO \"{schema}\".commits VALUES (NEW.kind, current_setting('synchronous_commit')); RETURN NEW; END $$;
             CREATE TRIGGER note AFTER INSERT ON \"{schema}\".cuca_session_records
                 FOR EACH ROW EXECUTE FUNCTION \"{schema}\".note();"
        ))
        .unwrap();
    let sequences = |session: &str| -> Vec<u64> {
        backend
            .replay(session)
            .unwrap()
            .iter()
            .map(|record| record.sequence)
            .collect()
    };
    for session in ["closed", "replayed"] {
        backend
            .append(record(
                session,
                0,
                SessionEvent::SystemPrompt { text: "s".into() },
            ))
            .unwrap();
        for sequence in 1..=100 {
            backend.append(output(session, sequence)).unwrap();
        }
        drained(&backend);
        let stored: i64 = admin
            .query_one(
                &format!(
                    "SELECT count(*) FROM \"{schema}\".cuca_session_records WHERE session_id = $1"
                ),
                &[&session],
            )
            .unwrap()
            .get(0);
        assert_eq!(stored, 101, "the blocks were committed before the cut");
        crash(&mut admin, &app, &schema, session, 100);
        if session == "closed" {
            backend
                .append(record(
                    session,
                    101,
                    SessionEvent::TokenUsage {
                        prompt_tokens: 1,
                        completion_tokens: 100,
                    },
                ))
                .unwrap();
            assert_eq!(sequences(session), (0..=101).collect::<Vec<_>>());
        } else {
            assert_eq!(sequences(session), (0..=100).collect::<Vec<_>>());
        }
    }
    let commits: Vec<(String, String)> = admin
        .query(
            &format!("SELECT DISTINCT kind, sync FROM \"{schema}\".commits ORDER BY 1, 2"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let commits: Vec<(&str, &str)> = commits
        .iter()
        .map(|(k, s)| (k.as_str(), s.as_str()))
        .collect();
    // Blocks: first without waiting, then sent again in a statement that waited.
    assert_eq!(
        commits,
        vec![
            ("Output", "off"),
            ("Output", "on"),
            ("SystemPrompt", "on"),
            ("TokenUsage", "on")
        ]
    );
}

/// The same crash, but another writer stored one of the lost sequences before the blocks were
/// sent again: those blocks cannot be stored again (the session would gain records below a
/// higher one), so they are reported, with the closing record that waited behind them, as
/// accepted but not stored, and nothing else of the call is stored after the hole.
#[test]
fn blocks_lost_in_a_crash_whose_sequence_another_writer_took_are_reported() {
    let Some(url) = common::url() else { return };
    let config = common::throwaway(&url).with_durability(Durability::Pipelined);
    let app = config.application_name().unwrap().to_owned();
    let backend = PostgresBackend::connect(config).unwrap();
    let schema = backend.schema().to_owned();
    let mut admin = common::admin(&url);
    backend
        .append(record(
            "s",
            0,
            SessionEvent::SystemPrompt { text: "s".into() },
        ))
        .unwrap();
    for sequence in 1..=20 {
        backend.append(output("s", sequence)).unwrap();
    }
    drained(&backend);
    crash(&mut admin, &app, &schema, "s", 20);
    let other = PostgresBackend::connect(
        PostgresConfig::new(&url)
            .unwrap()
            .with_schema(&schema)
            .unwrap(),
    )
    .unwrap();
    let theirs = record(
        "s",
        10,
        SessionEvent::Output {
            text: "theirs".into(),
        },
    );
    other.append(theirs.clone()).unwrap();
    let error = backend
        .append(record(
            "s",
            21,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 20,
            },
        ))
        .unwrap_err();
    let PluginError::Backend { source, .. } = &error else {
        panic!("{error:?}")
    };
    match source.as_ref().unwrap().downcast_ref::<Error>().unwrap() {
        Error::NotStored {
            first, last, count, ..
        } => assert_eq!((*first, *last, *count), (1, 20, 20), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("sequence was taken"), "{error}");
    let stored = backend.replay("s").unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1], theirs);
}

/// "every replay, fork or listing through this backend … comes after every record queued
/// before it is durable": a listing first commits, waiting for the disk, a statement whose
/// flush covers the blocks committed without waiting, and so the backend stops keeping them.
/// Shown by the crash that follows: the rows deleted behind its back (which a real crash could
/// no longer lose) are not sent again, where without the listing they would be (the test
/// above).
#[test]
fn a_listing_flushes_the_blocks_before_it_so_they_are_no_longer_kept() {
    let Some(url) = common::url() else { return };
    let config = common::throwaway(&url).with_durability(Durability::Pipelined);
    let app = config.application_name().unwrap().to_owned();
    let backend = PostgresBackend::connect(config).unwrap();
    let schema = backend.schema().to_owned();
    let mut admin = common::admin(&url);
    backend
        .append(record(
            "s",
            0,
            SessionEvent::SystemPrompt { text: "s".into() },
        ))
        .unwrap();
    for sequence in 1..=20 {
        backend.append(output("s", sequence)).unwrap();
    }
    drained(&backend);
    assert_eq!(backend.sessions().unwrap(), ["s"]);
    crash(&mut admin, &app, &schema, "s", 20);
    backend
        .append(record(
            "s",
            21,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 20,
            },
        ))
        .unwrap();
    let stored: Vec<u64> = backend
        .replay("s")
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(stored, [0, 21]);
}
