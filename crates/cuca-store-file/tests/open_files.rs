//! What FileBackend opens: regular files in its directory only (never a link, a FIFO or a
//! directory named like a session, on any open), and a bounded number of them at once.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::FileBackend;
use cuca_testkit::record;

fn output(session: &str, sequence: u64) -> SessionRecord {
    record(
        session,
        sequence,
        SessionEvent::Output {
            text: format!("record {sequence}"),
        },
    )
}

fn assert_not_regular(result: Result<impl std::fmt::Debug, PluginError>, what: &str) {
    match result {
        Err(PluginError::Io { source, .. }) => {
            assert!(source.to_string().contains(what), "{source}");
            assert!(
                source.to_string().contains("not a regular file"),
                "{source}"
            );
        }
        other => panic!("expected an Io error naming {what}, got {other:?}"),
    }
}

/// A session file elsewhere that a link in the store can point at.
fn outside_session(root: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let elsewhere = root.join("elsewhere");
    let writer = FileBackend::new(&elsewhere).unwrap();
    writer.append(output("s", 0)).unwrap();
    drop(writer);
    let target = elsewhere.join("s.cslog");
    let bytes = std::fs::read(&target).unwrap();
    (target, bytes)
}

/// "A symlink named like a session is followed on append, writing a record outside the store
/// directory. Refuse anything that is not a regular file in the directory (on every open, not
/// only the first)."
#[cfg(unix)]
#[test]
fn a_link_named_like_a_session_is_never_followed_on_any_open() {
    let root = tempfile::tempdir().unwrap();
    let (target, bytes) = outside_session(root.path());
    let store = root.path().join("store");
    let backend = FileBackend::new(&store).unwrap();
    std::os::unix::fs::symlink(&target, store.join("s.cslog")).unwrap();

    assert_not_regular(backend.append(output("s", 1)), "symbolic link");
    assert_not_regular(backend.replay("s"), "symbolic link");
    assert_not_regular(backend.verify("s"), "symbolic link");
    assert_not_regular(backend.fork("s", "s:0"), "symbolic link");
    assert_not_regular(backend.compact("s"), "symbolic link");
    assert_eq!(backend.sessions().unwrap(), Vec::<String>::new());
    assert_eq!(
        std::fs::read(&target).unwrap(),
        bytes,
        "nothing written outside"
    );

    // Every open, not only the first: a session appended to, closed, then replaced by a link.
    backend.append(output("t", 0)).unwrap();
    assert!(backend.close("t"));
    std::fs::remove_file(store.join("t.cslog")).unwrap();
    std::os::unix::fs::symlink(&target, store.join("t.cslog")).unwrap();
    assert_not_regular(backend.append(output("t", 1)), "symbolic link");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        bytes,
        "nothing written outside"
    );

    // A link in place of a compacted file is refused the same way.
    std::os::unix::fs::symlink(&target, store.join("u.cslog.gz")).unwrap();
    assert_not_regular(backend.replay("u"), "symbolic link");
    assert_not_regular(backend.append(output("u", 0)), "symbolic link");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        bytes,
        "nothing written outside"
    );
}

/// A FIFO named like a session is refused at once, never waited on.
#[cfg(unix)]
#[test]
fn a_fifo_named_like_a_session_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let made = Command::new("mkfifo")
        .arg(dir.path().join("s.cslog"))
        .status()
        .unwrap();
    assert!(made.success());
    assert_not_regular(backend.append(output("s", 0)), "FIFO");
    assert_not_regular(backend.replay("s"), "FIFO");
    std::fs::create_dir(dir.path().join("d.cslog")).unwrap();
    assert_not_regular(backend.append(output("d", 0)), "directory");
}

/// Past its bound a backend closes the least recently used session, which releases that
/// session's lock: another writer may take it, and this backend's next append to it is then
/// refused as any second writer's is.
#[test]
fn past_the_bound_the_least_recently_used_session_is_closed_and_its_lock_released() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path())
        .unwrap()
        .with_max_open_sessions(2);
    assert_eq!(backend.max_open_sessions(), 2);
    backend.append(output("a", 0)).unwrap();
    backend.append(output("b", 0)).unwrap();
    backend.append(output("a", 1)).unwrap(); // a is now the most recently used
    backend.append(output("c", 0)).unwrap(); // closes b, not a
    assert_eq!(backend.open_sessions(), 2);

    let other = FileBackend::new(dir.path()).unwrap();
    assert!(matches!(
        other.append(output("a", 2)),
        Err(PluginError::Locked { .. })
    ));
    other.append(output("b", 1)).unwrap();
    assert!(matches!(
        backend.append(output("b", 2)),
        Err(PluginError::Locked { .. })
    ));
    assert!(other.close("b"));
    // Reopened: the lock is taken again and the append continues the file.
    backend.append(output("b", 2)).unwrap();
    assert_eq!(
        backend.replay("b").unwrap(),
        vec![output("b", 0), output("b", 1), output("b", 2)]
    );
}

const SESSIONS: u64 = 20_000;
const CHILD_ENV: &str = "CUCA_OPEN_FILES_CHILD_DIR";

/// "One open file handle per session, forever … Proof: one backend appends to 20,000
/// sessions in turn with `ulimit -n 1024`." The test runs itself again in a child process
/// whose file descriptor limit `sh` lowered to 1,024; the child appends two rounds to 20,000
/// sessions through one backend and checks what it wrote.
#[cfg(unix)]
#[test]
fn one_backend_appends_to_20000_sessions_in_turn_under_ulimit_n_1024() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 1024 && exec \"$0\" \"$@\"")
        .arg(&exe)
        .args([
            "--exact",
            "one_backend_appends_to_20000_sessions_in_turn_under_ulimit_n_1024",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("limit 1024; appended {} records", 2 * SESSIONS)),
        "{stdout}"
    );
    let backend = FileBackend::new(dir.path()).unwrap();
    assert_eq!(backend.sessions().unwrap().len(), SESSIONS as usize);
}

#[cfg(unix)]
fn child(dir: &Path) {
    // The limit this process runs under, as the shell that started it sees it.
    let limit = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n")
        .output()
        .unwrap();
    let limit = String::from_utf8_lossy(&limit.stdout).trim().to_owned();
    assert_eq!(limit, "1024");
    let backend = FileBackend::new(dir).unwrap();
    let mut appended = 0;
    for round in 0..2 {
        for n in 0..SESSIONS {
            backend.append(output(&format!("s{n}"), round)).unwrap();
            appended += 1;
        }
    }
    assert!(backend.open_sessions() <= cuca_store_file::DEFAULT_MAX_OPEN_SESSIONS);
    for n in [0, 1, SESSIONS / 2, SESSIONS - 1] {
        assert_eq!(
            backend.replay(&format!("s{n}")).unwrap(),
            vec![output(&format!("s{n}"), 0), output(&format!("s{n}"), 1)]
        );
    }
    println!("limit {limit}; appended {appended} records");
}
