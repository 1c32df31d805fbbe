//! Regression (found by `cuca-reliability`'s fuzzing): bytes after `data: [DONE]` are
//! ignored whether or not they arrive in the same read as it.

// The helper unwraps: a decode error there is the failure this test looks for.
#![allow(clippy::unwrap_used)]

use cuca_client::ChatStreamDecoder;
use cuca_events::MessageContentBlock;

const STREAM: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n\
a: not UTF-8 \xc8\xef\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n";

fn decode(chunks: &[&[u8]]) -> (Vec<MessageContentBlock>, bool) {
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut blocks).unwrap();
    }
    let summary = decoder.finish(&mut blocks).unwrap();
    (blocks, summary.saw_done)
}

#[test]
fn garbage_after_done_in_the_same_read_is_ignored_like_garbage_in_a_later_read() {
    let done_end = STREAM
        .windows(14)
        .position(|w| w == b"data: [DONE]\n\n")
        .unwrap()
        + 14;
    let whole = decode(&[STREAM]);
    let split = decode(&[&STREAM[..done_end], &STREAM[done_end..]]);
    assert_eq!(whole, (vec![MessageContentBlock::text("ok")], true));
    assert_eq!(whole, split);
}
