//! cuca: session recording for LLM agents.
//!
//! This facade re-exports the cuca crates behind features, so an application names one
//! dependency and turns on what it uses.
//!
//! | feature | what it brings |
//! | --- | --- |
//! | *(always)* | the vocabulary: [`SessionEvent`], [`SessionRecord`], [`PluginError`], the [`SessionBackend`] and [`CucaPlugin`] traits |
//! | `plugin-session-log` | `SessionLogPlugin`, `InMemoryBackend`, `FileBackend` |
//! | `service-replay` | `SessionReplay` (enables `plugin-session-log`) |
//! | `provider-llamacpp` | `CucaClient` and `ProviderEndpoint::LlamaCpp` |
//! | `provider-openai` | `CucaClient` and `ProviderEndpoint::{OpenAi, OpenAiCompatible}` |
//! | `calllog` | the JSONL call log ([`calllog`]) |
//! | `journal` | the capture journal, host assembly and serving ([`journal`]) |
//! | `full` | all of the above |
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
//! The facade holds no code of its own; every type lives in the crate named in
//! `ARCHITECTURE.md`.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use cuca_events::*;

/// The vocabulary crate, by name.
pub use cuca_events as events;

#[cfg(feature = "plugin-session-log")]
#[cfg_attr(docsrs, doc(cfg(feature = "plugin-session-log")))]
pub use cuca_store_mem::InMemoryBackend;
