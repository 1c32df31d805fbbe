//! What the crash-test child writes: every byte a pure function of the record's number, so
//! the parent can tell an intact record from one that decodes into something else.

use cuca_events::SessionEvent;

/// Every how many records one is large: a frame that spans many pages is the write a
/// `SIGKILL` can cut part-way (Linux checks for a fatal signal between the pages it copies).
pub const LARGE_EVERY: u64 = 16;

/// The text of session record `sequence`: mostly under 900 bytes, every [`LARGE_EVERY`]th
/// between 64 KiB and 192 KiB.
pub fn session_text(sequence: u64) -> String {
    let len = if sequence % LARGE_EVERY == LARGE_EVERY - 1 {
        64 * 1024 + (sequence.wrapping_mul(7919) % (128 * 1024)) as usize
    } else {
        (sequence.wrapping_mul(31) % 900) as usize
    };
    // A 1 KiB block drawn from the sequence, repeated: every byte is still a function of the
    // sequence, and a large payload costs a copy, not a million draws.
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = sequence.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let block: String = (0..1024)
        .map(|_| {
            // xorshift: cheap, deterministic, and different for every sequence.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            alphabet[(state % alphabet.len() as u64) as usize] as char
        })
        .collect();
    let mut text = format!("record {sequence} ");
    while text.len() < len {
        let take = (len - text.len()).min(block.len());
        text.push_str(&block[..take]);
    }
    text
}

/// The event the child appends as record `sequence`.
pub fn session_event(sequence: u64) -> SessionEvent {
    SessionEvent::Output {
        text: session_text(sequence),
    }
}

/// The call-log row id of call `n`: 8 hex digits, as the log's own ids are.
pub fn call_id(n: u64) -> String {
    format!("{:08x}", n & 0xFFFF_FFFF)
}

/// The request body of call `n` (the bodies pin is on in the crash test, so rows are long
/// enough that some writes span pages).
pub fn call_body(n: u64) -> String {
    let text = session_text(n);
    // Keep it under the call log's rotation figure whatever `n` is.
    text.chars().take(96 * 1024).collect()
}
