//! Trace events and sinks: how a schedule says what it did, and a context says what it refused.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::sync::{Arc, Mutex};

#[cfg(feature = "tracing")]
mod tracing_sink;
#[cfg(feature = "tracing")]
pub use tracing_sink::{TracingSink, TRACING_TARGET};

/// Something a schedule or context reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceEvent {
    /// A context was asked for a schedule it cannot honour and kept another one.
    ScheduleDowngraded {
        /// The name of the schedule asked for.
        requested: String,
        /// The name of the schedule that stays in effect.
        effective: String,
        /// Why the request was not honoured.
        reason: String,
    },
    /// A region really ran on more than one task (inline runs emit nothing).
    ScheduleRegion {
        /// The operation that opened the region (`for_range`, `sdpa`, `matmul`, ...).
        op: String,
        /// The name of the schedule that ran it.
        schedule: String,
        /// The number of units (`n`).
        elements: usize,
        /// The number of tasks (non-empty chunks) it was split into.
        tasks: usize,
        /// Wall-clock time from opening to return; `None` where there is no clock (no `std`).
        duration: Option<Duration>,
    },
}

/// Where trace events go. Implementations must be cheap when disabled: producers check
/// [`enabled`](TraceSink::enabled) before building an event.
pub trait TraceSink: Send + Sync {
    /// Whether events should be built and emitted at all.
    fn enabled(&self) -> bool {
        true
    }

    /// Records one event.
    fn emit(&self, event: TraceEvent);
}

/// A shareable handle to a sink.
pub type TraceSinkRef = Arc<dyn TraceSink>;

/// The default sink: disabled, drops everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSink;

impl NoopSink {
    /// A shareable handle to the no-op sink.
    pub fn shared() -> TraceSinkRef {
        Arc::new(NoopSink)
    }
}

impl TraceSink for NoopSink {
    fn enabled(&self) -> bool {
        false
    }

    fn emit(&self, _event: TraceEvent) {}
}

/// A sink that keeps every event, in order; for tests and examples.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{CollectingSink, TraceEvent, TraceSink};
/// let sink = CollectingSink::new();
/// sink.emit(TraceEvent::ScheduleDowngraded {
///     requested: "hardware(8)".into(),
///     effective: "sequential".into(),
///     reason: "no threads".into(),
/// });
/// assert_eq!(sink.events().len(), 1);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct CollectingSink {
    events: Mutex<Vec<TraceEvent>>,
}

impl CollectingSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<TraceEvent> {
        self.events.lock().clone()
    }

    /// Removes and returns the events so far.
    pub fn take(&self) -> Vec<TraceEvent> {
        core::mem::take(&mut *self.events.lock())
    }

    /// The `ScheduleRegion` events so far.
    pub fn regions(&self) -> Vec<TraceEvent> {
        self.events
            .lock()
            .iter()
            .filter(|e| matches!(e, TraceEvent::ScheduleRegion { .. }))
            .cloned()
            .collect()
    }
}

impl TraceSink for CollectingSink {
    fn emit(&self, event: TraceEvent) {
        self.events.lock().push(event);
    }
}
