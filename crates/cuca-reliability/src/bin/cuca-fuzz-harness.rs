//! The stable-toolchain fuzz harness: mutation fuzzing without coverage feedback, for machines
//! where cargo-fuzz cannot build (it needs nightly features; `cargo xtask fuzz` tries it first).
//!
//! ```text
//! cuca-fuzz-harness <target|all> [--seconds N] [--corpus DIR] [--artifacts DIR]
//! cuca-fuzz-harness <target|all> --write-seeds DIR
//! ```
//!
//! `--write-seeds` writes each target's seeds to `DIR/<target>/seed-<n>` (what
//! `cargo xtask fuzz` starts an empty cargo-fuzz corpus from) and fuzzes nothing.
//!
//! For `--seconds` per target it mutates the seeds (`cuca_reliability::fuzz::seeds`) and the
//! files of `DIR/<target>/` (the committed cargo-fuzz corpus) with bit flips, byte edits,
//! truncation, duplication, splicing and random runs, and runs the target on each. A panic is a
//! crash: the input is written to `<artifacts>/<target>/crash-<n>` and the harness exits 1.
//! Every input is timed (over 1 s is a hang) and its peak allocation measured with the counting
//! allocator against a bound of 64 × its length + 32 MiB. It prints one `FIGURES` line per
//! target: executions, seconds, inputs per second, the slowest input, the largest allocation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuca_reliability::alloc::{peak_since_reset, reset_peak, Counting};
use cuca_reliability::fuzz::{run, seeds, Scratch, TARGETS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOC: Counting = Counting;

/// Over this, one input is a hang.
const HANG: Duration = Duration::from_secs(1);

/// The allocation one input may cause: generous for parse trees and gzip state, but finite.
fn alloc_bound(len: usize) -> usize {
    64 * len + 32 * 1024 * 1024
}

fn mutate(rng: &mut StdRng, pool: &[Vec<u8>]) -> Vec<u8> {
    let mut data = pool[rng.gen_range(0..pool.len())].clone();
    for _ in 0..rng.gen_range(1..=4) {
        let len = data.len();
        match rng.gen_range(0..8) {
            0 if len > 0 => {
                let at = rng.gen_range(0..len);
                data[at] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let at = rng.gen_range(0..len);
                data[at] = [0x00, 0xff, b'\n', b'\r', b'"', b'{', b':', 0x01][rng.gen_range(0..8)];
            }
            2 if len > 0 => data.truncate(rng.gen_range(0..len)),
            3 if len > 0 => {
                let at = rng.gen_range(0..len);
                let end = (at + rng.gen_range(1..64)).min(len);
                data.drain(at..end);
            }
            4 if len > 0 => {
                let at = rng.gen_range(0..len);
                let end = (at + rng.gen_range(1..256)).min(len);
                let copy = data[at..end].to_vec();
                let to = rng.gen_range(0..=data.len());
                data.splice(to..to, copy);
            }
            5 => {
                let other = &pool[rng.gen_range(0..pool.len())];
                let cut = rng.gen_range(0..=data.len());
                let from = rng.gen_range(0..=other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            6 => {
                let to = rng.gen_range(0..=data.len());
                let run: Vec<u8> = (0..rng.gen_range(1..32)).map(|_| rng.gen()).collect();
                data.splice(to..to, run);
            }
            _ => {
                let to = rng.gen_range(0..=data.len());
                let byte = if rng.gen_bool(0.5) { 0 } else { rng.gen() };
                data.splice(to..to, std::iter::repeat_n(byte, rng.gen_range(1..4096)));
            }
        }
    }
    data
}

struct Options {
    targets: Vec<String>,
    seconds: u64,
    corpus: Option<PathBuf>,
    artifacts: PathBuf,
    write_seeds: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        targets: Vec::new(),
        seconds: 10,
        corpus: None,
        artifacts: PathBuf::from("fuzz/artifacts"),
        write_seeds: None,
    };
    let mut args = args.iter().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().cloned().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--seconds" => {
                options.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--corpus" => options.corpus = Some(PathBuf::from(value("--corpus")?)),
            "--artifacts" => options.artifacts = PathBuf::from(value("--artifacts")?),
            "--write-seeds" => options.write_seeds = Some(PathBuf::from(value("--write-seeds")?)),
            "all" => options
                .targets
                .extend(TARGETS.iter().map(|t| t.to_string())),
            name if TARGETS.contains(&name) => options.targets.push(name.to_owned()),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; targets: {TARGETS:?} or all"
                ))
            }
        }
    }
    if options.targets.is_empty() {
        options
            .targets
            .extend(TARGETS.iter().map(|t| t.to_string()));
    }
    Ok(options)
}

fn fuzz_one(target: &str, options: &Options, scratch: &Scratch) -> Result<(), String> {
    let mut pool = seeds(target, scratch);
    if let Some(dir) = &options.corpus {
        if let Ok(entries) = std::fs::read_dir(dir.join(target)) {
            for entry in entries.flatten() {
                if let Ok(bytes) = std::fs::read(entry.path()) {
                    pool.push(bytes);
                }
            }
        }
    }
    pool.push(Vec::new());
    let mut rng = StdRng::seed_from_u64(rand::random());
    let started = Instant::now();
    let budget = Duration::from_secs(options.seconds);
    let (mut execs, mut slowest, mut max_alloc, mut max_len) =
        (0u64, Duration::ZERO, 0usize, 0usize);
    // Quiet: a panic is reported below with the input that caused it.
    std::panic::set_hook(Box::new(|_| {}));
    while started.elapsed() < budget {
        let data = if execs < pool.len() as u64 {
            pool[execs as usize].clone()
        } else {
            mutate(&mut rng, &pool)
        };
        reset_peak();
        let began = Instant::now();
        let outcome = std::panic::catch_unwind(|| run(target, scratch, &data));
        let took = began.elapsed();
        let peak = peak_since_reset();
        execs += 1;
        slowest = slowest.max(took);
        max_alloc = max_alloc.max(peak);
        max_len = max_len.max(data.len());
        let failure = match outcome {
            Err(payload) => Some(format!(
                "panicked: {}",
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
            Ok(_) if took > HANG => Some(format!("took {took:?} (a hang)")),
            Ok(_) if peak > alloc_bound(data.len()) => Some(format!(
                "allocated {peak} bytes for a {}-byte input",
                data.len()
            )),
            Ok(_) => None,
        };
        if let Some(failure) = failure {
            let dir = options.artifacts.join(target);
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("crash-{execs}"));
            let _ = std::fs::write(&path, &data);
            return Err(format!(
                "{target}: {failure}; input saved to {}",
                path.display()
            ));
        }
        // Keep some inputs that parsed into something, so mutation walks deeper (a poor
        // fuzzer's substitute for coverage feedback).
        if execs % 64 == 0 && pool.len() < 4096 {
            pool.push(data);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "FIGURES fuzz-harness {target}: execs={execs} seconds={secs:.1} execs_per_second={:.0} slowest_ms={:.2} max_alloc_bytes={max_alloc} max_input_bytes={max_len}",
        execs as f64 / secs,
        slowest.as_secs_f64() * 1000.0
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("cuca-fuzz-harness: {message}");
            return ExitCode::from(2);
        }
    };
    let scratch = match Scratch::new() {
        Ok(scratch) => scratch,
        Err(error) => {
            eprintln!("cuca-fuzz-harness: no scratch directory: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &options.write_seeds {
        for target in &options.targets {
            let target_dir = dir.join(target);
            let written = std::fs::create_dir_all(&target_dir).and_then(|()| {
                seeds(target, &scratch)
                    .iter()
                    .enumerate()
                    .try_for_each(|(n, seed)| {
                        std::fs::write(target_dir.join(format!("seed-{n}")), seed)
                    })
            });
            if let Err(error) = written {
                eprintln!(
                    "cuca-fuzz-harness: writing seeds to {}: {error}",
                    target_dir.display()
                );
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    for target in &options.targets {
        if let Err(message) = fuzz_one(target, &options, &scratch) {
            eprintln!("cuca-fuzz-harness: {message}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
