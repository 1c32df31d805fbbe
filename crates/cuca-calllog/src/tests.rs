//! Unit tests: timestamps, clipping, ids, non-finite floats, path resolution.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::finite::take_non_finite;
use crate::time::format_rfc3339_millis;
use crate::*;

#[test]
fn ts_is_rfc3339_with_milliseconds_utc() {
    // "Time is when this row was written, RFC3339 with milliseconds".
    let at = |ms: u64| format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms));
    assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(at(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    assert_eq!(at(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
}

#[test]
fn ts_agrees_with_humantime_across_four_centuries() {
    // A second, independent implementation over a spread of instants, leap days included.
    let mut ms: u64 = 7;
    while ms < 12_000_000_000_000 {
        let time = UNIX_EPOCH + Duration::from_millis(ms);
        assert_eq!(
            format_rfc3339_millis(time),
            humantime::format_rfc3339_millis(time).to_string()
        );
        ms = ms * 3 + 86_399_999;
    }
}

#[test]
fn ts_before_the_epoch_is_written_as_the_epoch_not_a_panic() {
    let before = UNIX_EPOCH - Duration::from_secs(10);
    assert_eq!(format_rfc3339_millis(before), "1970-01-01T00:00:00.000Z");
}

#[test]
fn new_id_is_eight_random_hex_chars() {
    // "Four bytes is eight hex characters".
    let ids: Vec<String> = (0..64).map(|_| new_id()).collect();
    for id in &ids {
        assert_eq!(id.len(), 8, "{id}");
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert!(distinct.len() >= 63, "ids collide: {ids:?}");
}

#[test]
fn clip_error_keeps_short_messages_whole() {
    assert_eq!(clip_error("  model not found \n"), "model not found");
    let exact = "x".repeat(MAX_ERROR_CHARS);
    assert_eq!(clip_error(&exact), exact);
}

#[test]
fn clip_error_cuts_on_char_boundaries_and_ends_in_an_ellipsis() {
    // "a reader can trust what a trailing ellipsis means".
    let page = "é".repeat(MAX_ERROR_CHARS * 3);
    let clipped = clip_error(&page);
    assert_eq!(clipped.chars().count(), MAX_ERROR_CHARS);
    assert!(clipped.ends_with('…'));
    assert!(clipped[..clipped.len() - '…'.len_utf8()]
        .chars()
        .all(|c| c == 'é'));
    let long = "ab".repeat(MAX_ERROR_CHARS);
    assert_eq!(clip_error(&long).chars().count(), MAX_ERROR_CHARS);
}

#[test]
fn non_finite_floats_are_taken_off_and_named_in_the_note() {
    // "A number JSON has no spelling for ... is taken off the row and named in words on it".
    let mut row = Record {
        wait_s: f64::INFINITY,
        cost: f64::NAN,
        waste_usd: f64::NEG_INFINITY,
        cost_s: 1.5,
        note: "borrowed auto".into(),
        ..Record::default()
    };
    take_non_finite(&mut row);
    assert_eq!(row.wait_s, 0.0);
    assert_eq!(row.cost, 0.0);
    assert_eq!(row.waste_usd, 0.0);
    assert_eq!(row.cost_s, 1.5);
    assert_eq!(
        row.note,
        "borrowed auto; waste_usd was -Inf and wait_s was +Inf and cost was NaN, \
         which JSON cannot spell: taken off the row"
    );
    let value = serde_json::to_value(&row).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["cost_s", "note"]);
}

#[test]
fn finite_rows_keep_their_note_untouched() {
    let mut row = Record {
        wait_s: 2.0,
        ..Record::default()
    };
    take_non_finite(&mut row);
    assert_eq!(row.note, "");
    assert_eq!(row.wait_s, 2.0);
}

fn env_with_home(home: &str) -> Env {
    Env {
        home: Some(PathBuf::from(home)),
        ..Env::default()
    }
}

#[test]
fn state_root_is_cuca_home_then_xdg_then_home() {
    let mut env = env_with_home("/h");
    assert_eq!(
        env.state_root(),
        Some(PathBuf::from("/h/.local/state/cuca"))
    );
    env.xdg_state_home = Some(PathBuf::from("relative/state"));
    assert_eq!(
        env.state_root(),
        Some(PathBuf::from("/h/.local/state/cuca")),
        "a relative XDG_STATE_HOME is ignored"
    );
    env.xdg_state_home = Some(PathBuf::from("/xdg"));
    assert_eq!(env.state_root(), Some(PathBuf::from("/xdg/cuca")));
    env.cuca_home = Some(PathBuf::from("/cuca"));
    assert_eq!(env.state_root(), Some(PathBuf::from("/cuca")));
    assert_eq!(Env::default().state_root(), None);
    assert_eq!(Env::default().path_for(None), None);
}

#[test]
fn the_env_var_turns_the_log_off_or_moves_it() {
    let mut env = env_with_home("/h");
    env.call_log = Some(OFF_VALUE.into());
    assert_eq!(env.path_for(Some(Path::new("/profile"))), None);
    env.call_log = Some("/tmp/watch/this.jsonl".into());
    assert_eq!(
        env.path_for(Some(Path::new("/profile"))),
        Some(PathBuf::from("/tmp/watch/this.jsonl"))
    );
    env.call_log = Some("".into());
    assert_eq!(
        env.path_for(Some(Path::new("/profile"))),
        Some(PathBuf::from("/profile/logs/calls.jsonl"))
    );
}

#[test]
fn the_bodies_pin_reads_yes_words_and_refuses_no_words() {
    let mut env = Env::default();
    assert!(!env.bodies());
    for yes in ["1", "true", "on", "yes"] {
        env.bodies = Some(yes.into());
        assert!(env.bodies(), "{yes}");
    }
    for no in ["0", "false", "OFF", "no", " "] {
        env.bodies = Some(no.into());
        assert!(!env.bodies(), "{no:?}");
    }
}

#[test]
fn under_test_nothing_lands_inside_the_state_root() {
    // "UNDER `go test` it answers "" for anything that would land inside the state root".
    let mut env = env_with_home("/h");
    env.under_test = true;
    assert_eq!(env.path_for(None), None);
    env.call_log = Some("/h/.local/state/cuca/elsewhere.jsonl".into());
    assert_eq!(env.path_for(None), None);
    env.call_log = Some("/tmp/t/calls.jsonl".into());
    assert_eq!(
        env.path_for(None),
        Some(PathBuf::from("/tmp/t/calls.jsonl"))
    );
    env.call_log = None;
    assert_eq!(
        env.path_for(Some(Path::new("/tmp/profile"))),
        Some(PathBuf::from("/tmp/profile/logs/calls.jsonl"))
    );
}

#[test]
fn this_test_binary_knows_it_is_under_test() {
    assert!(Env::from_process().under_test);
}

#[test]
fn previous_path_inserts_one_before_the_extension() {
    assert_eq!(
        previous_path(Path::new("/a/logs/calls.jsonl")),
        PathBuf::from("/a/logs").join(PREVIOUS_FILE_NAME)
    );
    assert_eq!(
        previous_path(Path::new("/a/trace")),
        PathBuf::from("/a/trace.1")
    );
}

#[test]
fn rotation_sizes_follow_the_bodies_pin() {
    assert_eq!(MAX_BYTES, 32 * 1024 * 1024);
    assert_eq!(BODIES_MAX_BYTES, 256 * 1024 * 1024);
    let plain = format!("{:?}", CallLog::builder().build());
    let bodies = format!("{:?}", CallLog::builder().bodies(true).build());
    assert!(
        plain.contains(&format!("max_bytes: {MAX_BYTES}")),
        "{plain}"
    );
    assert!(
        bodies.contains(&format!("max_bytes: {BODIES_MAX_BYTES}")),
        "{bodies}"
    );
}

#[test]
fn an_off_log_still_counts_calls_and_remembers_the_last_answer() {
    // "It is the in-memory half of the log, kept whether or not the file is being written."
    let log = CallLog::off();
    assert_eq!(log.path(), None);
    let call = log.start(Record {
        run: "r".into(),
        model: "asked".into(),
        ..Record::default()
    });
    let before = SystemTime::now();
    call.finish(Record {
        status: 200,
        served: "answered".into(),
        ..Record::default()
    });
    assert_eq!(log.calls_for("r"), 1);
    assert_eq!(log.calls_for("never"), 0);
    let last = log.last_call().unwrap();
    assert_eq!(last.model, "answered");
    assert!(last.at >= before);
}

#[test]
fn failed_and_unfinished_calls_are_not_the_last_answer() {
    let log = CallLog::off();
    log.append(Record {
        model: "m".into(),
        status: 503,
        ..Record::default()
    });
    log.append(Record {
        model: "m".into(),
        ended: "abandoned".into(),
        ..Record::default()
    });
    drop(log.start(Record {
        model: "m".into(),
        ..Record::default()
    }));
    assert_eq!(log.last_call(), None);
}

#[test]
fn a_real_application_in_a_directory_named_deps_keeps_its_call_log() {
    // Vendored trees and Nix/Bazel layouts put real applications in `deps/`;
    // only cargo's own test binaries (`target/<profile>/deps/<name>-<16 hex>` beside the
    // profile's `.cargo-lock`) count as tests.
    let tmp = tempfile::tempdir().unwrap();
    let touch = |rel: &str| {
        let path = tmp.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"").unwrap();
        path
    };
    let vendored = touch("opt/agent/deps/agent");
    let nix_like = touch("nix/store/abc-agent/deps/agent-0123456789abcdef");
    let bazel_like = touch("bazel-bin/deps/agent-runner");
    touch("target/debug/.cargo-lock");
    let cargo_test = touch("target/debug/deps/calls-0123456789abcdef");
    let cargo_named_plainly = touch("target/debug/deps/calls");
    let cargo_upper_hex = touch("target/debug/deps/calls-0123456789ABCDEF");
    assert!(!crate::is_cargo_test_binary(&vendored));
    assert!(
        !crate::is_cargo_test_binary(&nix_like),
        "no .cargo-lock beside it"
    );
    assert!(!crate::is_cargo_test_binary(&bazel_like));
    assert!(crate::is_cargo_test_binary(&cargo_test));
    assert!(!crate::is_cargo_test_binary(&cargo_named_plainly));
    assert!(!crate::is_cargo_test_binary(&cargo_upper_hex));
}

#[test]
fn the_off_reason_names_the_real_cause() {
    use crate::OffReason;
    let mut env = Env::default();
    assert_eq!(env.off_reason(None), Some(OffReason::NoStateRoot));
    env.home = Some(PathBuf::from("/h"));
    assert_eq!(env.off_reason(None), None);
    env.under_test = true;
    let reason = env.off_reason(None).unwrap();
    assert_eq!(
        reason,
        OffReason::UnderTest {
            path: PathBuf::from("/h/.local/state/cuca/logs/calls.jsonl")
        }
    );
    let words = reason.to_string();
    assert!(words.contains("cargo test binary"), "{words}");
    assert!(!words.contains("set CUCA_HOME or HOME"), "{words}");
    env.call_log = Some("off".into());
    assert_eq!(env.off_reason(None), Some(OffReason::SwitchedOff));
    assert_eq!(OffReason::SwitchedOff.to_string(), "CUCA_CALL_LOG=off");
}
