//! Memory does not grow with runs of zero bytes: reading a session file costs memory
//! bounded by the largest valid frame, whatever the file holds, and a compacted file costs no
//! more than its expanded bytes would. Measured with the counting allocator (bytes allocated
//! at the peak), never with a clock.

// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use std::io::Write;

use cuca_events::SessionBackend;
use cuca_reliability::alloc::{peak_since_reset, reset_peak, Counting};
use cuca_reliability::corpus;
use cuca_store_file::{FileBackend, FrameError, Verdict};

#[global_allocator]
static ALLOC: Counting = Counting;

/// The zeros appended: enough that one report entry (or one frame's state) per byte would
/// cost hundreds of megabytes.
const ZEROS: u64 = 8 << 20;

/// What a read of the zero file may allocate at its peak: the read chunk, the few records,
/// the report, and room for other tests of this binary running meanwhile — far below one
/// byte of memory per damaged byte.
const BOUND: usize = 2 << 20;

/// `demo.cslog`: five records, then [`ZEROS`] zero bytes.
fn zero_file(dir: &std::path::Path) -> Vec<cuca_events::SessionRecord> {
    let records = corpus::records("demo", 0, 5);
    let (bytes, _) = corpus::clean_file(&records);
    let mut file = std::fs::File::create(dir.join("demo.cslog")).unwrap();
    file.write_all(&bytes).unwrap();
    let block = vec![0u8; 1 << 20];
    for _ in 0..ZEROS / block.len() as u64 {
        file.write_all(&block).unwrap();
    }
    records
}

fn measured<T>(read: impl FnOnce() -> T) -> (T, usize) {
    reset_peak();
    let value = read();
    (value, peak_since_reset())
}

fn check_reads(backend: &FileBackend, records: &[cuca_events::SessionRecord], what: &str) {
    let (report, peak) = measured(|| backend.verify("demo").unwrap());
    eprintln!("FIGURES hostile {what}: zeros={ZEROS} verify_peak_bytes={peak}");
    assert!(peak < BOUND, "{what}: verify peaked at {peak} bytes");
    assert_eq!(report.verdict, Verdict::Recovered, "{what}");
    assert_eq!(report.records, records, "{what}");
    assert_eq!(
        report.skipped.len(),
        1,
        "{what}: one run, not one entry per byte"
    );
    assert_eq!(report.skipped[0].frames, ZEROS, "{what}");
    assert_eq!(report.skipped[0].reason, FrameError::Empty, "{what}");

    let (replayed, peak) = measured(|| backend.replay("demo").unwrap());
    eprintln!("FIGURES hostile {what}: replay_peak_bytes={peak}");
    assert!(peak < BOUND, "{what}: replay peaked at {peak} bytes");
    assert_eq!(replayed, records, "{what}");

    let mut n_visited = 0;
    let (result, peak) = measured(|| {
        backend.replay_each("demo", &mut |_| {
            n_visited += 1;
            Ok(())
        })
    });
    result.unwrap();
    assert!(peak < BOUND, "{what}: replay_each peaked at {peak} bytes");
    assert_eq!(n_visited, records.len(), "{what}");
}

/// "a session with 19 MB of zeros appended costs 940 MB to replay in the library … Reading a
/// file must cost memory bounded by the largest valid frame, whatever the file holds".
#[test]
fn a_session_with_megabytes_of_zeros_appended_reads_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let records = zero_file(dir.path());
    let backend = FileBackend::new(dir.path()).unwrap();
    check_reads(&backend, &records, "live");
}

/// "a 4.7 MB `.cslog.gz` of zeros aborts `verify` under a 3 GiB limit … Gzip input is bounded
/// by its expanded size too": the same session compacted reads in the same bounded memory.
#[test]
fn a_compacted_session_of_zeros_reads_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let records = zero_file(dir.path());
    let backend = FileBackend::new(dir.path()).unwrap();
    let compaction = backend.compact("demo").unwrap();
    assert!(compaction.bytes_after < ZEROS / 100, "{compaction:?}");
    assert!(backend.is_compacted("demo").unwrap());
    check_reads(&backend, &records, "compacted");
}
