//! `cuca export --format html`: the viewer's session page as one file that opens offline.

use std::io::Write;
use std::path::Path;

use crate::error::CliError;
use crate::store::Store;

/// Writes `session` of `store` as `cuca-view`'s self-contained session page, with the failed
/// calls of `calls` (this machine's call log when `None`, none when there is none) and, for
/// a store that is not a directory, its turns' file diffs read from `objects`.
pub(crate) fn write(
    store: &Store,
    session: &str,
    calls: Option<&Path>,
    objects: Option<cuca_view::diffs::Objects>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut config = match store.file() {
        Some(file) => cuca_view::ViewConfig::new(vec![file.dir().to_path_buf()]),
        None => cuca_view::ViewConfig::new(Vec::new()).with_store(store.describe(), store.shared()),
    };
    if let (None, Some(objects)) = (store.file(), objects) {
        config = config.with_store_objects(store.describe(), objects.0);
    }
    let calls = calls
        .map(Path::to_path_buf)
        .or_else(|| cuca::calllog::Env::from_process().path_for(None));
    if let Some(calls) = calls {
        config = config.with_call_log(calls);
    }
    cuca_view::standalone::write_session(&config, session, store.command_form(), out)
        .map_err(|error| CliError::Failed(error.to_string()))?;
    Ok(())
}
