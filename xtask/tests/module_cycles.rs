//! No import circles between a crate's files: a file that names `crate::x` depends on `x`,
//! and no file may depend, directly or through others, on a file that depends on it back.
//! A circle means two files that cannot be read (or changed) one without the other.
//!
//! The crates that had circles before this check are listed with them, so that none grows
//! and no new one appears; `cuca-proxy` has none.
// A repository that cannot be read is a failed check: unwrapping says where.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    // xtask lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file below `dir`, but unit-test files (`tests.rs`), which import what they
/// test by design.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The modules `text` names as `crate::name`, outside comments and an inline test module.
fn named_modules(text: &str) -> BTreeSet<String> {
    let code = text
        .find("#[cfg(test)]\nmod tests {")
        .map_or(text, |at| &text[..at]);
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The top-level modules of a crate's `src` and the ones each depends on (its file and its
/// folder of submodules together).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeSet::new();
    for entry in fs::read_dir(src).expect("src is a folder").flatten() {
        let path = entry.path();
        if let (Some(stem), Some("rs")) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|e| e.to_str()),
        ) {
            if stem != "lib" && stem != "main" {
                modules.insert(stem.to_owned());
            }
        }
    }
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut files = vec![src.join(format!("{module}.rs"))];
        sources(&src.join(module), &mut files);
        let mut deps = BTreeSet::new();
        for file in files {
            if let Ok(text) = fs::read_to_string(&file) {
                deps.extend(named_modules(&text));
            }
        }
        deps.retain(|d| d != module && modules.contains(d));
        graph.insert(module.clone(), deps);
    }
    graph
}

/// The modules that reach themselves through their dependencies.
fn in_circles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = graph[start].iter().collect();
        while let Some(next) = stack.pop() {
            if seen.insert(next.clone()) {
                stack.extend(graph.get(next).into_iter().flatten());
            }
        }
        if seen.contains(start) {
            out.insert(start.clone());
        }
    }
    out
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    // Circles that predate this check, each crate's modules in them; none may grow.
    let known: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("cuca-client", &["attempt", "client"][..]),
        ("cuca-replay", &["call", "trajectory"][..]),
        (
            "cuca-store-file",
            &[
                "backend", "compact", "handles", "naming", "scan", "sequence",
            ][..],
        ),
        ("cuca-view", &["index", "sessions"][..]),
    ]);
    let mut offenders = Vec::new();
    let crates = fs::read_dir(root().join("crates")).expect("crates/ is a folder");
    for entry in crates.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = module_graph(&src);
        let allowed: BTreeSet<String> = known
            .get(name.as_str())
            .into_iter()
            .flat_map(|m| m.iter().map(|s| (*s).to_owned()))
            .collect();
        let circled = in_circles(&graph);
        let new: Vec<_> = circled.difference(&allowed).collect();
        if !new.is_empty() {
            let edges: Vec<String> = new
                .iter()
                .map(|m| format!("{m} -> {:?}", graph[*m]))
                .collect();
            offenders.push(format!("{name}: {}", edges.join("; ")));
        }
    }
    assert!(
        offenders.is_empty(),
        "files in an import circle:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let graph = |edges: &[(&str, &[&str])]| -> BTreeMap<String, BTreeSet<String>> {
        edges
            .iter()
            .map(|(m, deps)| {
                (
                    (*m).to_owned(),
                    deps.iter().map(|d| (*d).to_owned()).collect(),
                )
            })
            .collect()
    };
    let circle = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
    assert_eq!(
        in_circles(&circle),
        ["a", "b", "c"].map(str::to_owned).into()
    );
    let chain = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
    assert!(in_circles(&chain).is_empty());
    assert_eq!(
        named_modules("use crate::a::X;\n// crate::b\nfn f() { crate::c::g() }\n#[cfg(test)]\nmod tests {\n use crate::d;\n}"),
        ["a", "c"].map(str::to_owned).into()
    );
}
