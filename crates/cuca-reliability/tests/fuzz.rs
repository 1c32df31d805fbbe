//! The fuzz targets on stable, in every `cargo test`: over their seeds, the committed
//! (minimized) cargo-fuzz corpus `fuzz/corpus/<target>/`, every past crash under
//! `tests/fuzz-regressions/<target>/`, and random mutants — each input within a time and an
//! allocation bound. The long runs are `cargo xtask fuzz`.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cuca_reliability::alloc::{peak_since_reset, reset_peak, Counting};
use cuca_reliability::fuzz::{self, Scratch, TARGETS};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOC: Counting = Counting;

/// What one input may make a reader allocate (the harness's bound): proportional to the input,
/// plus room for buffers, parse trees and gzip state, and for the other tests running meanwhile.
fn alloc_bound(len: usize) -> usize {
    64 * len + 32 * 1024 * 1024
}

fn files_under(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_target_survives_seeds_corpus_regressions_and_mutants_within_bounds() {
    let scratch = Scratch::new().unwrap();
    let mut rng = StdRng::seed_from_u64(0x00C0_FFEE);
    let mut total = 0;
    for target in TARGETS {
        let mut inputs = fuzz::seeds(target, &scratch);
        inputs.extend(files_under(&root().join("fuzz/corpus").join(target)));
        inputs.extend(files_under(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fuzz-regressions")
                .join(target),
        ));
        let n_given = inputs.len();
        // A few hundred mutants per target: flips, cuts and random runs of the given inputs.
        let n_mutants = if matches!(target, "cslog_reader" | "sse_decoder") {
            400
        } else {
            100
        };
        for _ in 0..n_mutants {
            let mut data = inputs[rng.gen_range(0..n_given)].clone();
            if !data.is_empty() {
                let at = rng.gen_range(0..data.len());
                match rng.gen_range(0..3) {
                    0 => data[at] ^= 1 << rng.gen_range(0..8),
                    1 => data.truncate(at),
                    _ => data
                        .splice(at..at, (0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>()))
                        .for_each(drop),
                }
            }
            inputs.push(data);
        }
        for data in &inputs {
            reset_peak();
            let started = Instant::now();
            assert!(fuzz::run(target, &scratch, data));
            let took = started.elapsed();
            let peak = peak_since_reset();
            assert!(
                took < Duration::from_secs(5),
                "{target}: {took:?} on a {}-byte input",
                data.len()
            );
            assert!(
                peak <= alloc_bound(data.len()),
                "{target}: {peak} bytes for a {}-byte input",
                data.len()
            );
        }
        total += inputs.len();
    }
    assert!(total > 1000, "{total}");
}

#[test]
fn the_seeds_read_back_as_what_wrote_them() {
    let scratch = Scratch::new().unwrap();
    let clean = fuzz::cslog_reader(&fuzz::seeds("cslog_reader", &scratch)[0]);
    assert_eq!(
        clean,
        fuzz::CslogSummary {
            n_records: 5,
            n_skipped: 0,
            loadable: true
        }
    );
    let sse = fuzz::sse_decoder(&fuzz::seeds("sse_decoder", &scratch)[0]);
    assert_eq!(
        sse,
        fuzz::SseSummary {
            n_events: 4,
            n_blocks: 2,
            accepted: true
        }
    );
    let journal = fuzz::journal(&scratch, &fuzz::seeds("journal", &scratch)[0]);
    assert_eq!(journal.outcome, Some("complete"));
    assert!(journal.n_lines_parsed >= 6, "{journal:?}");
    let calls = fuzz::calllog_reader(&scratch, &fuzz::seeds("calllog_reader", &scratch)[0]);
    assert_eq!(
        calls,
        fuzz::CallLogSummary {
            n_rows: 2,
            n_skipped: 0,
            torn: false
        }
    );
}

#[test]
fn regression_bytes_after_done_in_the_same_read_are_ignored() {
    // Found by the harness: `[DONE]` then a line that is not UTF-8, in one read, was refused,
    // while the same bytes split after `[DONE]` were accepted.
    let data = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz-regressions/sse_decoder/done-then-invalid-utf8-in-one-read"),
    )
    .unwrap();
    let summary = fuzz::sse_decoder(&data);
    assert!(summary.accepted, "{summary:?}");
    assert_eq!(summary.n_blocks, 1, "the tool call, once");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_cslog_reader_takes_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let summary = fuzz::cslog_reader(&data);
        prop_assert!(summary.n_records <= data.len() / 2);
    }

    #[test]
    fn the_cslog_reader_takes_any_bytes_after_a_good_header(tail in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut data = cuca_store_file::HEADER.to_vec();
        data.extend_from_slice(&tail);
        let summary = fuzz::cslog_reader(&data);
        prop_assert!(summary.n_records <= tail.len() / 2);
    }

    #[test]
    fn the_sse_decoders_take_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let summary = fuzz::sse_decoder(&data);
        prop_assert!(summary.n_events <= data.len());
    }

    #[test]
    fn the_sse_decoders_take_any_text_of_sse_shaped_lines(
        lines in proptest::collection::vec("(data|event|id|:|error)?:? ?[\\[\\]{}\":,a-z0-9DONE]{0,24}(\r\n|\n|\r)?", 0..24)
    ) {
        let data = lines.concat();
        let summary = fuzz::sse_decoder(data.as_bytes());
        prop_assert!(summary.n_blocks <= data.len());
    }
}
