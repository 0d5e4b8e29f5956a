#![cfg(not(feature = "loom"))]
//! `TracingSink`: trace events reach a `tracing` subscriber with the documented target, level and
//! fields, and the sink asks producers for nothing when no subscriber listens.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use skainet_schedule::TRACING_TARGET;
use skainet_schedule::{TraceEvent, TraceSink, TracingSink};
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::subscriber::{with_default, Interest};
use tracing::{Event, Level, Metadata, Subscriber};

/// One field as the subscriber saw it, typed the way `tracing` handed it over.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(String),
    U64(u64),
    Debug(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Recorded {
    target: String,
    level: Level,
    fields: Vec<(&'static str, Value)>,
}

struct Fields(Vec<(&'static str, Value)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), Value::Str(value.to_string())));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), Value::U64(value)));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name(), Value::Debug(format!("{value:?}"))));
    }
}

/// A subscriber that keeps every event it is interested in.
struct Capture {
    wants: fn(&Metadata<'_>) -> bool,
    events: Arc<Mutex<Vec<Recorded>>>,
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Ask per call: tests on other threads run other subscribers (or none) at the same time.
        Interest::sometimes()
    }
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        (self.wants)(metadata)
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.events.lock().unwrap().push(Recorded {
            target: event.metadata().target().to_string(),
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

/// Runs `f` under a subscriber that wants what `wants` says; returns what it recorded.
fn capture(wants: fn(&Metadata<'_>) -> bool, f: impl FnOnce()) -> Vec<Recorded> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Capture {
        wants,
        events: Arc::clone(&events),
    };
    with_default(subscriber, f);
    let recorded = events.lock().unwrap().clone();
    recorded
}

fn everything(_: &Metadata<'_>) -> bool {
    true
}

fn region(duration: Option<Duration>) -> TraceEvent {
    TraceEvent::ScheduleRegion {
        op: "sdpa".into(),
        schedule: "pool(4)".into(),
        elements: 4096,
        tasks: 4,
        duration,
    }
}

fn region_fields(duration_us: Option<u64>) -> Vec<(&'static str, Value)> {
    let mut fields = vec![
        ("message", Value::Debug("schedule region".into())),
        ("op", Value::Str("sdpa".into())),
        ("schedule", Value::Str("pool(4)".into())),
        ("elements", Value::U64(4096)),
        ("tasks", Value::U64(4)),
    ];
    if let Some(us) = duration_us {
        fields.push(("duration_us", Value::U64(us)));
    }
    fields
}

#[test]
fn region_is_a_debug_event_on_the_crate_target_with_every_field() {
    let recorded = capture(everything, || {
        TracingSink.emit(region(Some(Duration::from_micros(1500))))
    });
    assert_eq!(
        recorded,
        vec![Recorded {
            target: "skainet_schedule".into(),
            level: Level::DEBUG,
            fields: region_fields(Some(1500)),
        }]
    );
}

#[test]
fn region_duration_is_truncated_to_whole_microseconds() {
    let recorded = capture(everything, || {
        TracingSink.emit(region(Some(Duration::from_nanos(1_500_999))))
    });
    assert_eq!(recorded[0].fields, region_fields(Some(1500)));
}

#[test]
fn region_duration_saturates_at_u64_max_microseconds() {
    let recorded = capture(everything, || TracingSink.emit(region(Some(Duration::MAX))));
    assert_eq!(recorded[0].fields, region_fields(Some(u64::MAX)));
}

#[test]
fn region_without_a_duration_has_no_duration_field() {
    let recorded = capture(everything, || TracingSink.emit(region(None)));
    assert_eq!(recorded[0].fields, region_fields(None));
}

#[test]
fn downgrade_is_a_warn_event_with_requested_effective_and_reason() {
    let recorded = capture(everything, || {
        TracingSink.emit(TraceEvent::ScheduleDowngraded {
            requested: "hardware(8)".into(),
            effective: "sequential".into(),
            reason: "ops bound to sequential cannot be rebuilt".into(),
        })
    });
    assert_eq!(
        recorded,
        vec![Recorded {
            target: "skainet_schedule".into(),
            level: Level::WARN,
            fields: vec![
                ("message", Value::Debug("schedule downgraded".into())),
                ("requested", Value::Str("hardware(8)".into())),
                ("effective", Value::Str("sequential".into())),
                (
                    "reason",
                    Value::Str("ops bound to sequential cannot be rebuilt".into())
                ),
            ],
        }]
    );
}

#[test]
fn target_constant_is_the_crate_name() {
    assert_eq!(TRACING_TARGET, "skainet_schedule");
}

#[test]
fn enabled_is_false_without_a_subscriber() {
    assert!(!TracingSink.enabled());
}

#[test]
fn enabled_is_false_when_the_subscriber_ignores_the_target() {
    let mut enabled = None;
    capture(
        |m| m.target() != TRACING_TARGET,
        || enabled = Some(TracingSink.enabled()),
    );
    assert_eq!(enabled, Some(false));
}

#[test]
fn enabled_is_true_for_a_subscriber_that_wants_only_warnings() {
    let mut enabled = None;
    capture(
        |m| *m.level() <= Level::WARN,
        || enabled = Some(TracingSink.enabled()),
    );
    assert_eq!(enabled, Some(true));
}

#[test]
fn a_warnings_only_subscriber_gets_the_downgrade_and_not_the_region() {
    let recorded = capture(
        |m| *m.level() <= Level::WARN,
        || {
            TracingSink.emit(region(Some(Duration::from_micros(7))));
            TracingSink.emit(TraceEvent::ScheduleDowngraded {
                requested: "hardware(8)".into(),
                effective: "sequential".into(),
                reason: "no threads".into(),
            });
        },
    );
    let levels: Vec<Level> = recorded.iter().map(|r| r.level).collect();
    assert_eq!(levels, vec![Level::WARN]);
}
