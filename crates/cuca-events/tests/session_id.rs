//! The session-id rule every store shares: no empty id, no control character.

use cuca_events::{validate_session_id, PluginError};

fn refused(id: &str) -> bool {
    matches!(
        validate_session_id(id),
        Err(PluginError::Validation { ref schema, .. }) if schema == "session_id"
    )
}

#[test]
fn every_c0_c1_and_del_control_character_is_refused_anywhere_in_an_id() {
    // Ids with control characters (`\n`, ESC, other C0/C1 controls, DEL) are refused at
    // validation in every store, so none is later printed raw.
    let controls = (0u32..=0x1F).chain([0x7F]).chain(0x80..=0x9F);
    let mut n = 0;
    for code in controls {
        let control = char::from_u32(code).unwrap_or_else(|| panic!("U+{code:04X} is a char"));
        for id in [
            format!("{control}"),
            format!("{control}demo"),
            format!("de{control}mo"),
            format!("demo{control}"),
        ] {
            assert!(refused(&id), "{id:?} was accepted");
        }
        n += 1;
    }
    assert_eq!(n, 32 + 1 + 32);
}

#[test]
fn the_refusal_names_the_id_escaped_never_raw() {
    let Err(error) = validate_session_id("evil\n\u{1b}[2J") else {
        panic!("accepted an id with a newline and ESC");
    };
    let message = error.to_string();
    assert!(
        !message.contains('\n') && !message.contains('\u{1b}'),
        "{message:?}"
    );
    assert!(message.contains(r#""evil\n\u{1b}[2J""#), "{message}");
    assert!(message.contains("U+000A"), "{message}");
}

#[test]
fn the_empty_id_is_refused_and_printable_ids_pass() {
    assert!(refused(""));
    for id in [
        "default",
        "demo:fork:demo:1:0",
        "550e8400-e29b-41d4-a716-446655440000",
        "spaces are fine",
        "naïve ünïcode — ✓ 日本",
        "\u{a0}no-break space (U+00A0, just past C1)",
        "~!@#$%^&*()_+=[]{};'\",.<>?|`",
    ] {
        assert!(validate_session_id(id).is_ok(), "{id:?} was refused");
    }
}
