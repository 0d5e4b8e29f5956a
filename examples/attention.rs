//! Attention under `Sequential` and `hardware()`: the same bits, less time.
//!
//! `cargo run --release --features parallel --example attention [-- --full]`
//!
//! For each shape (batch 1, head_dim 64, causal) it runs scaled dot-product attention under
//! both schedules, keeps the best of a few runs, checks the outputs bit for bit, and prints a
//! table (both times, the speed-up, the tasks, bit identity); then one traced region. The
//! default set finishes in a few seconds; `--full` runs the whole benchmark grid (heads 8/32 ×
//! Sk 128/1024/4096 × Sq 1/64).

use std::sync::Arc;
use std::time::{Duration, Instant};

use skainet_schedule::hardware;
use skainet_schedule::Tensor;
use skainet_schedule::{scaled_dot_product_attention, SdpaOptions};
use skainet_schedule::{CollectingSink, Schedule, Sequential, TraceEvent};

const HEAD_DIM: usize = 64;

/// Deterministic values in [-1, 1).
fn tensor(shape: Vec<usize>, seed: u32) -> Tensor {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    Tensor::from_fn(shape, |_| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .expect("example shapes are small")
}

struct Inputs {
    q: Tensor,
    k: Tensor,
    v: Tensor,
}

impl Inputs {
    fn new(heads: usize, seq_kv: usize, seq_q: usize) -> Self {
        Self {
            q: tensor(vec![1, heads, seq_q, HEAD_DIM], 1),
            k: tensor(vec![1, heads, seq_kv, HEAD_DIM], 2),
            v: tensor(vec![1, heads, seq_kv, HEAD_DIM], 3),
        }
    }

    fn run(&self, schedule: &dyn Schedule) -> Tensor {
        let options = SdpaOptions {
            scale: None,
            causal: true,
        };
        scaled_dot_product_attention(&self.q, &self.k, &self.v, None, &options, schedule)
            .expect("valid shapes")
    }

    /// The output and the best wall time of a few runs (at least 3, for about 0.2 s).
    fn time(&self, schedule: &dyn Schedule) -> (Tensor, Duration) {
        let mut best = Duration::MAX;
        let started = Instant::now();
        let mut runs = 0;
        let mut out = None;
        while runs < 3 || (started.elapsed() < Duration::from_millis(200) && runs < 50) {
            let t = Instant::now();
            out = Some(self.run(schedule));
            best = best.min(t.elapsed());
            runs += 1;
        }
        (out.expect("ran at least once"), best)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let full = std::env::args().any(|a| a == "--full");
    let seq_kvs: &[usize] = if full {
        &[128, 1024, 4096]
    } else {
        &[128, 1024]
    };
    let hw = hardware();
    println!(
        "scaled dot-product attention, batch 1, head_dim {HEAD_DIM}, causal; sequential vs {}",
        hw.name()
    );
    println!(
        "{:>5} {:>6} {:>5} {:>14} {:>12} {:>9} {:>5} {:>13}",
        "heads",
        "seqKV",
        "seqQ",
        "sequential ms",
        "hardware ms",
        "speed-up",
        "tasks",
        "bit-identical"
    );
    for heads in [8, 32] {
        for &seq_kv in seq_kvs {
            for seq_q in [1, 64] {
                let inputs = Inputs::new(heads, seq_kv, seq_q);
                let (seq_out, seq_time) = inputs.time(&Sequential);
                let (hw_out, hw_time) = inputs.time(&hw);
                // How many tasks the region really had: 1 when the call stayed inline.
                let sink = Arc::new(CollectingSink::new());
                inputs.run(&hardware().with_trace(sink.clone()));
                let tasks = match sink.regions().first() {
                    Some(TraceEvent::ScheduleRegion { tasks, .. }) => *tasks,
                    _ => 1,
                };
                let same = seq_out.to_bits() == hw_out.to_bits();
                println!(
                    "{:>5} {:>6} {:>5} {:>14.3} {:>12.3} {:>8.2}x {:>5} {:>13}",
                    heads,
                    seq_kv,
                    seq_q,
                    ms(seq_time),
                    ms(hw_time),
                    seq_time.as_secs_f64() / hw_time.as_secs_f64(),
                    tasks,
                    if same { "yes" } else { "NO" }
                );
                assert!(same, "hardware() changed the result");
            }
        }
    }
    let sink = Arc::new(CollectingSink::new());
    Inputs::new(8, 1024, 64).run(&hardware().with_trace(sink.clone()));
    match sink.regions().first() {
        Some(event) => println!("trace: {event:?}"),
        None => {
            println!("trace: no region (hardware() has parallelism 1 here: the call ran inline)")
        }
    }
}
