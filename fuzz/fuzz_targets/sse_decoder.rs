//! libFuzzer target: the SSE decoder and the chat-stream decoder, whole and chunked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cuca_reliability::fuzz::sse_decoder(data);
});
