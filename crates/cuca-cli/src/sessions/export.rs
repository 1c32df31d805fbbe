//! `cuca export DIR SESSION`: a session as JSON Lines.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use super::{each_record, open_dir, scan_checked, stdout, write_json_line};
use crate::error::CliError;

/// `cuca export DIR SESSION --format jsonl`: checked in a first pass, so a refused session
/// prints nothing, then written record by record.
pub(crate) fn export(dir: &Path, session: &str) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let summary = scan_checked(&backend, session, &mut |_| Ok(()))?;
    let mut out = stdout();
    each_record(&backend, session, summary.n_records, &mut |record| {
        write_json_line(&mut out, &record)?;
        Ok(ControlFlow::Continue(()))
    })?;
    out.flush()?;
    Ok(())
}
