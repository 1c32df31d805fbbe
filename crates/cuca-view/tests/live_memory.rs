//! A live poll's answer is bounded in bytes, not only in records: a session of records of
//! 31 MiB each is followed a clipped record at a time, and four polls at once keep the viewer
//! small. Alone in its test binary, so the process's peak memory is this test's.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

mod support;

use cuca_events::{SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;

/// Each record's text: just under the store's 32 MiB frame limit.
const RECORD_TEXT_BYTES: usize = 31 * 1024 * 1024;
/// Records in the session: a poll that answered them whole would be 186 MiB.
const N_RECORDS: u64 = 6;
/// What one answer may weigh: the viewer's byte budget plus one clipped record and the JSON
/// around them.
const ANSWER_BOUND: usize = 4 * 1024 * 1024;
/// The whole process (server, client and test) while four polls run at once.
const PEAK_BOUND_KIB: u64 = 256 * 1024;

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn poll(client: reqwest::Client, url: String) -> (usize, serde_json::Value) {
    let body = client.get(url).send().await.unwrap().text().await.unwrap();
    (body.len(), serde_json::from_str(&body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_live_polls_of_31_mib_records_answer_bounded_bodies_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    {
        let backend = FileBackend::new(dir.path()).unwrap();
        for sequence in 0..N_RECORDS {
            let text = char::from(b'a' + sequence as u8)
                .to_string()
                .repeat(RECORD_TEXT_BYTES);
            backend
                .append(cuca_testkit::record(
                    "big",
                    sequence,
                    SessionEvent::Output { text },
                ))
                .unwrap();
        }
    }
    let base = support::serve(cuca_view::ViewConfig::new(vec![dir.path().to_owned()])).await;
    // From here on the peak is what the viewer and its client take, not the writing above.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = peak_kib();
    let client = reqwest::Client::new();
    let url = format!("{base}/api/sessions/big/records");
    let polls = (0..4).map(|_| poll(client.clone(), url.clone()));
    let answers = futures_join(polls).await;
    let peak = peak_kib();
    for (len, json) in &answers {
        assert!(
            *len < ANSWER_BOUND,
            "a poll answered {len} bytes, over {ANSWER_BOUND}"
        );
        let records = json["records"].as_array().unwrap();
        assert!(
            !records.is_empty() && records.len() < N_RECORDS as usize,
            "{}",
            records.len()
        );
        assert_eq!(records[0]["sequence"], 0);
        assert_eq!(json["full"], true, "the page asks again straight away");
    }
    assert!(
        peak < PEAK_BOUND_KIB,
        "four polls took the process from {before} KiB to a peak of {peak} KiB"
    );
    // Polls continue after the clipped records until every record was answered, once.
    let mut after: Option<u64> = None;
    let mut seen = Vec::new();
    loop {
        let query = after.map_or_else(String::new, |after| format!("?after={after}"));
        let (len, json) = poll(client.clone(), format!("{url}{query}")).await;
        assert!(len < ANSWER_BOUND, "{len}");
        for record in json["records"].as_array().unwrap() {
            let sequence = record["sequence"].as_u64().unwrap();
            let kept = record["text"].as_str().unwrap();
            assert!(kept.starts_with(char::from(b'a' + sequence as u8)));
            let clipped = record["clipped"].as_u64().unwrap();
            assert_eq!(
                kept.len() as u64 + clipped,
                RECORD_TEXT_BYTES as u64,
                "the marker counts what was cut"
            );
            seen.push(sequence);
            after = Some(sequence);
        }
        if json["full"] == false {
            break;
        }
    }
    assert_eq!(seen, (0..N_RECORDS).collect::<Vec<_>>());
}

/// Runs the polls at once on the runtime (no extra dependency for `join_all`).
async fn futures_join<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}
