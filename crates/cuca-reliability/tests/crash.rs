//! Crash tests with real processes and real signals: a child records in a loop and prints each
//! acknowledged record; the parent `SIGKILL`s it at a random point, many times over, and reads
//! what is on disk after each death.
//!
//! `CUCA_RELIABILITY_KILLS=N` raises the number of kills per test (the figures in
//! `docs/reliability.md` come from such a run); `CUCA_RELIABILITY_SEED` replays a run.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use cuca_events::SessionBackend;
use cuca_reliability::payload;
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{scan, FileBackend, Verdict};
use rand::Rng;

#[test]
fn a_killed_session_log_keeps_every_acknowledged_record_and_the_next_writer_continues() {
    // ".cslog v1 recovery rule — damage is tolerated only where nothing recorded was lost":
    // after every kill, every acknowledged record is there byte for byte, nothing else reads as
    // a record, and the next process continues the sequence.
    let kills = common::kills(24);
    let mut rng = common::rng("session crash");
    let dir = tempfile::tempdir().unwrap();
    let (mut torn, mut skipped, mut unacked_whole, mut acked_total) = (0, 0, 0, 0);
    let mut next = 0u64;
    let mut session = String::new();
    for round in 0..kills {
        // A new session every eight kills keeps each file (and each scan) small.
        if round % 8 == 0 {
            session = format!("crash-{}", round / 8);
            next = 0;
        }
        let path = dir.path().join(format!("{session}.cslog"));
        // Every fourth round syncs each append, so both durability modes are killed.
        let durability = if round % 4 == 3 { "sync" } else { "buffered" };
        let mut command = common::child();
        command
            .arg("session")
            .arg(dir.path())
            .args([session.as_str(), durability]);
        let killed = common::run_and_kill(command, rng.gen_range(1..=40));
        let expected: Vec<u64> = (next..next + killed.acks.len() as u64).collect();
        assert_eq!(
            killed.acks, expected,
            "round {round}: acks must continue the sequence"
        );
        acked_total += killed.acks.len();
        let last_ack = *killed.acks.last().unwrap();

        let report = scan(&path).unwrap();
        assert!(
            matches!(report.verdict, Verdict::Clean | Verdict::Recovered),
            "round {round}: a kill must never make the session unloadable: {:?}",
            report.verdict
        );
        for (i, record) in report.records.iter().enumerate() {
            assert_eq!(
                record.sequence, i as u64,
                "round {round}: records must be dense"
            );
            assert_eq!(record.session_id, session);
            assert!(
                record.event == payload::session_event(i as u64),
                "round {round}: record {i} decoded into something that was never written"
            );
        }
        let n = report.records.len() as u64;
        assert!(
            n > last_ack,
            "round {round}: acknowledged record {last_ack} is missing ({n} records)"
        );
        // The child prints an ack right after each append returns, so at most one whole record
        // (appended, not yet acknowledged) can be past the last ack.
        assert!(
            n <= last_ack + 2,
            "round {round}: {n} records but the last ack was {last_ack}"
        );
        unacked_whole += (n - 1 - last_ack) as usize;
        torn += usize::from(report.torn_tail_bytes > 0);
        skipped += report.skipped.len();
        next = n;
    }

    // The next append, through a new plugin on the same file, continues and loses nothing.
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(session.as_str());
    let record = plugin.append_log(payload::session_event(next)).unwrap();
    assert_eq!(record.sequence, next);
    let records = backend.replay(&session).unwrap();
    assert_eq!(records.len() as u64, next + 1);
    assert!(records
        .iter()
        .enumerate()
        .all(|(i, record)| record.event == payload::session_event(i as u64)));
    eprintln!(
        "FIGURES session: kills={kills} acked={acked_total} last_session_records={} torn_tails_seen={torn} \
         frames_skipped={skipped} whole_but_unacked={unacked_whole} bytes_on_disk={}",
        records.len(),
        backend.gauge().bytes_on_disk.unwrap()
    );
}

#[test]
fn a_killed_call_log_has_whole_rows_and_at_most_a_torn_last_line() {
    // "Lines are written whole, one write each; a reader skips an unterminated last line (a
    // torn row), and a writer that reopens a file not ending in \n writes one first."
    let kills = common::kills(24);
    let mut rng = common::rng("calllog crash");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (mut torn, mut acked_total, mut max_skipped) = (0, 0, 0);
    let mut first = 0u64;
    for round in 0..kills {
        let mut command = common::child();
        command.arg("calllog").arg(&path).arg(first.to_string());
        let killed = common::run_and_kill(command, rng.gen_range(1..=40));
        acked_total += killed.acks.len();

        let report = cuca_calllog::read_rows(&path).unwrap();
        torn += usize::from(report.torn_tail.is_some());
        // A skipped line can only be a torn row that a later writer sealed with `\n`.
        assert!(
            report.skipped.len() <= torn,
            "round {round}: {} unparseable complete lines after {torn} torn tails: {:?}",
            report.skipped.len(),
            report.skipped
        );
        max_skipped = report.skipped.len();
        for row in &report.rows {
            let n = u64::from_str_radix(&row.id, 16).unwrap();
            if row.is_start() {
                assert_eq!(
                    row.request_body,
                    payload::call_body(n),
                    "round {round}: row {n} is not what was written"
                );
            } else {
                assert_eq!(
                    row.completion_tokens, n,
                    "round {round}: end row {n} is not what was written"
                );
            }
        }
        for n in &killed.acks {
            let id = payload::call_id(*n);
            let rows: Vec<_> = report.rows.iter().filter(|row| row.id == id).collect();
            assert_eq!(
                rows.len(),
                2,
                "round {round}: acknowledged call {n} needs its start and end rows"
            );
        }
        first = killed.acks.last().unwrap() + 2;
    }
    eprintln!("FIGURES calllog: kills={kills} acked_calls={acked_total} torn_tails_seen={torn} sealed_lines_skipped={max_skipped}");
}

#[test]
fn a_killed_journal_assembles_as_session_killed_and_keeps_everything_read() {
    // Seed 004's damage table: "No terminating line — session_killed; everything read is kept",
    // and "A torn or unparseable line — corrupt_journal at the last complete seq" (a kill can cut
    // a write between pages).
    let kills = common::kills(24);
    let mut rng = common::rng("journal crash");
    let (mut killed_outcomes, mut torn_outcomes, mut entries_total, mut no_header) = (0, 0, 0, 0);
    for round in 0..kills {
        let workspace = tempfile::tempdir().unwrap();
        let mut command = common::child();
        command.arg("journal").arg(workspace.path());
        let killed = common::run_and_kill(command, rng.gen_range(1..=80));
        let last_queued = *killed.acks.last().unwrap();

        let journal = workspace.path().join(".cuca/replay.ndjson");
        let bytes = std::fs::read(&journal).unwrap();
        let complete = &bytes[..bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1)];
        let entry_lines = complete
            .split(|&b| b == b'\n')
            .filter(|line| line.starts_with(b"{\"line\":\"entry\""))
            .count() as u64;

        let run_dir = tempfile::tempdir().unwrap();
        let assembled = cuca_journal::assemble::assemble_journal(
            &journal,
            run_dir.path(),
            &cuca_journal::assemble::AssembleOptions::default(),
        );
        if !complete.starts_with(b"{\"line\":\"header\"") {
            // Killed before the writer thread flushed its first batch: the journal holds no
            // whole header, and assembly refuses it by name rather than invent a session.
            assert!(
                matches!(assembled, Err(cuca_journal::AssembleError::NoHeader { .. })),
                "round {round}: {assembled:?}"
            );
            no_header += 1;
            continue;
        }
        let report = assembled.unwrap();
        match &report.outcome {
            cuca_journal::Outcome::SessionKilled => {
                killed_outcomes += 1;
                assert_eq!(
                    complete.len(),
                    bytes.len(),
                    "round {round}: session_killed with a torn line"
                );
            }
            cuca_journal::Outcome::CorruptJournal {
                last_complete_seq,
                reason,
                ..
            } => {
                torn_outcomes += 1;
                assert!(reason.contains("torn"), "round {round}: {reason}");
                assert_eq!(*last_complete_seq, entry_lines.checked_sub(1));
            }
            other => panic!("round {round}: a killed session assembled as {other:?}"),
        }
        assert!(!report.terminated);
        assert_eq!(
            report.n_entries, entry_lines,
            "round {round}: every entry read is kept"
        );
        assert_eq!(report.last_seq, entry_lines.checked_sub(1));
        assert!(
            entry_lines <= last_queued + 1,
            "round {round}: more entries than were recorded"
        );
        assert!(run_dir.path().join("replay.json.gz").is_file());
        entries_total += entry_lines;
    }
    eprintln!(
        "FIGURES journal: kills={kills} session_killed={killed_outcomes} corrupt_torn={torn_outcomes} no_header_yet={no_header} entries_kept={entries_total}"
    );
}
