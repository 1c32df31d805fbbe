//! A README block runs twice on a fresh temp dir and shows exactly its point. The README's "next minute" block, run as written (its `cuca` function pointed at
//! the built binary) from the repository root, twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The block, with `cuca` the binary under test.
fn block() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("```sh\ncuca() {")
        .expect("the next-minute block")
        + "```sh\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let mut lines = readme[start..end].lines();
    let function = lines.next().unwrap();
    assert_eq!(function, "cuca() { cargo run -q -p cuca-cli -- \"$@\"; }");
    let binary = assert_cmd::cargo::cargo_bin("cuca");
    let mut script = format!("cuca() {{ '{}' \"$@\"; }}\n", binary.display());
    for line in lines {
        script.push_str(line);
        script.push('\n');
    }
    script
}

/// What a run of the block prints (stdout and stderr in order), its temp dir named `TMP`.
fn run(script: &str) -> String {
    let output = std::process::Command::new("bash")
        .args(["-c", &format!("exec 2>&1\n{script}echo \"dir=$s\"")])
        .current_dir(root())
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let dir = text
        .lines()
        .find_map(|line| line.strip_prefix("dir="))
        .unwrap()
        .to_owned();
    assert!(
        dir.starts_with(std::env::temp_dir().to_str().unwrap()),
        "{dir}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    text.replace(&dir, "TMP")
}

#[test]
fn the_next_minute_block_runs_twice_the_same_and_shows_its_points() {
    let script = block();
    let first = run(&script);
    let second = run(&script);
    assert_eq!(
        first, second,
        "the block printed something else the second time"
    );
    let lines: Vec<&str> = first.lines().collect();
    // The fork id is the same every time: a fresh copy has no fork of demo at 1 yet.
    assert_eq!(lines[0], "demo:fork:demo:1:0");
    assert!(
        first.contains("Turn 2 (records 17..=34, complete)"),
        "{first}"
    );
    assert!(
        first.contains("demo:1  turn 1  Message user  \"The vault is in Lisbon."),
        "{first}"
    );
    // The cut copy shows its one point: a torn tail, recovered, exit 0, and nothing else.
    let cut = first.find("torn tail of").unwrap();
    let cut_part = &first[cut..first[cut..].find("exit 0").unwrap() + cut];
    assert!(
        cut_part.contains("demo: recovered (17 records, 500 bytes)"),
        "{cut_part}"
    );
    assert!(
        !cut_part.contains("finding"),
        "unrelated findings: {cut_part}"
    );
    assert!(
        cut_part.contains("1 session, 17 records, 500 bytes: 0 clean, 1 recovered"),
        "{cut_part}"
    );
    // The flipped byte: refused, exit 1, the session named alone.
    assert!(
        first.contains("reasoning: refused (28 records, 938 bytes)"),
        "{first}"
    );
    assert!(first.ends_with("exit 1\ndir=TMP\n"), "{first}");
}
