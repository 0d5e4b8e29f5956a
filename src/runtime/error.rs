//! Why a threaded schedule could not be built as asked.

use alloc::string::String;
use core::fmt;
use core::num::IntErrorKind;

/// The environment variable that sets the parallelism of [`hardware()`](super::hardware).
pub const TASK_GROUPS_VAR: &str = "SKAINET_TASK_GROUPS";

/// The largest parallelism a pool may have: [`dedicated()`](super::dedicated) refuses more,
/// and [`hardware()`](super::hardware) never uses more.
///
/// Why 1024: it is 16 times the 64 workers an IREE task executor can manage (the runtime our
/// `SKAINET_TASK_GROUPS` knob mirrors) and above the hardware thread count of today's largest
/// two-socket servers (768), so no real machine is held back; yet a pool of this size (1023
/// threads, about 2 GiB of reserved stack address space) still starts on any 64-bit host,
/// whereas a typo such as `1000000000000` would otherwise exhaust memory and abort.
pub const MAX_PARALLELISM: usize = 1024;

/// Why a pool could not be built as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScheduleError {
    /// A pool of parallelism 0 was asked for; the caller is always one of the tasks, so the
    /// smallest pool is `dedicated(1)` (no threads, everything inline).
    ZeroParallelism,
    /// `SKAINET_TASK_GROUPS` is set but is not a positive integer.
    InvalidTaskGroups {
        /// The variable's value, as found (lossily decoded when it was not UTF-8).
        value: String,
    },
    /// A pool larger than [`MAX_PARALLELISM`] was asked for.
    ParallelismTooLarge {
        /// The parallelism asked for.
        requested: usize,
    },
    /// `SKAINET_TASK_GROUPS` is a positive integer, but larger than [`MAX_PARALLELISM`].
    TaskGroupsTooLarge {
        /// The variable's value, as found (lossily decoded when it was not UTF-8).
        value: String,
    },
    /// A block time above [`MAX_BLOCK_TIME`](super::MAX_BLOCK_TIME) was asked for
    /// ([`PoolSchedule::set_block_time`](super::PoolSchedule::set_block_time)).
    BlockTimeTooLong {
        /// The block time asked for.
        requested: core::time::Duration,
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
            Self::ParallelismTooLarge { requested } => write!(
                f,
                "a pool's parallelism must be at most {MAX_PARALLELISM} (MAX_PARALLELISM), \
                 got {requested}"
            ),
            Self::TaskGroupsTooLarge { value } => write!(
                f,
                "{TASK_GROUPS_VAR} must be at most {MAX_PARALLELISM} (MAX_PARALLELISM), \
                 got {value:?}"
            ),
            Self::BlockTimeTooLong { requested } => write!(
                f,
                "a pool's block time must be at most {:?} (MAX_BLOCK_TIME), got {requested:?}",
                super::MAX_BLOCK_TIME
            ),
            Self::SpawnFailed { thread, reason } => {
                write!(f, "could not start worker thread {thread}: {reason}")
            }
        }
    }
}

impl core::error::Error for ScheduleError {}

/// Parses a `SKAINET_TASK_GROUPS` value: a positive decimal integer no larger than
/// [`MAX_PARALLELISM`], surrounding whitespace allowed.
///
/// ```
/// use skainet_schedule::{parse_task_groups, ScheduleError};
/// assert_eq!(parse_task_groups(" 4 "), Ok(4));
/// assert_eq!(
///     parse_task_groups("0"),
///     Err(ScheduleError::InvalidTaskGroups { value: "0".into() })
/// );
/// assert_eq!(
///     parse_task_groups("5000"),
///     Err(ScheduleError::TaskGroupsTooLarge { value: "5000".into() })
/// );
/// ```
///
/// # Errors
///
/// [`ScheduleError::InvalidTaskGroups`] with the value when it is empty, not a number, or 0;
/// [`ScheduleError::TaskGroupsTooLarge`] when it is a number above [`MAX_PARALLELISM`] (however
/// many digits it has).
pub fn parse_task_groups(value: &str) -> Result<usize, ScheduleError> {
    let digits = value.trim();
    match digits.parse::<usize>() {
        Ok(groups) if groups > MAX_PARALLELISM => Err(ScheduleError::TaskGroupsTooLarge {
            value: value.into(),
        }),
        Ok(groups) if groups > 0 => Ok(groups),
        Err(err) if *err.kind() == IntErrorKind::PosOverflow => {
            Err(ScheduleError::TaskGroupsTooLarge {
                value: value.into(),
            })
        }
        _ => Err(ScheduleError::InvalidTaskGroups {
            value: value.into(),
        }),
    }
}
