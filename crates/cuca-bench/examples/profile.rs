//! A fixed, timing-free workload for `valgrind --tool=callgrind`, whose instruction counts do
//! not move with the machine's load the way criterion's times do.
//!
//! ```text
//! cargo build --profile bench -p cuca-bench --example profile
//! valgrind --tool=callgrind target/release/examples/profile append 1024 20000
//! valgrind --tool=callgrind target/release/examples/profile replay 32 10
//! valgrind --tool=callgrind target/release/examples/profile jsonl 32 10
//! ```
//!
//! `append <bytes> <n>`: `n` FileBackend appends of one Reasoning record of that size.
//! `raw <bytes> <n>`: `n` raw `write`s of that record's frame bytes (the limit).
//! `replay <bytes> <n>`: `n` `SessionReplay::load`s of a 7,800-record session of that size.
//! `jsonl <bytes> <n>`: `n` JSONL decodes of the same session.

use std::sync::Arc;

use cuca_bench::{reasoning_record, turn_session, JsonlPeer};
use cuca_events::SessionBackend;
use cuca_replay::SessionReplay;
use cuca_store_file::FileBackend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(size), Some(n)) = (args.first(), args.get(1), args.get(2)) else {
        return Err("usage: profile append|replay|jsonl <bytes> <n>".into());
    };
    let (size, n): (usize, usize) = (size.parse()?, n.parse()?);
    let dir = tempfile::tempdir()?;
    let backend = Arc::new(FileBackend::new(dir.path())?);
    match mode.as_str() {
        "append" => {
            let proto = reasoning_record("bench", 1, size);
            for _ in 0..n {
                backend.append(proto.clone())?;
            }
        }
        "raw" => {
            let mut frame = Vec::new();
            cuca_store_file::encode_frame(&reasoning_record("bench", 1, size), &mut frame)?;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("raw.cslog"))?;
            for _ in 0..n {
                std::io::Write::write_all(&mut file, &frame)?;
            }
        }
        "replay" | "jsonl" => {
            let records = turn_session("bench", 7_800, size);
            let mut jsonl = JsonlPeer::open(dir.path().join("bench.jsonl"))?;
            for record in &records {
                backend.append(record.clone())?;
                jsonl.append(record)?;
            }
            let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
            for _ in 0..n {
                let turns = if mode == "replay" {
                    replay.load("bench")?.len()
                } else {
                    JsonlPeer::decode(jsonl.path())?.len()
                };
                std::hint::black_box(turns);
            }
        }
        other => return Err(format!("unknown mode {other}").into()),
    }
    Ok(())
}
