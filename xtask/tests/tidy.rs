//! Repository checks that run as tests, so a plain `cargo test` catches drift.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    // xtask lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            // Build output, fuzz artifacts and trybuild's compile-fail inputs are not sources.
            if ["target", "artifacts", "corpus", "ui", ".git"].contains(&name.as_ref()) {
                continue;
            }
            rust_files(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<PathBuf> {
    let root = root();
    let mut files = Vec::new();
    for dir in ["src", "crates", "xtask", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 10,
        "found only {} sources under {}",
        files.len(),
        root.display()
    );
    files
}

/// STYLE.md: "Every module file opens with a one-line `//!`."
#[test]
fn every_source_file_opens_with_a_module_doc() {
    let missing: Vec<String> = sources()
        .into_iter()
        .filter(|path| {
            let text = fs::read_to_string(path).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` first line:\n{}",
        missing.join("\n")
    );
}

/// The brief: "Never a stub … or a test that asserts nothing"; STYLE.md: no ignored and no
/// panic-expecting tests (the attribute names are spelled in pieces below).
#[test]
fn no_stubs_and_no_skipped_tests() {
    // Spelled in pieces so this file does not match itself.
    let banned = [
        concat!("todo", "!("),
        concat!("unimplemented", "!("),
        concat!("#[", "ignore"),
        concat!("#[", "should_panic"),
    ];
    let mut hits = Vec::new();
    for path in sources() {
        let text = fs::read_to_string(&path).unwrap_or_default();
        for (line_idx, line) in text.lines().enumerate() {
            for pattern in banned {
                if line.contains(pattern) {
                    hits.push(format!(
                        "{}:{}: {}",
                        path.display(),
                        line_idx + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(hits.is_empty(), "banned patterns:\n{}", hits.join("\n"));
}

/// STYLE.md: "Only the facade has features; leaf crates are always whole."
#[test]
fn only_the_facade_has_features() {
    let crates = root().join("crates");
    let mut offenders = Vec::new();
    for entry in fs::read_dir(&crates).expect("crates/ exists").flatten() {
        // The binary may offer a build without PostgreSQL (`--no-default-features`): its
        // feature leaves a library crate no different.
        if entry.file_name() == "cuca-cli" {
            continue;
        }
        let manifest = entry.path().join("Cargo.toml");
        let text = fs::read_to_string(&manifest).unwrap_or_default();
        if text.lines().any(|line| line.trim() == "[features]") {
            offenders.push(manifest.display().to_string());
        }
    }
    assert!(
        offenders.is_empty(),
        "leaf crates with features:\n{}",
        offenders.join("\n")
    );
}

/// STYLE.md: "Folder name equals package name", and every crate inherits the workspace lints.
#[test]
fn crate_folders_match_package_names_and_inherit_lints() {
    let crates = root().join("crates");
    for entry in fs::read_dir(&crates).expect("crates/ exists").flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        let folder = entry.file_name().to_string_lossy().into_owned();
        assert!(
            text.contains(&format!("name = \"{folder}\"")),
            "{} does not name package {folder:?}",
            manifest.display()
        );
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "{} does not inherit the workspace lints",
            manifest.display()
        );
    }
}

/// ARCHITECTURE.md: every edge points towards `cuca-events`; the leaf-to-leaf edges are
/// `cuca-client → cuca-calllog`/`cuca-wire`, `cuca-wire → cuca-calllog`, the exporter's `cuca-otel → cuca-replay`/`cuca-calllog`
/// and the recorder's `cuca-session-log → cuca-redact`;
/// stores are never normal dependencies of a library crate.
#[test]
fn crate_edges_are_the_ones_architecture_md_allows() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let allowed = |from: &str, to: &str| -> bool {
        match from {
            // The facade re-exports everything; the CLI and the test/bench crates sit on top.
            "cuca" | "cuca-cli" | "cuca-reliability" | "cuca-bench" | "xtask" => true,
            "cuca-client" => matches!(to, "cuca-events" | "cuca-calllog" | "cuca-wire"),
            // The wire formats quote a server's words within the call log's bound.
            // and price the call-log row from its token kinds (ARCHITECTURE.md, cuca-cost).
            "cuca-wire" => matches!(to, "cuca-events" | "cuca-calllog" | "cuca-cost"),
            // The exporter reads like the CLI: replay's turns and the call log's rows.
            // and prices spans as `cuca cost` does.
            "cuca-otel" => matches!(
                to,
                "cuca-events" | "cuca-replay" | "cuca-calllog" | "cuca-cost"
            ),
            // The proxy composes like the CLI does, one level below it (ARCHITECTURE.md).
            "cuca-proxy" => matches!(
                to,
                "cuca-events"
                    | "cuca-calllog"
                    | "cuca-wire"
                    | "cuca-session-log"
                    | "cuca-replay"
                    | "cuca-serve"
                    | "cuca-redact"
                    | "cuca-workspace"
            ),
            // The session log redacts every record by the rules it is given before the store
            // sees it: the one door every recorder's records pass (ARCHITECTURE.md).
            "cuca-session-log" => matches!(to, "cuca-events" | "cuca-redact"),
            "cuca-calllog" => false,
            // Prices are data and arithmetic: token counts in, USD out, read from the
            // contract's token records (ARCHITECTURE.md).
            "cuca-cost" => to == "cuca-events",
            // Redaction is a library over the contract's events: recorders call it, it calls
            // nothing of theirs (ARCHITECTURE.md, cuca-redact).
            "cuca-redact" => to == "cuca-events",
            // The viewer sits on top like the CLI: it reads through the crates that own the
            // formats (ARCHITECTURE.md, cuca-view).
            // Serving names the journal's record file only (ARCHITECTURE.md, cuca-serve).
            "cuca-serve" => matches!(to, "cuca-events" | "cuca-journal"),
            "cuca-view" => matches!(
                to,
                "cuca-events"
                    | "cuca-store-file"
                    | "cuca-calllog"
                    | "cuca-journal"
                    | "cuca-search"
                    | "cuca-cost"
                    | "cuca-workspace"
            ),
            // Search reads sessions through the crate that owns their format, as the viewer does.
            "cuca-search" => matches!(to, "cuca-events" | "cuca-store-file"),
            _ => to == "cuca-events",
        }
    };
    let mut offenders = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let from = package["name"].as_str().unwrap_or_default();
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let to = dependency["name"].as_str().unwrap_or_default();
            let normal = dependency["kind"].is_null();
            if normal && to.starts_with("cuca") && !allowed(from, to) {
                offenders.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "edges ARCHITECTURE.md does not allow:\n{}",
        offenders.join("\n")
    );
}

/// Whether `line` names a tracker entry the way the regex `issue ?#?[0-9]+` does, ignoring
/// case: the word, an optional space, an optional `#`, then a digit.
fn names_a_tracker_entry(line: &str) -> bool {
    let line = line.to_ascii_lowercase();
    // Spelled in pieces so this file does not match itself.
    let word = concat!("iss", "ue");
    line.match_indices(word).any(|(at, _)| {
        let mut rest = &line[at + word.len()..];
        rest = rest.strip_prefix(' ').unwrap_or(rest);
        rest = rest.strip_prefix('#').unwrap_or(rest);
        rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A comment or test name says the guarantee it stands for, never a tracker entry the
/// repository does not hold: no `.rs` file under `crates/`, `src/` or `xtask/` names one.
#[test]
fn no_source_names_a_tracker_entry_instead_of_its_guarantee() {
    let word = concat!("Iss", "ue");
    for named in [
        format!("// {word} 28 item 11"),
        format!("/// ({} #4)", word.to_lowercase()),
        format!("fn {}7()", word.to_uppercase()),
    ] {
        assert!(names_a_tracker_entry(&named), "{named}");
    }
    for plain in [
        format!("{word}s of the call log"),
        format!("{word}_28"),
        format!("{word}: 4"),
    ] {
        assert!(!names_a_tracker_entry(&plain), "{plain}");
    }

    let root = root();
    let mut files = Vec::new();
    for dir in ["crates", "src", "xtask"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "found only {} sources", files.len());
    let mut hits = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap_or_default();
        for (line_idx, line) in text.lines().enumerate() {
            if names_a_tracker_entry(line) {
                hits.push(format!(
                    "{}:{}: {}",
                    path.display(),
                    line_idx + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "lines that name a tracker entry instead of saying what the code guarantees:\n{}",
        hits.join("\n")
    );
}
