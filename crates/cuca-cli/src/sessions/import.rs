//! `cuca import FILE.jsonl DIR SESSION`: a JSON Lines export into a new session.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use cuca::{FileBackend, SessionBackend, SessionRecord};
use serde_json::json;

use super::{count, stdout};
use crate::error::CliError;
use crate::store::{Store, StoreArg};

/// Reads a JSON Lines export whole, before anything is written. Its sequences must be those
/// of one session as the session log numbers it — 0, 1, 2, … in order — so an out-of-order,
/// duplicated or gapped line is refused, naming the first one.
fn read_jsonl(file: &Path) -> Result<Vec<SessionRecord>, CliError> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|error| CliError::Usage(format!("cannot open {}: {error}", file.display())))?;
        Box::new(std::io::BufReader::new(opened))
    };
    let mut records = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line =
            line.map_err(|error| CliError::Failed(format!("read {}: {error}", file.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: SessionRecord = serde_json::from_str(&line).map_err(|error| {
            CliError::Failed(format!(
                "{} line {}: not a SessionRecord: {error}",
                file.display(),
                i + 1
            ))
        })?;
        check_import_sequence(file, i + 1, records.len() as u64, record.sequence)?;
        records.push(record);
    }
    Ok(records)
}

/// The refusal of a line whose sequence is not `expected`, the number of records before it.
fn check_import_sequence(
    file: &Path,
    line: usize,
    expected: u64,
    sequence: u64,
) -> Result<(), CliError> {
    let what = if sequence == expected {
        return Ok(());
    } else if sequence < expected {
        // The lines before held 0..expected, so this one repeats one of them.
        format!("sequence {sequence} again (out of order or duplicated)")
    } else if expected == 0 {
        format!("sequence {sequence} first")
    } else if sequence == expected + 1 {
        format!(
            "sequence {sequence} after {} (sequence {expected} is missing)",
            expected - 1
        )
    } else {
        format!(
            "sequence {sequence} after {} (sequences {expected} to {} are missing)",
            expected - 1,
            sequence - 1
        )
    };
    Err(CliError::Failed(format!(
        "{} line {line}: {what}; import takes one session's records in order, numbered 0, 1, 2, … without gaps, as `cuca export` writes them",
        file.display()
    )))
}

/// `cuca import FILE.jsonl STORE SESSION`: into a directory as below, or into any other
/// store through the trait ([`import_stored`]).
pub(crate) fn import(
    file: &Path,
    store: &StoreArg,
    schema: Option<&str>,
    session: &str,
    as_json: bool,
) -> Result<(), CliError> {
    let StoreArg::Dir(dir) = store else {
        return import_stored(file, &store.open(schema, true)?, session, as_json);
    };
    // The id and the target are checked before the file is read, and the file is read whole
    // before anything is written: a refused import leaves no session behind.
    let backend = FileBackend::new(dir)?;
    let path: PathBuf = backend.session_path(session)?;
    let packed = backend.compacted_path(session)?;
    if std::fs::symlink_metadata(&path).is_ok() || std::fs::symlink_metadata(&packed).is_ok() {
        return Err(CliError::Usage(format!(
            "session {session:?} already exists in {} ({}); import writes new sessions only",
            dir.display(),
            path.display()
        )));
    }
    let records = read_jsonl(file)?;
    if records.is_empty() {
        // A session is its records: with none there is nothing to write, and no file.
        return Err(CliError::Failed(format!(
            "{} holds no records; nothing was imported and no session {session:?} was created",
            file.display()
        )));
    }
    let n_records = records.len();
    // The check above is for a quick answer; this one is atomic: the file is made only if
    // no session of that id exists, and stays locked by this backend while it is filled.
    if !backend.create_session(session)? {
        return Err(CliError::Usage(format!(
            "session {session:?} already exists in {} ({}): another writer created it while the input was read; import writes new sessions only",
            dir.display(),
            path.display()
        )));
    }
    for record in records {
        backend.append(SessionRecord {
            session_id: session.to_owned(),
            ..record
        })?;
    }
    let bytes = backend.bytes_on_disk(session)?;
    let mut out = stdout();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"session": session, "records": n_records, "bytes": bytes})
        )?;
    } else {
        writeln!(
            out,
            "imported {} into session {} ({bytes} bytes, {})",
            count(n_records as u64, "record", "records"),
            crate::term::line(&format!("{session:?}")),
            crate::term::line(&path.display().to_string())
        )?;
    }
    out.flush()?;
    Ok(())
}

/// [`import`] into a store that is not a directory: refused when the session has a record;
/// the store's sequence rule refuses the first record if another writer creates the
/// session meanwhile, so an import never mixes into a session that exists.
fn import_stored(file: &Path, store: &Store, session: &str, as_json: bool) -> Result<(), CliError> {
    cuca::validate_session_id(session)?;
    let backend = store.backend();
    let exists = |backend: &dyn SessionBackend| -> Result<bool, CliError> {
        Ok(backend
            .replay_each(session, &mut |_| {
                Err(cuca::PluginError::validation("import", "one is enough"))
            })
            .is_err())
    };
    if exists(backend)? {
        return Err(CliError::Usage(format!(
            "session {session:?} already exists in {}; import writes new sessions only",
            store.describe()
        )));
    }
    let records = read_jsonl(file)?;
    if records.is_empty() {
        return Err(CliError::Failed(format!(
            "{} holds no records; nothing was imported and no session {session:?} was created",
            file.display()
        )));
    }
    let n_records = records.len();
    for record in records {
        backend
            .append(SessionRecord {
                session_id: session.to_owned(),
                ..record
            })
            .map_err(|error| match error {
                cuca::PluginError::SequenceTaken { .. } => CliError::Usage(format!(
                    "session {session:?} already exists in {}: another writer created it while the input was read; import writes new sessions only",
                    store.describe()
                )),
                other => other.into(),
            })?;
    }
    let mut out = stdout();
    if as_json {
        writeln!(out, "{}", json!({"session": session, "records": n_records}))?;
    } else {
        writeln!(
            out,
            "imported {} into session {} ({})",
            count(n_records as u64, "record", "records"),
            crate::term::line(&format!("{session:?}")),
            crate::term::line(store.describe())
        )?;
    }
    out.flush()?;
    Ok(())
}
