//! What redaction costs a recorder, beside the proxy's per-chunk recording cost
//! (`cuca-proxy`'s `benches/proxy.rs`, `docs/performance.md`: about 22 µs a chunk):
//!
//! * `redact/token_chunk`: one streamed `Output` event of a few tokens, as the proxy records a
//!   chunk — the figure to hold against the proxy's per-chunk cost;
//! * `redact/text_4k/{clean,one_secret}`: a 4 KiB streamed text (prose, code, JSON) with no
//!   secret, and with one key in it;
//! * `redact/prompt_200k/{clean,five_secrets}`: a 200 KB prompt, without and with secrets;
//! * `redact/json_4k`: a 4 KiB request body walked by `redact_json`.
//!
//! ```text
//! cargo bench -p cuca-redact --bench redact -- --warm-up-time 1 --measurement-time 3
//! ```

// Benchmark setup failing is a broken bench, not bad input: unwrapping is how it stops.
// `criterion_group!` makes an undocumented function.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuca_events::SessionEvent;
use cuca_redact::Rules;

/// Lines of the kind an agent's prompts and tool outputs hold, none of them a secret, some
/// near misses (`max_tokens`, `sk-learn`, `Bearer tokens`, base64, hyphenated words).
const LINES: &[&str] = &[
    "The build failed because the linker could not find `libssl.so.3`; install openssl-dev.\n",
    "fn main() { let total: u64 = items.iter().map(|item| item.cost).sum(); println!(\"{total}\"); }\n",
    "{\"model\":\"qwen3-30b-a3b\",\"max_tokens\":8192,\"temperature\":0.2,\"stream\":true}\n",
    "$ cargo test -p cuca-store-file -- --nocapture 2>&1 | tail -20\n",
    "Bearer tokens are sent in the Authorization header; see the risk-assessment-framework.\n",
    "  File \"/usr/lib/python3.12/site-packages/sk-learn/pipeline.py\", line 412, in fit\n",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\n",
    "The vault is in Lisbon, the meeting is at 14:30 UTC, and the ticket is OPS-20417.\n",
    "diff --git a/crates/cuca-proxy/src/record.rs b/crates/cuca-proxy/src/record.rs\n",
    "{\"role\":\"tool\",\"tool_call_id\":\"call_8f2a\",\"content\":\"exit 0, 3 files changed\"}\n",
];

/// About `len` bytes of `LINES`, cycled.
fn clean_text(len: usize) -> String {
    let mut out = String::with_capacity(len + 128);
    let mut i = 0;
    while out.len() < len {
        out.push_str(LINES[i % LINES.len()]);
        i += 1;
    }
    out
}

/// Well-formed fakes, one per kind.
const SECRETS: &[&str] = &[
    "sk-proj-4fRq8ZtN0aLw2XyB7cVd1EeKmPqRsTuV",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_0123456789abcdefABCDEF0123456789abcd",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "{\"password\": \"hunter2-correct-horse\"}",
];

/// `text` with `n` secrets placed evenly through it, at line starts.
fn with_secrets(text: &str, n: usize) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let step = text.len() / (n + 1);
    let mut at = 0;
    for i in 0..n {
        let next = text[..(i + 1) * step]
            .rfind('\n')
            .map_or(0, |p| p + 1)
            .max(at);
        out.push_str(&text[at..next]);
        out.push_str(SECRETS[i % SECRETS.len()]);
        out.push('\n');
        at = next;
    }
    out.push_str(&text[at..]);
    out
}

fn bench(c: &mut Criterion) {
    let rules = Rules::defaults().unwrap();
    let mut group = c.benchmark_group("redact");

    let chunk = SessionEvent::Output {
        text: " tok4183".into(),
    };
    group.throughput(Throughput::Elements(1));
    group.bench_function("token_chunk", |b| {
        b.iter_batched_ref(
            || chunk.clone(),
            |event| black_box(rules.redact_event(event)),
            criterion::BatchSize::SmallInput,
        )
    });

    let text_4k = clean_text(4096);
    let text_4k_secret = with_secrets(&text_4k, 1);
    assert!(
        rules.scan(&text_4k).is_empty(),
        "the clean text holds no secret"
    );
    assert_eq!(rules.scan(&text_4k_secret).len(), 1);
    group.throughput(Throughput::Bytes(text_4k.len() as u64));
    group.bench_function("text_4k/clean", |b| {
        b.iter(|| black_box(rules.redact_text(black_box(&text_4k))))
    });
    group.bench_function("text_4k/one_secret", |b| {
        b.iter(|| black_box(rules.redact_text(black_box(&text_4k_secret))))
    });

    let prompt = clean_text(200_000);
    let prompt_secrets = with_secrets(&prompt, 5);
    assert!(
        rules.scan(&prompt).is_empty(),
        "the clean prompt holds no secret"
    );
    assert_eq!(rules.scan(&prompt_secrets).len(), 5);
    group.throughput(Throughput::Bytes(prompt.len() as u64));
    group.bench_function("prompt_200k/clean", |b| {
        b.iter(|| black_box(rules.redact_text(black_box(&prompt))))
    });
    group.bench_function("prompt_200k/five_secrets", |b| {
        b.iter(|| black_box(rules.redact_text(black_box(&prompt_secrets))))
    });

    let body = serde_json::json!({
        "model": "qwen3-30b-a3b",
        "max_tokens": 8192,
        "messages": LINES.iter().cycle().take(40).enumerate().map(|(i, line)| serde_json::json!({
            "role": if i % 2 == 0 { "user" } else { "assistant" },
            "content": line,
        })).collect::<Vec<_>>(),
        "metadata": {"request_id": "req-8f2a", "user": "someone"},
    });
    group.throughput(Throughput::Bytes(body.to_string().len() as u64));
    group.bench_function("json_4k", |b| {
        b.iter_batched_ref(
            || body.clone(),
            |body| black_box(rules.redact_json(body)),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
