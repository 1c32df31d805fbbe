//! The cuca contract: the vocabulary every other cuca crate speaks.
//!
//! * the message model of one provider turn ([`Message`], [`MessageContentBlock`],
//!   [`UnifiedRequest`], [`UnifiedResponse`]);
//! * the session log's append-only vocabulary ([`SessionEvent`], [`SessionRecord`]) whose
//!   postcard encoding is the `.cslog` payload, and [`ReplayedRecord`], the same record with
//!   a borrowed session id, as [`SessionBackend::replay_each`] hands records over;
//! * the one error type, [`PluginError`];
//! * the two seams: [`SessionBackend`] (a store) and [`CucaPlugin`] (hooks around a call),
//!   and [`AgentResponseStream`], the stream a live and a replayed turn both yield.
//!
//! ```
//! use cuca_events::{SessionEvent, SessionRecord, parse_point_id};
//!
//! let record = SessionRecord {
//!     session_id: "demo".into(),
//!     sequence: 1,
//!     timestamp_ms: 1_700_000_000_000,
//!     event: SessionEvent::Reasoning { text: "the vault is in Lisbon".into() },
//! };
//! assert_eq!(record.event.kind(), "Reasoning");
//! assert_eq!(parse_point_id(&record.point_id()).unwrap(), ("demo", 1));
//! ```
//!
//! # What this crate does not do
//!
//! It has no file system, no clock and no async runtime: backends, plugins and clients live
//! in their own crates and point here. Timestamps are filled in by whoever makes a record.
#![forbid(unsafe_code)]

mod backend;
mod error;
mod event;
mod message;
mod plugin;
mod point;
mod session_id;

pub use backend::{
    replay_after_counting, AppendRefused, BackendGauge, ReadAfter, ReadMark, SessionBackend,
    SessionStamp,
};
pub use error::{BoxError, PluginError};
pub use event::{
    CapturedStream, FileChange, FileChangeKind, ReplayedRecord, SessionEvent, SessionRecord,
};
pub use message::{
    Message, MessageContentBlock, PromptCacheUsage, ProviderUsage, RequestMetadata, Role,
    TokenDetail, TokenUsage, ToolChoice, ToolDefinition, UnifiedRequest, UnifiedResponse,
};
pub use plugin::{AgentResponseStream, CucaPlugin};
pub use point::{
    conversation_parent, conversation_session_id, fork_parent, fork_session_id, parse_point_id,
    point_in_session,
};
pub use session_id::validate_session_id;

/// Re-exported so implementors of [`CucaPlugin`] use the same macro version.
pub use async_trait::async_trait;
