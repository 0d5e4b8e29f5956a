//! What the pool costs when there is (almost) nothing to do: the CPU time the whole process
//! uses, as a percentage of one core, while `hardware()` is fully idle for 2 s, then while it
//! runs one tiny region (two units, grain 1, so it forks) every millisecond for 2 s, then one
//! region of 100 µs of work (enough to wake a helper, so workers block for a while after it)
//! every millisecond and every 10 ms; and the 1 ms stream again with the pool's block time set
//! to zero (`PoolSchedule::set_block_time`), where workers sleep after each region.
//!
//! `cargo run --release --features parallel --example idle_cpu`
//!
//! Linux only: CPU time is the sum over the process's threads of the nanoseconds in
//! `/proc/self/task/*/schedstat`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use skainet_schedule::Schedule;

/// Nanoseconds of CPU the process's threads have run so far.
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        eprintln!("idle_cpu: /proc/self/task is not readable (Linux only)");
        std::process::exit(2);
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Busy work for `d` of wall-clock time.
fn spin(d: Duration) {
    let started = Instant::now();
    while started.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// CPU percentage of one core that `f` uses over its wall-clock time.
fn measure(f: impl FnOnce()) -> f64 {
    let (cpu, wall) = (cpu_ns(), Instant::now());
    f();
    let (cpu, wall) = (cpu_ns() - cpu, wall.elapsed());
    100.0 * cpu as f64 / wall.as_nanos() as f64
}

/// Calls `region` once every `period` for `span`; returns how many calls it made.
fn every(period: Duration, span: Duration, mut region: impl FnMut()) -> u64 {
    let start = Instant::now();
    let mut next = start;
    let mut calls = 0;
    while start.elapsed() < span {
        region();
        calls += 1;
        next += period;
        if let Some(rest) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(rest);
        }
    }
    calls
}

fn main() {
    let pool = skainet_schedule::hardware();
    let span = Duration::from_secs(2);
    let (ms, ten_ms) = (Duration::from_millis(1), Duration::from_millis(10));
    let tiny = || {
        pool.for_range(2, 1, &|s, e| {
            black_box((s, e));
        })
    };
    // 100 µs of work in 100 units: worth waking a helper for.
    let large = || pool.for_range(100, 1, &|s, e| spin(Duration::from_micros((e - s) as u64)));
    // Starts the workers, then lets them settle into sleep.
    tiny();
    std::thread::sleep(Duration::from_millis(100));
    let idle = measure(|| std::thread::sleep(span));
    let mut regions = 0;
    let ticking = measure(|| regions = every(ms, span, tiny));
    // The same loops with nothing forked: the caller's own sleeping and timekeeping.
    let baseline = measure(|| {
        every(ms, span, || black_box(()));
    });
    let large_ms = measure(|| {
        every(ms, span, large);
    });
    std::thread::sleep(Duration::from_millis(100));
    let baseline_ten = measure(|| {
        every(ten_ms, span, || black_box(()));
    });
    let large_ten = measure(|| {
        every(ten_ms, span, large);
    });
    let block_time = pool.block_time();
    let passive_ms = pool.set_block_time(Duration::ZERO).map(|()| {
        measure(|| {
            every(ms, span, large);
        })
    });
    // `hardware()` is the process's pool: leave it as it was.
    let restored = pool.set_block_time(block_time);
    println!("pool: {}", pool.name());
    println!("fully idle, 2 s:                    {idle:.2} % of a core");
    println!("one tiny region every 1 ms, 2 s:    {ticking:.2} % of a core ({regions} regions)");
    println!("the same loop without regions:      {baseline:.2} % of a core");
    println!(
        "tiny regions' own cost:             {:.2} % of a core",
        ticking - baseline
    );
    println!(
        "one 100 µs region every 1 ms, 2 s:  {large_ms:.2} % of a core (the work alone: 10 %)"
    );
    println!(
        "one 100 µs region every 10 ms, 2 s: {large_ten:.2} % of a core (the work alone: 1 %; \
         the loop without regions: {baseline_ten:.2} %)"
    );
    println!(
        "  above the work and the loop:      {:.2} % of a core",
        large_ten - 1.0 - baseline_ten
    );
    match passive_ms.and_then(|passive| restored.map(|()| passive)) {
        Ok(passive) => println!(
            "one 100 µs region every 1 ms, block time 0, 2 s: {passive:.2} % of a core \
             (default block time {block_time:?}: {large_ms:.2} %)"
        ),
        Err(e) => println!("block time: {e}"),
    }
}
