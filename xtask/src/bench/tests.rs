//! Unit tests: the table reads criterion's files, the call-log table and the goals right.

use super::*;

/// The table's line for `figure` against a baseline whose cell contains `baseline`.
fn row_of(table: &str, figure: &str, baseline: &str) -> String {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {figure} |")) && l.contains(baseline))
        .unwrap_or_else(|| panic!("no row {figure:?} against {baseline:?} in\n{table}"))
        .to_owned()
}

fn write_result(dir: &Path, full_id: &str, median_ns: f64, elements: Option<u64>) {
    let new = dir.join(full_id.replace('/', "_")).join("new");
    std::fs::create_dir_all(&new).unwrap();
    let throughput = elements.map_or(
        serde_json::Value::Null,
        |n| serde_json::json!({ "Elements": n }),
    );
    std::fs::write(
        new.join("benchmark.json"),
        serde_json::json!({ "full_id": full_id, "throughput": throughput }).to_string(),
    )
    .unwrap();
    std::fs::write(
        new.join("estimates.json"),
        serde_json::json!({ "median": { "point_estimate": median_ns } }).to_string(),
    )
    .unwrap();
}

#[test]
fn criterion_medians_are_read_per_element() {
    let dir = tempfile::tempdir().unwrap();
    write_result(
        dir.path(),
        "peers/replay/32B/jsonl_decode",
        7_800_000.0,
        Some(7_800),
    );
    write_result(dir.path(), "noop_hook_call", 35.0, None);
    let mut out = HashMap::new();
    read_criterion(dir.path(), None, &mut out).unwrap();
    assert_eq!(out["peers/replay/32B/jsonl_decode"].amount, 1_000.0);
    assert_eq!(out["noop_hook_call"].amount, 35.0);
    assert_eq!(out.len(), 2);
}

#[test]
fn results_older_than_the_run_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    write_result(dir.path(), "memory/on_stream_chunk", 300.0, Some(1));
    let later = SystemTime::now() + std::time::Duration::from_secs(3600);
    let mut out = HashMap::new();
    read_criterion(dir.path(), Some(later), &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn calllog_p99_is_read_from_its_table_at_the_asked_writer_count() {
    let log = "\n| writer | writers | median µs/row | p99 µs/row | p99.9 µs/row | mean µs/row | p99 vs raw write | wall rows/s |\n\
               |---|---|---|---|---|---|---|---|\n\
               | raw write of the line bytes | 1 | 1.00 | 2.00 | 3.00 | 1.10 | 1.00× | 9000 |\n\
               | raw write of the line bytes | 8 | 4.00 | 12.50 | 30.00 | 5.00 | 1.00× | 9000 |\n\
               | cuca-calllog append | 8 | 5.00 | 7.25 | 40.00 | 6.00 | 0.58× | 9000 |\n";
    let p99 = calllog_p99(log, 8);
    assert_eq!(p99.len(), 2);
    assert_eq!(p99["cuca-calllog append"], 7.25);
    assert_eq!(p99["raw write of the line bytes"], 12.5);
}

#[test]
fn the_table_gives_ratios_and_verdicts_and_says_what_did_not_run() {
    let mut results = Results::default();
    let ns = |amount| Value {
        amount,
        unit: Unit::Nanos,
    };
    // FileBackend at 2 µs against a 1.6 µs raw write: 0.80× the raw speed, under 0.85.
    results
        .criterion
        .insert("peers/append/32B/file_backend".into(), ns(2_000.0));
    results
        .criterion
        .insert("peers/append/32B/raw_write".into(), ns(1_600.0));
    results
        .criterion
        .insert("peers/append/32B/sqlite".into(), ns(10_000.0));
    results
        .criterion
        .insert("memory/on_stream_chunk".into(), ns(326.0));
    results
        .criterion
        .insert("memory/backend_append_baseline".into(), ns(153.0));
    let table = table(&results);
    let line = |figure: &str, baseline: &str| row_of(&table, figure, baseline);
    assert!(line("FileBackend append 32 B", "raw write")
        .ends_with("| 0.80× | speed ≥ 0.85× | **no** |"));
    assert!(line("FileBackend append 32 B", "SQLite insert")
        .ends_with("| 5.00× | speed ≥ 3.00× | yes |"));
    assert!(line("FileBackend append 32 B", "JSONL append")
        .ends_with("| not run | — | speed ≥ 1.20× | not run |"));
    assert!(line("on_stream_chunk (memory)", "InMemoryBackend")
        .ends_with("| 2.13× | < 1.00 µs | yes |"));
    assert_eq!(table.lines().count(), ROWS.len() + 2);
}

#[test]
fn every_row_reads_a_bench_that_some_target_runs() {
    // Criterion group prefixes of each target, so a renamed group shows up here.
    let groups = [
        "peers/",
        "memory/",
        "file/",
        "decode_only/",
        "assemble/",
        "replay_100k/",
        "open_1M/",
        "live_1M/",
        "last_page_1M/",
        "search_1M/",
        "proxy_ttfb/",
        "proxy_stream/",
        "proxy_parallel/",
        "proxy_stream_messages/",
        "proxy_stream_responses/",
        "proxy_replay/",
        "proxy_replay_conversations/",
        "summary_200k/",
        "backend_stream/",
        "cost_1M/",
    ];
    for row in ROWS {
        for source in [row.of, row.against] {
            match source {
                Source::Criterion(id) => {
                    assert!(groups.iter().any(|g| id.starts_with(g)), "{id}");
                }
                Source::Json(file, ..) | Source::JsonDiff(file, ..) => {
                    // Each results file, and the bench that writes it.
                    let (package, bench) = match file {
                        "clients-interleaved" => ("cuca-bench", "clients"),
                        "proxy-ttfb" | "proxy-cpu" => ("cuca-proxy", "proxy"),
                        "proxy-postgres" => ("cuca-proxy", "postgres"),
                        other => panic!("no bench writes {other}.json"),
                    };
                    assert!(RESULT_FILES.contains(&file), "{file}");
                    assert!(TARGETS
                        .iter()
                        .any(|t| t.package == package && t.bench == bench));
                }
                _ => {}
            }
        }
    }
}

#[test]
fn the_client_rows_compare_real_framing_with_async_openai_the_minimal_reader_and_recording() {
    // The client costs per block ≤ 0.7× async-openai and ≤ 1.5× the minimal reader, and a
    // block recorded through `SessionLogPlugin` over a `FileBackend` (Buffered) costs at most
    // 1.0× the client's own per-block cost.
    let results = Results {
        json: HashMap::from([(
            "clients-interleaved",
            serde_json::json!({
                "per_block/per_event": {
                    "raw_sse_bytes": 1_000.0, "minimal_sse_json": 1_800.0, "cuca_client": 2_300.0,
                    "cuca_client_file_log": 4_200.0, "async_openai": 2_500.0,
                },
                "per_block/16KiB": { "cuca_client": 1_000.0, "async_openai": 2_600.0 },
                "ttft/median": { "cuca_client": 234_000.0, "async_openai": 306_000.0 },
                "ttft/p99": { "cuca_client": 360_000.0, "async_openai": 480_000.0 },
                "peak_heap": { "cuca_client": 2_355_700.0, "async_openai": 832_918.0 },
            }),
        )]),
        ..Results::default()
    };
    let table = table(&results);
    let line = |figure: &str, baseline: &str| row_of(&table, figure, baseline);
    assert!(line("client stream, per block", "| async-openai 0.43 |")
        .ends_with("| 2.30 µs | async-openai 0.43 | 2.50 µs | 0.92× | ≤ 0.70× | **no** |"));
    assert!(line("client stream, per block", "minimal SSE").ends_with("| 1.28× | ≤ 1.50× | yes |"));
    assert!(line("client stream, per block", "raw SSE read").ends_with("| 2.30× | — | — |"));
    assert!(
        line("client stream, per block, 16 KiB chunks", "async-openai")
            .ends_with("| 0.38× | — | — |")
    );
    // (4.2 − 2.3) / (2.3 − 1.0) µs.
    assert!(line("recording (file log) cost, per block", "client's own cost").ends_with(
        "| 1.90 µs | client's own cost (client − raw read) | 1.30 µs | 1.46× | ≤ 1.00× | **no** |"
    ));
    assert!(line("client time to first token, p99", "async-openai")
        .ends_with("| 360.00 µs | async-openai 0.43 | 480.00 µs | 0.75× | — | — |"));
    assert!(line("client peak heap, 10k-block stream", "async-openai")
        .ends_with("| 2355.7 KB | async-openai 0.43 | 832.9 KB | 2.83× | — | — |"));
    assert!(line("client decode only, per block, per event", "16 KiB")
        .ends_with("| not run | the same in 16 KiB pieces | not run | — | — | — |"));
    // Noise can put the recording run under the plain one: a negative cost, not "not run".
    let results = Results {
        json: HashMap::from([(
            "clients-interleaved",
            serde_json::json!({ "per_block/per_event": {
                "raw_sse_bytes": 1_000.0, "cuca_client": 2_000.0, "cuca_client_file_log": 1_900.0,
            }}),
        )]),
        ..Results::default()
    };
    assert!(super::table(&results).lines().any(|l| l
        .starts_with("| recording (file log) cost, per block | -100 ns |")
        && l.ends_with("| -0.10× | ≤ 1.00× | yes |")));
}

#[test]
fn the_cli_scale_line_gives_the_cli_rows() {
    // `cuca verify` and `cuca replay --turn 0` on a 1,000,000-record session against reading
    // the same records as JSONL with `serde_json`, with peak RSS.
    let results = Results {
        cli: Some(serde_json::json!({
            "verifyNs": 100e6, "replayTurn0Ns": 250e6, "jsonlReadNs": 1_000e6,
            "verifyRssKib": 8192.0, "replayTurn0RssKib": 70_000.0, "startRssKib": 4096.0,
        })),
        ..Results::default()
    };
    let table = table(&results);
    let line = |figure: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {figure} |")))
            .unwrap()
            .to_owned()
    };
    assert!(line("cuca verify, 1M records").ends_with("| 10.00× | speed ≥ 3.00× | yes |"));
    assert!(line("cuca replay --turn 1, 1M records").ends_with("| 4.00× | speed ≥ 3.00× | yes |"));
    assert!(line("cuca verify peak RSS, 1M records").contains("| 8.0 MiB |"));
    assert!(line("cuca replay --turn 1 peak RSS, 1M records").ends_with("| **no** |"));
}

#[test]
fn the_proxy_row_holds_what_recording_adds_to_time_to_first_byte_at_p99_under_1_ms() {
    // The recording proxy adds under 1 ms at p99 to time to first token.
    let results = |recording_p99: f64| Results {
        json: HashMap::from([(
            "proxy-ttfb",
            serde_json::json!({
                "p50": { "direct": 180_000.0, "passthrough": 350_000.0, "recording": 420_000.0 },
                "p99": { "direct": 400_000.0, "passthrough": 600_000.0, "recording": recording_p99 },
            }),
        )]),
        ..Results::default()
    };
    let line = |table: &str| {
        row_of(
            table,
            "what the recording proxy adds to time to first byte, p99",
            "direct to upstream",
        )
    };
    assert!(line(&table(&results(800_000.0)))
        .ends_with("| 400.00 µs | direct to upstream, p99 | 400.00 µs | 1.00× | < 1.0 ms | yes |"));
    assert!(line(&table(&results(1_500_000.0))).ends_with("| < 1.0 ms | **no** |"));
}
