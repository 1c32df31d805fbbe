//! The one error type of the price table.

use std::path::PathBuf;

/// Why a price table could not be read. Every variant names the table (a file path, or the
/// bundled snapshot) and, where it is about one entry, the model and the field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PricesError {
    /// The file could not be opened or read.
    #[error("cannot read price table {path}: {source}")]
    Read {
        /// The file given (`--prices FILE`).
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The table is larger than any LiteLLM list, so it is refused before it is read whole.
    #[error("price table {name} has {bytes} bytes, more than the {max} a price table may have")]
    TooLarge {
        /// The file or the bundled snapshot.
        name: String,
        /// Its size.
        bytes: u64,
        /// The bound, [`crate::MAX_TABLE_BYTES`].
        max: u64,
    },
    /// The text is not JSON.
    #[error("price table {name} is not JSON: {source}")]
    Json {
        /// The file or the bundled snapshot.
        name: String,
        /// Where and why parsing stopped (line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The JSON is not an object whose keys are model names.
    #[error("price table {name} is not a JSON object of models (the LiteLLM format)")]
    NotAnObject {
        /// The file or the bundled snapshot.
        name: String,
    },
    /// A price field holds something that is not a finite, non-negative number.
    #[error("price table {name}: model {model:?} field {field:?} {problem}")]
    Field {
        /// The file or the bundled snapshot.
        name: String,
        /// The model whose entry is wrong.
        model: String,
        /// The field, e.g. `input_cost_per_token`.
        field: String,
        /// What is wrong with it, e.g. `is "free", not a number`.
        problem: String,
    },
    /// Not one entry carries both an input and an output price per token: a file of another
    /// format would otherwise price every model as unknown without saying why.
    #[error("price table {name} prices no model per token (no entry has both input_cost_per_token and output_cost_per_token)")]
    NoPrices {
        /// The file or the bundled snapshot.
        name: String,
    },
    /// The bundled snapshot could not be unpacked; a build-time mistake, which the crate's
    /// tests catch.
    #[error("the bundled price table cannot be read: {problem}")]
    Bundled {
        /// What went wrong.
        problem: String,
    },
    /// The table the price setting names cannot be read: nothing is priced by other prices
    /// in its place.
    #[error("the price table {variable} names cannot be read: {problem}")]
    Configured {
        /// The setting (`CUCA_PRICES`).
        variable: &'static str,
        /// Why, naming the file.
        problem: String,
    },
}
