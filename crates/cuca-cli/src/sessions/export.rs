//! `cuca export DIR SESSION`: a session as JSON Lines.

use std::io::Write;
use std::path::Path;

use super::{load_records, open_dir, stdout};
use crate::error::CliError;

/// `cuca export DIR SESSION --format jsonl`.
pub(crate) fn export(dir: &Path, session: &str) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let records = load_records(&backend, session)?;
    let mut out = stdout();
    for record in &records {
        let line = serde_json::to_string(record)
            .map_err(|error| CliError::Failed(format!("encode record: {error}")))?;
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
