//! Appends one imported session's records: calls grouped, usage deduplicated, a resume marker.

use std::collections::HashSet;

use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::ImportError;
use crate::usage::{usage_records, Sent, TranscriptUsage};

/// The `CallWire` format of the records an import writes about itself: the resume marker
/// and the parent/child links. Readers that do not know it ignore it, as they ignore every
/// `CallWire` format they do not know.
pub const IMPORT_WIRE: &str = "cuca-import";

/// The `CallWire` format of an imported Anthropic call's extra fields (message id, request
/// id, the usage object as written): the proxy's name for the Messages format.
pub(crate) const MESSAGES_WIRE: &str = "messages";

/// One model call as a transcript line reports it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// What identifies the call across lines and files (message id and request id), when
    /// the transcript has one; calls without one are never deduplicated.
    pub(crate) key: Option<String>,
    pub(crate) usage: TranscriptUsage,
    /// Which kinds the line's usage wrote (kept with the usage it describes).
    pub(crate) sent: Sent,
    pub(crate) model: String,
    pub(crate) finish_reason: Option<String>,
    /// The wire format named in the call's `CallWire` record, and its fields.
    pub(crate) wire_format: &'static str,
    pub(crate) wire: Value,
}

struct Group {
    call: Call,
    /// Usage already written for this call by an earlier run.
    recorded: TranscriptUsage,
    /// False when another line (in this or another transcript) already counted this call.
    counted: bool,
    last_ts: u64,
    /// The call's records are all written (Codex's usage comes last): the next answer is
    /// another call's.
    done: bool,
}

/// A stable 64-bit hash of a call key: the set of keys seen is kept as these.
pub(crate) fn key_hash(key: &str) -> u64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// What a scan of an existing session found.
pub(crate) struct Existing {
    /// The last resume marker's fields.
    pub(crate) marker: Option<Value>,
    /// The session has records.
    pub(crate) has_records: bool,
    /// The sub-agent sessions it already names.
    pub(crate) children: HashSet<String>,
}

/// Appends to one session, tracking its next sequence, its open call and its turn start.
pub(crate) struct SessionWriter {
    pub(crate) id: String,
    next_seq: u64,
    pub(crate) new: bool,
    pub(crate) appended: u64,
    turn_start_ts: Option<u64>,
    open: Option<Group>,
    /// The last call an earlier run closed, and the usage it wrote for it: a later line of
    /// the same call adds only what it reports beyond that.
    last_call: Option<(String, TranscriptUsage)>,
    pub(crate) last_ts: u64,
}

impl SessionWriter {
    /// Opens `id` for appending, reading what it already holds when `exists`.
    pub(crate) fn open(
        backend: &dyn SessionBackend,
        id: &str,
        exists: bool,
    ) -> Result<(SessionWriter, Existing), ImportError> {
        let store_error = |source| ImportError::Store {
            session: id.to_string(),
            source,
        };
        let mut next_seq = 0;
        let mut marker = None;
        let mut has_records = false;
        let mut last_ts = 0;
        let mut children = HashSet::new();
        if exists {
            backend
                .replay_each(id, &mut |record| {
                    has_records = true;
                    next_seq = record.sequence.saturating_add(1);
                    last_ts = record.timestamp_ms;
                    if let SessionEvent::CallWire { format, wire } = &record.event {
                        if format == IMPORT_WIRE {
                            if let Ok(value) = serde_json::from_str::<Value>(wire) {
                                if value["kind"] == "marker" {
                                    marker = Some(value);
                                } else if value["kind"] == "child" {
                                    if let Some(child) = value["session"].as_str() {
                                        children.insert(child.to_string());
                                    }
                                }
                            }
                        }
                    }
                    Ok(())
                })
                .map_err(store_error)?;
        }
        let last_call = marker.as_ref().and_then(|m| {
            let key = m["last_call"]["key"].as_str()?.to_string();
            let usage = serde_json::from_value(m["last_call"]["usage"].clone()).ok()?;
            Some((key, usage))
        });
        Ok((
            SessionWriter {
                id: id.to_string(),
                next_seq,
                new: !has_records,
                appended: 0,
                turn_start_ts: None,
                open: None,
                last_call,
                last_ts,
            },
            Existing {
                marker,
                has_records,
                children,
            },
        ))
    }

    fn append(
        &mut self,
        backend: &dyn SessionBackend,
        timestamp_ms: u64,
        event: SessionEvent,
    ) -> Result<(), ImportError> {
        backend
            .append(SessionRecord {
                session_id: self.id.clone(),
                sequence: self.next_seq,
                timestamp_ms,
                event,
            })
            .map_err(|source| ImportError::Store {
                session: self.id.clone(),
                source,
            })?;
        self.next_seq = self.next_seq.saturating_add(1);
        self.appended += 1;
        self.last_ts = self.last_ts.max(timestamp_ms);
        Ok(())
    }

    /// A record of the model's answer (output, reasoning, a tool call).
    pub(crate) fn answer(
        &mut self,
        backend: &dyn SessionBackend,
        ts: u64,
        event: SessionEvent,
    ) -> Result<(), ImportError> {
        if self.open.as_ref().is_some_and(|group| group.done) {
            self.close(backend)?;
        }
        if let Some(group) = &mut self.open {
            group.last_ts = group.last_ts.max(ts);
        }
        self.append(backend, ts, event)
    }

    /// A record of what went to the model (a message, a tool result): the call before it
    /// is over, and the next one's latency counts from here.
    pub(crate) fn input(
        &mut self,
        backend: &dyn SessionBackend,
        ts: u64,
        event: SessionEvent,
    ) -> Result<(), ImportError> {
        self.close(backend)?;
        self.turn_start_ts = Some(ts);
        self.append(backend, ts, event)
    }

    /// A record that is neither input nor answer (a system prompt, a model swap, a link).
    pub(crate) fn other(
        &mut self,
        backend: &dyn SessionBackend,
        ts: u64,
        event: SessionEvent,
    ) -> Result<(), ImportError> {
        self.append(backend, ts, event)
    }

    /// A line of a call whose records close when a line of another call (or input) comes:
    /// Claude Code writes one line per content block, each repeating the message's usage.
    pub(crate) fn call_line(
        &mut self,
        backend: &dyn SessionBackend,
        seen: &mut HashSet<u64>,
        ts: u64,
        call: Call,
    ) -> Result<(), ImportError> {
        if let (Some(open), Some(key)) = (&mut self.open, &call.key) {
            if open.call.key.as_deref() == Some(key.as_str()) {
                // The same call again: keep the largest usage, as ccusage keeps the line with
                // the larger total, and the latest stop reason.
                if call.usage.total() > open.call.usage.total() {
                    open.call.usage = call.usage;
                    open.call.sent = call.sent;
                    open.call.wire = call.wire;
                }
                if call.finish_reason.is_some() {
                    open.call.finish_reason = call.finish_reason;
                }
                open.last_ts = open.last_ts.max(ts);
                return Ok(());
            }
        }
        self.close(backend)?;
        let mut recorded = TranscriptUsage::default();
        let mut counted = true;
        if let Some(key) = &call.key {
            match self.last_call.take() {
                Some((last, usage)) if last == *key => recorded = usage,
                _ => counted = seen.insert(key_hash(key)),
            }
        }
        self.last_call = None;
        self.open = Some(Group {
            call,
            recorded,
            counted,
            last_ts: ts,
            done: false,
        });
        Ok(())
    }

    /// A call whose usage comes after its records (Codex's `token_count`): its closing
    /// records are written when the next record comes, or at the end.
    pub(crate) fn call_done(
        &mut self,
        backend: &dyn SessionBackend,
        ts: u64,
        call: Call,
    ) -> Result<(), ImportError> {
        self.close(backend)?;
        self.open = Some(Group {
            call,
            recorded: TranscriptUsage::default(),
            counted: true,
            last_ts: ts,
            done: true,
        });
        Ok(())
    }

    /// Writes the open call's closing records: its wire fields, how it finished, its latency
    /// and its usage.
    pub(crate) fn close(&mut self, backend: &dyn SessionBackend) -> Result<(), ImportError> {
        self.close_after(backend, Vec::new())
    }

    /// [`SessionWriter::close`], writing `before` first (inside the call's turn, so that
    /// the import's own records never make a turn of their own).
    fn close_after(
        &mut self,
        backend: &dyn SessionBackend,
        before: Vec<SessionEvent>,
    ) -> Result<(), ImportError> {
        let Some(group) = self.open.take() else {
            for event in before {
                let ts = self.last_ts;
                self.append(backend, ts, event)?;
            }
            return Ok(());
        };
        for event in before {
            self.append(backend, group.last_ts, event)?;
        }
        let ts = group.last_ts;
        let usage = if group.counted {
            group.call.usage.beyond(&group.recorded)
        } else {
            TranscriptUsage::default()
        };
        let recorded_now = group.recorded_plus(usage);
        let mut wire = group.call.wire;
        if let Some(object) = wire.as_object_mut() {
            if let Some(key) = &group.call.key {
                object.insert("dedup_key".into(), json!(key));
            }
            object.insert("counted".into(), json!(group.counted));
        }
        self.append(
            backend,
            ts,
            SessionEvent::CallWire {
                format: group.call.wire_format.to_string(),
                wire: wire.to_string(),
            },
        )?;
        self.append(
            backend,
            ts,
            SessionEvent::CallFinish {
                finish_reason: group.call.finish_reason,
                model: group.call.model,
            },
        )?;
        // The transcript has no latency; the time from the input that started the turn to
        // the call's last line is the nearest it says.
        let duration_ms = self
            .turn_start_ts
            .map_or(0, |start| ts.saturating_sub(start));
        for event in usage_records(&usage, &group.call.sent, duration_ms) {
            self.append(backend, ts, event)?;
        }
        if let Some(key) = group.call.key {
            self.last_call = Some((key, recorded_now));
        }
        self.turn_start_ts = Some(ts);
        Ok(())
    }

    /// Writes `links` and the resume marker, then closes the open call: the marker goes
    /// inside the last call's turn, before its closing records.
    pub(crate) fn finish(
        &mut self,
        backend: &dyn SessionBackend,
        mut marker: Value,
        links: Vec<SessionEvent>,
    ) -> Result<(), ImportError> {
        let last_call = match &self.open {
            Some(group) => group.call.key.clone().map(|key| {
                let usage = if group.counted {
                    group.call.usage.beyond(&group.recorded)
                } else {
                    TranscriptUsage::default()
                };
                (key, group.recorded_plus(usage))
            }),
            None => self.last_call.clone(),
        };
        if let Some(object) = marker.as_object_mut() {
            object.insert("kind".into(), json!("marker"));
            if let Some((key, usage)) = &last_call {
                object.insert("last_call".into(), json!({ "key": key, "usage": usage }));
            }
        }
        let mut before = links;
        before.push(SessionEvent::CallWire {
            format: IMPORT_WIRE.to_string(),
            wire: marker.to_string(),
        });
        self.close_after(backend, before)
    }
}

impl Group {
    fn recorded_plus(&self, usage: TranscriptUsage) -> TranscriptUsage {
        if !self.counted {
            return self.recorded;
        }
        TranscriptUsage {
            input: self.recorded.input + usage.input,
            output: self.recorded.output + usage.output,
            cache_read: self.recorded.cache_read + usage.cache_read,
            cache_write_5m: self.recorded.cache_write_5m + usage.cache_write_5m,
            cache_write_1h: self.recorded.cache_write_1h + usage.cache_write_1h,
            reasoning: self.recorded.reasoning + usage.reasoning,
        }
    }
}
