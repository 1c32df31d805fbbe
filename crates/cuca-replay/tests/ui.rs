//! Compile-fail tests: what the type system refuses.

/// "SessionReplay is an explicit-call service. It never implements CucaPlugin, so passing it
/// to register_plugin is a compile error."
#[test]
fn a_session_replay_cannot_be_registered_as_a_plugin() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/register_replay.rs");
}
