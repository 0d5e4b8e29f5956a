//! `SKAINET_TASK_GROUPS` set to an invalid value: reported, and `hardware()` falls back.
//! (Its own test binary: the variable is read once per process.)
#![cfg(all(feature = "parallel", not(feature = "loom")))]

use skainet_schedule::Schedule;
use skainet_schedule::ScheduleError;

#[test]
fn an_invalid_task_group_count_is_reported_and_hardware_falls_back() {
    // The only test in this process, so no other thread reads the environment meanwhile.
    std::env::set_var("SKAINET_TASK_GROUPS", "lots");
    let expected = ScheduleError::InvalidTaskGroups {
        value: "lots".into(),
    };
    assert_eq!(
        skainet_schedule::hardware_parallelism(),
        Err(expected.clone())
    );
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = skainet_schedule::hardware();
    assert_eq!(pool.parallelism(), available);
    assert_eq!(pool.name(), format!("hardware({available})"));
    assert_eq!(skainet_schedule::hardware_fallback(), Some(expected));
}
