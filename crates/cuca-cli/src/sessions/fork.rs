//! `cuca fork STORE POINT_ID`: branch a session.

use std::io::Write;

use cuca::parse_point_id;
use serde_json::json;

use super::{require_session, stdout};
use crate::error::CliError;
use crate::store::Store;

/// `cuca fork STORE POINT_ID`.
pub(crate) fn fork(store: &Store, point_id: &str, as_json: bool) -> Result<(), CliError> {
    let (session, _) = parse_point_id(point_id)?;
    // A missing session is named as such before the backend is asked to fork it (another
    // store's fork says "session not found" itself).
    if let Some(file) = store.file() {
        require_session(file, session)?;
    }
    let new_id = store.backend().fork(session, point_id)?;
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
