//! What every bench shares: deterministic inputs and the list of schedules to compare.

use skainet_schedule::Tensor;
use skainet_schedule::{Schedule, Sequential};

/// Deterministic inputs in [-1, 1] (a 32-bit LCG; no dependency).
pub fn tensor(shape: Vec<usize>, seed: u32) -> Tensor {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    Tensor::from_fn(shape, |_| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .expect("bench shapes are small")
}

/// `Sequential`, plus `hardware()` with `parallel` and `RayonSchedule` with `rayon`.
pub fn schedules() -> Vec<(&'static str, Box<dyn Schedule>)> {
    #[allow(unused_mut)]
    let mut list: Vec<(&'static str, Box<dyn Schedule>)> =
        vec![("sequential", Box::new(Sequential))];
    #[cfg(feature = "parallel")]
    list.push(("hardware", Box::new(skainet_schedule::hardware())));
    #[cfg(feature = "rayon")]
    list.push(("rayon", Box::new(skainet_schedule::RayonSchedule::global())));
    list
}
