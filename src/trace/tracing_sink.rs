//! [`TracingSink`]: trace events as `tracing` events, for programs that already run a subscriber.

use super::{TraceEvent, TraceSink, TraceSinkRef};
use crate::sync::Arc;

/// The `tracing` target of every event this sink emits; filter on it
/// (`RUST_LOG=skainet_schedule=debug` with `tracing-subscriber`'s `EnvFilter`).
pub const TRACING_TARGET: &str = "skainet_schedule";

/// A sink that forwards trace events to the `tracing` crate (feature `tracing`).
///
/// Every event has the target [`TRACING_TARGET`] (`"skainet_schedule"`):
///
/// - [`TraceEvent::ScheduleRegion`] is a `DEBUG` event, message `"schedule region"`, with the
///   fields `op` and `schedule` (strings), `elements` and `tasks` (integers) and `duration_us`:
///   the wall-clock time in whole microseconds (truncated, saturating at `u64::MAX`), absent when
///   the event carries no duration. `DEBUG` because a region is one per forked kernel call: too
///   many for an `INFO` log, and an integer of microseconds is what a metrics layer can sum.
/// - [`TraceEvent::ScheduleDowngraded`] is a `WARN` event, message `"schedule downgraded"`, with
///   the string fields `requested`, `effective` and `reason`: the program did not get the
///   parallelism it asked for.
///
/// [`enabled`](TraceSink::enabled) asks `tracing` whether any subscriber wants either event, so
/// with no interested subscriber the producers build nothing.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{TraceSink, TracingSink};
/// // No subscriber is installed here, so the sink asks producers to build nothing.
/// assert!(!TracingSink.enabled());
/// let _sink = TracingSink::shared(); // attach with `with_trace(sink)` or a context
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingSink;

impl TracingSink {
    /// A shareable handle to the sink.
    pub fn shared() -> TraceSinkRef {
        Arc::new(TracingSink)
    }
}

impl TraceSink for TracingSink {
    fn enabled(&self) -> bool {
        // Two questions, because a subscriber may filter by level in any way it likes; each is a
        // cached callsite lookup when nobody listens.
        tracing::enabled!(target: TRACING_TARGET, tracing::Level::DEBUG)
            || tracing::enabled!(target: TRACING_TARGET, tracing::Level::WARN)
    }

    fn emit(&self, event: TraceEvent) {
        match event {
            TraceEvent::ScheduleRegion {
                op,
                schedule,
                elements,
                tasks,
                duration,
            } => {
                let duration_us =
                    duration.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
                tracing::debug!(
                    target: TRACING_TARGET,
                    op = op.as_str(),
                    schedule = schedule.as_str(),
                    elements,
                    tasks,
                    duration_us,
                    "schedule region"
                );
            }
            TraceEvent::ScheduleDowngraded {
                requested,
                effective,
                reason,
            } => {
                tracing::warn!(
                    target: TRACING_TARGET,
                    requested = requested.as_str(),
                    effective = effective.as_str(),
                    reason = reason.as_str(),
                    "schedule downgraded"
                );
            }
        }
    }
}
