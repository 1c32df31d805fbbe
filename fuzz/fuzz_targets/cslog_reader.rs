//! libFuzzer target: the `.cslog` reader (in memory, streamed in odd pieces).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cuca_reliability::fuzz::cslog_reader(data);
});
