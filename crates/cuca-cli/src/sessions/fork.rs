//! `cuca fork DIR POINT_ID`: branch a session.

use std::io::Write;
use std::path::Path;

use cuca::{parse_point_id, SessionBackend};
use serde_json::json;

use super::{open_dir, require_session, stdout};
use crate::error::CliError;

/// `cuca fork DIR POINT_ID`.
pub(crate) fn fork(dir: &Path, point_id: &str, as_json: bool) -> Result<(), CliError> {
    let (session, _) = parse_point_id(point_id)?;
    let backend = open_dir(dir)?;
    // A missing session is named as such before the backend is asked to fork it.
    require_session(&backend, session)?;
    let new_id = backend.fork(session, point_id)?;
    let mut out = stdout();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"session": new_id, "from_point": point_id})
        )?;
    } else {
        writeln!(out, "{}", crate::term::line(&new_id))?;
    }
    out.flush()?;
    Ok(())
}
