//! Fork mode onto another model, as configured: where the live calls start
//! ([`SwapPoint`]) and the model they go to ([`ModelSwap`]); `swap.rs` is what the proxy does
//! with a call under it.

use std::fmt;
use std::str::FromStr;

use crate::error::ProxyError;
use crate::index::TurnIndex;

/// Where the live calls start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapPoint {
    /// The call of this number, from 1 in its conversation (as `cuca replay --turn` numbers
    /// turns): the calls before it are replayed, it and those after it go live.
    Call(usize),
    /// A point `{session}:{sequence}` of the recorded conversation, as `cuca fork` takes it:
    /// the calls whose records end at or before it are replayed, the rest go live.
    At {
        /// The recorded conversation the point is in.
        session: String,
        /// The last record replayed.
        sequence: u64,
    },
}

impl fmt::Display for SwapPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwapPoint::Call(n) => write!(f, "{n}"),
            SwapPoint::At { session, sequence } => write!(f, "{session}:{sequence}"),
        }
    }
}

impl FromStr for SwapPoint {
    type Err = ProxyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |message: String| ProxyError::InvalidConfig {
            field: "model_swap.from",
            message,
        };
        if let Ok(n) = text.parse::<usize>() {
            return Ok(SwapPoint::Call(n));
        }
        let (session, sequence) = text.rsplit_once(':').ok_or_else(|| {
            invalid(format!(
                "{text:?} is neither a call number (2: the second call goes live) nor a point {{session}}:{{sequence}}"
            ))
        })?;
        let sequence = sequence.parse::<u64>().map_err(|_| {
            invalid(format!(
                "{text:?} is not a point {{session}}:{{sequence}}: {sequence:?} is not a sequence number"
            ))
        })?;
        if session.is_empty() {
            return Err(invalid(format!("{text:?} names no session")));
        }
        Ok(SwapPoint::At {
            session: session.to_owned(),
            sequence,
        })
    }
}

/// Fork mode onto another model: from [`ModelSwap::from`] on, calls go live to
/// [`ModelSwap::model`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSwap {
    /// Where the live calls start.
    pub from: SwapPoint,
    /// The model every live call is sent to, in its body's `model` field.
    pub model: String,
}

impl ModelSwap {
    /// Checks the swap: a model is named, and at least one call is replayed before the point
    /// (a run that is live from its first call is a new recording, `--mode record` with the
    /// agent told its model).
    pub fn validate(&self) -> Result<(), ProxyError> {
        if self.model.trim().is_empty() {
            return Err(ProxyError::InvalidConfig {
                field: "model_swap.model",
                message: "no model named to send the calls to".into(),
            });
        }
        if matches!(self.from, SwapPoint::Call(n) if n < 2) {
            return Err(ProxyError::InvalidConfig {
                field: "model_swap.from",
                message: format!(
                    "call {} leaves no call to replay before it; the first call that can go live is 2 (to run every call on {}, record a new session)",
                    self.from, self.model
                ),
            });
        }
        Ok(())
    }

    /// How many turns of the recorded conversation `conversation` (indexed by `index`) are
    /// replayed before the calls go live; `None` when the point is in another conversation,
    /// whose calls are all replayed.
    pub(crate) fn replayed_turns(&self, conversation: &str, index: &TurnIndex) -> Option<usize> {
        match &self.from {
            SwapPoint::Call(n) => Some(n.saturating_sub(1)),
            SwapPoint::At { session, sequence } => (session == conversation).then(|| {
                index
                    .turns()
                    .iter()
                    .take_while(|turn| turn.sequence_range().end() <= sequence)
                    .count()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_a_call_number_or_a_session_point_and_nothing_else() {
        assert_eq!("2".parse::<SwapPoint>().unwrap(), SwapPoint::Call(2));
        assert_eq!(
            "s:fork:s:7:0:12".parse::<SwapPoint>().unwrap(),
            SwapPoint::At {
                session: "s:fork:s:7:0".into(),
                sequence: 12
            }
        );
        for bad in ["", "two", "s:x", ":5", "s"] {
            assert!(bad.parse::<SwapPoint>().is_err(), "{bad:?}");
        }
        let swap = |from: SwapPoint, model: &str| ModelSwap {
            from,
            model: model.into(),
        };
        assert!(swap(SwapPoint::Call(2), "b").validate().is_ok());
        assert!(swap(SwapPoint::Call(1), "b").validate().is_err());
        assert!(swap(SwapPoint::Call(0), "b").validate().is_err());
        assert!(swap(SwapPoint::Call(2), " ").validate().is_err());
    }

    #[test]
    fn a_swap_is_fork_modes_only() {
        let mut config =
            crate::ProxyConfig::new(crate::Mode::Record, Some("http://127.0.0.1:9".into()))
                .unwrap();
        config.model_swap = Some(ModelSwap {
            from: SwapPoint::Call(2),
            model: "b".into(),
        });
        assert!(config.validate().is_err());
        config.mode = crate::Mode::Fork;
        assert!(config.validate().is_ok());
    }
}
