//! `cuca export STORE SESSION`: a session as JSON Lines.

use std::io::Write;
use std::ops::ControlFlow;

use super::{each_record, first_pass, stdout, write_json_line};
use crate::error::CliError;
use crate::store::Store;

/// `cuca export DIR SESSION --format jsonl`: checked in a first pass, so a refused session
/// prints nothing, then written record by record.
pub(crate) fn export(store: &Store, session: &str) -> Result<(), CliError> {
    let n_records = first_pass(store, session, &mut |_| Ok(()))?;
    let mut out = stdout();
    each_record(store.backend(), session, n_records, &mut |record| {
        write_json_line(&mut out, &record)?;
        Ok(ControlFlow::Continue(()))
    })?;
    out.flush()?;
    Ok(())
}
