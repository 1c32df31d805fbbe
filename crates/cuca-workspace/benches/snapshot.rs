//! A snapshot per model call on a 10,000-file, 100 MiB workspace with one file changed per
//! call: cuca's snapshot time against `git add -A && git write-tree` on a shadow git
//! directory over the same tree, in the same run, interleaved; and the object store's growth
//! per call against the changed file's bytes compressed. Prints one table (docs/performance.md
//! keeps the figures).
//!
//! `cargo bench -p cuca-workspace --bench snapshot`; `CUCA_BENCH_CALLS` sets the number of
//! calls (default 40). Needs `git` on `PATH`.

// A bench's setup failing is the bench failing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuca_workspace::{DirObjects, SnapshotConfig, Snapshotter};

const N_DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
/// 10,000 files of about 10 KiB: 100 MiB.
const FILE_BYTES: usize = 10 * 1024;

/// A small generator, so the bench needs no crate: the same workspace on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

const WORDS: [&str; 16] = [
    "let", "fn", "self", "match", "value", "return", "Some", "None", "error", "path", "into",
    "usize", "record", "session", "snapshot", "=>",
];

/// About `FILE_BYTES` of source-like text: lines of words and numbers.
fn text(rng: &mut Lcg) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_BYTES + 80);
    while out.len() < FILE_BYTES {
        let indent = (rng.next() % 4) as usize * 4;
        out.extend(std::iter::repeat_n(b' ', indent));
        for _ in 0..(3 + rng.next() % 6) {
            out.extend_from_slice(WORDS[(rng.next() % 16) as usize].as_bytes());
            out.push(b' ');
            if rng.next().is_multiple_of(3) {
                write!(out, "{} ", rng.next() % 100_000).unwrap();
            }
        }
        out.push(b'\n');
    }
    out
}

fn git(git_dir: &Path, work_tree: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .arg("--work-tree")
        .arg(work_tree)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(at) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let metadata = entry.metadata().unwrap();
            if metadata.is_dir() {
                pending.push(entry.path());
            } else {
                total += metadata.len();
            }
        }
    }
    total
}

fn compressed_len(bytes: &[u8]) -> u64 {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap().len() as u64
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let calls: usize = std::env::var("CUCA_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);
    let scratch = tempfile::tempdir().unwrap();
    let workspace = scratch.path().join("workspace");
    let sessions = scratch.path().join("sessions");
    let shadow_git = scratch.path().join("shadow.git");
    let mut rng = Lcg(43);
    let mut total = 0u64;
    for d in 0..N_DIRS {
        let dir = workspace.join(format!("src/module{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let bytes = text(&mut rng);
            total += bytes.len() as u64;
            std::fs::write(dir.join(format!("file{f:03}.rs")), bytes).unwrap();
        }
    }
    eprintln!(
        "workspace: {} files, {} bytes",
        N_DIRS * FILES_PER_DIR,
        total
    );
    let init = Command::new("git")
        .arg("init")
        .arg("-q")
        .arg("--bare")
        .arg(&shadow_git)
        .status()
        .unwrap();
    assert!(init.success());
    let objects = Arc::new(DirObjects::beside(&sessions));
    let mut snapshotter = Snapshotter::new(&workspace, objects, SnapshotConfig::default()).unwrap();

    // The first snapshot of each reads every file; then both are warmed once more after the
    // files are old enough for a stat to be trusted (both git and cuca re-read files
    // modified within their timestamp granularity of the last look).
    let started = Instant::now();
    let mut previous = snapshotter.snapshot(None).unwrap().id;
    let cuca_first = started.elapsed();
    let started = Instant::now();
    git(&shadow_git, &workspace, &["add", "-A"]);
    git(&shadow_git, &workspace, &["write-tree"]);
    let git_first = started.elapsed();
    std::thread::sleep(Duration::from_millis(1100));
    previous = snapshotter.snapshot(Some(&previous)).unwrap().id;
    git(&shadow_git, &workspace, &["add", "-A"]);
    git(&shadow_git, &workspace, &["write-tree"]);

    let mut cuca_times = Vec::with_capacity(calls);
    let mut git_times = Vec::with_capacity(calls);
    let (mut grew, mut changed_compressed, mut changed_raw, mut git_grew) =
        (0u64, 0u64, 0u64, 0u64);
    let mut n_read = 0u64;
    for call in 0..calls {
        let d = (rng.next() as usize) % N_DIRS;
        let f = (rng.next() as usize) % FILES_PER_DIR;
        let path = workspace.join(format!("src/module{d:03}/file{f:03}.rs"));
        let mut bytes = std::fs::read(&path).unwrap();
        // An edit: a line appended and the first line changed.
        bytes.extend_from_slice(format!("    let call = {call}; // edited\n").as_bytes());
        bytes[0] = b'X';
        std::fs::write(&path, &bytes).unwrap();
        changed_raw += bytes.len() as u64;
        changed_compressed += compressed_len(&bytes);
        let git_objects_before = dir_bytes(&shadow_git.join("objects"));
        // Interleaved, the order swapped each call, so neither always finds the page cache
        // warmed by the other.
        let mut run_cuca = |times: &mut Vec<Duration>| {
            let started = Instant::now();
            let taken = snapshotter.snapshot(Some(&previous)).unwrap();
            times.push(started.elapsed());
            assert_eq!(taken.changes.len(), 1);
            grew += taken.stored_bytes;
            n_read += taken.n_read;
            previous = taken.id;
        };
        let run_git = |times: &mut Vec<Duration>| {
            let started = Instant::now();
            git(&shadow_git, &workspace, &["add", "-A"]);
            git(&shadow_git, &workspace, &["write-tree"]);
            times.push(started.elapsed());
        };
        if call.is_multiple_of(2) {
            run_cuca(&mut cuca_times);
            run_git(&mut git_times);
        } else {
            run_git(&mut git_times);
            run_cuca(&mut cuca_times);
        }
        git_grew += dir_bytes(&shadow_git.join("objects")) - git_objects_before;
    }
    cuca_times.sort();
    git_times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let n = calls as u64;
    println!("snapshot per call, {calls} calls, one file (~10 KiB) changed per call");
    println!(
        "first snapshot (every file read): cuca {:.0} ms, git add -A && git write-tree {:.0} ms",
        ms(cuca_first),
        ms(git_first)
    );
    println!(
        "time per call: cuca median {:.1} ms (p90 {:.1}), git median {:.1} ms (p90 {:.1}); ratio {:.2}x",
        ms(percentile(&cuca_times, 0.5)),
        ms(percentile(&cuca_times, 0.9)),
        ms(percentile(&git_times, 0.5)),
        ms(percentile(&git_times, 0.9)),
        ms(percentile(&cuca_times, 0.5)) / ms(percentile(&git_times, 0.5))
    );
    println!(
        "files read per call: {:.1}; store growth per call: cuca {} bytes, git (loose objects) {} bytes; changed bytes {} raw, {} zlib-compressed; cuca ratio {:.2}x",
        n_read as f64 / calls as f64,
        grew / n,
        git_grew / n,
        changed_raw / n,
        changed_compressed / n,
        grew as f64 / changed_compressed as f64
    );
}
