//! Tests of the tail clip.

use super::*;

#[test]
fn a_short_text_is_kept_whole() {
    assert_eq!(clip_tail("abc", 3), "abc");
    assert_eq!(clip_tail("", 0), "");
}

#[test]
fn a_clipped_payload_keeps_its_tail() {
    // "A clipped payload keeps its tail, matching the rule gg's own shell output cap uses."
    assert_eq!(clip_tail("0123456789", 4), "6789");
}

#[test]
fn the_cut_moves_forward_to_a_char_boundary() {
    // "é" is two bytes; a cut through it must not split it.
    let text = "aéé";
    assert_eq!(text.len(), 5);
    assert_eq!(clip_tail(text, 3), "é");
    assert_eq!(clip_tail(text, 4), "éé");
    let emoji = "x🦀🦀";
    assert_eq!(clip_tail(emoji, 5), "🦀");
}

proptest::proptest! {
    #[test]
    fn the_tail_is_a_suffix_within_the_ceiling(text in ".{0,64}", max in 0usize..80) {
        let tail = clip_tail(&text, max);
        proptest::prop_assert!(text.ends_with(tail));
        proptest::prop_assert!(tail.len() <= max);
        proptest::prop_assert!(tail.len() + 3 >= max.min(text.len()));
    }
}
