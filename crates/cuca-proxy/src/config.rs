//! `ProxyConfig` and `Mode`: what the proxy does with a call, and its bounds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ProxyError;

/// What the proxy does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Forward every call to the upstream and record it.
    #[default]
    Record,
    /// Never touch the network: answer from the recording, 404 when it has no such turn.
    Replay,
    /// Answer from the recording where it has the turn; forward and record where not.
    Auto,
    /// Time travel: replay what matches the recording; at the first call that
    /// diverges from it, fork the recorded conversation at the last call that matched, forward
    /// that call live and record it, and every call after it, into the fork.
    Fork,
}

impl Mode {
    /// The word the command line and the docs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Record => "record",
            Mode::Replay => "replay",
            Mode::Auto => "auto",
            Mode::Fork => "fork",
        }
    }

    /// Whether calls may reach the upstream.
    pub fn forwards(self) -> bool {
        !matches!(self, Mode::Replay)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = ProxyError;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        match word {
            "record" => Ok(Mode::Record),
            "replay" => Ok(Mode::Replay),
            "auto" => Ok(Mode::Auto),
            "fork" => Ok(Mode::Fork),
            other => Err(ProxyError::InvalidConfig {
                field: "mode",
                message: format!("{other:?} is not a mode; use record, replay, auto or fork"),
            }),
        }
    }
}

/// The largest request body accepted by default. A chat request is its whole conversation,
/// and a long agent session with a few inline images reaches megabytes; sixteen mebibytes
/// holds that many times over while keeping one caller from making the proxy buffer
/// without bound (the body is read whole, since it must be parsed before it is routed).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// How long a caller may leave a streamed chunk unread before its call is cancelled. A
/// caller that stops reading holds its session's writer and its upstream generation; two
/// minutes is far past any honest pause of a reader (a debugger breakpoint is the usual
/// one), and short enough that a stuck process does not hold them for good.
pub const DEFAULT_CALLER_STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The most sessions the proxy keeps a writer for at once. Each is a small cursor (the
/// next sequence and the message positions already recorded); idle ones are dropped when
/// the table is full and re-read from the store when next used.
pub const DEFAULT_MAX_SESSIONS: usize = 4096;

/// How long a caller may take to send a request's head (line and headers). Ten seconds is
/// ample for any client on any network; a head that takes longer is a slowloris holding a
/// connection, and it is closed.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a caller may take to send a request's whole body once its head is in. A body of
/// [`DEFAULT_MAX_BODY_BYTES`] takes well under a second on loopback and about 16 s at 1 MB/s;
/// sixty seconds covers a slow link, and a body that stops arriving gets a 408 after it
/// instead of holding its connection (and its session's writer) for good.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a connection may go with no byte moving either way before it is closed. The
/// upstream may say nothing for minutes before its first byte: llama-server on a CPU takes
/// minutes to prefill a long prompt, and the proxy has nothing to send meanwhile. Fifteen
/// minutes is longer than any honest prefill, so the bound never cuts a real call; it only
/// reclaims connections left open and silent (the header, body and stall timeouts and the
/// connection cap bound hostile ones).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

// "A real model may take minutes before its first byte": the bound outlasts ten of them.
const _: () = assert!(DEFAULT_IDLE_TIMEOUT.as_secs() > 600);

/// How many caller connections are served at once. Under the common `ulimit -n 1024` every
/// one can be a call in flight, which also holds an upstream socket, and the upstream client
/// keeps up to as many idle sockets pooled; with the store's 256 open sessions and the
/// process's own few dozen, 200 × 3 + 256 + 50 ≈ 900 descriptors stays under 1,024. At the
/// cap a connection that has not sent a whole request head is closed to make room, so
/// half-sent heads cannot keep a real call out.
pub const DEFAULT_MAX_CONNECTIONS: usize = 200;

// The arithmetic above, checked when the crate compiles: a caller socket, an upstream socket
// and a pooled one per connection, the store's 256 open sessions and a margin for the
// process itself fit under `ulimit -n 1024`.
const _: () = assert!(DEFAULT_MAX_CONNECTIONS * 3 + 256 + 50 < 1024);

/// How long a shutdown lets calls in flight run on before it ends them. A few seconds
/// finishes most short answers whole; a long generation is then closed as a cut call (its
/// turn gets its closing records, with no finish reason), so the session stays replayable.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The largest `GET /v1/models` body passed on from the upstream. A model list is a few
/// kilobytes (llama-server's is under one); four mebibytes is thousands of models, and an
/// upstream that sends more is answered with a 502 instead of being buffered.
pub const MODELS_MAX_BYTES: usize = 4 << 20;

/// How long the upstream has to send its whole model list. It is read from memory by any
/// real server; thirty seconds is a loaded machine many times over.
pub const MODELS_TIMEOUT: Duration = Duration::from_secs(30);

/// The session a call is recorded in when neither its path nor its header names one.
pub const DEFAULT_SESSION: &str = "default";

/// How a [`crate::Proxy`] behaves. [`ProxyConfig::new`] validates; the fields are public,
/// so [`ProxyConfig::validate`] checks a struct built by hand, and the proxy calls it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// What the proxy does with a call.
    pub mode: Mode,
    /// The upstream's base URL (`http://127.0.0.1:8080` or `…/v1`); required unless the
    /// mode is [`Mode::Replay`], which never uses it.
    pub upstream: Option<String>,
    /// The session a call without `/s/{session}/` or `X-Cuca-Session` is recorded in.
    pub default_session: String,
    /// The largest request body accepted; larger ones get a 413.
    pub max_body_bytes: usize,
    /// How long a streamed chunk may wait for its caller to read it.
    pub caller_stall_timeout: Duration,
    /// The most sessions with a writer held at once.
    pub max_sessions: usize,
    /// How long a request's head may take to arrive ([`DEFAULT_HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive; after it, a 408
    /// ([`DEFAULT_BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// How long a connection may be silent both ways ([`DEFAULT_IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// How many caller connections are served at once ([`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// How long a shutdown lets calls in flight run before it closes them
    /// ([`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// Regular expressions whose matches replay blanks on both sides before comparing a
    /// request with the recording: what differs on every run by nature
    /// ([`crate::DEFAULT_IGNORE`] to start with; `cuca proxy --ignore REGEX` adds one).
    pub ignore: Vec<String>,
    /// Whether replay compares the sampling parameters ([`crate::SAMPLING_PARAMETERS`]) with
    /// the recorded call's (`cuca proxy --ignore-params` turns it off).
    pub compare_parameters: bool,
    /// JSON paths (`$.metadata.request_id`, the subset `docs/proxy.md` lists) of request
    /// fields replay leaves out on both sides before comparing (`cuca proxy
    /// --ignore-json-path PATH`): fields that change on every run.
    pub ignore_json_paths: Vec<String>,
    /// Whether a call whose request cannot be recorded (the store is away: a database
    /// restarting) is still forwarded and answered, its call-log row and stderr saying the
    /// session does not hold it (`true`: what `cuca proxy` does on a PostgreSQL store, where
    /// the caller's answer must not depend on the database), or refused with a 500 so that
    /// nothing is served that is not recorded (`false`, the default).
    pub answer_unrecorded: bool,
    /// Fork mode onto another model: the calls before the point are replayed, and from it
    /// on every call is sent to another model, recorded in a fork that says so
    /// (`cuca run --mode fork --from POINT --model MODEL`); `None`: fork mode as above.
    pub model_swap: Option<crate::model_swap::ModelSwap>,
    /// The redaction rules every record is redacted by before it is stored, and every
    /// request before replay compares it (`docs/redaction.md`): the default rules unless
    /// this turns them off, plus the user's. On by default.
    pub redaction: cuca_redact::Config,
}

impl ProxyConfig {
    /// A validated config for `mode` in front of `upstream`, with the defaults.
    pub fn new(mode: Mode, upstream: Option<String>) -> Result<Self, ProxyError> {
        let config = ProxyConfig {
            mode,
            upstream,
            default_session: DEFAULT_SESSION.to_owned(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            caller_stall_timeout: DEFAULT_CALLER_STALL_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            ignore: crate::matching::DEFAULT_IGNORE
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
            compare_parameters: true,
            ignore_json_paths: Vec::new(),
            answer_unrecorded: false,
            model_swap: None,
            redaction: cuca_redact::Config::default(),
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), ProxyError> {
        cuca_redact::Rules::new(&self.redaction).map_err(|error| ProxyError::InvalidConfig {
            field: "redaction",
            message: error.to_string(),
        })?;
        if self.mode.forwards() && self.upstream.as_deref().is_none_or(|u| u.trim().is_empty()) {
            return Err(ProxyError::InvalidConfig {
                field: "upstream",
                message: format!(
                    "{} mode forwards calls, so it needs an upstream url",
                    self.mode
                ),
            });
        }
        if let Some(swap) = &self.model_swap {
            if self.mode != Mode::Fork {
                return Err(ProxyError::InvalidConfig {
                    field: "model_swap",
                    message: format!(
                        "another model from a point on is fork mode's; {} mode sends calls as they come",
                        self.mode
                    ),
                });
            }
            swap.validate()?;
        }
        if let Some(message) = crate::session::invalid_session_id(&self.default_session) {
            return Err(ProxyError::InvalidConfig {
                field: "default_session",
                message,
            });
        }
        if self.max_body_bytes == 0 {
            return Err(ProxyError::InvalidConfig {
                field: "max_body_bytes",
                message: "0 accepts no request at all".into(),
            });
        }
        if self.caller_stall_timeout.is_zero() {
            return Err(ProxyError::InvalidConfig {
                field: "caller_stall_timeout",
                message: "0 cancels every streamed call".into(),
            });
        }
        crate::matching::Matching::new(&self.ignore, self.compare_parameters)?
            .ignoring_json_paths(&self.ignore_json_paths)?;
        if self.max_sessions == 0 {
            return Err(ProxyError::InvalidConfig {
                field: "max_sessions",
                message: "0 records no session".into(),
            });
        }
        let timeouts = [
            ("header_read_timeout", self.header_read_timeout),
            ("body_read_timeout", self.body_read_timeout),
            ("idle_timeout", self.idle_timeout),
        ];
        if let Some((field, _)) = timeouts.iter().find(|(_, d)| d.is_zero()) {
            return Err(ProxyError::InvalidConfig {
                field,
                message: "0 closes every connection before it is served".into(),
            });
        }
        if self.max_connections == 0 {
            return Err(ProxyError::InvalidConfig {
                field: "max_connections",
                message: "0 serves no caller".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_timeout_or_cap_is_refused_by_name() {
        let good = ProxyConfig::new(Mode::Replay, None).unwrap();
        assert_eq!(good.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(good.shutdown_grace, DEFAULT_SHUTDOWN_GRACE);
        type Spoil = fn(&mut ProxyConfig);
        let cases: [(&str, Spoil); 4] = [
            ("header_read_timeout", |c| {
                c.header_read_timeout = Duration::ZERO
            }),
            ("body_read_timeout", |c| {
                c.body_read_timeout = Duration::ZERO
            }),
            ("idle_timeout", |c| c.idle_timeout = Duration::ZERO),
            ("max_connections", |c| c.max_connections = 0),
        ];
        for (name, spoil) in cases {
            let mut config = good.clone();
            spoil(&mut config);
            match config.validate() {
                Err(ProxyError::InvalidConfig { field, .. }) => assert_eq!(field, name),
                other => panic!("{name}: {other:?}"),
            }
        }
        // A grace of zero is allowed: calls in flight are closed at once.
        let mut config = good;
        config.shutdown_grace = Duration::ZERO;
        assert!(config.validate().is_ok());
    }
}
