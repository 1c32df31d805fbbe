//! Tests of content addressing and interning.

use super::*;

#[test]
fn the_message_id_is_sha256_of_the_messages_json_first_16_bytes() {
    let message = Message::user("hello");
    let json = serde_json::to_vec(&message).unwrap();
    let digest = Sha256::digest(&json);
    assert_eq!(message_id(&message).0[..], digest[..16]);
    assert_eq!(message_id(&message).to_hex().len(), 32);
}

#[test]
fn two_pictures_of_one_media_type_and_size_are_two_addresses() {
    // "Addressing before the reduction is what keeps two different pictures of one media
    // type and decoded size two different messages."
    let picture = |data: &str| Message {
        role: Role::User,
        content: vec![MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: data.into(),
        }],
    };
    assert_ne!(message_id(&picture("AAAA")), message_id(&picture("BBBB")));
}

#[test]
fn the_decoded_size_of_base64() {
    assert_eq!(base64_decoded_len(""), 0);
    assert_eq!(base64_decoded_len("TQ=="), 1);
    assert_eq!(base64_decoded_len("TWE="), 2);
    assert_eq!(base64_decoded_len("TWFu"), 3);
    assert_eq!(base64_decoded_len("TQ"), 1);
    assert_eq!(base64_decoded_len("TWFu\nTWFu"), 6);
}

#[test]
fn interning_twice_writes_one_line_and_returns_one_index() {
    let mut pools = Pools::default();
    let mut buf = Vec::new();
    let mut interner = Interner {
        pools: &mut pools,
        buf: &mut buf,
    };
    let m = Message::user("same");
    let a = interner
        .message(m.role, &m.content, message_id(&m))
        .unwrap();
    let b = interner
        .message(m.role, &m.content, message_id(&m))
        .unwrap();
    assert_eq!((a, b), (0, 0));
    assert_eq!(buf.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(pools.counts(), (1, 0, 0));
}

#[test]
fn a_tool_output_quoted_into_a_message_shares_the_text_entry() {
    // "A tool's output is also quoted verbatim into the tool message that carries it into the
    // window, so interning both against one table collapses the pair."
    let mut pools = Pools::default();
    let mut buf = Vec::new();
    let mut interner = Interner {
        pools: &mut pools,
        buf: &mut buf,
    };
    let output = "file contents";
    let from_tool = interner
        .text(output, text_id(output), TOOL_CLIP_BYTES)
        .unwrap();
    let message = Message {
        role: Role::Tool,
        content: vec![MessageContentBlock::ToolResult {
            tool_call_id: "c1".into(),
            content: output.into(),
            is_error: false,
        }],
    };
    interner
        .message(message.role, &message.content, message_id(&message))
        .unwrap();
    assert_eq!(pools.counts(), (1, 0, 1));
    let text = String::from_utf8(buf).unwrap();
    let last: crate::format::JournalLine =
        serde_json::from_str(text.lines().last().unwrap()).unwrap();
    match last {
        crate::format::JournalLine::Message(line) => assert_eq!(
            line.body.content,
            vec![StoredBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: from_tool,
                is_error: false
            }]
        ),
        other => panic!("not a message line: {other:?}"),
    }
}

#[test]
fn the_hand_written_text_line_is_what_serde_writes() {
    for text in ["", "plain", "quote \" back\\slash \n tab\t é 🦀 \u{1}"] {
        let id = text_id(text);
        let mut by_hand = Vec::new();
        push_text_line(&mut by_hand, 7, id, text).unwrap();
        let mut by_serde = Vec::new();
        push_line(
            &mut by_serde,
            &JournalLine::Text(crate::format::TextLine {
                index: 7,
                id,
                text: text.to_owned(),
            }),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(by_hand).unwrap(),
            String::from_utf8(by_serde).unwrap()
        );
    }
}

#[test]
fn the_buffered_hash_equals_hashing_the_whole_json() {
    let big = Message::user("x".repeat(3 * HASH_BUF_BYTES + 17));
    for message in [Message::user("small"), big] {
        let json = serde_json::to_vec(&message).unwrap();
        assert_eq!(message_id(&message).0[..], Sha256::digest(&json)[..16]);
    }
}
