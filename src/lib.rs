//! cuca: session recording for LLM agents.
//!
//! This facade re-exports the cuca crates behind features, so an application names one
//! dependency and turns on what it uses. Each crate is also reachable as a module
//! (`cuca::session_log`, `cuca::replay`, …) with everything it exports.
//!
//! | feature | what it brings |
//! | --- | --- |
//! | *(always)* | the vocabulary: [`SessionEvent`], [`SessionRecord`], [`PluginError`], the [`SessionBackend`] and [`CucaPlugin`] traits |
//! | `plugin-session-log` | `SessionLogPlugin`, `InMemoryBackend`, `FileBackend`, `Durability` |
//! | `service-replay` | `SessionReplay`, `ReplayConfig` and the trajectory types (enables `plugin-session-log`) |
//! | `provider-llamacpp` | `CucaClient`, `ProviderEndpoint` (`LlamaCpp`) |
//! | `provider-openai` | `CucaClient`, `ProviderEndpoint` (`OpenAi`, `OpenAiCompatible`) |
//! | `calllog` | the JSONL call log, as `cuca::calllog` |
//! | `journal` | the capture journal and host assembly, as `cuca::journal` (serving is the `cuca-serve` crate, so capturing compiles no web server) |
//! | `store-postgres` | `PostgresBackend`, as `cuca::store_postgres` |
//! | `otel` | OTLP export of sessions and call-log rows, and the live `OtelPlugin`, as `cuca::otel` |
//! | `full` | all of the above |
//!
//! Features are additive. `provider-llamacpp` and `provider-openai` bring the same client:
//! the endpoint is chosen at run time with `ProviderEndpoint`; the two names exist so a
//! `Cargo.toml` says which server an application talks to.
//!
//! ```
//! use cuca::{SessionEvent, SessionRecord};
//! let record = SessionRecord {
//!     session_id: "demo".into(),
//!     sequence: 0,
//!     timestamp_ms: 0,
//!     event: SessionEvent::SystemPrompt { text: "You are terse.".into() },
//! };
//! assert_eq!(record.point_id(), "demo:0");
//! ```
//!
//! # What it does not do
//!
//! The facade holds no code of its own; every type lives in the crate `ARCHITECTURE.md`
//! names, and only the facade has features.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use cuca_events::*;

/// The vocabulary crate, by name.
pub use cuca_events as events;

/// The session log plugin ([`cuca_session_log`]).
#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_session_log as session_log;

/// The in-memory store ([`cuca_store_mem`]).
#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_store_mem as store_mem;

/// The file store and the `.cslog` codec ([`cuca_store_file`]).
#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_store_file as store_file;

#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_session_log::SessionLogPlugin;

#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_store_mem::InMemoryBackend;

#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_store_file::{Durability, FileBackend};

/// Replay of recorded trajectories ([`cuca_replay`]).
#[cfg(feature = "service-replay")]
#[cfg_attr(docsrs, doc(cfg(feature = "service-replay")))]
pub use cuca_replay as replay;

#[cfg(feature = "service-replay")]
#[cfg_attr(docsrs, doc(cfg(feature = "service-replay")))]
pub use cuca_replay::{
    ReplayCompletion, ReplayConfig, ReplayNote, ReplayTrajectory, ReplayTurn, ReplayUsage,
    SessionReplay,
};

/// The OpenAI-compatible streaming client ([`cuca_client`]).
#[cfg(any(feature = "provider-llamacpp", feature = "provider-openai"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "provider-llamacpp", feature = "provider-openai")))
)]
pub use cuca_client as client;

#[cfg(any(feature = "provider-llamacpp", feature = "provider-openai"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "provider-llamacpp", feature = "provider-openai")))
)]
pub use cuca_client::{
    ClientError, CucaClient, CucaClientBuilder, ProviderEndpoint, RetryPolicy, Timeouts,
};

/// The always-on JSONL call log ([`cuca_calllog`]).
#[cfg(feature = "calllog")]
#[cfg_attr(docsrs, doc(cfg(feature = "calllog")))]
pub use cuca_calllog as calllog;

/// The capture journal and host assembly ([`cuca_journal`]).
#[cfg(feature = "journal")]
#[cfg_attr(docsrs, doc(cfg(feature = "journal")))]
pub use cuca_journal as journal;

/// OTLP export with the OpenTelemetry GenAI conventions ([`cuca_otel`]).
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use cuca_otel as otel;

/// Sessions in PostgreSQL ([`cuca_store_postgres`]).
#[cfg(feature = "store-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "store-postgres")))]
pub use cuca_store_postgres as store_postgres;

#[cfg(feature = "store-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "store-postgres")))]
pub use cuca_store_postgres::{PostgresBackend, PostgresConfig};
