//! `SKAINET_TASK_GROUPS` set far above `MAX_PARALLELISM`: reported, and `hardware()` falls
//! back instead of aborting on a huge allocation. (Its own test binary: the variable is read
//! once per process.)
#![cfg(all(feature = "parallel", not(feature = "loom")))]

use skainet_schedule::Schedule;
use skainet_schedule::{ScheduleError, MAX_PARALLELISM};

#[test]
fn a_huge_task_group_count_is_reported_and_hardware_falls_back() {
    // The only test in this process, so no other thread reads the environment meanwhile.
    std::env::set_var("SKAINET_TASK_GROUPS", "1000000000000");
    let expected = ScheduleError::TaskGroupsTooLarge {
        value: "1000000000000".into(),
    };
    assert_eq!(
        skainet_schedule::hardware_parallelism(),
        Err(expected.clone())
    );
    let available = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_PARALLELISM);
    let pool = skainet_schedule::hardware();
    assert_eq!(pool.parallelism(), available);
    assert_eq!(pool.name(), format!("hardware({available})"));
    assert_eq!(skainet_schedule::hardware_fallback(), Some(expected));
}
