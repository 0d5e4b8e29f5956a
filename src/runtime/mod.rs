//! The threaded schedules (feature `parallel`).

use crate::schedule::{ScheduleRef, Sequential};

/// The platform default under `parallel`.
pub(crate) fn platform_default() -> ScheduleRef {
    Sequential::shared()
}
