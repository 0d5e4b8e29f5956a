#![cfg(not(feature = "loom"))]
//! The context seam of SPEC §3: schedule changes rebuild ops, refusals are reported once.

use std::sync::Arc;

use skainet_schedule::{
    refuse_schedule, ContextExt, ContextRef, ExecutionContext, OpsContext, Scheduled,
};
use skainet_schedule::{CollectingSink, Schedule, ScheduleRef, Sequential, TraceEvent};
use skainet_schedule::{OpsRef, TensorOps};

/// A schedule that only differs from `Sequential` by its name.
struct Named(&'static str, usize);

impl Schedule for Named {
    fn parallelism(&self) -> usize {
        self.1
    }
    fn name(&self) -> &str {
        self.0
    }
    fn for_range(&self, n: usize, _grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        if n > 0 {
            body(0, n);
        }
    }
}

fn named(name: &'static str, p: usize) -> ScheduleRef {
    Arc::new(Named(name, p))
}

/// Ops that can be rebuilt under any schedule.
struct Rebuildable(ScheduleRef);

impl TensorOps for Rebuildable {
    fn schedule(&self) -> &ScheduleRef {
        &self.0
    }
    fn with_schedule(&self, schedule: ScheduleRef) -> Option<OpsRef> {
        Some(Arc::new(Rebuildable(schedule)))
    }
}

/// Ops bound to one schedule for good.
struct Fixed(ScheduleRef);

impl TensorOps for Fixed {
    fn schedule(&self) -> &ScheduleRef {
        &self.0
    }
    fn with_schedule(&self, _schedule: ScheduleRef) -> Option<OpsRef> {
        None
    }
}

fn fixed_ctx(sink: &Arc<CollectingSink>) -> ContextRef {
    Arc::new(OpsContext::new(Arc::new(Fixed(Sequential::shared()))).with_sink(sink.clone()))
}

fn downgrade(requested: &str, effective: &str, reason: &str) -> TraceEvent {
    TraceEvent::ScheduleDowngraded {
        requested: requested.into(),
        effective: effective.into(),
        reason: reason.into(),
    }
}

const FIXED_REASON: &str = "ops bound to sequential cannot be rebuilt under another schedule";

#[test]
fn a_context_that_cannot_rebuild_keeps_its_schedule_and_reports_once() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = fixed_ctx(&sink);
    let after = ctx.clone().with_schedule(named("hardware(8)", 8));
    assert!(Arc::ptr_eq(&after, &ctx));
    assert_eq!(after.schedule().name(), "sequential");
    assert_eq!(
        sink.events(),
        vec![downgrade("hardware(8)", "sequential", FIXED_REASON)]
    );
}

#[test]
fn each_refused_request_is_reported_once() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = fixed_ctx(&sink);
    let ctx = ctx.with_schedule(named("hardware(8)", 8));
    let _ = ctx.with_schedule(named("dedicated(3)", 3));
    assert_eq!(
        sink.events(),
        vec![
            downgrade("hardware(8)", "sequential", FIXED_REASON),
            downgrade("dedicated(3)", "sequential", FIXED_REASON),
        ]
    );
}

#[test]
fn asking_for_the_schedule_it_already_has_is_silent() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = fixed_ctx(&sink);
    let same = ctx.clone().with_schedule(Sequential::shared());
    assert!(Arc::ptr_eq(&same, &ctx));
    assert_eq!(sink.events(), vec![]);
}

#[test]
fn refuse_schedule_is_the_shared_refusal_path() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = fixed_ctx(&sink);
    let kept = refuse_schedule(ctx.clone(), &Named("rayon(2)", 2), "no rayon here");
    assert!(Arc::ptr_eq(&kept, &ctx));
    let _ = refuse_schedule(ctx, &Sequential, "already sequential");
    assert_eq!(
        sink.events(),
        vec![downgrade("rayon(2)", "sequential", "no rayon here")]
    );
}

#[test]
fn a_rebuildable_context_returns_a_sibling_without_events() {
    let sink = Arc::new(CollectingSink::new());
    let ctx: ContextRef = Arc::new(
        OpsContext::new(Arc::new(Rebuildable(Sequential::shared()))).with_sink(sink.clone()),
    );
    let sibling = ctx.clone().with_schedule(named("dedicated(2)", 2));
    assert!(!Arc::ptr_eq(&sibling, &ctx));
    assert_eq!(sibling.schedule().name(), "dedicated(2)");
    assert_eq!(sibling.ops().schedule().name(), "dedicated(2)");
    assert_eq!(ctx.schedule().name(), "sequential");
    assert_eq!(sink.events(), vec![]);
}

#[test]
fn the_decorator_reports_the_requested_schedule_and_rebuilds_ops() {
    let base: ContextRef = Arc::new(OpsContext::new(Arc::new(Rebuildable(Sequential::shared()))));
    let decorated = Scheduled::new(base.clone(), named("hardware(4)", 4));
    assert_eq!(decorated.schedule().name(), "hardware(4)");
    assert_eq!(decorated.ops().schedule().name(), "hardware(4)");
    assert!(Arc::ptr_eq(decorated.base(), &base));
}

#[test]
fn the_decorator_over_fixed_ops_reports_the_downgrade_on_the_base_sink() {
    let sink = Arc::new(CollectingSink::new());
    let decorated = Scheduled::new(fixed_ctx(&sink), named("hardware(4)", 4));
    assert_eq!(decorated.schedule().name(), "hardware(4)");
    assert_eq!(decorated.ops().schedule().name(), "sequential");
    assert_eq!(
        sink.events(),
        vec![downgrade("hardware(4)", "sequential", FIXED_REASON)]
    );
}

#[test]
fn with_schedule_on_the_decorator_yields_a_sibling_over_the_same_base() {
    let base: ContextRef = Arc::new(OpsContext::new(Arc::new(Rebuildable(Sequential::shared()))));
    let decorated: Arc<Scheduled> = Arc::new(Scheduled::new(base.clone(), named("hardware(4)", 4)));
    let again: ContextRef = decorated.clone().with_schedule(named("hardware(4)", 4));
    assert_eq!(again.schedule().name(), "hardware(4)");
    let sibling = decorated.with_schedule(Sequential::shared());
    assert_eq!(sibling.schedule().name(), "sequential");
    assert_eq!(sibling.ops().schedule().name(), "sequential");
}

#[test]
fn run_under_scopes_the_schedule_and_leaves_the_context_alone() {
    let base: ContextRef = Arc::new(OpsContext::new(Arc::new(Rebuildable(Sequential::shared()))));
    let seen = base.run_under(named("dedicated(3)", 3), |ctx| {
        (
            ctx.schedule().name().to_string(),
            ctx.ops().schedule().parallelism(),
        )
    });
    assert_eq!(seen, ("dedicated(3)".to_string(), 3));
    assert_eq!(base.schedule().name(), "sequential");
}

#[test]
fn run_under_the_same_schedule_reuses_the_context() {
    let base: ContextRef = Arc::new(OpsContext::new(Arc::new(Rebuildable(Sequential::shared()))));
    let same = base.run_under(Sequential::shared(), |ctx| Arc::ptr_eq(ctx, &base));
    assert!(same);
}
