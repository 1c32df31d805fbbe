//! The live exporter against a collector that answers 200 with an endless body: the answer is
//! read up to `MAX_RESPONSE_BYTES` and no further, so the process's peak resident memory stays
//! bounded, and the span counts as exported (its 2xx says so).
//!
//! The live `OtelPlugin` does not read a collector's answer whole (an endless 200 body once
//! cost 5.1 GB). A test binary of its own, so the peak resident set (`VmHWM`) read from
//! `/proc/self/status` is this test's and no other's.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cuca_events::{CucaPlugin, UnifiedResponse};
use cuca_otel::{LiveConfig, OtelPlugin, MAX_RESPONSE_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How much the peak resident set may grow over the export. The exporter keeps at most
/// `MAX_RESPONSE_BYTES` (64 KiB) of the answer; the rest of the allowance is the runtime, the
/// HTTP client's buffers and the allocator's slack. Unbounded, the same run grew by the
/// loopback's speed times the request timeout: 1.18 GB in the 2 s timeout below, 5.1 GB in
/// the default 10 s.
const GROWTH_CEILING_KIB: u64 = 32 * 1024;

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}

/// A "collector" that answers every request `200` with a chunked body that never ends (until
/// the client goes away); returns its URL.
async fn endless_collector() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The request's head and (small) body: read what arrives first, then answer.
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head).await.is_err() {
                    return;
                }
                let mut chunk = format!("{:x}\r\n", 1 << 20).into_bytes();
                chunk.extend(std::iter::repeat_n(b'x', 1 << 20));
                chunk.extend_from_slice(b"\r\n");
                while socket.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    url
}

#[tokio::test]
async fn an_endless_200_body_is_read_up_to_the_cap_and_memory_stays_bounded() {
    let collector = endless_collector().await;
    let config = LiveConfig {
        // Only a guard: the capped read returns long before it.
        request_timeout: Duration::from_secs(2),
        ..LiveConfig::new(&collector).unwrap()
    };
    let plugin = OtelPlugin::spawn(config).unwrap();
    let before_kib = status_kib("VmHWM:");
    plugin
        .on_response_complete(&UnifiedResponse {
            model: "qwen3".into(),
            call_id: Some("endless".into()),
            ..UnifiedResponse::default()
        })
        .await
        .unwrap();
    let stats = tokio::time::timeout(Duration::from_secs(60), plugin.shutdown())
        .await
        .expect("shutdown returned");
    let peak_kib = status_kib("VmHWM:");
    eprintln!(
        "endless 200 body: peak RSS {before_kib} KiB before the export, {peak_kib} KiB after \
         (cap {MAX_RESPONSE_BYTES} bytes)"
    );
    assert_eq!(stats.queued, 1);
    assert_eq!(stats.exported, 1, "{stats:?}");
    assert_eq!(stats.failed_requests, 0, "{stats:?}");
    assert!(
        peak_kib.saturating_sub(before_kib) < GROWTH_CEILING_KIB,
        "peak RSS grew by {} KiB, over the {GROWTH_CEILING_KIB} KiB ceiling",
        peak_kib.saturating_sub(before_kib)
    );
}
