//! What a model call cost: a dated price table shipped as data, and the arithmetic.
//!
//! The table is LiteLLM's public model price list (`model_prices_and_context_window.json`,
//! MIT licensed), trimmed to the fields pricing needs and bundled compressed, so no price is
//! fetched at run time; [`PriceTable::from_file`] reads a newer list in the same format
//! (`--prices FILE`). Every table says which it is and how old ([`PriceTable::source`]), so a
//! figure can cite it. A model the table does not know has no price, and so no cost: the
//! answer is `None`, never 0.
//!
//! ```
//! use cuca_cost::{PriceTable, Usage};
//!
//! let table = PriceTable::bundled()?;
//! let price = table.price("anthropic/claude-sonnet-4-5-20250929").expect("a Claude model");
//! let usage = Usage { input: 1_000, output: 100, cache_read: 10_000, ..Usage::default() };
//! let cost = price.cost(&usage);
//! // $3/M input, $15/M output, $0.30/M cache reads.
//! assert!((cost.total() - (0.003 + 0.0015 + 0.003)).abs() < 1e-12);
//! assert!(table.price("no-such-model").is_none());
//! println!("priced by {}", table.source());
//! # Ok::<(), cuca_cost::PricesError>(())
//! ```
//!
//! [`CallReader`] reads a session's records one at a time into model calls (model and every
//! token kind, from the `TokenDetail` record, or the folded `TokenUsage` pair of a session
//! recorded before it), and [`Report`] sums calls by day, week, month, session or model, in
//! memory that grows with the rows, never with the calls. A transcript importer that writes
//! the same records is priced the same way.
//!
//! It deliberately does not know wire formats, stores or files other than a price list;
//! `docs/cost.md` explains every number.
#![forbid(unsafe_code)]

mod calls;
mod configured;
mod error;
mod price;
mod report;
mod table;

pub use calls::{Call, CallReader, Counted};
pub use configured::{configured, PRICES_ENV};
pub use error::PricesError;
pub use price::{Cost, ModelPrice, Rates, Tier, Usage};
pub use report::{parse_day, price_of, utc_day, GroupBy, Report, Row, Totals};
pub use table::{trim_litellm_json, PriceSource, PriceTable, MAX_TABLE_BYTES};
