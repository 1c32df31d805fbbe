//! The price table a process uses when nobody hands it one: `CUCA_PRICES`, else the bundled
//! snapshot.

use std::sync::OnceLock;

use crate::error::PricesError;
use crate::table::PriceTable;

/// The environment variable naming a price list in LiteLLM's format that replaces the bundled
/// snapshot for every figure a process prices without `--prices` (the call log's `cost`, the
/// proxy's rows, `cuca sessions`). cuca has no configuration file; this is its setting.
pub const PRICES_ENV: &str = "CUCA_PRICES";

/// The table named by [`PRICES_ENV`], read once per process, else [`PriceTable::bundled`].
/// A named file that cannot be read is an error every time it is asked for, never a silent
/// fall back to other prices.
pub fn configured() -> Result<&'static PriceTable, PricesError> {
    static FROM_ENV: OnceLock<Option<Result<PriceTable, String>>> = OnceLock::new();
    let chosen = FROM_ENV.get_or_init(|| {
        let path = std::env::var_os(PRICES_ENV).filter(|p| !p.is_empty())?;
        Some(PriceTable::from_file(&path).map_err(|e| e.to_string()))
    });
    match chosen {
        None => PriceTable::bundled(),
        Some(Ok(table)) => Ok(table),
        Some(Err(problem)) => Err(PricesError::Configured {
            variable: PRICES_ENV,
            problem: problem.clone(),
        }),
    }
}
