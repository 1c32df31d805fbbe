//! Unit tests of `session`.

use super::fork_parent;
use cuca_events::fork_session_id;

#[test]
fn a_fork_id_names_its_parent_and_point() {
    let id = fork_session_id("demo", "demo:1", 0);
    assert_eq!(fork_parent(&id), Some(("demo", "demo:1")));
    // A fork of a fork: the parent is the first fork, whole.
    let twice = fork_session_id(&id, &format!("{id}:4"), 2);
    assert_eq!(
        fork_parent(&twice),
        Some((id.as_str(), &*format!("{id}:4")))
    );
    assert_eq!(fork_parent("demo"), None);
    assert_eq!(
        fork_parent("a:fork:b:1:0"),
        None,
        "the parent must appear twice"
    );
    assert_eq!(fork_parent("demo:fork:demo:x:0"), None);
}
