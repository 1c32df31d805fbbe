//! `Attempt`: every start row gets a row under it.

mod common;

use cuca_calllog::{in_flight, read_rows, Ended, Record, PHASE_START};

fn started() -> Record {
    Record {
        run: "run-7".into(),
        tag: "turn".into(),
        node: "n1".into(),
        model: "glm".into(),
        attempt: 2,
        messages: 4,
        stream: true,
        ..Record::default()
    }
}

#[test]
fn a_guard_dropped_unfinished_writes_an_abandoned_end_row() {
    // "EVERY START ROW GETS A ROW UNDER IT ... "abandoned" when the call simply returned and
    // nothing wrote the row."
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let call = log.start(started());
    let id = call.id().to_owned();
    drop(call);
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].phase, PHASE_START);
    assert_eq!(rows[0].id, id);
    assert_eq!(rows[0].messages, 4);
    let end = &rows[1];
    assert_eq!(end.phase, "");
    assert_eq!(end.ended, "abandoned");
    assert_eq!(
        (
            end.id.as_str(),
            end.run.as_str(),
            end.tag.as_str(),
            end.node.as_str()
        ),
        (id.as_str(), "run-7", "turn", "n1")
    );
    assert_eq!((end.model.as_str(), end.attempt), ("glm", 2));
    // The row nobody on the path wrote keeps the request's shape.
    assert_eq!(end.messages, 4, "the end row keeps the request's shape");
    assert!(in_flight(&rows).is_empty());
}

#[test]
fn a_dropped_guard_keeps_the_status_ttft_and_shape_already_known() {
    // The `cancelled` row written by the drop guard keeps the status, ttft and request shape
    // already known.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let mut call = log.start(Record {
        effort: "high".into(),
        max_tokens: 512,
        tools: 2,
        stream: true,
        ..started()
    });
    call.on_drop(Ended::Cancelled);
    call.known().status = 200;
    call.known().ttft_ms = 41;
    call.known().conn_reused = Some(false);
    call.known().connect_ms = 3;
    drop(call);
    let rows = read_rows(&path).unwrap().rows;
    let end = &rows[1];
    assert_eq!(end.ended, "cancelled");
    assert_eq!((end.status, end.ttft_ms), (200, 41));
    assert_eq!((end.conn_reused, end.connect_ms), (Some(false), 3));
    assert_eq!(
        (
            end.effort.as_str(),
            end.max_tokens,
            end.messages,
            end.tools,
            end.stream
        ),
        ("high", 512, 4, 2, true)
    );
    assert_eq!(
        (end.model.as_str(), end.attempt, end.run.as_str()),
        ("glm", 2, "run-7")
    );
    assert_eq!(end.phase, "", "an end row has no phase");
}

#[test]
fn the_caller_chooses_the_word_a_drop_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    for word in [Ended::Cancelled, Ended::Deadline, Ended::Hopped] {
        let mut call = log.start(started());
        call.on_drop(word);
        drop(call);
    }
    let mut call = log.start(started());
    call.on_drop(Ended::Cancelled);
    call.on_drop(Ended::Abandoned);
    drop(call);
    let ended: Vec<String> = read_rows(&path)
        .unwrap()
        .rows
        .into_iter()
        .filter(|r| !r.is_start())
        .map(|r| r.ended)
        .collect();
    assert_eq!(ended, ["cancelled", "deadline", "hopped", "abandoned"]);
}

#[test]
fn end_writes_the_word_and_finish_writes_what_the_path_assembled() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    log.start(started()).end(Ended::Hopped);
    log.start(started()).finish(Record {
        status: 200,
        ms: 1234,
        finish: "stop".into(),
        served: "glm@b".into(),
        completion_tokens: 9,
        phase: PHASE_START.into(), // cleared: an end row has no phase
        ..Record::default()
    });
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[1].ended, "hopped");
    assert_eq!(rows[1].id, rows[0].id);
    let end = &rows[3];
    assert_eq!(end.id, rows[2].id);
    assert_ne!(rows[0].id, rows[2].id);
    assert_eq!((end.phase.as_str(), end.ended.as_str()), ("", ""));
    assert_eq!((end.status, end.ms, end.completion_tokens), (200, 1234, 9));
    assert_eq!(end.run, "run-7");
    assert_eq!(log.last_call().unwrap().model, "glm@b");
    assert_eq!(log.calls_for("run-7"), 2);
}

#[test]
fn a_caller_supplied_id_pairs_the_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let call = log.start(Record {
        id: "0badcafe".into(),
        ..started()
    });
    assert_eq!(call.id(), "0badcafe");
    call.finish(Record::default());
    let rows = read_rows(&path).unwrap().rows;
    assert!(rows.iter().all(|r| r.id == "0badcafe"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_future_closes_its_attempt_as_cancelled() {
    // The client's shape: the guard lives inside the future; the caller drops the future.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let task_log = log.clone();
    let task = tokio::spawn(async move {
        let mut call = task_log.start(started());
        call.on_drop(Ended::Cancelled);
        started_tx.send(()).unwrap();
        std::future::pending::<()>().await;
        call.finish(Record::default());
    });
    started_rx.await.unwrap();
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].ended, "cancelled");
}

#[test]
fn a_start_row_with_no_end_row_is_in_flight() {
    // "a start with no end beside it is a call that is still in flight"
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let open = log.start(started());
    log.start(started()).finish(Record::default());
    let rows = read_rows(&path).unwrap().rows;
    let flying = in_flight(&rows);
    assert_eq!(flying.len(), 1);
    assert_eq!(flying[0].id, open.id());
    drop(open);
    assert!(in_flight(&read_rows(&path).unwrap().rows).is_empty());
}
