//! How a threaded schedule runs one `for_range`: inline when it cannot or need not fork,
//! otherwise as a [`Region`], traced.

use alloc::string::ToString;

use super::nesting;
use super::region::{pieces, Body, Region, Wake};
use crate::schedule::Chunks;
use crate::sync::TrackedArc;
use crate::trace::{TraceEvent, TraceSinkRef};

/// What a schedule tells [`for_range`] about itself.
pub(crate) struct Forking<'a> {
    /// The schedule's name, for trace events.
    pub(crate) name: &'a str,
    /// The schedule's parallelism: how many chunks a region may have.
    pub(crate) parallelism: usize,
    /// Where forked regions are reported, if anywhere.
    pub(crate) trace: Option<&'a TraceSinkRef>,
}

/// Runs `body` over `[0, n)`: nothing when `n == 0`; inline as `body(0, n)` when there is one
/// task or the calling thread is already inside a region; otherwise as a region of
/// [`pieces`] whose `tasks - 1` helper jobs go to `offer` (and sleeping helpers are roused
/// through `wake` when that pays), emitting one `ScheduleRegion` event (with the task count)
/// when the sink is enabled. A panic
/// in a chunk is resumed here after every chunk has ended (and after the event).
pub(crate) fn for_range(
    schedule: Forking<'_>,
    op: &str,
    n: usize,
    grain: usize,
    body: &Body<'_>,
    offer: impl FnOnce(TrackedArc<Region>, usize),
    wake: &dyn Wake,
) {
    let chunks = Chunks::new(n, grain, schedule.parallelism);
    let tasks = chunks.len();
    match tasks {
        0 => return,
        1 => return body(0, n),
        _ => {}
    }
    if nesting::is_nested() {
        return body(0, n);
    }
    let sink = schedule.trace.filter(|sink| sink.enabled());
    let started = sink.map(|_| std::time::Instant::now());
    let outcome = Region::run(pieces(n, grain, tasks), tasks - 1, body, offer, wake);
    if let (Some(sink), Some(started)) = (sink, started) {
        sink.emit(TraceEvent::ScheduleRegion {
            op: op.to_string(),
            schedule: schedule.name.to_string(),
            elements: n,
            tasks,
            duration: Some(started.elapsed()),
        });
    }
    if let Err(payload) = outcome {
        std::panic::resume_unwind(payload);
    }
}
