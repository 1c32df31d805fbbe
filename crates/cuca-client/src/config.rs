//! Timeouts and the retry policy, validated where they are made.

use std::time::Duration;

use crate::error::ClientError;

/// The longest timeout [`Timeouts::validate`] accepts: one day. Longer ones would overflow
/// the `Instant` arithmetic deadlines use, and no model call legitimately takes a day.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// The four clocks that can end a call with [`cuca_events::PluginError::Timeout`].
///
/// Each names the `phase` its timeout error carries:
///
/// | field | phase | runs from … until … |
/// | --- | --- | --- |
/// | `connect` | `"connection"` | dialing until the TCP (and TLS) connection is up, per attempt |
/// | `first_token` | `"first token"` | sending the request until the first content block decodes (prompt processing happens here, so it is long) |
/// | `idle` | `"data"` | one read of the body until the next, once the first block has arrived |
/// | `total` | `"response"` | the first attempt until the end of the stream, retries and back-off included |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Per-attempt connection timeout.
    pub connect: Duration,
    /// Time allowed until the first content block.
    pub first_token: Duration,
    /// Longest silence allowed between reads after the first block.
    pub idle: Duration,
    /// Time allowed for the whole call.
    pub total: Duration,
}

impl Default for Timeouts {
    /// Connect 10 s (a local server answers at once; a remote one within a few seconds),
    /// first token 300 s (a long prompt on a CPU-only llama-server takes minutes to
    /// process), idle 60 s (a server that goes quiet for a minute mid-answer is stuck),
    /// total 30 min (a bound, not an expectation: long reasoning answers on slow hardware).
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_token: Duration::from_secs(300),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(30 * 60),
        }
    }
}

impl Timeouts {
    /// Checks that every timeout is above zero and none exceeds `total`.
    pub fn validate(&self) -> Result<(), ClientError> {
        for (setting, value) in [
            ("Timeouts::connect", self.connect),
            ("Timeouts::first_token", self.first_token),
            ("Timeouts::idle", self.idle),
            ("Timeouts::total", self.total),
        ] {
            if value.is_zero() {
                return Err(ClientError::InvalidConfig {
                    setting: setting.into(),
                    message: "a timeout of zero would fail every call; give a positive duration"
                        .into(),
                });
            }
            // Deadlines are `Instant + timeout`; a timeout past what an `Instant` can add
            // (e.g. `Duration::MAX`) would panic there, and no call needs more than a day.
            if value > MAX_TIMEOUT {
                return Err(ClientError::InvalidConfig {
                    setting: setting.into(),
                    message: format!(
                        "{value:?} is longer than the {MAX_TIMEOUT:?} maximum; a call that may run longer should be split"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Bounded retries with exponential back-off and jitter.
///
/// A call is retried on a connection error, HTTP 429 and HTTP 5xx, and never once a block
/// has reached the caller (the answer would be spliced from two generations). The `n`th
/// retry waits a random time between half and all of `initial_backoff * 2^(n-1)`, capped at
/// `max_backoff`; when the server sends `Retry-After` (in seconds) the wait is at least that,
/// and a `Retry-After` longer than `max_retry_after` ends the retries with the server's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 turns retrying off).
    pub max_retries: u32,
    /// The back-off before the first retry.
    pub initial_backoff: Duration,
    /// The longest back-off between two attempts.
    pub max_backoff: Duration,
    /// The longest `Retry-After` the client will honour by waiting.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// Two retries (three attempts: enough to ride out a restart or a brief overload
    /// without hiding a server that is down), 500 ms doubling to at most 8 s, and a
    /// `Retry-After` honoured up to 60 s.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A validated policy.
    pub fn new(
        max_retries: u32,
        initial_backoff: Duration,
        max_backoff: Duration,
        max_retry_after: Duration,
    ) -> Result<Self, ClientError> {
        let policy = RetryPolicy {
            max_retries,
            initial_backoff,
            max_backoff,
            max_retry_after,
        };
        policy.validate()?;
        Ok(policy)
    }

    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Checks that the back-off range is ordered and the retry count is sane.
    pub fn validate(&self) -> Result<(), ClientError> {
        // Ten retries at the default 8 s cap already wait over a minute; more is a loop
        // hiding a dead server, not resilience.
        if self.max_retries > 10 {
            return Err(ClientError::InvalidConfig {
                setting: "RetryPolicy::max_retries".into(),
                message: format!("{} is more than 10", self.max_retries),
            });
        }
        if self.initial_backoff > self.max_backoff {
            return Err(ClientError::InvalidConfig {
                setting: "RetryPolicy::initial_backoff".into(),
                message: format!(
                    "{:?} is longer than max_backoff {:?}",
                    self.initial_backoff, self.max_backoff
                ),
            });
        }
        Ok(())
    }

    /// The jittered back-off before retry number `retry` (1-based).
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(20);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        let nanos = u64::try_from(full.as_nanos()).unwrap_or(u64::MAX);
        if nanos < 2 {
            return full;
        }
        // "Equal jitter": half fixed, half random, so concurrent clients spread out but a
        // retry never comes back sooner than half the schedule says.
        let half = nanos / 2;
        Duration::from_nanos(half + rand::random::<u64>() % (nanos - half + 1))
    }
}

#[cfg(test)]
mod tests;
