//! Unit tests of run-id validation.

use super::*;

#[test]
fn run_ids_that_could_leave_the_runs_directory_are_refused() {
    assert_eq!(validate_run_id(""), Err(RunIdError::Empty));
    assert_eq!(validate_run_id("."), Err(RunIdError::DotSegment));
    assert_eq!(validate_run_id(".."), Err(RunIdError::DotSegment));
    assert_eq!(validate_run_id("../../etc"), Err(RunIdError::Separator));
    assert_eq!(validate_run_id("/etc"), Err(RunIdError::Separator));
    assert_eq!(validate_run_id("a\\b"), Err(RunIdError::Separator));
    assert_eq!(validate_run_id("a\0b"), Err(RunIdError::ControlCharacter));
    assert_eq!(validate_run_id("a\nb"), Err(RunIdError::ControlCharacter));
    assert_eq!(validate_run_id(&"a".repeat(256)), Err(RunIdError::TooLong));
    assert_eq!(validate_run_id(&"a".repeat(255)), Ok(()));
    assert_eq!(validate_run_id("..hidden-but-fine"), Ok(()));
    assert_eq!(validate_run_id("run:42"), Ok(()));
}
