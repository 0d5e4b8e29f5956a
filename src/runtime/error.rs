//! Why a threaded schedule could not be built as asked.

use alloc::string::String;
use core::fmt;

/// The environment variable that sets the parallelism of [`hardware()`](super::hardware).
pub const TASK_GROUPS_VAR: &str = "SKAINET_TASK_GROUPS";

/// Why a pool could not be built as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// A pool of parallelism 0 was asked for; the caller is always one of the tasks, so the
    /// smallest pool is `dedicated(1)` (no threads, everything inline).
    ZeroParallelism,
    /// `SKAINET_TASK_GROUPS` is set but is not a positive integer.
    InvalidTaskGroups {
        /// The variable's value, as found (lossily decoded when it was not UTF-8).
        value: String,
    },
    /// The operating system refused to start a worker thread.
    SpawnFailed {
        /// The name of the thread that did not start (`skainet-schedule-2`, ...).
        thread: String,
        /// The operating system's reason.
        reason: String,
    },
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroParallelism => {
                f.write_str("a pool needs parallelism >= 1 (the caller is one of its tasks), got 0")
            }
            Self::InvalidTaskGroups { value } => write!(
                f,
                "{TASK_GROUPS_VAR} must be a positive integer, got {value:?}"
            ),
            Self::SpawnFailed { thread, reason } => {
                write!(f, "could not start worker thread {thread}: {reason}")
            }
        }
    }
}

impl core::error::Error for ScheduleError {}

/// Parses a `SKAINET_TASK_GROUPS` value: a positive decimal integer, surrounding whitespace
/// allowed.
///
/// ```
/// use skainet_schedule::{parse_task_groups, ScheduleError};
/// assert_eq!(parse_task_groups(" 4 "), Ok(4));
/// assert_eq!(
///     parse_task_groups("0"),
///     Err(ScheduleError::InvalidTaskGroups { value: "0".into() })
/// );
/// ```
///
/// # Errors
///
/// [`ScheduleError::InvalidTaskGroups`] with the value when it is empty, not a number, or 0.
pub fn parse_task_groups(value: &str) -> Result<usize, ScheduleError> {
    match value.trim().parse::<usize>() {
        Ok(groups) if groups > 0 => Ok(groups),
        _ => Err(ScheduleError::InvalidTaskGroups {
            value: value.into(),
        }),
    }
}
