//! `SKAINET_TASK_GROUPS=3` sizes `hardware()`. (Its own test binary: the variable is read once
//! per process.)
#![cfg(all(feature = "parallel", not(feature = "loom")))]

use skainet_schedule::Schedule;

#[test]
fn the_task_group_count_sizes_hardware() {
    // The only test in this process, so no other thread reads the environment meanwhile.
    std::env::set_var("SKAINET_TASK_GROUPS", "3");
    assert_eq!(skainet_schedule::hardware_parallelism(), Ok(3));
    let pool = skainet_schedule::hardware();
    assert_eq!(pool.name(), "hardware(3)");
    assert_eq!(pool.parallelism(), 3);
    assert_eq!(skainet_schedule::hardware_fallback(), None);
}
