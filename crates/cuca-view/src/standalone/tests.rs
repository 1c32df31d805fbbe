//! Unit tests of the one-file page: base64, the inlined assets, the page's policy and quoting.

use super::*;

#[test]
fn base64_matches_rfc_4648_test_vectors() {
    let vectors = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];
    for (plain, encoded) in vectors {
        assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
    }
}

#[test]
fn the_written_in_script_and_stylesheet_cannot_close_their_elements() {
    // They are written into the page unescaped: a `</script` or `</style` inside would end
    // the element early and turn the rest into markup.
    let script = script().to_ascii_lowercase();
    let style = style().to_ascii_lowercase();
    assert!(
        !script.contains("</script"),
        "the script closes its element"
    );
    assert!(!script.contains("<!--"), "the script opens an HTML comment");
    assert!(
        !style.contains("</style"),
        "the stylesheet closes its element"
    );
}

#[test]
fn the_policy_names_the_script_and_the_stylesheet_by_their_hashes() {
    let policy = policy();
    assert!(policy.starts_with("default-src 'none'; "), "{policy}");
    assert!(policy.contains(&format!("script-src '{}'", source_hash(&script()))));
    assert!(policy.contains(&format!("style-src '{}'", source_hash(&style()))));
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    // A SHA-256 is 32 bytes: 44 characters of base64.
    assert_eq!(source_hash("x").len(), "sha256-".len() + 44);
}

#[test]
fn shell_words_read_back_as_they_were() {
    assert_eq!(shell_word("demo:fork:demo:1:0"), "demo:fork:demo:1:0");
    assert_eq!(shell_word("my session"), "'my session'");
    assert_eq!(shell_word("it's"), r"'it'\''s'");
    assert_eq!(shell_word("$(rm -rf /)"), "'$(rm -rf /)'");
    assert_eq!(shell_word(""), "''");
}
