//! libFuzzer target: the call-log reader.
#![no_main]

use std::sync::OnceLock;

use cuca_reliability::fuzz::Scratch;

static SCRATCH: OnceLock<Scratch> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let scratch = SCRATCH.get_or_init(|| Scratch::new().expect("a scratch directory"));
    cuca_reliability::fuzz::calllog_reader(scratch, data);
});
