//! What the fuzz targets check, one function per target. The targets in `fuzz/fuzz_targets/`
//! and the regression test `tests/fuzz_regressions.rs` both include this file, so a crashing
//! input saved under `fuzz/regressions/<target>/` replays through exactly the same checks.
//!
//! Inputs are plain bytes read by [`Input`], a cursor that never fails (it reads zeros once the
//! bytes run out), so every byte string is a valid input and libFuzzer's mutations stay cheap.
// Each includer uses only some of the checks.
#![allow(dead_code)]

use std::sync::OnceLock;

use skainet_schedule::gguf::{self, Gguf, ValueType, MAX_ARRAY_DEPTH, MAX_DIMS};
use skainet_schedule::graph::{
    core_passes, npy, stablehlo, Attr, AttrMap, GraphBuilder, OpBuilder, ScheduleHint, Value,
    LAYOUT_KEY, SCHEDULE_KEY,
};
use skainet_schedule::prelude::*;
use skainet_schedule::shape::{self, element_count, MAX_ELEMENTS};
use skainet_schedule::{
    conv2d_with, cpu_kernels, dedicated, matmul_with, scaled_dot_product_attention_with,
    Conv2dOptions, KernelConfig, KernelError, PoolSchedule, Schedule, SdpaOptions, Sequential,
    Tensor,
};

/// The most elements the kernel target allocates over all operands of one call.
pub const MAX_KERNEL_ELEMENTS: usize = 4096;

/// The most output-value × tap visits one conv2d call of the kernel target may make.
pub const MAX_KERNEL_VISITS: usize = 1 << 24;

/// The most steps one graph input takes; a step adds at most 4 nodes, so a handle numbered
/// [`STRANGER`] from another builder is always foreign.
const MAX_GRAPH_OPS: usize = 48;
const STRANGER: usize = 4 * MAX_GRAPH_OPS;

/// A cursor over the fuzzer's bytes: reads past the end give zeros.
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&b, rest)) => {
                self.bytes = rest;
                b
            }
            None => 0,
        }
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| acc << 8 | u64::from(self.u8()))
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.u8()) % n
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A dimension: mostly small, sometimes at an edge of `usize` or of the element limit.
    pub fn dim(&mut self) -> usize {
        const EDGES: [usize; 14] = [
            1 << 16,
            1 << 20,
            1 << 31,
            1 << 32,
            (1 << 32) + 1,
            1 << 40,
            1 << 62,
            1 << 63,
            MAX_ELEMENTS,
            MAX_ELEMENTS + 1,
            isize::MAX as usize,
            usize::MAX - 1,
            usize::MAX,
            usize::MAX / 2 + 1,
        ];
        match self.u8() {
            t @ 0..=199 => usize::from(t % 9),
            t => EDGES[usize::from(t - 200) % EDGES.len()],
        }
    }

    /// A shape of rank `0..=max_rank`.
    pub fn shape(&mut self, max_rank: usize) -> Vec<usize> {
        let rank = self.below(max_rank + 1);
        (0..rank).map(|_| self.dim()).collect()
    }

    /// An f32: mostly small exact values, sometimes a special one.
    pub fn f32(&mut self) -> f32 {
        const SPECIAL: [f32; 8] = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            1.0e-40,
            0.0,
        ];
        match self.u8() {
            t @ 0..=239 => (f32::from(t) - 120.0) / 16.0,
            t => SPECIAL[usize::from(t - 240) % SPECIAL.len()],
        }
    }

    /// `len` values from a seed read here: a few bytes describe a tensor of any size.
    pub fn values(&mut self, len: usize) -> Vec<f32> {
        let mut state = self.u64() | 1;
        (0..len)
            .map(|_| {
                // xorshift64: deterministic, cheap, no dependency.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                match state % 64 {
                    0 => f32::NEG_INFINITY,
                    1 => f32::INFINITY,
                    2 => f32::from_bits(0x7fc0_0000 | (state >> 40) as u32 & 0x3f_ffff),
                    3 => -0.0,
                    _ => ((state >> 32) as i16 as f32) / 1024.0,
                }
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// npy_read

/// Any bytes: the reader returns `Ok` or `Err`, never panics. A decoded tensor holds no more
/// than the input could carry (4 bytes per value, at least a byte per dimension), and writing
/// it and reading it back gives the same shape and the same bits.
pub fn check_npy_read(data: &[u8]) {
    let tensor = match npy::from_bytes(data) {
        Ok(t) => t,
        Err(e) => {
            // Every error must format (messages quote the header).
            let _ = e.to_string();
            return;
        }
    };
    assert!(
        tensor.len().checked_mul(4).is_some_and(|n| n <= data.len()),
        "{} values decoded from {} bytes",
        tensor.len(),
        data.len()
    );
    assert!(
        tensor.rank() <= data.len(),
        "rank {} decoded from {} bytes",
        tensor.rank(),
        data.len()
    );
    assert_eq!(element_count(tensor.shape()), Some(tensor.len()));
    let bytes = npy::to_bytes(&tensor);
    let back = npy::from_bytes(&bytes)
        .unwrap_or_else(|e| panic!("re-reading a written tensor {:?}: {e}", tensor.shape()));
    assert_eq!(
        back.shape(),
        tensor.shape(),
        "shape changed on a round trip"
    );
    assert_eq!(
        back.to_bits(),
        tensor.to_bits(),
        "bits changed on a round trip"
    );
    assert_eq!(npy::to_bytes(&back), bytes, "writing is not deterministic");
}

// ---------------------------------------------------------------------------------------------
// gguf_parse

/// Any bytes: the GGUF reader returns `Ok` or `Err`, never panics, and every error formats. A
/// parsed file's tables agree with its bytes and with themselves: no more entries than the
/// input could encode, every tensor's data is the input's bytes at `data_offset + offset`,
/// aligned, of the size its type and dimensions give, and apart from every other tensor's;
/// every key and name is found again by lookup; every array yields exactly its length, and
/// `get`, the typed views and the typed accessors agree with its elements.
pub fn check_gguf_parse(data: &[u8]) {
    let file = match Gguf::parse(data) {
        Ok(g) => g,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!(matches!(file.version(), 2 | 3));
    assert!(file.alignment().is_power_of_two());
    assert!(file.data_offset() <= data.len());
    // At least 13 bytes an entry, 24 a tensor info, after a 24-byte header.
    let tables = 24 + 13 * file.metadata().len() + 24 * file.tensors().len();
    assert!(tables <= data.len(), "{} bytes hold {file:?}", data.len());

    for (key, value) in file.metadata() {
        assert!(!key.is_empty());
        // The very entry (by address: a NaN value is not equal to itself).
        let found = file.get(key).unwrap_or_else(|| panic!("lookup of {key:?}"));
        assert!(std::ptr::eq(found, value), "lookup of {key:?}");
        check_gguf_value(&file, key, value, data, 0);
    }

    let base = data.as_ptr() as usize;
    let mut spans = Vec::new();
    for tensor in file.tensors() {
        let name = tensor.name();
        assert_eq!(file.get_tensor(name), Some(tensor), "lookup of {name:?}");
        assert!(tensor.dims().len() <= MAX_DIMS);
        let elements = tensor.dims().iter().product::<usize>();
        assert_eq!(tensor.element_count(), elements);
        assert_eq!(tensor.row_len() * tensor.rows(), elements);
        assert_eq!(
            tensor.ty().row_bytes(elements),
            Some(tensor.byte_len()),
            "{name}"
        );
        assert_eq!(tensor.offset() % file.alignment() as u64, 0, "{name}");
        let start = tensor.data().as_ptr() as usize - base;
        assert_eq!(
            start as u64,
            file.data_offset() as u64 + tensor.offset(),
            "{name}"
        );
        assert!(start + tensor.byte_len() <= data.len(), "{name}");
        if tensor.byte_len() > 0 {
            spans.push((start, start + tensor.byte_len()));
        }
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "tensor data overlaps: {pair:?}");
    }
}

/// Equal values, floats compared by their bits (a NaN read twice is the same NaN).
fn same_gguf_value(a: &gguf::Value<'_>, b: &gguf::Value<'_>) -> bool {
    match (a, b) {
        (gguf::Value::F32(x), gguf::Value::F32(y)) => x.to_bits() == y.to_bits(),
        (gguf::Value::F64(x), gguf::Value::F64(y)) => x.to_bits() == y.to_bits(),
        (gguf::Value::Array(x), gguf::Value::Array(y)) => {
            x.element_type() == y.element_type() && x.len() == y.len() && x.bytes() == y.bytes()
        }
        _ => a == b,
    }
}

fn check_gguf_value(
    file: &Gguf<'_>,
    key: &str,
    value: &gguf::Value<'_>,
    data: &[u8],
    depth: usize,
) {
    assert!(depth <= MAX_ARRAY_DEPTH);
    if depth == 0 {
        // The typed accessor of the value's own type agrees; another type's is an error.
        match *value {
            gguf::Value::U32(v) => assert_eq!(file.get_u32(key).unwrap(), v),
            gguf::Value::F32(v) => assert_eq!(file.get_f32(key).unwrap().to_bits(), v.to_bits()),
            gguf::Value::String(s) => assert_eq!(file.get_str(key).unwrap(), s),
            _ => assert!(file.get_u32(key).is_err()),
        }
    }
    let gguf::Value::Array(array) = value else {
        return;
    };
    let bytes = array.bytes();
    let offset = bytes.as_ptr() as usize - data.as_ptr() as usize;
    assert!(offset + bytes.len() <= data.len());
    let min = match array.element_type() {
        ValueType::String => 8,
        ValueType::Array => 12,
        ty => ty.fixed_len().unwrap(),
    };
    assert!(array.len() * min <= bytes.len(), "{key}: {array:?}");
    let elements: Vec<gguf::Value<'_>> = array.iter().collect();
    assert_eq!(elements.len(), array.len(), "{key}");
    for (i, element) in elements.iter().enumerate() {
        assert_eq!(element.ty(), array.element_type(), "{key}[{i}]");
        check_gguf_value(file, key, element, data, depth + 1);
    }
    // Spot checks: the ends and the middle, through `get` and the typed views.
    for i in [0, array.len() / 2, array.len().wrapping_sub(1)] {
        let (got, want) = (array.get(i), elements.get(i).copied());
        let same = match (got, want) {
            (Some(a), Some(b)) => same_gguf_value(&a, &b),
            (a, b) => a.is_none() && b.is_none(),
        };
        assert!(same, "{key}.get({i}): {got:?}, iteration gave {want:?}");
    }
    assert_eq!(array.get(array.len()), None);
    if let Some(strings) = array.strings() {
        assert!(strings
            .zip(&elements)
            .all(|(s, e)| gguf::Value::String(s) == *e));
    }
    if let Some(floats) = array.scalars::<f32>() {
        assert_eq!(floats.len(), array.len());
        assert!(floats
            .zip(&elements)
            .all(|(f, e)| matches!(e, gguf::Value::F32(g) if g.to_bits() == f.to_bits())));
    }
    if let Some(ints) = array.scalars::<i32>() {
        assert!(ints.zip(&elements).all(|(v, e)| gguf::Value::I32(v) == *e));
    }
    if depth == 0 {
        assert_eq!(file.get_array(key).unwrap(), *array);
    }
}

// ---------------------------------------------------------------------------------------------
// graph_export

const IDS: [&str; 14] = [
    "x",
    "y",
    "attn",
    "matmul_0",
    "add_1",
    "",
    " ",
    "0a",
    "a b",
    "q\"\\",
    "\n\u{7f}",
    "layer.0_attn$",
    "ü",
    "{}",
];

const DIM_NAMES: [&str; 13] = [
    "batch",
    "heads",
    "rows",
    "out_channels",
    "Rows",
    "OUT-CHANNELS",
    "b a t c h",
    "x",
    " ",
    "",
    "kv_heads",
    "q\"\\\n",
    "é",
];

fn id(input: &mut Input<'_>) -> String {
    match input.u8() {
        t @ 0..=199 => IDS[usize::from(t) % IDS.len()].to_string(),
        t => format!("n{t}"),
    }
}

fn hint(input: &mut Input<'_>) -> Option<ScheduleHint> {
    let count = input.below(4);
    let dims: Vec<&str> = (0..count).map(|_| input.pick(&DIM_NAMES)).collect();
    let parallelism = input.pick(&[None, None, Some(0), Some(1), Some(8), Some(usize::MAX)]);
    let hint = ScheduleHint::new(dims, parallelism);
    if let Err(e) = &hint {
        let _ = e.to_string();
    }
    hint.ok()
}

fn attr(input: &mut Input<'_>, depth: usize) -> Attr {
    match input.below(if depth == 0 { 4 } else { 6 }) {
        0 => Attr::Bool(input.bool()),
        1 => Attr::Int(input.pick(&[0, 1, -1, 8, i64::MIN, i64::MAX])),
        2 => Attr::Float(f64::from(input.f32())),
        3 => Attr::Str(
            input
                .pick(&["NHSD", "NCHW", "", "\"", "parallel_dims"])
                .into(),
        ),
        4 => Attr::List(
            (0..input.below(3))
                .map(|_| attr(input, depth - 1))
                .collect(),
        ),
        _ => {
            let mut map = AttrMap::new();
            for _ in 0..input.below(3) {
                let key = input.pick(&["parallel_dims", "parallelism", "tile"]);
                map.insert(key.into(), attr(input, depth - 1));
            }
            Attr::Map(map)
        }
    }
}

fn metadata_key(input: &mut Input<'_>) -> &'static str {
    input.pick(&[SCHEDULE_KEY, LAYOUT_KEY, "note"])
}

/// An operand: one of the values built so far, or (byte 255, or none built yet) a handle from
/// another builder that this one does not know.
fn operand(input: &mut Input<'_>, values: &[Value], stranger: Value) -> Value {
    match input.u8() {
        255 => stranger,
        _ if values.is_empty() => stranger,
        t => values[usize::from(t) % values.len()],
    }
}

/// Adds one op read from `input` (or a scoped block around one) to `b`.
fn graph_op(
    b: &mut GraphBuilder,
    input: &mut Input<'_>,
    values: &mut Vec<Value>,
    stranger: Value,
    depth: usize,
) {
    let tag = input.below(14);
    if tag >= 11 {
        // A template: inputs whose shapes fit an op (before one perturbation), then the op on
        // them, so that deep graphs are common rather than rare.
        let mut shapes = match tag {
            11 => {
                let [b, h, kv, sq, sk, hd] = [0; 6].map(|_| input.dim());
                let h = h.saturating_mul(kv);
                vec![vec![b, h, sq, hd], vec![b, kv, sk, hd], vec![b, kv, sk, hd]]
            }
            12 => {
                let [m, k, n] = [0; 3].map(|_| input.dim());
                vec![vec![m, k], vec![k, n]]
            }
            _ => {
                let [n, c, h, w, o, kh, kw] = [0; 7].map(|_| input.dim());
                vec![vec![n, c, h, w], vec![o, c, kh, kw]]
            }
        };
        perturb(input, &mut shapes);
        let first = values.len();
        for (i, s) in shapes.into_iter().enumerate() {
            match b.input(&format!("in{first}_{i}"), s) {
                Ok(v) => values.push(v),
                Err(e) => drop(e.to_string()),
            }
        }
        let Some(ops) = values.get(first..).filter(|v| v.len() >= 2) else {
            return;
        };
        let ops = ops.to_vec();
        let op = match tag {
            11 => {
                let options = SdpaOptions {
                    scale: None,
                    causal: input.bool(),
                };
                b.sdpa(ops[0], ops[1], ops[ops.len() - 1], None, options)
            }
            12 => b.matmul(ops[0], ops[1]),
            _ => {
                let options = Conv2dOptions {
                    stride: [1 + input.below(3), 1 + input.below(3)],
                    padding: [input.below(3), input.below(3)],
                };
                b.conv2d(ops[0], ops[1], None, options)
            }
        };
        finish_op(op, input, values);
        return;
    }
    if tag == 0 {
        let name = id(input);
        let shape = input.shape(5);
        match b.input(&name, shape) {
            Ok(v) => values.push(v),
            Err(e) => drop(e.to_string()),
        }
        return;
    }
    if tag == 9 {
        let v = operand(input, values, stranger);
        if let Err(e) = b.output(v) {
            let _ = e.to_string();
        }
        return;
    }
    if tag == 10 {
        if let Some(h) = hint(input) {
            if depth < 3 {
                b.schedule(h, |b| graph_op(b, input, values, stranger, depth + 1));
            }
        }
        return;
    }
    let mut x = || operand(input, values, stranger);
    let (a, c, d) = (x(), x(), x());
    let op = match tag {
        1 => {
            let mask = input.bool().then(|| operand(input, values, stranger));
            let options = SdpaOptions {
                scale: input.bool().then(|| input.f32()),
                causal: input.bool(),
            };
            b.sdpa(a, c, d, mask, options)
        }
        2 => b.matmul(a, c),
        3 => {
            let bias = input.bool().then(|| operand(input, values, stranger));
            let options = Conv2dOptions {
                stride: [input.dim(), input.dim()],
                padding: [input.dim(), input.dim()],
            };
            b.conv2d(a, c, bias, options)
        }
        4 => b.add(a, c),
        5 => b.sub(a, c),
        6 => b.mul(a, c),
        7 => {
            let shape = input.shape(5);
            b.reshape(a, shape)
        }
        _ => {
            let len = input.below(7);
            let permutation: Vec<usize> = (0..len).map(|_| input.below(7)).collect();
            b.transpose(a, permutation)
        }
    };
    finish_op(op, input, values);
}

/// Names, hints and annotates `op` as `input` says, then adds it.
fn finish_op(mut op: OpBuilder<'_>, input: &mut Input<'_>, values: &mut Vec<Value>) {
    let flags = input.u8();
    if flags & 1 != 0 {
        op = op.id(id(input));
    }
    if flags & 2 != 0 {
        if let Some(h) = hint(input) {
            op = op.schedule(h);
        }
    }
    if flags & 4 != 0 {
        op = op.meta(metadata_key(input), attr(input, 2));
    }
    match op.finish() {
        Ok(v) => values.push(v),
        Err(e) => drop(e.to_string()),
    }
}

/// A random sequence of builder calls: building never panics; a built graph goes through
/// `core_passes` (twice: the second run changes nothing) and exports a module.
pub fn check_graph_export(data: &[u8]) {
    let mut input = Input::new(data);
    let mut other = GraphBuilder::new();
    let mut stranger = None;
    for i in 0..=STRANGER {
        stranger = other.input(&format!("s{i}"), [1]).ok();
    }
    let stranger = stranger.expect("a fresh builder takes distinct names");

    let mut b = GraphBuilder::new();
    let mut values = Vec::new();
    for _ in 0..MAX_GRAPH_OPS {
        if input.is_empty() {
            break;
        }
        graph_op(&mut b, &mut input, &mut values, stranger, 0);
    }
    let mut graph = match b.build() {
        Ok(g) => g,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    // Metadata written by hand before the passes: they must cope with whatever is there.
    for _ in 0..input.below(4) {
        let v = operand(&mut input, &values, stranger);
        let key = metadata_key(&mut input);
        let value = attr(&mut input, 2);
        if let Some(meta) = graph.metadata_mut(v) {
            meta.insert(key.into(), value);
        }
    }

    let diagnostics = core_passes(&mut graph);
    for d in &diagnostics {
        let _ = d.to_string();
    }
    let once = format!("{graph:?}");
    let again = core_passes(&mut graph);
    assert_eq!(
        format!("{graph:?}"),
        once,
        "core_passes changed the graph twice"
    );
    assert_eq!(again, diagnostics, "core_passes reported differently twice");

    let mlir = stablehlo::export(&graph);
    assert!(
        mlir.starts_with("module"),
        "export starts {:?}",
        &mlir[..mlir.len().min(40)]
    );
    assert!(mlir.ends_with("  }\n}\n"), "export is not closed");
}

// ---------------------------------------------------------------------------------------------
// kernel_shapes

/// The one 2-thread pool every call compares against.
fn pool() -> &'static PoolSchedule {
    static POOL: OnceLock<PoolSchedule> = OnceLock::new();
    POOL.get_or_init(|| dedicated(2).expect("a 2-thread pool starts"))
}

/// With probability about 1/4, one dim of `shapes` replaced by a fresh one (or a rank changed).
fn perturb(input: &mut Input<'_>, shapes: &mut [Vec<usize>]) {
    match input.u8() {
        0..=191 => {}
        192..=239 => {
            let s = input.below(shapes.len());
            if !shapes[s].is_empty() {
                let at = input.below(shapes[s].len());
                shapes[s][at] = input.dim();
            }
        }
        _ => {
            let s = input.below(shapes.len());
            if input.bool() {
                shapes[s].pop();
            } else {
                shapes[s].push(input.dim());
            }
        }
    }
}

/// Tensors of `shapes` when they exist and all of them together, with the output the shape
/// rule accepted (if any), hold at most [`MAX_KERNEL_ELEMENTS`] values: a valid output of
/// 2^40 values from empty operands is a real allocation, not a finding.
fn tensors(
    input: &mut Input<'_>,
    shapes: &[Vec<usize>],
    out: &Result<Vec<usize>, skainet_schedule::ShapeError>,
) -> Option<Vec<Tensor>> {
    let mut total = match out {
        Ok(s) => element_count(s).expect("asserted by the caller"),
        Err(_) => 0,
    };
    for s in shapes {
        match element_count(s) {
            Some(n) => total = total.saturating_add(n),
            None => {
                // A shape without an element count is never a tensor.
                assert!(
                    Tensor::new(s.clone(), Vec::new()).is_err(),
                    "tensor of {s:?}"
                );
                assert!(Tensor::zeros(s.clone()).is_err(), "zeros of {s:?}");
                return None;
            }
        }
    }
    if total > MAX_KERNEL_ELEMENTS {
        return None;
    }
    Some(
        shapes
            .iter()
            .map(|s| {
                let n = element_count(s).expect("counted above");
                Tensor::new(s.clone(), input.values(n)).expect("data of the counted length")
            })
            .collect(),
    )
}

/// The configurations a call is compared under: the selected variant and every other available
/// one under `Sequential`, and the selected one on the pool with a region for any size.
fn same_under_every_schedule(
    shape_ok: Result<Vec<usize>, skainet_schedule::ShapeError>,
    run: &dyn Fn(&KernelConfig, &dyn Schedule) -> Result<Tensor, KernelError>,
) {
    let reference = run(&KernelConfig::selected(), &Sequential);
    match (&reference, &shape_ok) {
        (Ok(t), Ok(shape)) => assert_eq!(t.shape(), shape.as_slice(), "kernel and shape rule"),
        (Err(KernelError::Shape(e)), Err(s)) => assert_eq!(e, s, "kernel and shape rule"),
        (r, s) => panic!("kernel gave {r:?}, its shape rule {s:?}"),
    }
    let bits =
        |r: &Result<Tensor, KernelError>| r.as_ref().map(|t| t.to_bits()).map_err(Clone::clone);
    // A NaN is compared as "a NaN": Rust leaves an arithmetic NaN's sign and payload
    // unspecified, so the crate promises the same bits for every value but a NaN's payload
    // (features.md, "Proof that runs in CI"); which NaN input's payload an addition keeps may
    // follow the code path a tile takes. Every other value must match to the bit.
    let nan_as_one = |r: Result<Vec<u32>, KernelError>| {
        r.map(|v| {
            v.into_iter()
                .map(|b| {
                    if f32::from_bits(b).is_nan() {
                        0x7fc0_0000
                    } else {
                        b
                    }
                })
                .collect::<Vec<u32>>()
        })
    };
    let expected = nan_as_one(bits(&reference));
    let forking = KernelConfig::selected().with_min_parallel_work(0);
    assert_eq!(
        nan_as_one(bits(&run(&forking, pool()))),
        expected,
        "dedicated(2) differs from Sequential"
    );
    for variant in cpu_kernels().providers().iter() {
        if variant.is_available() {
            let config = KernelConfig::new(variant.clone());
            assert_eq!(
                nan_as_one(bits(&run(&config, &Sequential))),
                expected,
                "variant {} differs",
                variant.name()
            );
        }
    }
}

fn check_sdpa(input: &mut Input<'_>) {
    let [b, h, kv, sq, sk, hd] = [0; 6].map(|_| input.dim());
    let h = if input.bool() {
        h.saturating_mul(kv)
    } else {
        h
    };
    let mask = match input.below(6) {
        0 => Some(vec![sq, sk]),
        1 => Some(vec![b, 1, sq, sk]),
        2 => Some(vec![1, h, 1, sk]),
        3 => Some(vec![b, h, sq, sk]),
        4 => Some(input.shape(5)),
        _ => None,
    };
    let mut shapes = vec![vec![b, h, sq, hd], vec![b, kv, sk, hd], vec![b, kv, sk, hd]];
    shapes.extend(mask);
    perturb(input, &mut shapes);
    let options = SdpaOptions {
        scale: input.bool().then(|| input.f32()),
        causal: input.bool(),
    };
    let mask_shape = shapes.get(3).map(Vec::as_slice);
    let dims = shape::sdpa(
        &shapes[0],
        &shapes[1],
        &shapes[2],
        mask_shape,
        options.causal,
    );
    let out = dims.map(|d| d.output_shape());
    if let Ok(s) = &out {
        assert!(element_count(s).is_some(), "sdpa accepted an output {s:?}");
    }
    let Some(t) = tensors(input, &shapes, &out) else {
        return;
    };
    same_under_every_schedule(out, &|config, schedule| {
        scaled_dot_product_attention_with(
            config,
            &t[0],
            &t[1],
            &t[2],
            t.get(3).map(Tensor::view),
            &options,
            schedule,
        )
    });
}

fn check_matmul(input: &mut Input<'_>) {
    let [m, k, n] = [0; 3].map(|_| input.dim());
    let mut a = input.shape(2);
    a.extend([m, k]);
    let mut shapes = vec![a, vec![k, n]];
    perturb(input, &mut shapes);
    let out = shape::matmul(&shapes[0], &shapes[1]).map(|d| d.output_shape);
    if let Ok(s) = &out {
        assert!(
            element_count(s).is_some(),
            "matmul accepted an output {s:?}"
        );
    }
    let Some(t) = tensors(input, &shapes, &out) else {
        return;
    };
    same_under_every_schedule(out, &|config, schedule| {
        matmul_with(config, &t[0], &t[1], schedule)
    });
}

fn check_conv2d(input: &mut Input<'_>) {
    let [n, c, h, w, o, kh, kw] = [0; 7].map(|_| input.dim());
    let mut shapes = vec![vec![n, c, h, w], vec![o, c, kh, kw]];
    if input.bool() {
        shapes.push(vec![o]);
    }
    perturb(input, &mut shapes);
    let options = Conv2dOptions {
        stride: [input.dim(), input.dim()],
        padding: [input.dim(), input.dim()],
    };
    let bias = shapes.get(2).map(Vec::as_slice);
    let dims = shape::conv2d(
        &shapes[0],
        &shapes[1],
        bias,
        options.stride,
        options.padding,
    );
    let out = dims.map(|d| d.output_shape());
    if let Ok(s) = &out {
        assert!(
            element_count(s).is_some(),
            "conv2d accepted an output {s:?}"
        );
    }
    // The loops visit C·kH·kW taps per output value even where kW or kH is 0 (the window is
    // empty, the work estimate 0): bound that too, or a 4096-value output of 2^16 channels is a
    // slow input rather than a finding.
    if let Ok(o) = &out {
        let w = &shapes[1];
        let visits = [
            element_count(o).unwrap_or(0),
            w[1],
            w[2].max(1),
            w[3].max(1),
        ]
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if visits.is_none_or(|v| v > MAX_KERNEL_VISITS) {
            return;
        }
    }
    let Some(t) = tensors(input, &shapes, &out) else {
        return;
    };
    same_under_every_schedule(out, &|config, schedule| {
        conv2d_with(config, &t[0], &t[1], t.get(2), &options, schedule)
    });
}

/// The shape rules on their own: never a panic, and every accepted result has an element count.
fn check_shape_rules(input: &mut Input<'_>) {
    let a = input.shape(6);
    let b = input.shape(6);
    if let Ok(s) = shape::elementwise("add", &a, &b) {
        assert!(element_count(&s).is_some(), "add accepted {s:?}");
    }
    if let Ok(s) = shape::reshape(&a, &b) {
        assert_eq!(
            element_count(&s),
            element_count(&a),
            "reshape {a:?} -> {s:?}"
        );
    }
    let permutation: Vec<usize> = (0..input.below(7)).map(|_| input.below(8)).collect();
    if let Ok(s) = shape::transpose(&a, &permutation) {
        let mut sorted = s.clone();
        let mut original = a.clone();
        sorted.sort_unstable();
        original.sort_unstable();
        assert_eq!(sorted, original, "transpose {a:?} by {permutation:?}");
    }
}

/// Random shapes, valid and not, with huge dims next to zero ones: the shape rules and the
/// kernels return `Ok` or `Err` and never panic or abort; a kernel agrees with its shape rule,
/// and its result is bit-identical under `Sequential`, `dedicated(2)` and every variant.
pub fn check_kernel_shapes(data: &[u8]) {
    let mut input = Input::new(data);
    match input.below(4) {
        0 => check_sdpa(&mut input),
        1 => check_matmul(&mut input),
        2 => check_conv2d(&mut input),
        _ => check_shape_rules(&mut input),
    }
}
