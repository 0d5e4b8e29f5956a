//! The context seam: where a schedule hangs, how it is changed, and how a refusal is reported.
//!
//! An [`ExecutionContext`] hands out its schedule, its ops (bound to that schedule) and its
//! trace sink. Changing the schedule rebuilds the ops; a context that cannot rebuild them keeps
//! its schedule and emits [`TraceEvent::ScheduleDowngraded`] — an unhonoured request is never
//! silent. Asking for the schedule a context already has is a silent no-op.

use alloc::format;
use alloc::string::{String, ToString};

use crate::kernels::{CpuOps, OpsRef, TensorOps};
use crate::schedule::{same_schedule, Schedule, ScheduleRef};
use crate::sync::Arc;
use crate::trace::{NoopSink, TraceEvent, TraceSink, TraceSinkRef};

/// A shareable handle to a context.
pub type ContextRef = Arc<dyn ExecutionContext>;

/// What an op needs from its surroundings: a schedule, ops bound to it, and a trace sink.
pub trait ExecutionContext: Send + Sync {
    /// The schedule ops of this context run under.
    fn schedule(&self) -> &ScheduleRef;

    /// The ops, bound to [`schedule`](ExecutionContext::schedule).
    fn ops(&self) -> &OpsRef;

    /// Where this context reports what it did and refused.
    fn trace_sink(&self) -> &TraceSinkRef;

    /// A context like this one under `schedule`.
    ///
    /// Returns `self` unchanged (and silently) when `schedule` is the one it already has; a
    /// context that cannot honour the request returns `self` and emits exactly one
    /// [`TraceEvent::ScheduleDowngraded`] (see [`refuse_schedule`]).
    fn with_schedule(self: Arc<Self>, schedule: ScheduleRef) -> ContextRef;
}

/// The refusal path every context shares: keeps `ctx` and reports the unhonoured request on its
/// sink, unless `requested` is the schedule it already has.
pub fn refuse_schedule(ctx: ContextRef, requested: &dyn Schedule, reason: &str) -> ContextRef {
    if !same_schedule(ctx.schedule().as_ref(), requested) {
        report_downgrade(
            ctx.trace_sink().as_ref(),
            requested,
            ctx.schedule().as_ref(),
            reason,
        );
    }
    ctx
}

fn report_downgrade(
    sink: &dyn TraceSink,
    requested: &dyn Schedule,
    effective: &dyn Schedule,
    reason: &str,
) {
    if sink.enabled() {
        sink.emit(TraceEvent::ScheduleDowngraded {
            requested: requested.name().to_string(),
            effective: effective.name().to_string(),
            reason: reason.to_string(),
        });
    }
}

fn cannot_rebuild(ops: &dyn TensorOps) -> String {
    format!(
        "ops bound to {} cannot be rebuilt under another schedule",
        ops.schedule().name()
    )
}

/// A context made of ops and a sink: `with_schedule` rebuilds the ops and returns a sibling,
/// or — if the ops cannot be rebuilt — keeps them and reports the downgrade.
///
/// ```
/// use std::sync::Arc;
/// use skainet_schedule::prelude::*;
/// use skainet_schedule::{OpsContext, OpsRef, ScheduleRef, Sequential, TensorOps};
/// # struct MyOps(ScheduleRef);
/// # impl TensorOps for MyOps {
/// #     fn schedule(&self) -> &ScheduleRef { &self.0 }
/// #     fn with_schedule(&self, s: ScheduleRef) -> Option<OpsRef> { Some(Arc::new(MyOps(s))) }
/// # }
/// let ctx = Arc::new(OpsContext::new(Arc::new(MyOps(Sequential::shared()))));
/// assert_eq!(ctx.schedule().name(), "sequential");
/// ```
#[derive(Clone)]
pub struct OpsContext {
    ops: OpsRef,
    sink: TraceSinkRef,
}

impl OpsContext {
    /// A context over `ops`, with the no-op sink.
    pub fn new(ops: OpsRef) -> Self {
        Self {
            ops,
            sink: NoopSink::shared(),
        }
    }

    /// The CPU context: this crate's [`CpuOps`] under `schedule`, with the no-op sink.
    ///
    /// It always honours [`with_schedule`](ExecutionContext::with_schedule): CPU ops rebuild
    /// under any schedule, so it returns a sibling with the same sink, never a downgrade.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use skainet_schedule::prelude::*;
    /// use skainet_schedule::{OpsContext, Sequential};
    /// let ctx = Arc::new(OpsContext::cpu(Sequential::shared()));
    /// assert_eq!(ctx.ops().schedule().name(), "sequential");
    /// ```
    pub fn cpu(schedule: ScheduleRef) -> Self {
        Self::new(CpuOps::shared(schedule))
    }

    /// The same context reporting to `sink`.
    pub fn with_sink(mut self, sink: TraceSinkRef) -> Self {
        self.sink = sink;
        self
    }
}

impl ExecutionContext for OpsContext {
    fn schedule(&self) -> &ScheduleRef {
        self.ops.schedule()
    }

    fn ops(&self) -> &OpsRef {
        &self.ops
    }

    fn trace_sink(&self) -> &TraceSinkRef {
        &self.sink
    }

    fn with_schedule(self: Arc<Self>, schedule: ScheduleRef) -> ContextRef {
        if same_schedule(self.schedule().as_ref(), schedule.as_ref()) {
            return self;
        }
        match self.ops.with_schedule(schedule.clone()) {
            Some(ops) => Arc::new(OpsContext {
                ops,
                sink: self.sink.clone(),
            }),
            None => {
                let reason = cannot_rebuild(self.ops.as_ref());
                refuse_schedule(self, schedule.as_ref(), &reason)
            }
        }
    }
}

/// A decorator: `base` with another schedule, delegating everything else.
///
/// It reports the requested schedule. Its ops are `base`'s rebuilt under that schedule; if
/// `base`'s ops cannot be rebuilt they are kept, and the construction emits one
/// [`TraceEvent::ScheduleDowngraded`] on `base`'s sink, so the request is not silently ignored.
pub struct Scheduled {
    base: ContextRef,
    schedule: ScheduleRef,
    ops: OpsRef,
}

impl Scheduled {
    /// Decorates `base` with `schedule`.
    pub fn new(base: ContextRef, schedule: ScheduleRef) -> Self {
        let base_ops = base.ops();
        let ops = if same_schedule(base_ops.schedule().as_ref(), schedule.as_ref()) {
            base_ops.clone()
        } else if let Some(rebuilt) = base_ops.with_schedule(schedule.clone()) {
            rebuilt
        } else {
            report_downgrade(
                base.trace_sink().as_ref(),
                schedule.as_ref(),
                base_ops.schedule().as_ref(),
                &cannot_rebuild(base_ops.as_ref()),
            );
            base_ops.clone()
        };
        Self {
            base,
            schedule,
            ops,
        }
    }

    /// The decorated context.
    pub fn base(&self) -> &ContextRef {
        &self.base
    }
}

impl ExecutionContext for Scheduled {
    fn schedule(&self) -> &ScheduleRef {
        &self.schedule
    }

    fn ops(&self) -> &OpsRef {
        &self.ops
    }

    fn trace_sink(&self) -> &TraceSinkRef {
        self.base.trace_sink()
    }

    fn with_schedule(self: Arc<Self>, schedule: ScheduleRef) -> ContextRef {
        if same_schedule(self.schedule.as_ref(), schedule.as_ref()) {
            return self;
        }
        // A sibling over the same base, not a decorator of a decorator.
        Arc::new(Scheduled::new(self.base.clone(), schedule))
    }
}

/// The scoped form of a schedule change.
pub trait ContextExt {
    /// Runs `f` with a context that is this one under `schedule`, and returns what `f`
    /// returns. Nothing outlives the call: the original context is untouched.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use skainet_schedule::prelude::*;
    /// use skainet_schedule::{
    ///     ContextRef, OpsContext, OpsRef, Schedule, ScheduleRef, Sequential, TensorOps,
    /// };
    /// # struct MyOps(ScheduleRef);
    /// # impl TensorOps for MyOps {
    /// #     fn schedule(&self) -> &ScheduleRef { &self.0 }
    /// #     fn with_schedule(&self, s: ScheduleRef) -> Option<OpsRef> { Some(Arc::new(MyOps(s))) }
    /// # }
    /// struct Named(&'static str);
    /// impl Schedule for Named {
    ///     fn parallelism(&self) -> usize { 1 }
    ///     fn name(&self) -> &str { self.0 }
    ///     fn for_range(&self, n: usize, _g: usize, body: &(dyn Fn(usize, usize) + Sync)) {
    ///         if n > 0 { body(0, n) }
    ///     }
    /// }
    /// let ctx: ContextRef = Arc::new(OpsContext::new(Arc::new(MyOps(Sequential::shared()))));
    /// let inside = ctx.run_under(Arc::new(Named("mine")), |ctx| ctx.ops().schedule().name().to_string());
    /// assert_eq!(inside, "mine");
    /// assert_eq!(ctx.schedule().name(), "sequential");
    /// ```
    fn run_under<R>(&self, schedule: ScheduleRef, f: impl FnOnce(&ContextRef) -> R) -> R;
}

impl ContextExt for ContextRef {
    fn run_under<R>(&self, schedule: ScheduleRef, f: impl FnOnce(&ContextRef) -> R) -> R {
        let scoped: ContextRef = if same_schedule(self.schedule().as_ref(), schedule.as_ref()) {
            self.clone()
        } else {
            Arc::new(Scheduled::new(self.clone(), schedule))
        };
        f(&scoped)
    }
}

impl Default for OpsContext {
    /// [`OpsContext::cpu`] under [`platform_default_schedule`].
    fn default() -> Self {
        Self::cpu(platform_default_schedule())
    }
}

/// The schedule a CPU context uses when none is given: the process-wide `hardware()` pool with
/// the `parallel` feature, [`Sequential`](crate::Sequential) otherwise.
///
/// This is the one place outside the runtime that names it: kernels take their schedule as an
/// argument and never reach for a pool on their own.
pub fn platform_default_schedule() -> ScheduleRef {
    #[cfg(feature = "parallel")]
    {
        crate::runtime::platform_default()
    }
    #[cfg(not(feature = "parallel"))]
    {
        crate::Sequential::shared()
    }
}
