//! Loads that segment records as `SessionBackend::replay_each` hands them over give what
//! loads of the `Vec` that `SessionBackend::replay` returns gave: the same trajectories, and
//! the same refusals in the same order of precedence (the backend's error, then the record
//! cap, then the first segmentation refusal), over a `FileBackend` that overrides
//! `replay_each` and damaged files.

// Fixture helpers outside #[test] fns unwrap too: a broken fixture should stop the test loudly.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_replay::{ReplayConfig, ReplayTrajectory, SessionReplay};
use cuca_store_file::golden::golden_files;
use cuca_store_file::FileBackend;
use proptest::prelude::*;

/// A backend that implements `replay` only, so loads through it take the trait's default
/// `replay_each`: every record collected into a `Vec` first, as loads did before.
#[derive(Debug)]
struct OnlyReplay(Arc<FileBackend>);

impl SessionBackend for OnlyReplay {
    fn name(&self) -> &str {
        "only-replay"
    }
    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        self.0.append(record)
    }
    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        self.0.replay(session_id)
    }
    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.0.fork(session_id, point_id)
    }
    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.0.sessions()
    }
    fn gauge(&self) -> BackendGauge {
        self.0.gauge()
    }
}

/// The same directory read through `FileBackend::replay_each` and through `replay`.
fn both(dir: &Path, config: ReplayConfig) -> (SessionReplay, SessionReplay) {
    let file = Arc::new(FileBackend::new(dir).unwrap());
    let streamed = SessionReplay::with_config(Arc::clone(&file) as _, config).unwrap();
    let collected = SessionReplay::with_config(Arc::new(OnlyReplay(file)), config).unwrap();
    (streamed, collected)
}

/// Equal trajectories, or errors that print the same (`PluginError` has no `PartialEq`).
fn assert_same(
    streamed: &Result<ReplayTrajectory, PluginError>,
    collected: &Result<ReplayTrajectory, PluginError>,
) {
    match (streamed, collected) {
        (Ok(left), Ok(right)) => assert_eq!(left, right),
        (Err(left), Err(right)) => assert_eq!(format!("{left:?}"), format!("{right:?}")),
        _ => panic!("streamed {streamed:?}, collected {collected:?}"),
    }
}

/// [`assert_same`], then the streamed result.
fn same(
    streamed: Result<ReplayTrajectory, PluginError>,
    collected: Result<ReplayTrajectory, PluginError>,
) -> Result<ReplayTrajectory, PluginError> {
    assert_same(&streamed, &collected);
    streamed
}

fn output_session(n_records: u64) -> Vec<SessionRecord> {
    (0..n_records)
        .map(|sequence| {
            cuca_testkit::record(
                "s",
                sequence,
                SessionEvent::Output {
                    text: "x".repeat(60),
                },
            )
        })
        .collect()
}

#[test]
fn a_long_file_session_loads_the_same_whole_and_as_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let (streamed, collected) = both(dir.path(), ReplayConfig::default());
    // 400 seed-shaped turns, about 200 KiB: frames straddle the store's 64 KiB reads.
    let mut records = Vec::new();
    for turn_idx in 0..400 {
        records.extend(cuca_testkit::demo_turn("demo", turn_idx * 7));
    }
    records.truncate(records.len() - 2); // the last turn stays open
    let file = FileBackend::new(dir.path()).unwrap();
    cuca_testkit::append_all(&file, &records);
    drop(file);
    let whole = same(streamed.load("demo"), collected.load("demo")).unwrap();
    assert_eq!(whole.len(), 400);
    assert_eq!(whole.usage().records, records.len());
    for through in [0, 1, 6, 7, 1_000, records.len() as u64 - 1] {
        let prefix = same(
            streamed.load_prefix("demo", through),
            collected.load_prefix("demo", through),
        )
        .unwrap();
        assert_eq!(prefix.usage().records, through as usize + 1);
    }
    let error = same(
        streamed.load_prefix("demo", 1 << 40),
        collected.load_prefix("demo", 1 << 40),
    )
    .unwrap_err();
    assert!(error.to_string().contains("(2798 records)"), "{error}");
}

#[test]
fn golden_files_load_or_refuse_as_their_records_did() {
    let dir = tempfile::tempdir().unwrap();
    for golden in golden_files().unwrap() {
        let session_id = golden.name.trim_end_matches(".cslog");
        std::fs::write(dir.path().join(golden.name), &golden.bytes).unwrap();
        for config in [
            ReplayConfig::default(),
            ReplayConfig::new(2, 100, None).unwrap(),
            ReplayConfig::new(100, 1, None).unwrap(),
        ] {
            let (streamed, collected) = both(dir.path(), config);
            let result = same(streamed.load(session_id), collected.load(session_id));
            for through in 0..12 {
                assert_same(
                    &streamed.load_prefix(session_id, through),
                    &collected.load_prefix(session_id, through),
                );
            }
            match (golden.name, result) {
                // Damage that lost a record: the backend's refusal comes first, before the
                // caps, although the records before the damage were already segmented.
                ("gap.cslog" | "damaged_last.cslog", Err(PluginError::Corrupt { offset, .. })) => {
                    assert!(offset > 9)
                }
                (name @ ("gap.cslog" | "damaged_last.cslog"), other) => {
                    panic!("{name}: {other:?}")
                }
                // Clean or recovered: the cap of 2 records is the first refusal.
                ("empty.cslog", Ok(trajectory)) => assert!(trajectory.is_empty()),
                (_, Err(PluginError::Validation { schema, message })) => {
                    assert!(config.max_records == 2 || config.max_turn_blocks == 1);
                    if config.max_records == 2 {
                        assert_eq!(schema, "ReplayConfig::max_records");
                        // The exact count, as before: the store read on to the end.
                        assert!(message.contains("records, over the cap of 2"), "{message}");
                    }
                }
                (name, Ok(trajectory)) => {
                    // v1_damaged_last.cslog loads without its damaged last record.
                    assert!(trajectory.usage().records >= 9, "{name}");
                    assert_eq!(config, ReplayConfig::default());
                }
                (name, Err(other)) => panic!("{name}: {other:?}"),
            }
        }
    }
}

#[test]
fn the_record_cap_reports_the_exact_count_and_wins_over_the_block_cap() {
    let dir = tempfile::tempdir().unwrap();
    let file = FileBackend::new(dir.path()).unwrap();
    cuca_testkit::append_all(&file, &output_session(10));
    // One turn of 10 blocks: over both caps; the record cap is the one reported.
    let (streamed, collected) = both(dir.path(), ReplayConfig::new(5, 3, None).unwrap());
    match same(streamed.load("s"), collected.load("s")) {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "ReplayConfig::max_records");
            assert!(
                message.contains("has 10 records, over the cap of 5"),
                "{message}"
            );
        }
        other => panic!("expected the record cap, got {other:?}"),
    }
    // A prefix past the cap is refused with the prefix's count; a missing sequence in a
    // session over the cap is "no such record", with the session's count.
    match same(streamed.load_prefix("s", 6), collected.load_prefix("s", 6)) {
        Err(PluginError::Validation { message, .. }) => {
            assert!(
                message.contains("has 7 records, over the cap of 5"),
                "{message}"
            );
        }
        other => panic!("expected the record cap, got {other:?}"),
    }
    match same(
        streamed.load_prefix("s", 99),
        collected.load_prefix("s", 99),
    ) {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "point_id");
            assert!(message.contains("(10 records)"), "{message}");
        }
        other => panic!("expected no prefix, got {other:?}"),
    }
    // Under the record cap, the block cap is the refusal.
    let (streamed, collected) = both(dir.path(), ReplayConfig::new(50, 3, None).unwrap());
    match same(streamed.load("s"), collected.load("s")) {
        Err(PluginError::Validation { schema, .. }) => {
            assert_eq!(schema, "ReplayConfig::max_turn_blocks")
        }
        other => panic!("expected the block cap, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Any session of short turns, cut anywhere (a torn tail) and loaded under any caps, whole
    /// or as any prefix: streamed and collected loads agree.
    #[test]
    fn streamed_and_collected_loads_agree(
        n_turns in 0u64..40,
        cut in 0.0f64..=1.0,
        max_records in 1usize..300,
        max_turn_blocks in 1usize..6,
        through in 0u64..300,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut records = Vec::new();
        for turn_idx in 0..n_turns {
            records.extend(cuca_testkit::demo_turn("demo", turn_idx * 7));
        }
        let file = FileBackend::new(dir.path()).unwrap();
        cuca_testkit::append_all(&file, &records);
        let path = file.session_path("demo").unwrap();
        drop(file);
        if let Ok(bytes) = std::fs::read(&path) {
            std::fs::write(&path, &bytes[..(cut * bytes.len() as f64) as usize]).unwrap();
        }
        let config = ReplayConfig::new(max_records, max_turn_blocks, Some(0.5)).unwrap();
        let (streamed, collected) = both(dir.path(), config);
        assert_same(&streamed.load("demo"), &collected.load("demo"));
        assert_same(&streamed.load_prefix("demo", through), &collected.load_prefix("demo", through));
    }
}
