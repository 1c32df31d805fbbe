//! `ReplayConfig`: the caps one load may retain, validated at construction and again on use.

use cuca_events::PluginError;

#[cfg(test)]
mod tests;

/// The caps of one load.
///
/// The fields are public so a struct literal works; [`ReplayConfig::validate`] re-checks one,
/// and [`crate::SessionReplay::with_config`] calls it.
///
/// ```
/// use cuca_replay::ReplayConfig;
/// let config = ReplayConfig::new(1_000, 100, Some(0.5))?;
/// assert_eq!(config.warn_at(), Some(500));
/// assert!(ReplayConfig::new(0, 100, None).is_err());
/// assert!(ReplayConfig { warn_fraction: Some(1.5), ..config }.validate().is_err());
/// # Ok::<(), cuca_events::PluginError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayConfig {
    /// The most records one load may retain. A load over it is refused, never shortened.
    pub max_records: usize,
    /// The most content blocks one turn may retain. A load with a bigger turn is refused.
    pub max_turn_blocks: usize,
    /// The fraction of `max_records`, in `(0, 1]`, at which [`crate::ReplayUsage::near_cap`]
    /// turns true; `None` keeps it false.
    pub warn_fraction: Option<f64>,
}

impl ReplayConfig {
    /// The default [`ReplayConfig::max_records`]: 262,144 records.
    ///
    /// Four times `InMemoryBackend::DEFAULT_MAX_RECORDS` (65,536, a whole backend instance),
    /// so any session a default in-memory log holds loads, and a `FileBackend` session of
    /// about two thousand turns of the seed's size (78 to 135 records a turn) loads too. A
    /// `SessionRecord` is 152 bytes before its text (x86-64), so the records a backend hands
    /// over at the cap take 40 MB plus text: tens of megabytes, which is what "bounded by
    /// default" asks of a service that reads whole sessions.
    pub const DEFAULT_MAX_RECORDS: usize = 262_144;

    /// The default [`ReplayConfig::max_turn_blocks`]: 65,536 blocks.
    ///
    /// A reasoning model streams about one block per token, and 32,768 tokens is the largest
    /// completion budget common serving setups grant one call; twice that leaves headroom for
    /// tool calls and results while still catching a session whose turns never closed.
    pub const DEFAULT_MAX_TURN_BLOCKS: usize = 65_536;

    /// The default [`ReplayConfig::warn_fraction`]: 0.8.
    ///
    /// A trajectory at 80% of the cap still loads, and the flag says so while a recording
    /// a quarter longer would still fit, early enough to raise the cap before a load fails.
    pub const DEFAULT_WARN_FRACTION: f64 = 0.8;

    /// A validated config.
    pub fn new(
        max_records: usize,
        max_turn_blocks: usize,
        warn_fraction: Option<f64>,
    ) -> Result<ReplayConfig, PluginError> {
        let config = ReplayConfig {
            max_records,
            max_turn_blocks,
            warn_fraction,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every field: both caps at least 1, `warn_fraction` finite and in `(0, 1]`.
    pub fn validate(&self) -> Result<(), PluginError> {
        if self.max_records == 0 {
            return Err(PluginError::validation(
                "ReplayConfig::max_records",
                "the cap must be at least 1 record; a load of nothing needs no config",
            ));
        }
        if self.max_turn_blocks == 0 {
            return Err(PluginError::validation(
                "ReplayConfig::max_turn_blocks",
                "the cap must be at least 1 block; every recorded answer has one",
            ));
        }
        if let Some(fraction) = self.warn_fraction {
            // `!(0 < f <= 1)` is also true for NaN, so one test refuses both.
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(PluginError::validation(
                    "ReplayConfig::warn_fraction",
                    format!(
                        "{fraction} is not a fraction in (0, 1]; use e.g. 0.8, or None for no warning"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The record count at which [`crate::ReplayUsage::near_cap`] turns true:
    /// `ceil(warn_fraction * max_records)`, or `None` without a `warn_fraction`.
    pub fn warn_at(&self) -> Option<usize> {
        self.warn_fraction.map(|fraction| {
            // Float to int `as` saturates; a validated fraction keeps this in 1..=max_records.
            let at = (fraction * self.max_records as f64).ceil() as usize;
            at.clamp(1, self.max_records.max(1))
        })
    }
}

impl Default for ReplayConfig {
    /// [`ReplayConfig::DEFAULT_MAX_RECORDS`], [`ReplayConfig::DEFAULT_MAX_TURN_BLOCKS`] and
    /// `Some(`[`ReplayConfig::DEFAULT_WARN_FRACTION`]`)`; each constant says why.
    fn default() -> Self {
        ReplayConfig {
            max_records: Self::DEFAULT_MAX_RECORDS,
            max_turn_blocks: Self::DEFAULT_MAX_TURN_BLOCKS,
            warn_fraction: Some(Self::DEFAULT_WARN_FRACTION),
        }
    }
}
