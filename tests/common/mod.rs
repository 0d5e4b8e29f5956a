//! Shared helpers of the kernel tests: a schedule that runs chunks out of order on several
//! threads, deterministic inputs, and plain f64 references.
#![allow(dead_code)] // each test file uses its own subset

pub mod graph;
pub mod model_file;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use skainet_schedule::{
    scaled_dot_product_attention_with, KernelConfig, SdpaOptions, Tensor, TensorView,
};
use skainet_schedule::{Chunks, Schedule, TraceEvent, TraceSinkRef};
use skainet_schedule::{CpuKernels, KernelProvider};

/// Every compiled variant of the kernels this CPU can run (portable always among them).
pub fn available_variants() -> Vec<Arc<CpuKernels>> {
    skainet_schedule::cpu_kernels()
        .providers()
        .iter()
        .filter(|p| p.is_available())
        .cloned()
        .collect()
}

/// The order in which [`OutOfOrder`] hands out chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Last chunk first.
    Reversed,
    /// A fixed pseudo-random permutation (seeded).
    Shuffled(u64),
}

/// A schedule that cuts ranges exactly like every other one ([`Chunks`]) but runs them in
/// reverse or shuffled order, claimed by `threads` std threads at once; it emits
/// `ScheduleRegion` events when given a sink, like the threaded schedules.
pub struct OutOfOrder {
    threads: usize,
    order: Order,
    name: String,
    sink: Option<TraceSinkRef>,
    regions: AtomicUsize,
}

impl OutOfOrder {
    pub fn new(threads: usize, order: Order) -> Self {
        let name = match order {
            Order::Reversed => format!("reversed({threads})"),
            Order::Shuffled(seed) => format!("shuffled({threads}, {seed})"),
        };
        Self {
            threads,
            order,
            name,
            sink: None,
            regions: AtomicUsize::new(0),
        }
    }

    pub fn with_trace(mut self, sink: TraceSinkRef) -> Self {
        self.sink = Some(sink);
        self
    }

    /// How many regions really ran on more than one chunk.
    pub fn regions(&self) -> usize {
        self.regions.load(Ordering::Relaxed)
    }

    fn permutation(&self, count: usize) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..count).collect();
        match self.order {
            Order::Reversed => idx.reverse(),
            Order::Shuffled(seed) => {
                let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                for i in (1..count).rev() {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    idx.swap(i, (state >> 33) as usize % (i + 1));
                }
            }
        }
        idx
    }
}

impl Schedule for OutOfOrder {
    fn parallelism(&self) -> usize {
        self.threads
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        self.for_range_op("for_range", n, grain, body);
    }

    fn for_range_op(&self, op: &str, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        let chunks = Chunks::new(n, grain, self.threads);
        if chunks.is_empty() {
            return;
        }
        let order = self.permutation(chunks.len());
        let next = AtomicUsize::new(0);
        let panicked = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..self.threads.min(chunks.len()) {
                scope.spawn(|| loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&chunk) = order.get(at) else { break };
                    let range = chunks.get(chunk).expect("chunk index in range");
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        body(range.start, range.end)
                    }));
                    if let Err(payload) = run {
                        panicked.lock().unwrap().get_or_insert(payload);
                        break;
                    }
                });
            }
        });
        if let Some(payload) = panicked.into_inner().unwrap() {
            std::panic::resume_unwind(payload);
        }
        if chunks.len() > 1 {
            self.regions.fetch_add(1, Ordering::Relaxed);
            if let Some(sink) = &self.sink {
                sink.emit(TraceEvent::ScheduleRegion {
                    op: op.to_string(),
                    schedule: self.name.clone(),
                    elements: n,
                    tasks: chunks.len(),
                    duration: None,
                });
            }
        }
    }
}

/// The out-of-order schedules every parity test runs: reversed and two shuffles, 2 to 4 threads.
pub fn out_of_order_schedules() -> Vec<Arc<dyn Schedule>> {
    vec![
        Arc::new(OutOfOrder::new(3, Order::Reversed)),
        Arc::new(OutOfOrder::new(4, Order::Shuffled(7))),
        Arc::new(OutOfOrder::new(2, Order::Shuffled(1234))),
    ]
}

/// The real threaded schedules of the enabled features: `hardware()`, `dedicated(1..=4)`,
/// `RayonSchedule::global()`.
#[allow(unused_mut, clippy::vec_init_then_push)] // the pushes depend on the features
pub fn runtime_schedules() -> Vec<Arc<dyn Schedule>> {
    let mut list: Vec<Arc<dyn Schedule>> = Vec::new();
    #[cfg(feature = "parallel")]
    {
        list.push(Arc::new(skainet_schedule::hardware()));
        for p in 1..=4 {
            list.push(Arc::new(
                skainet_schedule::dedicated(p).expect("p >= 1 is valid"),
            ));
        }
    }
    #[cfg(feature = "rayon")]
    list.push(Arc::new(skainet_schedule::RayonSchedule::global()));
    list
}

/// Every schedule a parity test compares with `Sequential`.
pub fn all_schedules() -> Vec<Arc<dyn Schedule>> {
    let mut list = out_of_order_schedules();
    list.extend(runtime_schedules());
    list
}

/// Deterministic values in `[-1, 1)` (a 32-bit LCG), distinct per `seed`.
pub fn uniform(shape: &[usize], seed: u32) -> Tensor {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    Tensor::from_fn(shape.to_vec(), |_| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .expect("test shapes are small")
}

/// A mask with `-inf` at every position whose `(flat index * 7 + seed) % period == 0`, and
/// values in `[-1, 1)` elsewhere.
pub fn sparse_mask(shape: &[usize], seed: u32, period: usize) -> Tensor {
    let noise = uniform(shape, seed);
    Tensor::from_fn(shape.to_vec(), |i| {
        if (i * 7 + seed as usize).is_multiple_of(period) {
            f32::NEG_INFINITY
        } else {
            noise.data()[i]
        }
    })
    .expect("test shapes are small")
}

/// `k` `[b, nKV, S, hd]` with each K/V head repeated `heads / nKV` times: `[b, heads, S, hd]`.
pub fn tile_heads(k: &Tensor, heads: usize) -> Tensor {
    let [b, kv, s, hd] = *k.shape() else {
        panic!("rank 4")
    };
    let group = heads / kv;
    let mut data = Vec::with_capacity(b * heads * s * hd);
    for bi in 0..b {
        for h in 0..heads {
            let start = (bi * kv + h / group) * s * hd;
            data.extend_from_slice(&k.data()[start..start + s * hd]);
        }
    }
    Tensor::new(vec![b, heads, s, hd], data).expect("tiled shape")
}

/// Attention in f64, written plainly: per (batch, head, row) the scores of every key,
/// `-inf` for keys hidden by the bottom-right causal mask, the additive mask broadcast from its
/// trailing dimensions, a softmax (zeros for a row with no finite score) and the weighted sum.
pub fn reference_sdpa(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: Option<f32>,
    causal: bool,
) -> Vec<f64> {
    let [b, heads, sq, hd] = *q.shape() else {
        panic!("rank 4")
    };
    let [_, kv_heads, sk, _] = *k.shape() else {
        panic!("rank 4")
    };
    let scale = scale.map_or(1.0 / (hd as f64).sqrt(), f64::from);
    let mask_at = |bi: usize, h: usize, i: usize, j: usize| -> f64 {
        let Some(m) = mask else { return 0.0 };
        let shape = m.shape();
        let mut padded = vec![1usize; 4 - shape.len()];
        padded.extend_from_slice(shape);
        let idx = [bi, h, i, j];
        let mut flat = 0;
        for d in 0..4 {
            let at = if padded[d] == 1 { 0 } else { idx[d] };
            flat = flat * padded[d] + at;
        }
        f64::from(m.data()[flat])
    };
    let mut out = vec![0.0f64; b * heads * sq * hd];
    for bi in 0..b {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            for i in 0..sq {
                let mut scores = vec![f64::NEG_INFINITY; sk];
                for (j, score) in scores.iter_mut().enumerate() {
                    if causal && j + sq > i + sk {
                        continue;
                    }
                    let mut dot = 0.0f64;
                    for d in 0..hd {
                        let qv = q.data()[((bi * heads + h) * sq + i) * hd + d];
                        let kv = k.data()[((bi * kv_heads + kvh) * sk + j) * hd + d];
                        dot += f64::from(qv) * f64::from(kv);
                    }
                    *score = dot * scale + mask_at(bi, h, i, j);
                }
                let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if top == f64::NEG_INFINITY {
                    continue;
                }
                let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let total: f64 = weights.iter().sum();
                for d in 0..hd {
                    let mut acc = 0.0f64;
                    for (j, w) in weights.iter().enumerate() {
                        acc += w * f64::from(v.data()[((bi * kv_heads + kvh) * sk + j) * hd + d]);
                    }
                    out[((bi * heads + h) * sq + i) * hd + d] = acc / total;
                }
            }
        }
    }
    out
}

/// The largest `|a - b|`.
pub fn max_abs_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - y).abs())
        .fold(0.0, f64::max)
}

/// The attention operands of one call: `q`, `k`, `v`, the optional mask and the options.
pub struct SdpaCall<'a> {
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub mask: Option<TensorView<'a>>,
    pub options: SdpaOptions,
}

/// Asserts that `call` under `config` gives exactly the bits `want` on every schedule in
/// `schedules`; `what` names the case in the failure message, with the schedule.
pub fn assert_sdpa_bits_under(
    schedules: &[Arc<dyn Schedule>],
    config: &KernelConfig,
    call: &SdpaCall<'_>,
    want: &[u32],
    what: &str,
) {
    for s in schedules {
        let got = scaled_dot_product_attention_with(
            config,
            call.q,
            call.k,
            call.v,
            call.mask.clone(),
            &call.options,
            s.as_ref(),
        )
        .unwrap();
        assert_eq!(got.to_bits(), want, "{} {what}", s.name());
    }
}
