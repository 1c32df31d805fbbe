//! `cuca export STORE SESSION`: a session as JSON Lines, or as one HTML page.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use super::{each_record, first_pass, stdout, write_json_line};
use crate::error::CliError;
use crate::store::Store;
use crate::ExportFormat;

/// Where an export goes and in what form.
#[derive(Debug)]
pub(crate) struct ExportTo {
    /// The format.
    pub(crate) format: ExportFormat,
    /// The file to write (replaced once written whole); stdout when `None`.
    pub(crate) output: Option<PathBuf>,
    /// The call log an HTML page takes failed calls from; this machine's when `None`.
    pub(crate) calls: Option<PathBuf>,
    /// The workspace objects an HTML page reads its file diffs from, for a store that is not
    /// a directory (a directory's are beside it).
    pub(crate) objects: Option<cuca_view::diffs::Objects>,
}

/// `cuca export STORE SESSION [--format jsonl|html] [-o FILE]`: every format is checked in
/// the same first pass, so a refused session writes nothing, then written record by record
/// (JSON Lines) or a page of turns at a time (HTML).
pub(crate) fn export(store: &Store, session: &str, to: &ExportTo) -> Result<(), CliError> {
    let n_records = first_pass(store, session, &mut |_| Ok(()))?;
    match &to.output {
        None => {
            let mut out = stdout();
            write(store, session, n_records, to, &mut out)?;
            out.flush()?;
            Ok(())
        }
        Some(path) => write_file(path, &mut |out| write(store, session, n_records, to, out)),
    }
}

fn write(
    store: &Store,
    session: &str,
    n_records: u64,
    to: &ExportTo,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match to.format {
        ExportFormat::Jsonl => each_record(store.backend(), session, n_records, &mut |record| {
            write_json_line(&mut &mut *out, &record)?;
            Ok(ControlFlow::Continue(()))
        }),
        ExportFormat::Html => {
            super::export_html::write(store, session, to.calls.as_deref(), to.objects.clone(), out)
        }
    }
}

/// Writes `path` through `fill`: into a file beside it first, renamed over it once written
/// and flushed, so a failed export never leaves half a file where a whole one was.
fn write_file(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let name = path
        .file_name()
        .ok_or_else(|| CliError::Usage(format!("-o {} does not name a file", path.display())))?;
    let mut partial = name.to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = path.with_file_name(partial);
    let written = (|| {
        let file = std::fs::File::create(&partial)
            .map_err(|error| CliError::Failed(format!("create {}: {error}", partial.display())))?;
        let mut out = std::io::BufWriter::new(file);
        fill(&mut out)?;
        let file = out.into_inner().map_err(|error| {
            CliError::Failed(format!("write {}: {}", partial.display(), error.error()))
        })?;
        file.sync_all()
            .map_err(|error| CliError::Failed(format!("write {}: {error}", partial.display())))?;
        std::fs::rename(&partial, path).map_err(|error| {
            CliError::Failed(format!(
                "rename {} to {}: {error}",
                partial.display(),
                path.display()
            ))
        })
    })();
    if written.is_err() {
        // What was half written is of no use to anyone.
        let _ = std::fs::remove_file(&partial);
    }
    written
}
