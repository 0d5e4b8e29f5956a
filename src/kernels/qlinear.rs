//! Products and lookups over quantized weights, read in place from their GGUF bytes:
//! [`quant_linear`] (`x · Wᵀ`) in two activation modes, and [`quant_embedding`].
//!
//! Neither ever holds an f32 copy of a weight: exact mode decodes a block at a time into a
//! buffer on the stack, q8 mode reads the quants themselves. The arithmetic of each output is
//! fixed by the shapes (see `loops/qdot.rs`), so results are bit-identical under every schedule;
//! the portable loops are the definition a per-instruction-set variant must match.

use alloc::vec;
use alloc::vec::Vec;

use super::config::KernelConfig;
use super::decoder::DECODER_PARALLEL_MIN_WORK;
use super::error::scratch;
pub(crate) use super::loops::qdot::QScratch;
use super::loops::qdot::{Q8Act, Q8Rows, Q8Side, QDot, QRows};
use super::parallel::{parallel_chunks, parallel_chunks_grained, Work};
use super::KernelError;
use crate::quant::{
    self, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0,
    GgmlType, QuantError,
};
use crate::schedule::Schedule;
use crate::shape;
use crate::tensor::{Tensor, TensorView};
use crate::ShapeError;

/// Calls of [`quant_linear`] with fewer multiply-adds than this (`rows·k·n`) run inline on
/// the caller (2^18, as [`MATMUL_PARALLEL_MIN_WORK`](crate::MATMUL_PARALLEL_MIN_WORK); not
/// tuned separately).
pub const QUANT_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// The fewest weight rows a body call of [`quant_linear`] takes: each call pays for its
/// activations' setup, so a region's pieces are at least this large. The bits never depend on it.
const WEIGHT_ROWS_PER_CALL: usize = 16;

/// A borrowed quantized matrix: `rows` rows of `cols` values of type `ty`, each row
/// `ty.row_bytes(cols)` bytes, back to back — a GGUF tensor of shape `[cols, rows]` (GGUF lists
/// the fastest dimension first), as a linear layer's weight `[out, in]` is stored.
///
/// ```
/// use skainet_schedule::quant::GgmlType;
/// use skainet_schedule::QMatrix;
/// let bytes = [0u8; 2 * 20]; // two Q4_1 rows of 32 values
/// let w = QMatrix::new(GgmlType::Q4_1, 2, 32, &bytes).unwrap();
/// assert_eq!((w.rows(), w.cols(), w.row_bytes()), (2, 32, 20));
/// assert!(QMatrix::new(GgmlType::Q4_1, 3, 32, &bytes).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QMatrix<'a> {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    bytes: &'a [u8],
}

impl<'a> QMatrix<'a> {
    /// The matrix stored in `bytes`, checked: `cols` a whole number of blocks of `ty`, and
    /// `bytes` exactly `rows` rows of them.
    ///
    /// # Errors
    ///
    /// [`QuantError::PartialBlock`] (`cols` not a multiple of the block length),
    /// [`QuantError::TooLarge`] or [`QuantError::MatrixTooLarge`] (the size overflows `usize`),
    /// [`QuantError::MatrixBytes`] (`bytes` has another length), each naming the values.
    pub fn new(
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: &'a [u8],
    ) -> Result<Self, QuantError> {
        let row_bytes = quant::row_bytes(ty, cols)?;
        let expected = rows
            .checked_mul(row_bytes)
            .ok_or(QuantError::MatrixTooLarge { ty, rows, cols })?;
        if bytes.len() != expected {
            return Err(QuantError::MatrixBytes {
                ty,
                rows,
                cols,
                expected,
                got: bytes.len(),
            });
        }
        Ok(Self {
            ty,
            rows,
            cols,
            row_bytes,
            bytes,
        })
    }

    /// The element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Rows (a linear layer's outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row (a linear layer's inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// All the bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes of row `r`, or `None` past the last row.
    pub fn row(&self, r: usize) -> Option<&'a [u8]> {
        if r >= self.rows {
            return None;
        }
        let at = r * self.row_bytes;
        self.bytes.get(at..at + self.row_bytes)
    }

    /// Row `r`'s bytes for an index the caller checked (`r < rows`); past the end, no bytes.
    fn row_or_empty(&self, r: usize) -> &'a [u8] {
        self.row(r).unwrap_or(&[])
    }
}

/// How [`quant_linear`] treats its f32 activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activations {
    /// f32 activations times the exactly decoded weight: `x · dequant(W)ᵀ` to f32 rounding, a
    /// fixed-order sum (the numerics of a float reference of the dequantized model).
    Exact,
    /// Activations quantized per block as llama.cpp does (Q8_0 for Q4_0/Q5_0/Q8_0 weights,
    /// Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants), then integer dot products (llama.cpp's
    /// numerics). Float weights (F32, F16, BF16) have no quantized form here: they run as
    /// [`Exact`](Self::Exact).
    Q8,
}

/// `x · Wᵀ` for `x` of shape `[.., k]` (rank ≥ 1, its last stride 1) and a quantized weight
/// `w` of `n` rows of `k` values (`[n, k]`, one row per output): an output of shape `[.., n]`.
///
/// * [`Activations::Exact`]: every output is `Σ x[p]·w[p]` over the decoded weight values in
///   32 accumulators (value `p` to vector `(p / 8) % 4`, lane `p % 8`, two roundings a step),
///   joined and folded in a fixed tree — for one row exactly the bits of [`linear()`](crate::linear)
///   against the decoded weight.
/// * [`Activations::Q8`]: each row of `x` quantized as llama.cpp's x86_64 build does
///   ([`quant::quantize_row_q8_0`] and its siblings), then per block an exact integer dot
///   product and one f32 step into the output's sum, block after block: the 32-value formats'
///   step as llama.cpp's scalar `ggml_vec_dot_*_generic` takes it, the K-quants'
///   `(dw·da)·isum − (dminw·da)·msum` (where llama.cpp's scalar code keeps eight float lanes).
///
/// The units of `schedule` are the weight's rows (output columns), at least 16 to a body
/// call; calls below [`QUANT_PARALLEL_MIN_WORK`] stay inline. The order of each output depends
/// only on the shapes, so the result is bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::quant::{BlockQ8_0, GgmlType};
/// use skainet_schedule::{quant_linear, Activations, QMatrix, Sequential, Tensor};
/// let row = BlockQ8_0 { d: 0x3800, qs: [2; 32] }; // 0.5 · 2 = 1 everywhere
/// let bytes = row.to_le_bytes();
/// let w = QMatrix::new(GgmlType::Q8_0, 1, 32, &bytes).unwrap();
/// let x = Tensor::new(vec![1, 32], vec![0.25; 32]).unwrap();
/// let y = quant_linear(&x, &w, Activations::Exact, &Sequential).unwrap();
/// assert_eq!((y.shape(), y.data()), (&[1, 1][..], &[8.0][..]));
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with the [`ShapeError`] of [`shape::linear`] (`x` of rank 0, its
/// last dimension not `w.cols()`, an output too large) or [`ShapeError::Layout`] (a last
/// stride other than 1); [`KernelError::Tensor`] when the output cannot be allocated,
/// [`KernelError::Scratch`] when the quantized activations or a transposing buffer cannot.
pub fn quant_linear<'a>(
    x: impl Into<TensorView<'a>>,
    w: &QMatrix<'_>,
    mode: Activations,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    quant_linear_with(&KernelConfig::selected(), x, w, mode, schedule)
}

/// [`quant_linear`] with a given [`KernelConfig`]: its work threshold, and its precision for
/// exact mode ([`Precision::Native`](crate::Precision::Native) fuses the dot's multiply-adds
/// where the variant has FMA; the portable precision gives the portable bits on every variant).
///
/// # Errors
///
/// As [`quant_linear`].
pub fn quant_linear_with<'a>(
    config: &KernelConfig,
    x: impl Into<TensorView<'a>>,
    w: &QMatrix<'_>,
    mode: Activations,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let mut outs = linear_many(config, x.into(), core::slice::from_ref(w), mode, schedule)?;
    // One weight, one output.
    outs.pop().ok_or(KernelError::Scratch {
        op: "quant_linear",
        elements: 0,
    })
}

/// [`quant_linear`] of one `x` by several weights of the same input width (a layer's query,
/// key and value projections; its gate and up projections): one output per weight, each
/// bit-identical to its own [`quant_linear`] call.
///
/// Weights of one format share one region of the schedule over all their rows and, in q8 mode,
/// one quantization of `x`: a decode step then opens one region where it opened three. Weights
/// of different formats run one call each.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::quant::{BlockQ8_0, GgmlType};
/// use skainet_schedule::{quant_linear, quant_linear_many, Activations, QMatrix, Sequential, Tensor};
/// let rows = [BlockQ8_0 { d: 0x3c00, qs: [1; 32] }, BlockQ8_0 { d: 0x3c00, qs: [-2; 32] }];
/// let bytes: Vec<u8> = rows.iter().flat_map(|b| b.to_le_bytes()).collect();
/// let a = QMatrix::new(GgmlType::Q8_0, 2, 32, &bytes).unwrap();
/// let b = QMatrix::new(GgmlType::Q8_0, 1, 32, &bytes[..34]).unwrap();
/// let x = Tensor::new(vec![1, 32], vec![0.5; 32]).unwrap();
/// let ys = quant_linear_many(&x, &[a, b], Activations::Exact, &Sequential).unwrap();
/// assert_eq!((ys[0].data(), ys[1].data()), (&[16.0, -32.0][..], &[16.0][..]));
/// // In q8 mode too, each output is its own call's.
/// let ys = quant_linear_many(&x, &[a, b], Activations::Q8, &Sequential).unwrap();
/// assert_eq!(ys[1], quant_linear(&x, &b, Activations::Q8, &Sequential).unwrap());
/// # }
/// ```
///
/// # Errors
///
/// As [`quant_linear`], for the first weight that fails.
pub fn quant_linear_many<'a>(
    x: impl Into<TensorView<'a>>,
    ws: &[QMatrix<'_>],
    mode: Activations,
    schedule: &dyn Schedule,
) -> Result<Vec<Tensor>, KernelError> {
    quant_linear_many_with(&KernelConfig::selected(), x, ws, mode, schedule)
}

/// [`quant_linear_many`] with a given [`KernelConfig`], as [`quant_linear_with`].
///
/// # Errors
///
/// As [`quant_linear`], for the first weight that fails.
pub fn quant_linear_many_with<'a>(
    config: &KernelConfig,
    x: impl Into<TensorView<'a>>,
    ws: &[QMatrix<'_>],
    mode: Activations,
    schedule: &dyn Schedule,
) -> Result<Vec<Tensor>, KernelError> {
    let x = x.into();
    match ws.first() {
        Some(first) if ws.iter().any(|w| w.ty != first.ty) => {
            let mut outs = Vec::new();
            outs.try_reserve_exact(ws.len())
                .map_err(|_| KernelError::Scratch {
                    op: "quant_linear",
                    elements: ws.len(),
                })?;
            for w in ws {
                let mut one =
                    linear_many(config, x.clone(), core::slice::from_ref(w), mode, schedule)?;
                outs.append(&mut one);
            }
            Ok(outs)
        }
        _ => linear_many(config, x, ws, mode, schedule),
    }
}

/// The products of `x` by the weights `ws`, all of one format: one region over all their
/// rows, one output each.
fn linear_many(
    config: &KernelConfig,
    x: TensorView<'_>,
    ws: &[QMatrix<'_>],
    mode: Activations,
    schedule: &dyn Schedule,
) -> Result<Vec<Tensor>, KernelError> {
    const OP: &str = "quant_linear";
    let mut outs = Vec::new();
    outs.try_reserve_exact(ws.len())
        .map_err(|_| KernelError::Scratch {
            op: OP,
            elements: ws.len(),
        })?;
    if ws.is_empty() {
        return Ok(outs);
    }
    let (mut m, mut k, mut n) = (0, 0, 0usize);
    for w in ws {
        let dims = shape::linear(x.shape(), &[w.rows, w.cols])?;
        (m, k) = (dims.rows, dims.inner);
        n = n
            .checked_add(dims.cols)
            .ok_or_else(|| ShapeError::TooLarge {
                op: OP,
                shapes: ws.iter().map(|w| vec![w.rows, w.cols]).collect(),
            })?;
        outs.push(Tensor::zeros(dims.output_shape)?);
    }
    shape::contiguous_rows(OP, "x", x.shape(), x.strides())?;
    if m == 0 || n == 0 || k == 0 {
        return Ok(outs);
    }
    let mut xs: Vec<&[f32]> = Vec::new();
    xs.try_reserve_exact(m).map_err(|_| KernelError::Scratch {
        op: OP,
        elements: m,
    })?;
    for r in 0..m {
        xs.push(x.row(r).ok_or_else(|| ShapeError::Layout {
            op: OP,
            operand: "x",
            shape: x.shape().to_vec(),
            strides: x.strides().to_vec(),
            expected: "the last stride 1",
        })?);
    }
    let work = Work {
        total: (m as u64).saturating_mul(k as u64).saturating_mul(n as u64),
        fork_from: config.threshold(QUANT_PARALLEL_MIN_WORK),
    };
    let run = Columns {
        schedule,
        work,
        m,
        n,
    };
    let mut scratch = QScratch::default();
    products(
        config,
        &run,
        &xs,
        ws,
        mode,
        &mut scratch,
        Dest::Tensors(&mut outs),
    )?;
    Ok(outs)
}

/// The product of one row `x` by the weights `ws` (every one `x.len()` wide), written to
/// `out` — the weights' outputs one after another, `Σ rows` values — with the bits of
/// [`quant_linear_many`]; `scratch` holds the quantized activations between calls. Nothing is
/// allocated once `scratch` has grown to the widest `x`: a decoder's step calls this.
#[cfg(feature = "model")]
pub(crate) fn quant_linear_row_into(
    config: &KernelConfig,
    x: &[f32],
    ws: &[QMatrix<'_>],
    mode: Activations,
    schedule: &dyn Schedule,
    scratch: &mut QScratch,
    out: &mut [f32],
) -> Result<(), KernelError> {
    // For one row, the column-major product is the row of outputs.
    quant_linear_rows_into(config, &[x], ws, mode, schedule, scratch, out)
}

/// The product of the rows `xs` (each as wide as every weight of `ws`) by the weights `ws`,
/// written column-major to `out`: each output column's `xs.len()` values in turn, the weights'
/// columns one after another (`xs.len() · Σ rows` values). These are the bits of
/// [`quant_linear_many`] (whose row-major outputs are this buffer transposed), computed by the
/// same calls: one region and one quantization of `xs` for weights of one format, one call per
/// weight otherwise. `scratch` holds the quantized activations between calls, so nothing is
/// allocated once it has grown to the largest call: a decoder's prefill and step call this.
#[cfg(feature = "model")]
pub(crate) fn quant_linear_rows_into(
    config: &KernelConfig,
    xs: &[&[f32]],
    ws: &[QMatrix<'_>],
    mode: Activations,
    schedule: &dyn Schedule,
    scratch: &mut QScratch,
    out: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "quant_linear";
    let m = xs.len();
    let k = xs.first().map_or(0, |x| x.len());
    if let Some(x) = xs.iter().find(|x| x.len() != k) {
        return Err(ShapeError::ElementwiseMismatch {
            op: OP,
            a: vec![m, k],
            b: vec![x.len()],
        }
        .into());
    }
    let mut n = 0usize;
    for w in ws {
        if w.cols != k {
            // The shape check names the mismatch (it cannot pass here).
            shape::linear(&[m, k], &[w.rows, w.cols])?;
        }
        n = n.saturating_add(w.rows);
    }
    if out.len() != m.saturating_mul(n) {
        return Err(ShapeError::TooLarge {
            op: OP,
            shapes: vec![vec![out.len()], ws.iter().map(|w| w.rows).collect()],
        }
        .into());
    }
    let Some(first) = ws.first() else {
        return Ok(());
    };
    if ws.iter().any(|w| w.ty != first.ty) {
        // One call per weight, as `quant_linear_many` makes them: weight `i`'s columns are a
        // run of the buffer.
        let mut rest = out;
        for w in ws {
            let (mine, tail) = core::mem::take(&mut rest).split_at_mut(w.rows * m);
            rest = tail;
            let one = core::slice::from_ref(w);
            quant_linear_rows_into(config, xs, one, mode, schedule, scratch, mine)?;
        }
        return Ok(());
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        out.fill(0.0);
        return Ok(());
    }
    let run = Columns {
        schedule,
        work: Work {
            total: (m as u64).saturating_mul(k as u64).saturating_mul(n as u64),
            fork_from: config.threshold(QUANT_PARALLEL_MIN_WORK),
        },
        m,
        n,
    };
    products(config, &run, xs, ws, mode, scratch, Dest::Columns(out))
}

/// Where a product's outputs go.
enum Dest<'o> {
    /// One row-major tensor per weight.
    Tensors(&'o mut [Tensor]),
    /// One buffer of `n·m` values, column after column of all the weights (for one row of
    /// `x`, the weights' outputs one after another).
    #[cfg_attr(not(feature = "model"), allow(dead_code))]
    Columns(&'o mut [f32]),
}

/// The products of `xs` by `ws` (all of one format) into `dest`, by `mode`'s loop.
fn products(
    config: &KernelConfig,
    run: &Columns<'_>,
    xs: &[&[f32]],
    ws: &[QMatrix<'_>],
    mode: Activations,
    scratch: &mut QScratch,
    dest: Dest<'_>,
) -> Result<(), KernelError> {
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let q8 = mode == Activations::Q8;
    let s = scratch;
    match first.ty {
        GgmlType::Q8_0 if q8 => {
            run_q8::<BlockQ8_0>(config, run, xs, ws, quant::quantize_row_q8_0, s, dest)
        }
        GgmlType::Q4_0 if q8 => {
            run_q8::<BlockQ4_0>(config, run, xs, ws, quant::quantize_row_q8_0, s, dest)
        }
        GgmlType::Q5_0 if q8 => {
            run_q8::<BlockQ5_0>(config, run, xs, ws, quant::quantize_row_q8_0, s, dest)
        }
        GgmlType::Q4_1 if q8 => {
            run_q8::<BlockQ4_1>(config, run, xs, ws, quant::quantize_row_q8_1, s, dest)
        }
        GgmlType::Q5_1 if q8 => {
            run_q8::<BlockQ5_1>(config, run, xs, ws, quant::quantize_row_q8_1, s, dest)
        }
        GgmlType::Q4_K if q8 => {
            run_q8::<BlockQ4_K>(config, run, xs, ws, quant::quantize_row_q8_K, s, dest)
        }
        GgmlType::Q5_K if q8 => {
            run_q8::<BlockQ5_K>(config, run, xs, ws, quant::quantize_row_q8_K, s, dest)
        }
        GgmlType::Q6_K if q8 => {
            run_q8::<BlockQ6_K>(config, run, xs, ws, quant::quantize_row_q8_K, s, dest)
        }
        _ => run_exact(config, run, xs, ws, dest),
    }
}

/// A body of [`Columns::run`]: weight `i`, its columns, their values.
type WeightColumns<'a> = dyn Fn(usize, core::ops::Range<usize>, &mut [f32]) + Sync + 'a;

/// How the output columns of one call are split: `m` rows × `n` columns, the columns of all
/// the call's weights one after another.
struct Columns<'s> {
    schedule: &'s dyn Schedule,
    work: Work,
    m: usize,
    n: usize,
}

impl Columns<'_> {
    /// Runs `body(w, cols, values)` for weight `w`'s columns `cols` under the schedule
    /// (`values`: the `m` outputs of each column of `cols`, column after column; a region's
    /// range that spans two weights is one call per weight) and writes them to `dest`: a
    /// column-major buffer as they are; row-major tensors (weight `i`'s into `outs[i]`)
    /// straight in for one weight and one row, else through a column-major buffer.
    fn run(
        &self,
        dest: Dest<'_>,
        ws: &[QMatrix<'_>],
        body: &WeightColumns<'_>,
    ) -> Result<(), KernelError> {
        const OP: &str = "quant_linear";
        let (m, n) = (self.m, self.n);
        let body = |cols: core::ops::Range<usize>, chunk: &mut [f32]| {
            // Weight `i`'s columns are `from..from + ws[i].rows` of all of them.
            let mut from = 0;
            for (i, w) in ws.iter().enumerate() {
                let (lo, hi) = (cols.start.max(from), cols.end.min(from + w.rows));
                if lo < hi {
                    let values = &mut chunk[(lo - cols.start) * m..(hi - cols.start) * m];
                    body(i, lo - from..hi - from, values);
                }
                from += w.rows;
            }
            Ok(())
        };
        let grain = WEIGHT_ROWS_PER_CALL;
        let (s, work) = (self.schedule, self.work);
        let outs = match dest {
            Dest::Columns(buf) => {
                return parallel_chunks_grained(OP, s, buf, m, grain, work, &body);
            }
            Dest::Tensors(outs) => outs,
        };
        if let ([out], 1) = (&mut *outs, m) {
            return parallel_chunks_grained(OP, s, out.data_mut(), 1, grain, work, &body);
        }
        let mut by_column = scratch(OP, m * n)?;
        parallel_chunks_grained(OP, s, &mut by_column, m, grain, work, &body)?;
        let mut from = 0;
        for (out, w) in outs.iter_mut().zip(ws) {
            let width = w.rows;
            let columns = &by_column[from * m..(from + width) * m];
            transpose_into(columns, m, width, out.data_mut());
            from += width;
        }
        Ok(())
    }
}

/// Columns the transpose of [`transpose_into`] moves at a time: per row, one run of
/// contiguous writes from as many column streams.
const TRANSPOSE_COLUMNS: usize = 16;

/// `width` columns of `m` values each, back to back in `columns`, into the row-major `out`
/// (`m` rows of `width`): a group of columns at a time, row after row, so that the reads
/// stream and the writes are runs, not a stride of a row per value.
pub(crate) fn transpose_into(columns: &[f32], m: usize, width: usize, out: &mut [f32]) {
    debug_assert!(columns.len() == m * width && out.len() == m * width);
    let mut j = 0;
    while j < width {
        let group = (width - j).min(TRANSPOSE_COLUMNS);
        let block = &columns[j * m..(j + group) * m];
        for (r, row) in out.chunks_exact_mut(width).enumerate() {
            for (c, o) in row[j..j + group].iter_mut().enumerate() {
                *o = block[c * m + r];
            }
        }
        j += group;
    }
}

/// Exact mode: each column's weight row decoded a block at a time, against every row of `x`,
/// by the loop `config` picks (every variant gives the portable bits in the portable mode).
fn run_exact(
    config: &KernelConfig,
    run: &Columns<'_>,
    xs: &[&[f32]],
    ws: &[QMatrix<'_>],
    dest: Dest<'_>,
) -> Result<(), KernelError> {
    let kernel = config.pick(&config.kernels().qexact);
    run.run(dest, ws, &|i, cols, values| {
        let w = &ws[i];
        let rows = QRows {
            ty: w.ty,
            xs,
            w: w.bytes,
            row_bytes: w.row_bytes,
            k: w.cols,
        };
        kernel(&rows, cols, values)
    })
}

/// An activation quantizer (`quant::quantize_row_q8_*`).
type Quantizer<A> = fn(&[f32], &mut [A]) -> Result<(), QuantError>;

/// Q8 mode: every row of `x` quantized once into `W`'s activation blocks (with their scales
/// widened once, [`Q8Side`]), then each column's weight row dotted with each, by the loop
/// `config`'s variant has (every variant gives the portable bits). `ws`: weights of format
/// `W`, all of `xs`'s width.
fn run_q8<W: QDot>(
    config: &KernelConfig,
    run: &Columns<'_>,
    xs: &[&[f32]],
    ws: &[QMatrix<'_>],
    quantize: Quantizer<W::Act>,
    scratch: &mut QScratch,
    dest: Dest<'_>,
) -> Result<(), KernelError> {
    const OP: &str = "quant_linear";
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let per_row = first.cols / W::LEN;
    let total = per_row.checked_mul(xs.len()).ok_or(KernelError::Scratch {
        op: OP,
        elements: usize::MAX,
    })?;
    let (acts, side) = W::Act::buffers(scratch);
    acts.clear();
    side.clear();
    // Nothing is allocated where the buffers already hold `total` blocks.
    let room = acts
        .try_reserve_exact(total)
        .and_then(|()| side.try_reserve_exact(total));
    room.map_err(|_| KernelError::Scratch {
        op: OP,
        elements: total,
    })?;
    acts.resize(total, W::Act::default());
    for (x, a) in xs.iter().zip(acts.chunks_exact_mut(per_row)) {
        quantize(x, a)?;
    }
    side.extend(acts.iter().map(Q8Side::of));
    let (acts, side) = (&*acts, &*side);
    let kernel = config.kernels().q8;
    run.run(dest, ws, &|i, cols, values| {
        let w = &ws[i];
        let rows = Q8Rows {
            acts: W::acts(acts),
            side,
            w: w.bytes,
            row_bytes: w.row_bytes,
            blocks: per_row,
            m: run.m,
        };
        kernel(&rows, cols, values)
    })
}

/// Row `id` of a quantized table decoded into `out` (`table.cols()` values), as
/// [`quant_embedding`] decodes it, without allocating: a decoder's step calls this.
#[cfg(feature = "model")]
pub(crate) fn quant_embedding_row_into(
    id: u32,
    table: &QMatrix<'_>,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let row = usize::try_from(id)
        .ok()
        .filter(|&r| r < table.rows)
        .and_then(|r| table.row(r))
        .ok_or_else(|| ShapeError::EmbeddingId {
            table: vec![table.rows, table.cols],
            index: 0,
            id: id as usize,
        })?;
    quant::decode_row(table.ty, row, out)?;
    Ok(())
}

/// The rows `ids` of a quantized table decoded into `out` (`ids.len() · table.cols()` values,
/// row after row) under `schedule`, as [`quant_embedding`] decodes and schedules them, without
/// allocating: a decoder's prefill calls this.
#[cfg(feature = "model")]
pub(crate) fn quant_embedding_rows_into(
    config: &KernelConfig,
    ids: &[u32],
    table: &QMatrix<'_>,
    schedule: &dyn Schedule,
    out: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "quant_embedding";
    let d = table.cols;
    if let Some((index, &id)) = ids
        .iter()
        .enumerate()
        .find(|(_, &id)| usize::try_from(id).map_or(true, |r| r >= table.rows))
    {
        return Err(ShapeError::EmbeddingId {
            table: vec![table.rows, table.cols],
            index,
            id: id as usize,
        }
        .into());
    }
    if out.len() != ids.len().saturating_mul(d) {
        return Err(ShapeError::ElementwiseMismatch {
            op: OP,
            a: vec![ids.len(), d],
            b: vec![out.len()],
        }
        .into());
    }
    if d == 0 || ids.is_empty() {
        return Ok(());
    }
    let work = Work {
        total: out.len() as u64,
        fork_from: config.threshold(DECODER_PARALLEL_MIN_WORK),
    };
    parallel_chunks(OP, schedule, out, d, work, &|units, chunk| {
        for (r, o) in units.zip(chunk.chunks_exact_mut(d)) {
            quant::decode_row(table.ty, table.row_or_empty(ids[r] as usize), o)?;
        }
        Ok(())
    })
}

/// The rows `ids` of a quantized table (`table.rows()` rows of `table.cols()` values), each
/// decoded exactly ([`quant::decode_row`]): an output of shape `[ids.len(), table.cols()]`.
///
/// Output rows are the units of `schedule`; a call of fewer values than
/// [`DECODER_PARALLEL_MIN_WORK`](crate::DECODER_PARALLEL_MIN_WORK) stays inline. Each row's
/// decode is fixed, so the result is bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::quant::{BlockQ8_0, GgmlType};
/// use skainet_schedule::{quant_embedding, QMatrix, Sequential};
/// let rows = [BlockQ8_0 { d: 0x3c00, qs: [1; 32] }, BlockQ8_0 { d: 0x3c00, qs: [-3; 32] }];
/// let bytes: Vec<u8> = rows.iter().flat_map(|b| b.to_le_bytes()).collect();
/// let table = QMatrix::new(GgmlType::Q8_0, 2, 32, &bytes).unwrap();
/// let e = quant_embedding(&[1, 0], &table, &Sequential).unwrap();
/// assert_eq!((e.data()[0], e.data()[32]), (-3.0, 1.0));
/// assert!(quant_embedding(&[2], &table, &Sequential).is_err());
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::EmbeddingId`] for the first id that is not a row
/// of the table (naming it and where it is) or [`ShapeError::TooLarge`];
/// [`KernelError::Tensor`] when the output cannot be allocated.
pub fn quant_embedding(
    ids: &[u32],
    table: &QMatrix<'_>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    quant_embedding_with(&KernelConfig::selected(), ids, table, schedule)
}

/// [`quant_embedding`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`quant_embedding`].
pub fn quant_embedding_with(
    config: &KernelConfig,
    ids: &[u32],
    table: &QMatrix<'_>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    const OP: &str = "quant_embedding";
    let table_shape = [table.rows, table.cols];
    let mut rows: Vec<usize> = Vec::new();
    rows.try_reserve_exact(ids.len())
        .map_err(|_| KernelError::Scratch {
            op: OP,
            elements: ids.len(),
        })?;
    for (index, &id) in ids.iter().enumerate() {
        match usize::try_from(id) {
            Ok(r) if r < table.rows => rows.push(r),
            _ => {
                return Err(ShapeError::EmbeddingId {
                    table: table_shape.to_vec(),
                    index,
                    id: id as usize,
                }
                .into())
            }
        }
    }
    let shape = vec![ids.len(), table.cols];
    if shape::element_count(&shape).is_none() {
        return Err(ShapeError::TooLarge {
            op: OP,
            shapes: vec![table_shape.to_vec(), vec![ids.len()]],
        }
        .into());
    }
    let mut out = Tensor::zeros(shape)?;
    let d = table.cols;
    if d == 0 || ids.is_empty() {
        return Ok(out);
    }
    let work = Work {
        total: out.len() as u64,
        fork_from: config.threshold(DECODER_PARALLEL_MIN_WORK),
    };
    parallel_chunks(OP, schedule, out.data_mut(), d, work, &|units, chunk| {
        for (r, o) in units.zip(chunk.chunks_exact_mut(d)) {
            quant::decode_row(table.ty, table.row_or_empty(rows[r]), o)?;
        }
        Ok(())
    })?;
    Ok(out)
}

#[cfg(all(test, feature = "model", not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::kernels::tests::TwoTasksInline;
    use crate::Sequential;

    /// `rows` Q8_0 rows of `cols` values, their quants and scales from `seed`.
    fn q8_0(rows: usize, cols: usize, seed: u8) -> Vec<u8> {
        (0..rows * cols / 32)
            .flat_map(|b| {
                let at = b as u8;
                let qs = core::array::from_fn(|i| (i as u8 ^ at).wrapping_mul(seed) as i8 >> 1);
                // Scales between 2^-8 and 2^-7 (f16 bits 0x1c00..0x2000).
                let d = 0x1c00 + (u16::from(at.wrapping_mul(seed)) << 2);
                BlockQ8_0 { d, qs }.to_le_bytes()
            })
            .collect()
    }

    /// `rows` Q4_0 rows of `cols` values, as [`q8_0`].
    fn q4_0(rows: usize, cols: usize, seed: u8) -> Vec<u8> {
        (0..rows * cols / 32)
            .flat_map(|b| {
                let at = b as u8;
                let qs = core::array::from_fn(|i| (i as u8).wrapping_mul(seed) ^ at);
                BlockQ4_0 {
                    d: 0x2000 + u16::from(at),
                    qs,
                }
                .to_le_bytes()
            })
            .collect()
    }

    /// The `[m, n]` tensors of `ys`, each transposed and back to back: the column-major
    /// buffer of their columns.
    fn columns(ys: &[Tensor]) -> Vec<f32> {
        let mut out = Vec::new();
        for y in ys {
            let [m, n] = *y.shape() else {
                panic!("{:?}", y.shape())
            };
            out.extend((0..n * m).map(|i| y.data()[(i % m) * n + i / m]));
        }
        out
    }

    #[test]
    fn rows_into_writes_the_bits_of_quant_linear_many_column_major() {
        let (m, k) = (5, 64);
        let x = Tensor::new(
            vec![m, k],
            (0..m * k).map(|i| (i as f32 * 0.29).sin()).collect(),
        )
        .unwrap();
        let xs: Vec<&[f32]> = x.data().chunks_exact(k).collect();
        let (a, b, c) = (q8_0(20, k, 3), q8_0(7, k, 5), q4_0(9, k, 7));
        let a = QMatrix::new(GgmlType::Q8_0, 20, k, &a).unwrap();
        let b = QMatrix::new(GgmlType::Q8_0, 7, k, &b).unwrap();
        let c = QMatrix::new(GgmlType::Q4_0, 9, k, &c).unwrap();
        let forked = KernelConfig::selected().with_min_parallel_work(0);
        let schedules: [(KernelConfig, &dyn Schedule); 2] = [
            (KernelConfig::selected(), &Sequential),
            (forked, &TwoTasksInline),
        ];
        // One format (one region), and two (one call per weight).
        for ws in [vec![a, b], vec![a, c, b]] {
            for mode in [Activations::Exact, Activations::Q8] {
                let want = quant_linear_many(&x, &ws, mode, &Sequential).unwrap();
                let want = columns(&want);
                for (config, s) in &schedules {
                    let mut scratch = QScratch::default();
                    let mut out = vec![f32::NAN; want.len()];
                    quant_linear_rows_into(config, &xs, &ws, mode, *s, &mut scratch, &mut out)
                        .unwrap();
                    assert_eq!(out, want, "{mode:?}");
                    // One row: the row of outputs, as `quant_linear_row_into` writes it.
                    let one = quant_linear_many(
                        x.view().narrow(0, 2, 1).unwrap(),
                        &ws,
                        mode,
                        &Sequential,
                    )
                    .unwrap();
                    let mut row = vec![f32::NAN; want.len() / m];
                    quant_linear_row_into(config, xs[2], &ws, mode, *s, &mut scratch, &mut row)
                        .unwrap();
                    assert_eq!(row, columns(&one), "{mode:?}");
                }
            }
        }
        // An output of another length, and rows of another width, are refused.
        let config = KernelConfig::selected();
        let mut scratch = QScratch::default();
        let mut out = vec![0.0; m * 27 - 1];
        let short = quant_linear_rows_into(
            &config,
            &xs,
            &[a, b],
            Activations::Q8,
            &Sequential,
            &mut scratch,
            &mut out,
        );
        assert!(matches!(
            short,
            Err(KernelError::Shape(ShapeError::TooLarge { .. }))
        ));
        let ragged = [xs[0], &xs[1][1..]];
        let mut out = vec![0.0; 2 * 27];
        let ragged = quant_linear_rows_into(
            &config,
            &ragged,
            &[a, b],
            Activations::Q8,
            &Sequential,
            &mut scratch,
            &mut out,
        );
        assert!(matches!(
            ragged,
            Err(KernelError::Shape(ShapeError::ElementwiseMismatch { .. }))
        ));
    }

    #[test]
    fn embedding_rows_into_writes_the_bits_of_quant_embedding() {
        let table = q4_0(6, 64, 11);
        let table = QMatrix::new(GgmlType::Q4_0, 6, 64, &table).unwrap();
        let ids = [5, 0, 3, 3];
        let want = quant_embedding(&ids, &table, &Sequential).unwrap();
        let forked = KernelConfig::selected().with_min_parallel_work(0);
        let schedules: [(KernelConfig, &dyn Schedule); 2] = [
            (KernelConfig::selected(), &Sequential),
            (forked, &TwoTasksInline),
        ];
        for (config, s) in &schedules {
            let mut out = vec![f32::NAN; want.len()];
            quant_embedding_rows_into(config, &ids, &table, *s, &mut out).unwrap();
            assert_eq!(out, want.data());
        }
        // An id past the table is quant_embedding's error, naming it and where it is.
        let mut out = vec![0.0; 2 * 64];
        let config = KernelConfig::selected();
        assert_eq!(
            quant_embedding_rows_into(&config, &[1, 6], &table, &Sequential, &mut out).unwrap_err(),
            quant_embedding(&[1, 6], &table, &Sequential).unwrap_err()
        );
    }
}
