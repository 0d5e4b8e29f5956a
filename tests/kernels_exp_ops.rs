#![cfg(not(feature = "loom"))]
//! The deterministic `exp` (accuracy against f64, special values), `parallel_chunks`, and the
//! ops and context that carry a schedule.

mod common;

use std::sync::Arc;

use common::{uniform, Order, OutOfOrder};
use skainet_schedule::prelude::*;
use skainet_schedule::{
    exp, parallel_chunks, platform_default_schedule, scaled_dot_product_attention, CollectingSink,
    CpuOps, DisjointError, KernelError, OpsContext, Schedule, ScheduleRef, SdpaOptions, Sequential,
    Work, EXP_MAX_ARG, EXP_MAX_REL_ERROR, EXP_MIN_ARG,
};

#[test]
fn exp_relative_error_is_bounded_over_the_whole_normal_range() {
    let steps = 2_000_000;
    let (lo, hi) = (f64::from(EXP_MIN_ARG), f64::from(EXP_MAX_ARG));
    let mut worst = 0.0f64;
    for i in 0..=steps {
        let x = (lo + (hi - lo) * i as f64 / steps as f64) as f32;
        let want = f64::from(x).exp();
        let got = f64::from(exp(x));
        worst = worst.max(((got - want) / want).abs());
    }
    println!("exp: max relative error {worst:e} over [{lo}, {hi}]");
    assert!(worst <= EXP_MAX_REL_ERROR, "max relative error {worst:e}");
}

#[test]
fn exp_relative_error_is_bounded_near_zero() {
    let mut worst = 0.0f64;
    for i in -100_000..=100_000 {
        let x = i as f32 * 1e-5;
        let want = f64::from(x).exp();
        worst = worst.max(((f64::from(exp(x)) - want) / want).abs());
    }
    assert!(worst <= EXP_MAX_REL_ERROR, "max relative error {worst:e}");
}

#[test]
fn exp_special_values() {
    assert_eq!(exp(0.0).to_bits(), 1.0f32.to_bits());
    assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0.0f32.to_bits());
    assert_eq!(exp(-100.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(89.0), f32::INFINITY);
    assert!(exp(f32::NAN).is_nan());
    assert!(exp(EXP_MAX_ARG).is_finite());
    assert!(exp(EXP_MIN_ARG) >= f32::MIN_POSITIVE);
}

#[test]
fn parallel_chunks_stays_inline_below_the_minimum_work() {
    let schedule = OutOfOrder::new(4, Order::Reversed);
    let mut out = vec![0u32; 12];
    let work = Work {
        total: 10,
        fork_from: 11,
    };
    parallel_chunks("test", &schedule, &mut out, 3, work, &|units, chunk| {
        assert_eq!(units, 0..4);
        chunk.fill(1);
        Ok(())
    })
    .unwrap();
    assert_eq!(schedule.regions(), 0);
    assert_eq!(out, vec![1; 12]);
}

#[test]
fn parallel_chunks_splits_units_at_or_above_the_minimum_work() {
    let schedule = OutOfOrder::new(2, Order::Shuffled(3));
    let mut out = vec![0usize; 8];
    let work = Work {
        total: 11,
        fork_from: 11,
    };
    parallel_chunks("test", &schedule, &mut out, 2, work, &|units, chunk| {
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = units.start * 2 + k;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(schedule.regions(), 1);
    assert_eq!(out, (0..8).collect::<Vec<_>>());
}

#[test]
fn parallel_chunks_reports_a_ragged_output() {
    let mut out = vec![0u8; 7];
    let work = Work {
        total: 0,
        fork_from: 0,
    };
    let err = parallel_chunks("test", &Sequential, &mut out, 2, work, &|_, _| Ok(())).unwrap_err();
    assert_eq!(
        err,
        KernelError::DisjointSplit(DisjointError::RaggedLength {
            len: 7,
            unit_len: 2
        })
    );
}

#[test]
fn cpu_ops_run_the_kernels_under_their_schedule() {
    let schedule: ScheduleRef = Arc::new(OutOfOrder::new(3, Order::Reversed));
    let ops = CpuOps::new(schedule.clone());
    let q = uniform(&[2, 8, 64, 64], 1);
    let k = uniform(&[2, 8, 128, 64], 2);
    let o = SdpaOptions {
        scale: None,
        causal: true,
    };
    let via_ops = ops.sdpa(&q, &k, &k, None, &o).unwrap();
    let direct = scaled_dot_product_attention(&q, &k, &k, None, &o, &Sequential).unwrap();
    assert_eq!(via_ops.to_bits(), direct.to_bits());
    assert_eq!(ops.schedule().name(), "reversed(3)");
}

#[test]
fn cpu_ops_with_schedule_returns_a_sibling_under_the_new_schedule() {
    let ops = CpuOps::new(Sequential::shared());
    let sibling = ops
        .with_schedule(Arc::new(OutOfOrder::new(2, Order::Reversed)))
        .unwrap();
    assert_eq!(sibling.schedule().name(), "reversed(2)");
    assert_eq!(ops.schedule().name(), "sequential");
    let same = ops.with_schedule(Sequential::shared()).unwrap();
    assert_eq!(same.schedule().name(), "sequential");
}

#[test]
fn the_default_context_runs_cpu_ops_under_the_platform_schedule() {
    let expected = platform_default_schedule().name().to_string();
    assert_eq!(OpsContext::default().schedule().name(), expected);
}

#[test]
fn cpu_context_honours_with_schedule_without_a_downgrade() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = Arc::new(OpsContext::cpu(Sequential::shared()).with_sink(sink.clone()));
    let next = ctx
        .clone()
        .with_schedule(Arc::new(OutOfOrder::new(2, Order::Reversed)));
    assert_eq!(next.schedule().name(), "reversed(2)");
    assert_eq!(next.ops().schedule().name(), "reversed(2)");
    assert!(sink.events().is_empty());
    // The sibling reports to the same sink.
    next.trace_sink()
        .emit(skainet_schedule::TraceEvent::ScheduleDowngraded {
            requested: "a".into(),
            effective: "b".into(),
            reason: "probe".into(),
        });
    assert_eq!(sink.events().len(), 1);
}

#[test]
fn cpu_context_asked_for_its_own_schedule_returns_itself() {
    let ctx = Arc::new(OpsContext::cpu(Sequential::shared()));
    let same = ctx.clone().with_schedule(Sequential::shared());
    assert!(std::ptr::addr_eq(Arc::as_ptr(&same), Arc::as_ptr(&ctx)));
}

#[test]
fn schedule_names_are_visible_through_dyn() {
    let s: &dyn Schedule = &Sequential;
    assert_eq!(format!("{s:?}"), "sequential");
}
