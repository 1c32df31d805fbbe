//! The CLI's small things: a directory with no cuca data is an error, not an empty store; a
//! point given as a session is told as a point; `cuca proxy --help` does not offer
//! `--no-pager`; `cuca run` takes `--listen` as `cuca proxy` does; a fork refused because
//! another process holds the session names that process and how to fork anyway; the proxy's
//! log lines sent to a file hold no colour escapes.

#![allow(clippy::unwrap_used)]

mod common;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let output = cuca().args(args).output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A directory of files that are not sessions, as `/etc` is.
fn not_a_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("passwd"),
        "root:x:0:0:root:/root:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("hosts"), "127.0.0.1 localhost\n").unwrap();
    dir
}

fn demo(dir: &std::path::Path) {
    let backend = FileBackend::new(dir).unwrap();
    for (sequence, text) in ["the vault", "is in Lisbon"].into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "demo".into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000,
                event: SessionEvent::Output { text: text.into() },
            })
            .unwrap();
    }
}

#[test]
fn a_directory_with_no_cuca_data_is_an_error_not_an_empty_store() {
    let dir = not_a_store();
    let d = dir.path().to_str().unwrap();
    let listed = run(&["sessions", d]);
    assert_eq!(listed.code, 2, "{}", listed.stdout);
    assert_eq!(listed.stdout, "");
    assert!(
        listed
            .stderr
            .contains("is not a store: none of its 2 entries is a session (`.cslog` file)"),
        "{}",
        listed.stderr
    );
    let found = run(&["grep", d, "root"]);
    assert_eq!(found.code, 2);
    assert!(found.stderr.contains("is not a store"), "{}", found.stderr);
    // An empty directory is a store with nothing recorded yet.
    let empty = tempfile::tempdir().unwrap();
    let listed = run(&["sessions", empty.path().to_str().unwrap()]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("0 sessions"), "{}", listed.stdout);
}

#[test]
fn a_point_given_as_a_session_is_told_as_a_point() {
    let dir = tempfile::tempdir().unwrap();
    demo(dir.path());
    let d = dir.path().to_str().unwrap();
    let shown = run(&["show", d, "demo:1"]);
    assert_eq!(shown.code, 2);
    assert!(
        shown.stderr.contains(
            "demo:1 is a point (record 1 of session \"demo\"), not a session: `cuca show STORE demo` shows the session, `cuca replay STORE demo --at demo:1`"
        ),
        "{}",
        shown.stderr
    );
    let replayed = run(&["replay", d, "demo:1"]);
    assert!(
        replayed.stderr.contains("is a point"),
        "{}",
        replayed.stderr
    );
    // A session that does not exist, and is no point of one, is still "not found".
    let missing = run(&["show", d, "nope:1"]);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);
}

#[test]
fn proxy_help_does_not_offer_no_pager_and_run_takes_listen() {
    let proxy = run(&["proxy", "--help"]);
    assert_eq!(proxy.code, 0);
    assert!(!proxy.stdout.contains("--no-pager"), "{}", proxy.stdout);
    let sessions = run(&["sessions", "--help"]);
    assert!(
        sessions.stdout.contains("--no-pager"),
        "{}",
        sessions.stdout
    );
    let help = run(&["run", "--help"]);
    assert!(help.stdout.contains("--listen <ADDR>"), "{}", help.stdout);
    assert!(!help.stdout.contains("--no-pager"), "{}", help.stdout);

    // The proxy listens where it is told, and COMMAND is pointed at that address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{port}");
    let ran = run(&[
        "run",
        "--store",
        dir.path().to_str().unwrap(),
        "--upstream",
        "http://127.0.0.1:9",
        "--listen",
        &listen,
        "--",
        "sh",
        "-c",
        "echo $CUCA_PROXY_URL",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stdout.trim(), format!("http://{listen}"));
}

#[test]
fn a_fork_refused_while_another_process_holds_the_session_names_it_and_how_to_fork_anyway() {
    let dir = tempfile::tempdir().unwrap();
    demo(dir.path());
    let file = dir.path().join("demo.cslog");
    // `flock(1)` holds the session's append lock, as an idle proxy that recorded it does.
    let Ok(holder) = std::process::Command::new("flock")
        .arg(&file)
        .args(["sleep", "60"])
        .spawn()
    else {
        eprintln!("skipping: flock(1) cannot run");
        return;
    };
    let holder = common::Killed(holder);
    let pid = holder.0.id();
    let d = dir.path().to_str().unwrap();
    // flock(1) takes the lock after it starts: wait for the kernel's table to show it.
    let mut refused = run(&["fork", d, "demo:1"]);
    for _ in 0..100 {
        if refused.code != 0 {
            break;
        }
        // The fork went through before the lock was taken: try on a new parent point.
        std::thread::sleep(std::time::Duration::from_millis(20));
        refused = run(&["fork", d, "demo:1"]);
    }
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stderr.contains(&format!(
            "session \"demo\" is held open for append by process {pid} (`flock "
        )),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(&format!("stop it (`kill {pid}`"))
            && refused.stderr.contains(&format!(
                "or fork a copy: `cuca export {d} demo > copy.jsonl && cuca import copy.jsonl {d} demo-copy && cuca fork {d} demo-copy:1`"
            )),
        "{}",
        refused.stderr
    );
    drop(holder);
}

/// An upstream that answers every request with an empty JSON object, on a thread of its own.
fn answering_upstream() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    address
}

#[test]
fn the_proxys_log_lines_in_a_file_hold_no_colour_escapes() {
    use std::io::{Read, Write};
    let upstream = answering_upstream();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    command
        .args(["proxy", "--store"])
        .arg(dir.path().join("sessions"))
        .args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(format!("http://{upstream}"))
        .env_remove("NO_COLOR")
        .env("CUCA_CALL_LOG", "off")
        .stderr(std::fs::File::create(&log).unwrap());
    let (mut proxy, address, _lines) = common::serving_with(command, "listening on http://");
    // A body the proxy cannot read as a request: forwarded, and a warning says it is not
    // recorded.
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: 8\r\nconnection: close\r\n\r\nnot json"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let _ = std::process::Command::new("kill")
        .arg(proxy.0.id().to_string())
        .status();
    let _ = proxy.0.wait();
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(written.contains("not recorded"), "{written}");
    assert!(!written.contains('\u{1b}'), "{written:?}");
}
