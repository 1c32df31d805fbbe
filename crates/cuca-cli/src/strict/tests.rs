//! The report's XML escaping: whatever a prompt holds, the JUnit file stays well formed.

use super::*;

/// A prompt with XML's specials and control characters, quoted in an attribute and an
/// element, reads back as its text (controls as `?`) from a well-formed document.
#[test]
fn any_prompt_text_leaves_the_junit_file_well_formed() {
    let prompt = "a <b> & \"c\" 'd' \u{1}\u{1b}[31m\tend\r\n]]>";
    let mut out = String::from("<testsuites>\n");
    testcase(
        &mut out,
        "cuca.replay.s",
        prompt,
        Some(("diverged", prompt.to_owned(), prompt.to_owned())),
    );
    out.push_str("</testsuites>\n");
    let xml = roxmltree::Document::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let case = xml
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    let shown = "a <b> & \"c\" 'd' ??[31m\tend\r\n]]>";
    assert_eq!(case.attribute("name"), Some(shown));
    let failure = case.first_element_child().unwrap();
    assert_eq!(failure.attribute("message"), Some(shown));
    assert_eq!(failure.text(), Some(shown));
}
