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

#[test]
fn a_copied_call_belongs_to_the_session_that_recorded_it() {
    // A fork's inherited turns are not exported again as calls but linked to the parent's
    // spans: the link names the session whose own export sent the call,
    // however many forks up.
    let first = fork_session_id("demo", "demo:9", 0);
    let second = fork_session_id(&first, &format!("{first}:20"), 0);
    assert_eq!(super::owner_of(&second, 25), second.as_str());
    assert_eq!(super::owner_of(&second, 20), first.as_str());
    assert_eq!(super::owner_of(&second, 12), first.as_str());
    assert_eq!(super::owner_of(&second, 9), "demo");
    assert_eq!(super::owner_of("demo", 3), "demo");
}
