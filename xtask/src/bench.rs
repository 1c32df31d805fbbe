//! `cargo xtask bench [--quick]`: runs the criterion benches, then prints one table of each
//! figure beside its baseline measured in the same run, the ratio, the target and a verdict.
//!
//! Everything the table knows is in two constants: [`TARGETS`] (which benches run, and with
//! which filter in `--quick` mode) and [`ROWS`] (which measurement is a figure, which is its
//! baseline, and what its target is). Measurements come from criterion's own
//! `target/criterion/**/new/{benchmark,estimates}.json` (the median, per element when the
//! group declared element throughput), from `target/cuca-bench/peers-sizes.json` (bytes on
//! disk, written by `crates/cuca-bench/benches/peers.rs`), from the interleaved comparisons
//! `peers-interleaved.json` and `clients-interleaved.json` beside it (the client rows, written
//! by `crates/cuca-bench/benches/clients.rs`), and from two lines benches print:
//! the call-log bench's percentile table and the journal bench's peak-RSS line. A criterion
//! result older than this run's start is treated as missing, so no ratio ever mixes runs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context};

/// Criterion settings of a smoke run: the whole `--quick` run stays under two minutes on a
/// warm build, at the price of wider confidence intervals.
const QUICK_ARGS: &[&str] = &[
    "--warm-up-time",
    "0.5",
    "--measurement-time",
    "1",
    "--sample-size",
    "10",
];

/// Criterion settings of a full run: the shared-machine settings every crate's own figures
/// in `docs/performance.md` were measured with.
const FULL_ARGS: &[&str] = &["--warm-up-time", "1", "--measurement-time", "3"];

/// What a bench target runs in `--quick` mode.
#[derive(Debug, Clone, Copy)]
enum Quick {
    /// Only the benchmarks whose id matches this criterion filter (a regex).
    Filter(&'static str),
    /// All of it, unfiltered: a bench that is not criterion's, trimmed by its `quick_env`.
    Whole,
    /// Nothing: the table's rows do not read it, it runs in full mode only.
    Skip,
}

/// One `cargo bench -p <package> --bench <bench>` invocation.
#[derive(Debug)]
struct Target {
    package: &'static str,
    bench: &'static str,
    quick: Quick,
    /// Environment in `--quick` mode.
    quick_env: &'static [(&'static str, &'static str)],
    /// Environment in full mode.
    full_env: &'static [(&'static str, &'static str)],
}

/// Every bench in the workspace. Quick mode runs only what [`ROWS`] reads.
const TARGETS: &[Target] = &[
    Target {
        package: "cuca-bench",
        bench: "peers",
        // The SQLite and bare-FileBackend replays are context rows, left to full mode.
        quick: Quick::Filter("append|replay_load_segment|jsonl_decode|memcpy_read"),
        // The interleaved comparison runs in every mode; quick mode takes fewer rounds.
        quick_env: &[("CUCA_BENCH_ROUNDS", "5")],
        full_env: &[],
    },
    // CucaClient against async-openai, the minimal reader and the raw read: interleaved
    // rounds, not criterion; quick mode takes fewer rounds.
    Target {
        package: "cuca-bench",
        bench: "clients",
        quick: Quick::Whole,
        quick_env: &[("CUCA_BENCH_ROUNDS", "5"), ("CUCA_BENCH_TTFT_ROUNDS", "40")],
        full_env: &[],
    },
    Target {
        package: "cuca-session-log",
        bench: "hooks",
        quick: Quick::Filter("^memory/"),
        quick_env: &[],
        full_env: &[],
    },
    Target {
        package: "cuca-client",
        bench: "stream",
        quick: Quick::Filter("^decode_only/"),
        quick_env: &[],
        full_env: &[],
    },
    Target {
        package: "cuca-proxy",
        bench: "proxy",
        quick: Quick::Filter("^proxy_"),
        quick_env: &[],
        full_env: &[],
    },
    // The call-log bench always prints its percentile table after criterion; the filter only
    // trims criterion's part to the 8-writer rows.
    Target {
        package: "cuca-calllog",
        bench: "append",
        quick: Quick::Filter("8 writers"),
        quick_env: &[],
        full_env: &[],
    },
    // The peak-RSS run is opt-in in the journal bench. Quick mode assembles 64 MiB (the
    // filter matches no criterion benchmark, so only that run happens; generating the
    // journal is most of its time); full mode the 1 GiB the target names, then the
    // criterion benchmarks.
    Target {
        package: "cuca-journal",
        bench: "assemble",
        quick: Quick::Filter("^rss$"),
        quick_env: &[("CUCA_BENCH_RSS_GIB", "0.0625")],
        full_env: &[("CUCA_BENCH_RSS_GIB", "1")],
    },
    Target {
        package: "cuca-store-file",
        bench: "append_replay",
        quick: Quick::Skip,
        quick_env: &[],
        full_env: &[],
    },
    Target {
        package: "cuca-replay",
        bench: "replay",
        quick: Quick::Skip,
        quick_env: &[],
        full_env: &[],
    },
    Target {
        package: "cuca-journal",
        bench: "capture",
        quick: Quick::Skip,
        quick_env: &[],
        full_env: &[],
    },
    Target {
        package: "cuca-view",
        bench: "open",
        quick: Quick::Filter("first_page"),
        quick_env: &[],
        full_env: &[],
    },
    // A search across 1,000,000 records (ten sessions) and a bare read of them.
    Target {
        package: "cuca-search",
        bench: "search",
        quick: Quick::Filter("rare_word|full_read"),
        quick_env: &[],
        full_env: &[],
    },
    // The CLI on a million-record session: one run of the real binary per figure (best of
    // three in full mode), not criterion. Quick mode uses a tenth of the records.
    Target {
        package: "cuca-cli",
        bench: "scale",
        quick: Quick::Filter("scale"),
        quick_env: &[
            ("CUCA_BENCH_CLI_RECORDS", "100000"),
            ("CUCA_BENCH_CLI_RUNS", "1"),
        ],
        full_env: &[],
    },
    // `cuca cost` on a million records (1,000 sessions), by day and by model: one run of the
    // real binary per figure under GNU time, not criterion. Quick mode uses a tenth.
    Target {
        package: "cuca-cli",
        bench: "cost",
        quick: Quick::Whole,
        quick_env: &[
            ("CUCA_BENCH_COST_RECORDS", "100000"),
            ("CUCA_BENCH_COST_RUNS", "1"),
        ],
        full_env: &[],
    },
    // The same under criterion, with `cuca verify` of the store as the baseline: ten runs
    // of each. Quick mode builds a tenth of the store and times the report by day.
    Target {
        package: "cuca-cli",
        bench: "cost_report",
        quick: Quick::Filter("cost_1M/(by_day_json|verify)"),
        quick_env: &[("CUCA_BENCH_COST_RECORDS", "100000")],
        full_env: &[],
    },
    // Recording into PostgreSQL through the proxy, against a FileBackend; without
    // CUCA_PG_URL it prints why and its rows say "not run".
    Target {
        package: "cuca-proxy",
        bench: "postgres",
        quick: Quick::Whole,
        quick_env: &[],
        full_env: &[],
    },
    // PostgreSQL rows run only when CUCA_PG_URL is set; the in-memory and file rows always.
    Target {
        package: "cuca-store-postgres",
        bench: "pg",
        quick: Quick::Skip,
        quick_env: &[],
        full_env: &[],
    },
];

/// Where a measurement comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A criterion benchmark by its full id: the median time, per element when the group
    /// declared element throughput.
    Criterion(&'static str),
    /// Bytes on disk in `peers-sizes.json`: payload (`"32B"`), store (`"cslog"`, `"jsonl"`).
    Size(&'static str, &'static str),
    /// The call-log bench's percentile table: p99 of the writer named, at 8 writers.
    CalllogP99(&'static str),
    /// A field of the journal bench's `peak-RSS run:` line, in KiB.
    JournalRss(&'static str),
    /// A field of the CLI scale bench's `cli-scale run:` line (nanoseconds, or KiB for the
    /// `…RssKib` fields).
    CliScale(&'static str),
    /// The peers bench's interleaved comparison (`peers-interleaved.json`): group
    /// (`"append/32B"`), contender (`"file_backend"`), nanoseconds per element.
    Interleaved(&'static str, &'static str),
    /// A figure of a results file a bench wrote beside `peers-sizes.json`
    /// ([`RESULT_FILES`]): file stem, group, contender. The clients bench's
    /// (`"clients-interleaved"`: `"per_block/per_event"`, `"ttft/p99"`, `"peak_heap"`, …;
    /// contender `"cuca_client"`, …) and the proxy bench's (`"proxy-ttfb"`: `"p50"`, `"p99"`;
    /// route `"recording"`, …). Nanoseconds, or bytes for a `peak_heap` group.
    Json(&'static str, &'static str, &'static str),
    /// The difference of two contenders of one group of a results file: the first's figure
    /// minus the second's (what one adds on top of the other).
    JsonDiff(&'static str, &'static str, &'static str, &'static str),
}

/// How the ratio column is computed.
#[derive(Debug, Clone, Copy)]
enum Ratio {
    /// Baseline time over figure time: how many times as fast the figure is.
    Speed,
    /// Figure over baseline: what the figure costs in baselines (time, bytes, memory).
    Cost,
}

/// The target a row must meet, or that it is shown for information.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// The ratio is at least this.
    AtLeast(f64),
    /// The ratio is at most this.
    AtMost(f64),
    /// The figure itself is below this many of its unit (ns or KiB).
    Below(f64),
    /// Context, no target.
    Info,
}

/// One line of the table.
#[derive(Debug)]
struct Row {
    figure: &'static str,
    of: Source,
    baseline: &'static str,
    against: Source,
    ratio: Ratio,
    goal: Goal,
}

const fn row(
    figure: &'static str,
    of: Source,
    baseline: &'static str,
    against: Source,
    ratio: Ratio,
    goal: Goal,
) -> Row {
    Row {
        figure,
        of,
        baseline,
        against,
        ratio,
        goal,
    }
}

use Goal::{AtLeast, AtMost, Below, Info};
use Ratio::{Cost, Speed};
use Source::{CalllogP99, CliScale, Criterion as C, Interleaved as I, JournalRss, Size};

/// The results files benches write beside `peers-sizes.json`, read whole into
/// [`Results::json`] for [`Source::Json`] rows.
const RESULT_FILES: &[&str] = &[
    "clients-interleaved",
    "proxy-ttfb",
    "proxy-cpu",
    "proxy-postgres",
];

/// A figure of the clients bench's interleaved comparison.
const fn k(group: &'static str, contender: &'static str) -> Source {
    Source::Json("clients-interleaved", group, contender)
}

/// What one contender of the clients bench adds on top of another.
const fn k_diff(group: &'static str, of: &'static str, minus: &'static str) -> Source {
    Source::JsonDiff("clients-interleaved", group, of, minus)
}

/// The mapping from bench ids to table rows: the one place to change when a bench or a
/// target changes. Times are per element (per append, per replayed record, per streamed
/// block) wherever the bench declared element throughput.
#[rustfmt::skip]
const ROWS: &[Row] = &[
    // FileBackend appends: ≥ 85% of the raw-write limit, ≥ 1.2× JSONL, ≥ 3× SQLite.
    row("FileBackend append 32 B", C("peers/append/32B/file_backend"), "raw write", C("peers/append/32B/raw_write"), Speed, AtLeast(0.85)),
    row("FileBackend append 200 B", C("peers/append/200B/file_backend"), "raw write", C("peers/append/200B/raw_write"), Speed, AtLeast(0.85)),
    row("FileBackend append 1 KiB", C("peers/append/1024B/file_backend"), "raw write", C("peers/append/1024B/raw_write"), Speed, AtLeast(0.85)),
    row("FileBackend append 32 B", C("peers/append/32B/file_backend"), "JSONL append", C("peers/append/32B/jsonl"), Speed, AtLeast(1.2)),
    row("FileBackend append 200 B", C("peers/append/200B/file_backend"), "JSONL append", C("peers/append/200B/jsonl"), Speed, AtLeast(1.2)),
    row("FileBackend append 1 KiB", C("peers/append/1024B/file_backend"), "JSONL append", C("peers/append/1024B/jsonl"), Speed, AtLeast(1.2)),
    row("FileBackend append 32 B", C("peers/append/32B/file_backend"), "raw write of an owned record", C("peers/append/32B/raw_write_owned"), Speed, Info),
    row("FileBackend append 1 KiB", C("peers/append/1024B/file_backend"), "raw write of an owned record", C("peers/append/1024B/raw_write_owned"), Speed, Info),
    row("FileBackend append 32 B, interleaved", I("append/32B", "file_backend"), "raw write, interleaved", I("append/32B", "raw_write"), Speed, Info),
    row("FileBackend append 200 B, interleaved", I("append/200B", "file_backend"), "raw write, interleaved", I("append/200B", "raw_write"), Speed, Info),
    row("FileBackend append 1 KiB, interleaved", I("append/1024B", "file_backend"), "raw write, interleaved", I("append/1024B", "raw_write"), Speed, Info),
    row("FileBackend append 32 B, interleaved", I("append/32B", "file_backend"), "JSONL append, interleaved", I("append/32B", "jsonl"), Speed, Info),
    row("FileBackend append 200 B, interleaved", I("append/200B", "file_backend"), "JSONL append, interleaved", I("append/200B", "jsonl"), Speed, Info),
    row("FileBackend append 1 KiB, interleaved", I("append/1024B", "file_backend"), "JSONL append, interleaved", I("append/1024B", "jsonl"), Speed, Info),
    row("FileBackend append 32 B", C("peers/append/32B/file_backend"), "SQLite insert", C("peers/append/32B/sqlite"), Speed, AtLeast(3.0)),
    row("FileBackend append 200 B", C("peers/append/200B/file_backend"), "SQLite insert", C("peers/append/200B/sqlite"), Speed, AtLeast(3.0)),
    row("FileBackend append 1 KiB", C("peers/append/1024B/file_backend"), "SQLite insert", C("peers/append/1024B/sqlite"), Speed, AtLeast(3.0)),
    // Replay: load + segment ≥ 3× the JSONL decode; the memcpy read is the physical limit.
    row("replay load+segment 32 B", C("peers/replay/32B/replay_load_segment"), "JSONL decode", C("peers/replay/32B/jsonl_decode"), Speed, AtLeast(3.0)),
    row("replay load+segment 200 B", C("peers/replay/200B/replay_load_segment"), "JSONL decode", C("peers/replay/200B/jsonl_decode"), Speed, AtLeast(3.0)),
    row("replay load+segment 1 KiB", C("peers/replay/1024B/replay_load_segment"), "JSONL decode", C("peers/replay/1024B/jsonl_decode"), Speed, AtLeast(3.0)),
    row("replay load+segment 32 B, interleaved", I("replay/32B", "replay_load_segment"), "JSONL decode, interleaved", I("replay/32B", "jsonl_decode"), Speed, Info),
    row("replay load+segment 200 B, interleaved", I("replay/200B", "replay_load_segment"), "JSONL decode, interleaved", I("replay/200B", "jsonl_decode"), Speed, Info),
    row("replay load+segment 1 KiB, interleaved", I("replay/1024B", "replay_load_segment"), "JSONL decode, interleaved", I("replay/1024B", "jsonl_decode"), Speed, Info),
    row("replay load+segment 32 B", C("peers/replay/32B/replay_load_segment"), "memcpy read of the .cslog", C("peers/replay/32B/memcpy_read"), Speed, Info),
    row("replay load+segment 200 B", C("peers/replay/200B/replay_load_segment"), "memcpy read of the .cslog", C("peers/replay/200B/memcpy_read"), Speed, Info),
    row("replay load+segment 1 KiB", C("peers/replay/1024B/replay_load_segment"), "memcpy read of the .cslog", C("peers/replay/1024B/memcpy_read"), Speed, Info),
    row("FileBackend replay 1 KiB", C("peers/replay/1024B/file_backend_replay"), "SQLite select", C("peers/replay/1024B/sqlite_replay"), Speed, Info),
    // Size on disk ≤ 60% of JSONL.
    row(".cslog size 32 B", Size("prose-32B", "cslog"), "JSONL size", Size("prose-32B", "jsonl"), Cost, AtMost(0.60)),
    row(".cslog size 200 B", Size("prose-200B", "cslog"), "JSONL size", Size("prose-200B", "jsonl"), Cost, AtMost(0.60)),
    row(".cslog size 1 KiB", Size("prose-1024B", "cslog"), "JSONL size", Size("prose-1024B", "jsonl"), Cost, AtMost(0.60)),
    row("compacted .cslog.gz size 32 B", Size("prose-32B", "cslog_gz"), "JSONL size", Size("prose-32B", "jsonl"), Cost, AtMost(0.60)),
    row("compacted .cslog.gz size 200 B", Size("prose-200B", "cslog_gz"), "JSONL size", Size("prose-200B", "jsonl"), Cost, AtMost(0.60)),
    row("compacted .cslog.gz size 1 KiB", Size("prose-1024B", "cslog_gz"), "JSONL size", Size("prose-1024B", "jsonl"), Cost, AtMost(0.60)),
    row("compacted .cslog.gz size 200 B", Size("prose-200B", "cslog_gz"), "JSONL gzipped", Size("prose-200B", "jsonl_gz"), Cost, Info),
    row(".cslog size 200 B", Size("200B", "cslog"), "SQLite size", Size("200B", "sqlite"), Cost, Info),
    row(".cslog size, recorded demo", Size("demo", "cslog"), "JSONL size", Size("demo", "jsonl"), Cost, Info),
    row(".cslog size, recorded reasoning", Size("reasoning", "cslog"), "JSONL size", Size("reasoning", "jsonl"), Cost, Info),
    // The session-log hook under 1 µs per block over InMemoryBackend.
    row("on_stream_chunk (memory)", C("memory/on_stream_chunk"), "InMemoryBackend append", C("memory/backend_append_baseline"), Cost, Below(1_000.0)),
    row("on_stream_chunk (file)", C("file/on_stream_chunk"), "FileBackend append", C("file/backend_append_baseline"), Cost, Info),
    // The client over llama-server's own framing (one HTTP chunk per event), interleaved with
    // its peers: per block ≤ 0.7× async-openai and ≤ 1.5× the minimal SSE + JSON reader.
    row("client stream, per block", k("per_block/per_event", "cuca_client"), "async-openai 0.43", k("per_block/per_event", "async_openai"), Cost, AtMost(0.7)),
    row("client stream, per block", k("per_block/per_event", "cuca_client"), "minimal SSE + JSON reader", k("per_block/per_event", "minimal_sse_json"), Cost, AtMost(1.5)),
    row("client stream, per block", k("per_block/per_event", "cuca_client"), "raw SSE read", k("per_block/per_event", "raw_sse_bytes"), Cost, Info),
    row("client stream, per block, 16 KiB chunks", k("per_block/16KiB", "cuca_client"), "async-openai 0.43, 16 KiB chunks", k("per_block/16KiB", "async_openai"), Cost, Info),
    row("minimal SSE + JSON reader, per block", k("per_block/per_event", "minimal_sse_json"), "raw SSE read", k("per_block/per_event", "raw_sse_bytes"), Cost, Info),
    // Recording through SessionLogPlugin over FileBackend costs at most what the client does.
    row("recording (file log) cost, per block", k_diff("per_block/per_event", "cuca_client_file_log", "cuca_client"), "client's own cost (client − raw read)", k_diff("per_block/per_event", "cuca_client", "raw_sse_bytes"), Cost, AtMost(1.0)),
    row("client time to first token, median", k("ttft/median", "cuca_client"), "async-openai 0.43", k("ttft/median", "async_openai"), Cost, Info),
    row("client time to first token, p99", k("ttft/p99", "cuca_client"), "async-openai 0.43", k("ttft/p99", "async_openai"), Cost, Info),
    row("client peak heap, 10k-block stream", k("peak_heap", "cuca_client"), "async-openai 0.43", k("peak_heap", "async_openai"), Cost, Info),
    row("client decode only, per block, per event", C("decode_only/per_event"), "the same in 16 KiB pieces", C("decode_only/16KiB"), Cost, Info),
    // The recording proxy: at most 1.5× a plain pass-through proxy per chunk, and under 1 ms
    // added at p99 to time to first byte (the interleaved run's `proxy-ttfb.json`).
    row("recording proxy, per chunk", C("proxy_stream/recording"), "pass-through proxy", C("proxy_stream/passthrough"), Cost, AtMost(1.5)),
    row("recording proxy, per chunk", C("proxy_stream/recording"), "direct to upstream", C("proxy_stream/direct"), Cost, Info),
    // Redaction at write time (the default rules, on by default) costs a recorded chunk at
    // most 10% more than recording it with every rule off.
    row("recording proxy, per chunk, default redaction", C("proxy_stream/recording"), "with redaction off", C("proxy_stream/recording_unredacted"), Cost, AtMost(1.1)),
    row("recording proxy, per chunk, Anthropic Messages", C("proxy_stream_messages/recording"), "pass-through proxy", C("proxy_stream_messages/passthrough"), Cost, AtMost(1.5)),
    row("recording proxy, per chunk, OpenAI Responses", C("proxy_stream_responses/recording"), "pass-through proxy", C("proxy_stream_responses/passthrough"), Cost, AtMost(1.5)),
    row("recording proxy, time to first byte", C("proxy_ttfb/recording"), "pass-through proxy", C("proxy_ttfb/passthrough"), Cost, Info),
    row("recording proxy, time to first byte", C("proxy_ttfb/recording"), "direct to upstream", C("proxy_ttfb/direct"), Cost, Info),
    row("what the recording proxy adds to time to first byte, p99", Source::JsonDiff("proxy-ttfb", "p99", "recording", "direct"), "direct to upstream, p99", Source::Json("proxy-ttfb", "p99", "direct"), Cost, Below(1e6)),
    row("what the recording proxy adds to time to first byte, p99", Source::JsonDiff("proxy-ttfb", "p99", "recording", "passthrough"), "pass-through proxy, p99", Source::Json("proxy-ttfb", "p99", "passthrough"), Cost, Info),
    // The proxy's own CPU per streamed chunk (its threads only, the kernel's count): what
    // recording adds over passing the chunk through is at most 2 µs.
    row("proxy CPU per streamed chunk, recording", Source::Json("proxy-cpu", "per_chunk", "recording"), "pass-through proxy's CPU per chunk", Source::Json("proxy-cpu", "per_chunk", "passthrough"), Cost, Info),
    row("what recording adds to the proxy's CPU per streamed chunk", Source::JsonDiff("proxy-cpu", "per_chunk", "recording", "passthrough"), "pass-through proxy's CPU per chunk", Source::Json("proxy-cpu", "per_chunk", "passthrough"), Cost, Below(2000.0)),
    row("what recording adds to the proxy's CPU per streamed chunk, redaction off", Source::JsonDiff("proxy-cpu", "per_chunk", "recording_unredacted", "passthrough"), "pass-through proxy's CPU per chunk", Source::Json("proxy-cpu", "per_chunk", "passthrough"), Cost, Info),
    // Recording into PostgreSQL (pipelined) costs a caller ≤ 2× recording into a file.
    row("proxy recording a 1,000-chunk stream into PostgreSQL", Source::Json("proxy-postgres", "stream_1000", "postgres"), "into a FileBackend", Source::Json("proxy-postgres", "stream_1000", "file"), Cost, AtMost(2.0)),
    row("proxy recording a 1,000-chunk stream, a commit per record", Source::Json("proxy-postgres", "stream_1000", "postgres_commit"), "into a FileBackend", Source::Json("proxy-postgres", "stream_1000", "file"), Cost, Info),
    row("50 concurrent 1,000-chunk streams on 50 sessions into PostgreSQL", Source::Json("proxy-postgres", "parallel_50", "postgres"), "into a FileBackend", Source::Json("proxy-postgres", "parallel_50", "file"), Cost, AtMost(2.0)),
    // Fifty agents starting at once: the slowest of 50 concurrent calls, each beginning a new
    // session, waits for its first byte ≤ 2× what it waits with a FileBackend.
    row("slowest first byte of 50 concurrent calls beginning new sessions, PostgreSQL", Source::Json("proxy-postgres", "first_byte_50", "postgres"), "into a FileBackend", Source::Json("proxy-postgres", "first_byte_50", "file"), Cost, AtMost(2.0)),
    // The backend's own share of it: one streamed call's appends (message, 1,000 blocks,
    // TokenUsage) until the closing record is acknowledged, without the proxy around them.
    row("PostgresBackend (pipelined), a 1,000-block call's appends, per record", C("backend_stream/postgres_pipelined"), "FileBackend", C("backend_stream/file"), Cost, Info),
    // 8 parallel streamed calls through one base URL (8 conversations of one
    // session) take at most 1.2× the wall time of the same calls made directly.
    row("8 parallel streamed calls, one base URL, recording", C("proxy_parallel/recording"), "the same 8 calls direct to upstream", C("proxy_parallel/direct"), Cost, AtMost(1.2)),
    // A replayed call on a 1,000-turn session costs at most 1.5× one on a
    // 10-turn session (the replay index, not a load of the session per call) and at most 2×
    // the same call answered by the upstream directly.
    row("replayed call, 1,000-turn session", C("proxy_replay/turns_1000"), "replayed call, 10-turn session", C("proxy_replay/turns_10"), Cost, AtMost(1.5)),
    row("replayed call, 1,000-turn session", C("proxy_replay/turns_1000"), "direct to upstream", C("proxy_replay/direct"), Cost, AtMost(2.0)),
    row("replayed call, 100-turn session", C("proxy_replay/turns_100"), "replayed call, 10-turn session", C("proxy_replay/turns_10"), Cost, Info),
    row("replayed call, 10-turn session", C("proxy_replay/turns_10"), "direct to upstream", C("proxy_replay/direct"), Cost, Info),
    row("replayed call, 1,000th of 1,000 conversations", C("proxy_replay_conversations/last"), "direct to upstream", C("proxy_replay_conversations/direct"), Cost, AtMost(2.0)),
    row("replayed call, 1st of 1,000 conversations", C("proxy_replay_conversations/first"), "direct to upstream", C("proxy_replay_conversations/direct"), Cost, Info),
    // Call-log append p99 under 50 µs at 8 writers.
    row("calllog append p99, 8 writers", CalllogP99("cuca-calllog append"), "raw write p99, 8 writers", CalllogP99("raw write of the line bytes"), Cost, Below(50_000.0)),
    row("calllog append p99, 8 writers", CalllogP99("cuca-calllog append"), "tracing-appender p99", CalllogP99("tracing-appender JSON (non-blocking)"), Cost, Info),
    // Journal assembly's peak RSS independent of size: under 64 MiB.
    row("journal assembly VmHWM", JournalRss("vmHwmKib"), "VmHWM at process start", JournalRss("vmHwmBeforeKib"), Cost, Below(64.0 * 1024.0)),
    row("journal assembly 16 MiB, gzip 1", C("assemble/assemble_16MiB/1"), "gzip -1 of the journal", C("assemble/gzip_copy_16MiB_baseline/1"), Cost, Info),
    // The viewer opens a 1,000,000-record session's first page in under 1 s.
    row("cuca view: first page of a 1M-record session", C("open_1M/first_page"), "a full read of the session", C("open_1M/full_read_baseline"), Cost, Below(1e9)),
    // Search (`cuca grep`, the viewer's box) across 1,000,000 records in under 1 s warm.
    row("search across 1M records (one hit)", C("search_1M/rare_word"), "a bare read of the same records", C("search_1M/full_read_baseline"), Cost, Below(1e9)),
    row("search across 1M records, ignoring case", C("search_1M/ignore_case"), "a bare read of the same records", C("search_1M/full_read_baseline"), Cost, Info),
    // The summary page (header totals over the whole session) of a 200,000-record
    // session, first request (cold: the session read once and indexed) and next (warm).
    row("cuca view: summary page of a 200k-record session, first request", C("summary_200k/first_page_cold"), "a full read of the session", C("summary_200k/full_read_baseline"), Cost, Below(1e9)),
    row("cuca view: summary page of a 200k-record session, next request", C("summary_200k/first_page_warm"), "a full read of the session", C("summary_200k/full_read_baseline"), Cost, Info),
    // The viewer O(new): a live poll near the end of a 1M-record session under 5 ms, and its
    // last page under 10 ms once the session's page marks are known.
    row("cuca view: live poll of 10 new records, 1M-record session", C("live_1M/poll_10_new"), "a full read of the session", C("live_1M/full_read_baseline"), Cost, Below(5e6)),
    row("cuca view: last page of a 1M-record session, next request", C("last_page_1M/warm"), "a full read of the session", C("last_page_1M/full_read_baseline"), Cost, Below(1e7)),
    row("cuca view: last page of a 1M-record session, first request", C("last_page_1M/first"), "a full read of the session", C("last_page_1M/full_read_baseline"), Cost, Info),
    // The CLI on a million-record session: ≥ 3× the JSONL reader, peak RSS under 64 MiB.
    row("cuca verify, 1M records", CliScale("verifyNs"), "serde_json JSONL read", CliScale("jsonlReadNs"), Speed, AtLeast(3.0)),
    row("cuca replay --turn 1, 1M records", CliScale("replayTurn0Ns"), "serde_json JSONL read", CliScale("jsonlReadNs"), Speed, AtLeast(3.0)),
    row("cuca verify peak RSS, 1M records", CliScale("verifyRssKib"), "cuca --version peak RSS", CliScale("startRssKib"), Cost, Below(64.0 * 1024.0)),
    row("cuca replay --turn 1 peak RSS, 1M records", CliScale("replayTurn0RssKib"), "cuca --version peak RSS", CliScale("startRssKib"), Cost, Below(64.0 * 1024.0)),
    // `cuca cost` on a million records (1,000 sessions) under 2 s, against reading the same
    // store (`cuca verify`); its peak RSS is the GNU-time `cost` bench's (docs/performance.md).
    row("cuca cost --json (by day), 1M records", C("cost_1M/by_day_json"), "cuca verify of the store", C("cost_1M/verify"), Cost, Below(2e9)),
    row("cuca cost --by model, 1M records", C("cost_1M/by_model"), "cuca verify of the store", C("cost_1M/verify"), Cost, Below(2e9)),
    // Replay over InMemoryBackend, 100k records (the replay crate's own bench).
    row("replay load, 100k records (memory)", C("replay_100k/load"), "backend.replay clone", C("replay_100k/backend_replay_baseline"), Cost, Info),
];

/// What a value measures, for printing and for [`Goal::Below`].
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Nanos,
    Bytes,
    Kib,
}

#[derive(Debug, Clone, Copy)]
struct Value {
    amount: f64,
    unit: Unit,
}

impl Value {
    fn show(&self) -> String {
        let a = self.amount;
        match self.unit {
            Unit::Nanos if a < 1e3 => format!("{a:.0} ns"),
            Unit::Nanos if a < 1e6 => format!("{:.2} µs", a / 1e3),
            Unit::Nanos if a < 1e9 => format!("{:.1} ms", a / 1e6),
            Unit::Nanos => format!("{:.2} s", a / 1e9),
            Unit::Bytes if a < 1e4 => format!("{a:.0} B"),
            Unit::Bytes if a < 1e7 => format!("{:.1} KB", a / 1e3),
            Unit::Bytes => format!("{:.1} MB", a / 1e6),
            Unit::Kib => format!("{:.1} MiB", a / 1024.0),
        }
    }
}

/// Everything this run measured, by source.
#[derive(Debug, Default)]
struct Results {
    criterion: HashMap<String, Value>,
    sizes: Option<serde_json::Value>,
    calllog: HashMap<String, f64>,
    journal: Option<serde_json::Value>,
    interleaved: Option<serde_json::Value>,
    /// The [`RESULT_FILES`] this run wrote, by file stem.
    json: HashMap<&'static str, serde_json::Value>,
    cli: Option<serde_json::Value>,
}

impl Results {
    fn get(&self, source: Source) -> Option<Value> {
        match source {
            Source::Criterion(id) => self.criterion.get(id).copied(),
            Source::Size(payload, store) => {
                let sizes = self.sizes.as_ref()?.get(payload)?;
                let n = sizes.get("n_records")?.as_f64()?;
                Some(Value {
                    amount: sizes.get(store)?.as_f64()? / n,
                    unit: Unit::Bytes,
                })
            }
            Source::CalllogP99(sink) => self.calllog.get(sink).map(|&micros| Value {
                amount: micros * 1e3,
                unit: Unit::Nanos,
            }),
            Source::Interleaved(group, name) => Some(Value {
                amount: self.interleaved.as_ref()?.get(group)?.get(name)?.as_f64()?,
                unit: Unit::Nanos,
            }),
            Source::Json(file, group, name) => Some(Value {
                amount: self.json.get(file)?.get(group)?.get(name)?.as_f64()?,
                unit: if group == "peak_heap" {
                    Unit::Bytes
                } else {
                    Unit::Nanos
                },
            }),
            Source::JsonDiff(file, group, of, minus) => {
                let (of, minus) = (
                    self.get(Source::Json(file, group, of))?,
                    self.get(Source::Json(file, group, minus))?,
                );
                Some(Value {
                    amount: of.amount - minus.amount,
                    unit: of.unit,
                })
            }
            Source::CliScale(field) => Some(Value {
                amount: self.cli.as_ref()?.get(field)?.as_f64()?,
                unit: if field.ends_with("Kib") {
                    Unit::Kib
                } else {
                    Unit::Nanos
                },
            }),
            Source::JournalRss(field) => Some(Value {
                amount: self.journal.as_ref()?.get(field)?.as_f64()?,
                unit: Unit::Kib,
            }),
        }
    }
}

/// Runs the benches (unless `no_run`) and prints the table.
pub(crate) fn run(quick: bool, no_run: bool) -> anyhow::Result<()> {
    let root = workspace_root();
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let logs = target_dir.join("cuca-bench").join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let load_before = load_average();
    // Criterion results are timestamped by the file system; a one-second margin keeps a
    // coarse mtime from hiding this run's own first result.
    let started = SystemTime::now() - std::time::Duration::from_secs(1);
    let clock = Instant::now();
    let selected: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| !(quick && matches!(t.quick, Quick::Skip)))
        .collect();

    // A target that fails to build or run is reported and left out; the table still prints
    // (its rows say "not run") and the command fails at the end.
    let mut failed = Vec::new();
    if !no_run {
        let mut built = Vec::new();
        for target in selected {
            match build(&root, &logs, target) {
                Ok(()) => built.push(target),
                Err(error) => failed.push(format!("{error:#}")),
            }
        }
        println!(
            "built {} bench targets in {:.0} s",
            built.len(),
            clock.elapsed().as_secs_f64()
        );
        let running = Instant::now();
        for target in built {
            if let Err(error) = bench(&root, &logs, target, quick) {
                failed.push(format!("{error:#}"));
            }
        }
        println!("ran them in {:.0} s", running.elapsed().as_secs_f64());
    }

    let mut results = Results::default();
    let criterion_dir = target_dir.join("criterion");
    let since = (!no_run).then_some(started);
    read_criterion(&criterion_dir, since, &mut results.criterion)?;
    let sizes = target_dir.join("cuca-bench").join("peers-sizes.json");
    if fresh(&sizes, since) {
        let text = std::fs::read_to_string(&sizes)
            .with_context(|| format!("reading {}", sizes.display()))?;
        results.sizes = Some(
            serde_json::from_str(&text).with_context(|| format!("parsing {}", sizes.display()))?,
        );
    }
    let interleaved = target_dir.join("cuca-bench").join("peers-interleaved.json");
    if fresh(&interleaved, since) {
        let text = std::fs::read_to_string(&interleaved)
            .with_context(|| format!("reading {}", interleaved.display()))?;
        results.interleaved = Some(
            serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", interleaved.display()))?,
        );
    }
    for &stem in RESULT_FILES {
        let path = target_dir.join("cuca-bench").join(format!("{stem}.json"));
        if fresh(&path, since) {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            results.json.insert(
                stem,
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            );
        }
    }
    if let Ok(log) = std::fs::read_to_string(logs.join("cuca-calllog-append.log")) {
        if fresh(&logs.join("cuca-calllog-append.log"), since) {
            results.calllog = calllog_p99(&log, 8);
        }
    }
    if let Ok(log) = std::fs::read_to_string(logs.join("cuca-journal-assemble.log")) {
        if fresh(&logs.join("cuca-journal-assemble.log"), since) {
            results.journal = log
                .lines()
                .find_map(|l| l.strip_prefix("peak-RSS run: "))
                .and_then(|json| serde_json::from_str(json).ok());
        }
    }

    if let Ok(log) = std::fs::read_to_string(logs.join("cuca-cli-scale.log")) {
        if fresh(&logs.join("cuca-cli-scale.log"), since) {
            results.cli = log
                .lines()
                .find_map(|l| l.strip_prefix("cli-scale run: "))
                .and_then(|json| serde_json::from_str(json).ok());
        }
    }

    let mode = if quick { " --quick" } else { "" };
    println!();
    println!("{}", machine(load_before));
    println!(
        "command: `cargo xtask bench{mode}` (criterion {})",
        if quick {
            QUICK_ARGS.join(" ")
        } else {
            FULL_ARGS.join(" ")
        }
    );
    println!();
    print!("{}", table(&results));
    if let Some(journal) = &results.journal {
        println!();
        println!(
            "journal peak-RSS run: {} journal bytes assembled in {} s",
            journal
                .get("journalBytes")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            journal
                .get("seconds")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0),
        );
    }
    println!("logs: {}", logs.display());
    if !failed.is_empty() {
        bail!(
            "{} bench target(s) failed:\n{}",
            failed.len(),
            failed.join("\n")
        );
    }
    Ok(())
}

/// The markdown table: figure, value, baseline, value, ratio, target, met?
fn table(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| figure | value | baseline (same run) | value | ratio | target | met? |"
    );
    let _ = writeln!(out, "| --- | ---: | --- | ---: | ---: | --- | --- |");
    for row in ROWS {
        let (figure, baseline) = (results.get(row.of), results.get(row.against));
        let show = |v: Option<Value>| v.map_or_else(|| "not run".to_owned(), |v| v.show());
        let ratio = match (figure, baseline) {
            // A cost may be a difference of two figures (`JsonDiff`), which noise can take
            // below zero: that is still a ratio (and under any cost target).
            (Some(f), Some(b))
                if b.amount > 0.0 && (f.amount > 0.0 || matches!(row.ratio, Ratio::Cost)) =>
            {
                Some(match row.ratio {
                    Ratio::Speed => b.amount / f.amount,
                    Ratio::Cost => f.amount / b.amount,
                })
            }
            _ => None,
        };
        let target = match (row.ratio, row.goal) {
            (Ratio::Speed, Goal::AtLeast(x)) => format!("speed ≥ {x:.2}×"),
            (Ratio::Cost, Goal::AtMost(x)) => format!("≤ {x:.2}×"),
            (_, Goal::AtLeast(x)) => format!("≥ {x:.2}×"),
            (_, Goal::AtMost(x)) => format!("≤ {x:.2}×"),
            (_, Goal::Below(x)) => {
                let unit = figure.map_or(Unit::Nanos, |v| v.unit);
                format!("< {}", Value { amount: x, unit }.show())
            }
            (_, Goal::Info) => "—".to_owned(),
        };
        let met = match (row.goal, ratio, figure) {
            (Goal::Info, _, _) => "—",
            (Goal::AtLeast(x), Some(r), _) => verdict(r >= x),
            (Goal::AtMost(x), Some(r), _) => verdict(r <= x),
            (Goal::Below(x), _, Some(f)) => verdict(f.amount < x),
            _ => "not run",
        };
        let ratio = ratio.map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {ratio} | {target} | {met} |",
            row.figure,
            show(figure),
            row.baseline,
            show(baseline),
        );
    }
    out
}

fn verdict(met: bool) -> &'static str {
    if met {
        "yes"
    } else {
        "**no**"
    }
}

/// `cargo bench --no-run` for one target, so build time is not counted as bench time; the
/// compiler's output goes to `logs/<package>-<bench>.build.log`.
fn build(root: &Path, logs: &Path, target: &Target) -> anyhow::Result<()> {
    let log_path = logs.join(format!("{}-{}.build.log", target.package, target.bench));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let status = Command::new(cargo())
        .current_dir(root)
        .args([
            "bench",
            "--no-run",
            "-p",
            target.package,
            "--bench",
            target.bench,
        ])
        .stdout(log.try_clone().context("cloning the log handle")?)
        .stderr(log)
        .status()
        .with_context(|| format!("starting cargo for {}/{}", target.package, target.bench))?;
    if !status.success() {
        print_tail(&log_path);
        bail!(
            "building {}/{} failed ({status}); log: {}",
            target.package,
            target.bench,
            log_path.display()
        );
    }
    Ok(())
}

/// The last lines of a log, on stderr, indented.
fn print_tail(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    for line in tail.into_iter().rev() {
        eprintln!("    {line}");
    }
}

/// Runs one target, its stdout and stderr into `logs/<package>-<bench>.log`.
fn bench(root: &Path, logs: &Path, target: &Target, quick: bool) -> anyhow::Result<()> {
    let log_path = logs.join(format!("{}-{}.log", target.package, target.bench));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut command = Command::new(cargo());
    command
        .current_dir(root)
        .args([
            "bench",
            "--quiet",
            "-p",
            target.package,
            "--bench",
            target.bench,
            "--",
        ])
        .stdout(log.try_clone().context("cloning the log handle")?)
        .stderr(log);
    if quick {
        command
            .args(QUICK_ARGS)
            .envs(target.quick_env.iter().copied());
        if let Quick::Filter(filter) = target.quick {
            command.arg(filter);
        }
    } else {
        command
            .args(FULL_ARGS)
            .envs(target.full_env.iter().copied());
    }
    let started = Instant::now();
    let status = command
        .status()
        .with_context(|| format!("starting cargo for {}/{}", target.package, target.bench))?;
    println!(
        "  {}/{}: {:.0} s{}",
        target.package,
        target.bench,
        started.elapsed().as_secs_f64(),
        if status.success() { "" } else { " FAILED" }
    );
    if !status.success() {
        print_tail(&log_path);
        bail!(
            "{}/{} failed ({status}); log: {}",
            target.package,
            target.bench,
            log_path.display()
        );
    }
    Ok(())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Whether `path` was written at or after `since` (always, without a `since`).
fn fresh(path: &Path, since: Option<SystemTime>) -> bool {
    let modified = std::fs::metadata(path).and_then(|m| m.modified());
    match (modified, since) {
        (Err(_), _) => false,
        (Ok(_), None) => true,
        (Ok(modified), Some(since)) => modified >= since,
    }
}

/// Every `new/benchmark.json` under `dir` with its median, per element when the group
/// declared element throughput, skipping results older than `since`.
fn read_criterion(
    dir: &Path,
    since: Option<SystemTime>,
    out: &mut HashMap<String, Value>,
) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let (benchmark, estimates) = (
            path.join("new/benchmark.json"),
            path.join("new/estimates.json"),
        );
        if path
            .file_name()
            .is_some_and(|n| n != "new" && n != "base" && n != "change")
        {
            read_criterion(&path, since, out)?;
        }
        if !fresh(&estimates, since) || !benchmark.is_file() {
            continue;
        }
        let read = |p: &Path| -> anyhow::Result<serde_json::Value> {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
        };
        let (meta, est) = (read(&benchmark)?, read(&estimates)?);
        let Some(id) = meta.get("full_id").and_then(serde_json::Value::as_str) else {
            continue;
        };
        let Some(median) = est
            .pointer("/median/point_estimate")
            .and_then(serde_json::Value::as_f64)
        else {
            continue;
        };
        let elements = meta
            .pointer("/throughput/Elements")
            .and_then(serde_json::Value::as_u64)
            .filter(|&n| n > 0);
        out.insert(
            id.to_owned(),
            Value {
                amount: median / elements.unwrap_or(1) as f64,
                unit: Unit::Nanos,
            },
        );
    }
    Ok(())
}

/// p99 in µs by writer name, from the call-log bench's table rows
/// `| <writer> | <writers> | median | p99 | …`.
fn calllog_p99(log: &str, writers: u32) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in log.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 4 || cells[1].parse::<u32>().ok() != Some(writers) {
            continue;
        }
        if let Ok(p99) = cells[3].parse::<f64>() {
            out.insert(cells[0].to_owned(), p99);
        }
    }
    out
}

/// `/proc/loadavg`'s first three fields, or nothing off Linux.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// One line naming the machine: cores, CPU model, load average before and after.
fn machine(load_before: Option<String>) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let load = match (load_before, load_average()) {
        (Some(before), Some(after)) => format!("load average {before} before, {after} after"),
        _ => "load average unknown".to_owned(),
    };
    format!("machine: {cores} cores, {model}; {load}")
}

fn workspace_root() -> PathBuf {
    // xtask's manifest is `{root}/xtask/Cargo.toml`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests;
