//! RFC 3339 timestamps with milliseconds, UTC, formatted by hand from `SystemTime`.
//!
//! Written here rather than taken from a crate because it is one conversion (days since the
//! epoch to a civil date, Howard Hinnant's `civil_from_days`) and the crates that do it
//! either pull in a timezone database (`chrono`) or panic on a clock before 1970
//! (`humantime`'s formatter), and a log writer must not panic. The tests check it against
//! `humantime` over a spread of instants.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-29T17:23:41.123Z` for `time`. A clock before 1970 is written as the epoch rather
/// than refused: the row matters more than its timestamp.
pub(crate) fn format_rfc3339_millis(time: SystemTime) -> String {
    let millis = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    let millis = u64::try_from(millis).unwrap_or(u64::MAX);
    let secs = millis / 1000;
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        millis % 1000
    )
}

/// Year, month (1-12) and day (1-31) of the day `days` after 1970-01-01, in the proleptic
/// Gregorian calendar. Unsigned because [`format_rfc3339_millis`] never passes a day before
/// the epoch.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01, so a leap day is the last day of its "year".
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
