//! Host assembly end to end: a whole journal, and one damaged journal per row of the seed's
//! damage table.
//!
//! The journals are written with the format types (`cuca_journal::format`), line by line, as
//! the recorder writes them; `host_recorder.rs` assembles one the `Recorder` itself wrote.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod host_common;

use cuca_journal::assemble::{assemble, assemble_with, AssembleError, AssembleOptions, Outcome};
use cuca_journal::format::{End, JournalLine, StopReason};
use host_common::*;

fn with_end(end: End) -> Vec<u8> {
    let mut lines = session();
    *lines.last_mut().unwrap() = JournalLine::End(end);
    to_bytes(&lines)
}

#[test]
fn a_whole_journal_becomes_one_record_with_every_part() {
    let fx = Fixture::new(&to_bytes(&session()));
    std::fs::create_dir_all(fx.run_dir.join("implementation")).unwrap();
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();

    assert_eq!(report.outcome, Outcome::Complete);
    assert_eq!(report.session_id, "run-42");
    assert_eq!(report.n_entries, SESSION_ENTRIES);
    assert_eq!(report.last_seq, Some(SESSION_ENTRIES - 1));
    assert_eq!(
        (
            report.n_messages,
            report.n_toolsets,
            report.n_texts,
            report.n_clips
        ),
        (3, 1, 4, 1)
    );
    assert_eq!(report.n_agents, 2);
    assert!(report.terminated);
    assert_eq!(report.n_lines, session().len() as u64);
    assert_eq!(
        report.entries_by_kind.len(),
        8,
        "{:?}",
        report.entries_by_kind
    );

    // "It writes replay.json.gz at the root of the run directory, never inside implementation/."
    assert_eq!(report.artifact, fx.artifact());
    assert_eq!(fx.run_dir_names(), vec!["implementation", "replay.json.gz"]);
    assert_eq!(
        std::fs::read_dir(fx.run_dir.join("implementation"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        report.artifact_bytes,
        std::fs::metadata(fx.artifact()).unwrap().len()
    );

    // "On success the stage removes the journal from the collected tree."
    assert!(report.journal_removed);
    assert!(!fx.journal.exists());
    assert!(!fx.tree.join(".cuca").exists());
    assert!(fx.tree.join("src/main.rs").exists());

    let record = read_artifact(&fx.artifact());
    assert_eq!(record["formatVersion"], 1);
    assert_eq!(record["sessionId"], "run-42");
    // "The assembled record keeps the routing key beside the session id as routingKey."
    assert_eq!(record["routingKey"], "eu-1/run-42");
    // The seed's field name, `recorder.ggVersion`.
    assert_eq!(record["recorder"]["ggVersion"], "0.1.0");
    assert!(record["recorder"].get("version").is_none());
    assert_eq!(record["recorder"]["commit"], "9f2c1e0");
    assert_eq!(record["capabilities"]["a0"][0], "shell");
    assert_eq!(record["outcome"], serde_json::json!({"kind": "complete"}));
    // "The seed line may be written again, and assembly keeps the last one."
    assert_eq!(
        record["seed"]["slots"][0]["modalities"],
        serde_json::json!(["text"])
    );
    // "Assembly upserts by agent id, so the terminal row supersedes the opening one", in
    // creation order.
    let agents: Vec<_> = record["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(agents, vec![("a0", "completed"), ("a1", "stopped")]);
    assert_eq!(record["agents"][1]["ceiling"], "max_turns");
    assert_eq!(record["agents"][1]["origin"]["parent"], "a0");

    let pools = &record["pools"];
    assert_eq!(pools["messages"].as_array().unwrap().len(), 3);
    assert_eq!(
        pools["messages"][2]["body"]["content"][0]["type"],
        "tool_call"
    );
    assert_eq!(pools["messages"][0]["id"], "00".repeat(16));
    assert_eq!(pools["toolsets"][0]["tools"][0]["name"], "read_file");
    assert_eq!(pools["texts"][1]["text"], "…the kept tail of a long README");
    assert_eq!(pools["texts"].as_array().unwrap().len(), 4);
    assert_eq!(
        record["clips"],
        serde_json::json!([{"pool":"text","index":1,"originalBytes":300000,"originalId":"65".repeat(16)}])
    );

    // "Entries read in seq order are the windows the run built."
    let entries = record["entries"].as_array().unwrap();
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..SESSION_ENTRIES).collect::<Vec<_>>());
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "clock",
            "model_io",
            "prompt_frame",
            "tool_result",
            "shell",
            "git",
            "cancel_probe",
            "model_error"
        ]
    );
    assert_eq!(entries[1]["request"]["messages"], serde_json::json!([0, 1]));
    assert_eq!(entries[4]["origin"], "hook");
    assert!(
        entries[0].get("line").is_none(),
        "the journal's line tag is not part of the record"
    );
}

#[test]
fn a_missing_journal_is_an_ordinary_absence() {
    // "A missing journal is an ordinary absence."
    let fx = Fixture::new(b"");
    std::fs::remove_file(&fx.journal).unwrap();
    assert!(assemble(&fx.tree, &fx.run_dir).unwrap().is_none());
    assert!(fx.run_dir_names().is_empty());
}

#[test]
fn no_terminating_line_is_session_killed_and_everything_read_is_kept() {
    // "No terminating line | session_killed; everything read is kept"
    let mut lines = session();
    lines.pop();
    let fx = Fixture::new(&to_bytes(&lines));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::SessionKilled);
    assert!(!report.terminated);
    let record = read_artifact(&fx.artifact());
    assert_eq!(record["outcome"]["kind"], "session_killed");
    assert_eq!(
        record["entries"].as_array().unwrap().len() as u64,
        SESSION_ENTRIES
    );
    assert_eq!(record["agents"][0]["status"], "completed");
}

#[test]
fn a_journal_cut_mid_session_keeps_its_prefix_and_the_opening_rows() {
    // "Writing the opening row is what keeps the agents worth explaining."
    let lines: Vec<_> = session().into_iter().take(17).collect();
    let fx = Fixture::new(&to_bytes(&lines));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::SessionKilled);
    let record = read_artifact(&fx.artifact());
    assert_eq!(record["agents"][1]["status"], "started");
    assert_eq!(record["entries"].as_array().unwrap().len(), 4);
    assert_eq!(
        record["seed"]["slots"][0]["modalities"],
        serde_json::json!(["text", "image"])
    );
}

#[test]
fn a_torn_last_line_is_corrupt_journal_at_the_last_complete_seq() {
    // "A torn or unparseable line | corrupt_journal at the last complete seq"
    let lines = session();
    let mut bytes = to_bytes(&lines[..lines.len() - 6]); // through seq 5 (git)
    let torn = serde_json::to_string(&lines[lines.len() - 6]).unwrap(); // seq 6
    bytes.extend_from_slice(&torn.as_bytes()[..torn.len() / 2]);
    let fx = Fixture::new(&bytes);
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    match &report.outcome {
        Outcome::CorruptJournal {
            last_complete_seq,
            line,
            reason,
        } => {
            assert_eq!(*last_complete_seq, Some(5));
            assert_eq!(*line, (lines.len() - 5) as u64);
            assert!(reason.contains("torn"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let record = read_artifact(&fx.artifact());
    assert_eq!(record["outcome"]["lastCompleteSeq"], 5);
    assert_eq!(record["entries"].as_array().unwrap().len(), 6);
}

#[test]
fn an_unparseable_line_is_corrupt_journal_and_nothing_after_it_is_kept() {
    let mut lines = text_lines(&session());
    // Line 11 (index 10) is the prompt frame of seq 2; flip it into garbage.
    assert!(lines[10].contains("prompt_frame"));
    lines[10] = lines[10].replace("\"turn\":1", "\"turn\":\"one\"");
    let fx = Fixture::new(&join(&lines));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    match &report.outcome {
        Outcome::CorruptJournal {
            last_complete_seq,
            line,
            reason,
        } => {
            assert_eq!(*last_complete_seq, Some(1));
            assert_eq!(*line, 11);
            assert!(reason.contains("unparseable"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(report.n_entries, 2);
    assert_eq!(report.n_lines, 10);
    let record = read_artifact(&fx.artifact());
    assert_eq!(record["entries"].as_array().unwrap().len(), 2);
    assert_eq!(record["pools"]["texts"].as_array().unwrap().len(), 1);
    // The journal still goes: a damaged journal yields a record that says so.
    assert!(!fx.journal.exists());
}

#[test]
fn a_line_over_the_maximum_is_corrupt_journal() {
    let mut lines = text_lines(&session());
    lines[11] = lines[11].replace("…the kept tail", &"x".repeat(4096));
    let fx = Fixture::new(&join(&lines));
    let options = AssembleOptions {
        max_line_bytes: 2048,
        ..AssembleOptions::default()
    };
    let report = assemble_with(&fx.tree, &fx.run_dir, &options)
        .unwrap()
        .unwrap();
    match &report.outcome {
        Outcome::CorruptJournal { line, reason, .. } => {
            assert_eq!(*line, 12);
            assert!(reason.contains("2048"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_terminating_count_that_disagrees_is_corrupt_journal() {
    // "A terminating line whose count disagrees with the walk | corrupt_journal"
    for claimed in [SESSION_ENTRIES - 1, SESSION_ENTRIES + 1] {
        let fx = Fixture::new(&with_end(End {
            entries: claimed,
            stop_reason: None,
        }));
        let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
        match &report.outcome {
            Outcome::CorruptJournal {
                last_complete_seq,
                line,
                reason,
            } => {
                assert_eq!(*last_complete_seq, Some(SESSION_ENTRIES - 1));
                assert_eq!(*line, session().len() as u64);
                assert!(reason.contains(&claimed.to_string()), "{reason}");
            }
            other => panic!("{claimed}: {other:?}"),
        }
        assert_eq!(
            report.n_entries, SESSION_ENTRIES,
            "everything walked is kept"
        );
    }
}

#[test]
fn a_writer_failure_is_write_failed_as_the_recorder_reported_it() {
    // "The journal writer failed | write_failed, as the recorder reported it"
    for reason in [StopReason::WriteFailed, StopReason::QueueFull] {
        let fx = Fixture::new(&with_end(End {
            entries: SESSION_ENTRIES,
            stop_reason: Some(reason),
        }));
        let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
        assert_eq!(
            report.outcome,
            Outcome::WriteFailed {
                stop_reason: reason
            }
        );
        let record = read_artifact(&fx.artifact());
        assert_eq!(record["outcome"]["kind"], "write_failed");
        assert_eq!(record["outcome"]["stopReason"], reason.as_str());
    }
}

#[test]
fn the_byte_ceiling_is_byte_ceiling_as_the_recorder_reported_it() {
    // "The byte ceiling was crossed | byte_ceiling, as the recorder reported it"
    let fx = Fixture::new(&with_end(End {
        entries: SESSION_ENTRIES,
        stop_reason: Some(StopReason::ByteCeiling),
    }));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::ByteCeiling);
    assert_eq!(
        read_artifact(&fx.artifact())["outcome"]["kind"],
        "byte_ceiling"
    );
}

#[test]
fn a_self_reported_stop_does_not_outrank_a_wrong_count() {
    // "The journal's structure outranks its self-report."
    let fx = Fixture::new(&with_end(End {
        entries: 3,
        stop_reason: Some(StopReason::ByteCeiling),
    }));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome.kind(), "corrupt_journal");
}

#[test]
fn a_line_after_the_terminating_line_is_corrupt_journal() {
    let mut bytes = to_bytes(&session());
    bytes.extend_from_slice(b"{\"line\":\"end\",\"entries\":8}\n");
    let fx = Fixture::new(&bytes);
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome.kind(), "corrupt_journal");
}

#[test]
fn a_seq_that_skips_is_corrupt_journal() {
    let mut lines = text_lines(&session());
    assert!(lines[3].contains("\"seq\":0"));
    lines[3] = lines[3].replace("\"seq\":0", "\"seq\":1");
    let fx = Fixture::new(&join(&lines));
    let report = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    match report.outcome {
        Outcome::CorruptJournal {
            last_complete_seq,
            line,
            ..
        } => {
            assert_eq!(last_complete_seq, None);
            assert_eq!(line, 4);
        }
        other => panic!("{other:?}"),
    }
}

/// Runs assembly on `journal` and checks the refusal contract: the error, no record, no
/// scratch file, and the journal left where it is.
fn refused(journal: &[u8]) -> AssembleError {
    let fx = Fixture::new(journal);
    std::fs::create_dir_all(&fx.run_dir).unwrap();
    let err = assemble(&fx.tree, &fx.run_dir).unwrap_err();
    // "Refused; no record is written."
    assert!(!fx.artifact().exists());
    assert!(
        fx.run_dir_names().is_empty(),
        "left behind: {:?}",
        fx.run_dir_names()
    );
    // "A refused journal is left where it is."
    assert_eq!(std::fs::read(&fx.journal).unwrap(), journal);
    err
}

#[test]
fn a_pool_line_whose_index_is_not_the_next_one_is_refused() {
    // "A pool line whose index is not the next one | Refused; no record is written"
    let mut lines = text_lines(&session());
    assert!(lines[7].contains("\"line\":\"message\",\"index\":1"));
    lines[7] = lines[7].replace("\"index\":1", "\"index\":2");
    match refused(&join(&lines)) {
        AssembleError::PoolGap {
            line,
            pool,
            expected,
            found,
            ..
        } => {
            assert_eq!((line, pool, expected, found), (8, "message", 1, 2));
        }
        other => panic!("{other:?}"),
    }
    // A pool line dropped altogether is the same gap, seen from the next line.
    let mut lines = text_lines(&session());
    lines.remove(15); // text 2
    match refused(&join(&lines)) {
        AssembleError::PoolGap {
            pool,
            expected,
            found,
            ..
        } => {
            assert_eq!((pool, expected, found), ("text", 2, 3));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_entry_referencing_past_a_pools_end_is_refused() {
    // "An entry referencing past a pool's end | Refused; no record is written"
    let mut lines = text_lines(&session());
    assert!(lines[9].contains("\"kind\":\"model_io\""));
    lines[9] = lines[9].replace("\"messages\":[0,1]", "\"messages\":[0,3]");
    match refused(&join(&lines)) {
        AssembleError::DanglingReference {
            line,
            field,
            pool,
            index,
            len,
            ..
        } => {
            assert_eq!(
                (line, field, pool, index, len),
                (10, "request.messages", "message", 3, 3)
            );
        }
        other => panic!("{other:?}"),
    }
    // A stored message referencing a text that was never written is the same refusal.
    let mut lines = text_lines(&session());
    lines[8] = lines[8].replace("\"arguments\":0", "\"arguments\":7");
    assert!(matches!(
        refused(&join(&lines)),
        AssembleError::DanglingReference {
            pool: "text",
            index: 7,
            ..
        }
    ));
}

#[test]
fn a_journal_in_another_format_is_refused() {
    // "A journal in a format this build does not write | Refused; no record is written"
    let mut lines = text_lines(&session());
    lines[0] = lines[0].replace("\"formatVersion\":1", "\"formatVersion\":2");
    match refused(&join(&lines)) {
        AssembleError::UnsupportedFormat { found, .. } => assert_eq!(found, "2"),
        other => panic!("{other:?}"),
    }
    let mut lines = text_lines(&session());
    lines[0] = lines[0].replace("\"formatVersion\":1,", "");
    match refused(&join(&lines)) {
        AssembleError::UnsupportedFormat { found, .. } => assert_eq!(found, "none"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_journal_with_no_header_is_refused() {
    let lines = text_lines(&session());
    for (journal, why) in [
        (join(&lines[1..]), "a \"seed\" line"),
        (Vec::new(), "empty"),
        (lines[0].as_bytes()[..20].to_vec(), "torn"),
        (b"not json\n".to_vec(), "does not parse"),
    ] {
        match refused(&journal) {
            AssembleError::NoHeader { reason, .. } => assert!(reason.contains(why), "{reason}"),
            other => panic!("{why}: {other:?}"),
        }
    }
}

#[test]
fn assembly_replaces_an_earlier_record_whole() {
    let fx = Fixture::new(&to_bytes(&session()[..5]));
    let first = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(first.outcome, Outcome::SessionKilled);
    std::fs::create_dir_all(fx.journal.parent().unwrap()).unwrap();
    std::fs::write(&fx.journal, to_bytes(&session())).unwrap();
    let second = assemble(&fx.tree, &fx.run_dir).unwrap().unwrap();
    assert_eq!(second.outcome, Outcome::Complete);
    assert_eq!(read_artifact(&fx.artifact())["outcome"]["kind"], "complete");
    assert_eq!(fx.run_dir_names(), vec!["replay.json.gz"]);
}

#[test]
fn a_journal_cut_anywhere_yields_its_prefix_or_a_refusal_never_a_wrong_record() {
    // "Damage is reported when it is bounded and refused when it is not. A journal that stops
    // early yields a shorter record that says so."
    let bytes = to_bytes(&session());
    let header_len = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut cuts: Vec<usize> = (0..bytes.len()).step_by(31).collect();
    cuts.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(at, _)| at + 1),
    );
    cuts.sort_unstable();
    cuts.dedup();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("replay.ndjson");
    let run_dir = dir.path().join("run");
    let mut last_entries = 0;
    for cut in cuts {
        std::fs::write(&journal, &bytes[..cut]).unwrap();
        let result = cuca_journal::assemble::assemble_journal(
            &journal,
            &run_dir,
            &AssembleOptions::default(),
        );
        if cut < header_len {
            assert!(
                matches!(result, Err(AssembleError::NoHeader { .. })),
                "cut {cut}: {result:?}"
            );
            continue;
        }
        let report = result.unwrap();
        let on_boundary = bytes[cut - 1] == b'\n';
        let expected = match (cut == bytes.len(), on_boundary) {
            (true, _) => "complete",
            (false, true) => "session_killed",
            (false, false) => "corrupt_journal",
        };
        assert_eq!(report.outcome.kind(), expected, "cut {cut}");
        // The record only ever grows as the cut moves on, and its entries are a prefix.
        assert!(report.n_entries >= last_entries, "cut {cut}");
        last_entries = report.n_entries;
        let record = read_artifact(&report.artifact);
        let seqs: Vec<u64> = record["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (0..report.n_entries).collect::<Vec<_>>(), "cut {cut}");
    }
    assert_eq!(last_entries, SESSION_ENTRIES);
}
