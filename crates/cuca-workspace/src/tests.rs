//! Unit tests of snapshots and restores: round trips, ignored and capped files, the stat
//! cache, change kinds and damaged objects.

use std::path::Path;
use std::sync::Arc;

use cuca_events::FileChangeKind;

use crate::*;

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let at = root.join(path);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, bytes).unwrap();
}

fn snapshotter(root: &Path, store: Arc<MemObjects>) -> Snapshotter {
    Snapshotter::new(root, store, SnapshotConfig::default()).unwrap()
}

/// Moves every file's modification time two seconds back, so the stat cache trusts it
/// (a file modified within a second of being read is read again, by design).
fn age(root: &Path) {
    for entry in ignore::WalkBuilder::new(root)
        .hidden(false)
        .build()
        .flatten()
    {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            let file = std::fs::File::options()
                .write(true)
                .open(entry.path())
                .unwrap();
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2);
            file.set_modified(old).unwrap();
        }
    }
}

#[test]
fn a_snapshot_restores_to_the_same_files_modes_and_links() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "deep/er/still/file.txt", b"deep\n");
    write(root, "run.sh", b"#!/bin/sh\necho hi\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("src/main.rs", root.join("link")).unwrap();
    let store = Arc::new(MemObjects::new());
    let taken = snapshotter(root, store.clone()).snapshot(None).unwrap();
    assert_eq!(taken.n_files, 4);
    let copy = tempfile::tempdir().unwrap();
    let restored = restore(
        store.as_ref(),
        &taken.id,
        copy.path(),
        &RestoreOptions::default(),
    )
    .unwrap();
    assert_eq!(restored.n_written, 4);
    assert_eq!(
        std::fs::read(copy.path().join("src/main.rs")).unwrap(),
        b"fn main() {}\n"
    );
    assert_eq!(
        std::fs::read(copy.path().join("deep/er/still/file.txt")).unwrap(),
        b"deep\n"
    );
    let mode = std::fs::metadata(copy.path().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    assert_eq!(
        std::fs::read_link(copy.path().join("link")).unwrap(),
        Path::new("src/main.rs")
    );
    // The copy snapshots to the same address: nothing was lost or added.
    let again = snapshotter(copy.path(), store.clone())
        .snapshot(None)
        .unwrap();
    assert_eq!(again.id, taken.id);
}

#[test]
fn gitignored_files_and_dot_git_are_not_snapshotted() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, ".gitignore", b"target/\n*.log\n");
    write(root, "target/debug/big", b"build output");
    write(root, "trace.log", b"noise");
    write(root, ".git/HEAD", b"ref: refs/heads/main\n");
    write(root, "kept.txt", b"kept\n");
    let store = Arc::new(MemObjects::new());
    let taken = snapshotter(root, store.clone()).snapshot(None).unwrap();
    let flat = read_flat(store.as_ref(), &taken.id).unwrap();
    let paths: Vec<&str> = flat.keys().map(String::as_str).collect();
    assert_eq!(paths, [".gitignore", "kept.txt"]);
}

#[test]
fn a_file_over_the_cap_is_skipped_and_named() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "small.txt", b"small\n");
    write(root, "big.bin", &[7u8; 2048]);
    let store = Arc::new(MemObjects::new());
    let config = SnapshotConfig {
        max_file_bytes: 1024,
        exclude: Vec::new(),
    };
    let taken = Snapshotter::new(root, store.clone(), config)
        .unwrap()
        .snapshot(None)
        .unwrap();
    assert_eq!(taken.n_files, 1);
    assert_eq!(
        taken.skipped,
        ["big.bin: 2048 bytes, over the 1024-byte cap"]
    );
    assert!(!read_flat(store.as_ref(), &taken.id)
        .unwrap()
        .contains_key("big.bin"));
}

#[test]
fn unchanged_files_are_not_read_again() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    for n in 0..50 {
        write(
            root,
            &format!("dir{}/f{n}.txt", n % 5),
            format!("file {n}\n").as_bytes(),
        );
    }
    age(root);
    let store = Arc::new(MemObjects::new());
    let mut snapshotter = snapshotter(root, store.clone());
    let first = snapshotter.snapshot(None).unwrap();
    assert_eq!(first.n_read, 50);
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    assert_eq!(second.n_read, 0, "nothing changed, nothing read");
    assert_eq!(second.id, first.id);
    assert!(second.changes.is_empty());
    write(root, "dir3/f13.txt", b"file 13, edited\n");
    let third = snapshotter.snapshot(Some(&second.id)).unwrap();
    assert_eq!(third.n_read, 1, "only the edited file is read");
    assert_eq!(snapshotter.n_reads(), 51);
    assert_eq!(third.changes.len(), 1);
    assert_eq!(third.changes[0].path, "dir3/f13.txt");
    assert_eq!(third.changes[0].kind, FileChangeKind::Modified);
}

#[test]
fn changes_say_added_modified_deleted_lines_and_binary() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "a.txt", b"one\ntwo\nthree\n");
    write(root, "gone.txt", b"x\ny\n");
    write(root, "image.png", b"\x89PNG\r\n\x1a\n\0\0\0");
    let store = Arc::new(MemObjects::new());
    let mut snapshotter = snapshotter(root, store.clone());
    let first = snapshotter.snapshot(None).unwrap();
    assert!(first.changes.is_empty(), "the first snapshot is the base");
    write(root, "a.txt", b"one\n2\nthree\nfour\n");
    std::fs::remove_file(root.join("gone.txt")).unwrap();
    write(root, "new.txt", b"alpha\nbeta");
    write(root, "image.png", b"\x89PNG\r\n\x1a\n\0\0\x01");
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    let summary: Vec<(&str, FileChangeKind, u64, u64, bool)> = second
        .changes
        .iter()
        .map(|c| {
            (
                c.path.as_str(),
                c.kind,
                c.added_lines,
                c.removed_lines,
                c.binary,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a.txt", FileChangeKind::Modified, 2, 1, false),
            ("gone.txt", FileChangeKind::Deleted, 0, 2, false),
            ("image.png", FileChangeKind::Modified, 0, 0, true),
            ("new.txt", FileChangeKind::Added, 2, 0, false),
        ]
    );
    assert!(matches!(
        second.event(),
        cuca_events::SessionEvent::WorkspaceSnapshot { ref snapshot, .. } if *snapshot == second.id.to_string()
    ));
}

#[test]
fn an_unchanged_workspace_grows_the_store_by_nothing() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "a/b.txt", b"b\n");
    write(root, "c.txt", b"c\n");
    let store = Arc::new(MemObjects::new());
    let mut snapshotter = snapshotter(root, store.clone());
    let first = snapshotter.snapshot(None).unwrap();
    let size = store.stored_bytes();
    assert!(size > 0);
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    assert_eq!((second.stored_bytes, store.stored_bytes()), (0, size));
}

#[test]
fn a_restore_refuses_a_non_empty_target_unless_forced_and_prunes_when_asked() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "keep.txt", b"old\n");
    let store = Arc::new(MemObjects::new());
    let taken = snapshotter(root, store.clone()).snapshot(None).unwrap();
    write(root, "keep.txt", b"new\n");
    write(root, "extra.txt", b"made later\n");
    write(root, "ignored.log", b"kept: ignored\n");
    write(root, ".gitignore", b"*.log\n");
    let refused = restore(store.as_ref(), &taken.id, root, &RestoreOptions::default()).unwrap_err();
    assert!(
        matches!(refused, WorkspaceError::NotEmpty { .. }),
        "{refused}"
    );
    assert_eq!(std::fs::read(root.join("keep.txt")).unwrap(), b"new\n");
    let options = RestoreOptions {
        force: true,
        prune: Some(SnapshotConfig::default()),
    };
    let restored = restore(store.as_ref(), &taken.id, root, &options).unwrap();
    assert_eq!(std::fs::read(root.join("keep.txt")).unwrap(), b"old\n");
    assert!(!root.join("extra.txt").exists());
    assert!(!root.join(".gitignore").exists());
    // Removed with .gitignore it may be, but it was ignored when the prune walked.
    assert!(root.join("ignored.log").exists());
    assert_eq!(
        restored,
        Restored {
            n_written: 1,
            n_removed: 2
        }
    );
}

#[test]
fn a_damaged_object_is_refused_with_its_address() {
    let store = MemObjects::new();
    let (id, _) = put_object(&store, b"the real bytes").unwrap();
    let (other, _) = put_object(&store, b"other bytes").unwrap();
    let swapped = store.get(&other).unwrap().unwrap();
    store.put(&id, &swapped).unwrap();
    let error = get_object(&store, &id).unwrap_err();
    assert!(
        error.to_string().contains(&id.to_string())
            && error.to_string().contains("another address"),
        "{error}"
    );
    let missing = ObjectId::of(b"never stored");
    assert!(matches!(
        get_object(&store, &missing),
        Err(WorkspaceError::Missing { .. })
    ));
}

#[test]
fn line_counts_follow_a_diff_without_moves() {
    assert_eq!(line_changes(b"", b"a\nb\n"), (2, 0));
    assert_eq!(line_changes(b"a\nb\n", b""), (0, 2));
    assert_eq!(line_changes(b"a\nb\nc\n", b"a\nB\nc\n"), (1, 1));
    assert_eq!(line_changes(b"a\na\n", b"a\n"), (0, 1));
    assert_eq!(line_changes(b"a", b"a\n"), (0, 0));
    assert!(is_binary(b"\0abc"));
    assert!(is_binary(&[0xff, 0xfe, b'a']));
    assert!(!is_binary("héllo\n".as_bytes()));
}

#[test]
fn ids_print_and_parse_back() {
    let id = ObjectId::of(b"x");
    assert_eq!(ObjectId::parse(&id.to_string()).unwrap(), id);
    assert!(matches!(
        ObjectId::parse("sha256:zz"),
        Err(WorkspaceError::BadId { .. })
    ));
    assert!(ObjectId::parse(&id.hex()).is_err());
}

#[test]
fn a_directory_store_keeps_objects_across_handles() {
    let sessions = tempfile::tempdir().unwrap();
    let store = DirObjects::beside(sessions.path());
    let (id, grew) = put_object(&store, b"kept on disk").unwrap();
    assert!(grew > 0);
    assert!(sessions
        .path()
        .join(".cuca-workspace/objects")
        .join(&id.hex()[..2])
        .is_dir());
    let again = DirObjects::beside(sessions.path());
    assert_eq!(get_object(&again, &id).unwrap(), b"kept on disk");
    assert_eq!(put_object(&again, b"kept on disk").unwrap().1, 0);
}

#[test]
fn an_excluded_directory_inside_the_workspace_is_not_walked() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "cuca-sessions/run.cslog", b"records");
    write(root, "code.txt", b"code\n");
    let store = Arc::new(MemObjects::new());
    let config = SnapshotConfig {
        exclude: vec!["cuca-sessions".into()],
        ..SnapshotConfig::default()
    };
    let taken = Snapshotter::new(root, store.clone(), config)
        .unwrap()
        .snapshot(None)
        .unwrap();
    let flat = read_flat(store.as_ref(), &taken.id).unwrap();
    assert_eq!(flat.keys().collect::<Vec<_>>(), ["code.txt"]);
}

#[test]
fn a_text_diff_reads_as_diff_u_does() {
    let old = b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
    let new = b"a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\n";
    let diff = text_diff(old, new, DiffLimits::default());
    let lines: Vec<String> = diff.lines.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "@@ -1,10 +1,11 @@",
            " a",
            " b",
            " c",
            "-d",
            "+D",
            " e",
            " f",
            " g",
            " h",
            " i",
            " j",
            "+k",
        ]
    );
    let far = b"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
    let edited = b"one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n";
    let hunks: Vec<String> = text_diff(far, edited, DiffLimits::default())
        .lines
        .iter()
        .filter(|l| matches!(l, DiffLine::Hunk { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(hunks, ["@@ -1,4 +1,4 @@", "@@ -9,4 +9,4 @@"]);
    let added: Vec<String> = text_diff(b"", b"x\ny\n", DiffLimits::default())
        .lines
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(added, ["@@ -0,0 +1,2 @@", "+x", "+y"]);
    assert!(text_diff(old, old, DiffLimits::default()).lines.is_empty());
}

#[test]
fn a_text_diff_keeps_to_its_limits() {
    let old: String = (0..100).map(|i| format!("{i}\n")).collect();
    let new: String = (0..100).map(|i| format!("new {i}\n")).collect();
    let limits = DiffLimits {
        context: 3,
        max_lines: 50,
        max_cells: 10,
    };
    let diff = text_diff(old.as_bytes(), new.as_bytes(), limits);
    assert!(diff.coarse);
    assert_eq!(diff.lines.len(), 50);
    // A hunk header, 100 removed, 100 added.
    assert_eq!(diff.lines_left_out, 201 - 50);
}

#[test]
fn a_file_diff_reads_both_snapshots_by_path() {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "logo.png", b"\x89PNG\0\0");
    let store = Arc::new(MemObjects::new());
    let mut snapshotter = snapshotter(root, store.clone());
    let first = snapshotter.snapshot(None).unwrap();
    write(
        root,
        "src/main.rs",
        b"fn main() {\n    println!(\"hi\");\n}\n",
    );
    age(root);
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    assert_eq!(
        find_file(store.as_ref(), &second.id, "src").unwrap(),
        None,
        "a directory is no file"
    );
    assert!(find_file(store.as_ref(), &second.id, "src/main.rs")
        .unwrap()
        .is_some());
    let FileDiff::Text(diff) = file_diff(
        store.as_ref(),
        Some(&first.id),
        Some(&second.id),
        "src/main.rs",
        DiffLimits::default(),
    )
    .unwrap() else {
        panic!("a text file's diff is text")
    };
    let lines: Vec<String> = diff.lines.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "@@ -1,1 +1,3 @@",
            "-fn main() {}",
            "+fn main() {",
            "+    println!(\"hi\");",
            "+}"
        ]
    );
    assert_eq!(
        file_diff(
            store.as_ref(),
            None,
            Some(&second.id),
            "logo.png",
            DiffLimits::default()
        )
        .unwrap(),
        FileDiff::Binary {
            old_bytes: 0,
            new_bytes: 6
        }
    );
}
