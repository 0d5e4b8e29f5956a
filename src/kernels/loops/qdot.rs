//! The dot products over quantized weight rows, portable: the definitions a per-instruction-set
//! micro-kernel beside them must reproduce bit for bit.
//!
//! **Q8 mode** ([`QDot`]): a weight row against activations quantized by llama.cpp's rule
//! (`quant::quantize_row_q8_*`), the 32-value formats combined as llama.cpp's scalar
//! `ggml_vec_dot_*_generic` (`ggml-cpu/quants.c`) combines them. Each block's integer dot is
//! exact (any order); the floats then go, block after block, into one f32 sum:
//!
//! * `Q4_0`·`Q8_0`: `sum += (isum · dw) · da`;
//! * `Q8_0`·`Q8_0`: `sum += isum · (dw · da)`; `Q5_0`·`Q8_0`: `sum += (dw · da) · isum`;
//! * `Q4_1`, `Q5_1`·`Q8_1`: `sum += ((dw · da) · isum + mw · sa)`;
//! * `Q4_K`, `Q5_K`·`Q8_K`: per block the integers `isum = Σ scale · q · a` and
//!   `msum = Σ bsums · min`, then `sum += (dw · da) · isum − (dminw · da) · msum`;
//! * `Q6_K`·`Q8_K`: `sum += (dw · da) · isum`.
//!
//! For the K-quants, llama.cpp's scalar code keeps eight float lanes per row (value `e` in lane
//! `e % 8`), and its x86 SIMD dots accumulate the blocks in other orders again (eight lanes with
//! fused multiply-adds, the minima apart). One float step per block, as for the 32-value
//! formats, lets a vector loop hold a weight row in each lane (see `docs/design/kernels.md`).
//! The order above is this crate's definition, so its bits do not depend on the CPU.
//!
//! **Exact mode** ([`exact_dots`]): f32 activations against the exactly decoded weight (a block
//! at a time into a buffer on the stack, never a whole row): `Σ x[p]·w[p]` in 32 accumulators
//! — value `p` to vector `(p / 8) % 4`, lane `p % 8`, `acc + x·w` rounded twice in
//! [`Unfused`](super::simd::Unfused) — the vectors joined `(v0 + v1) + (v2 + v3)` and folded
//! by [`Simd::fold`]. A row whose length is not a multiple of 32 (only the float types) ends as
//! [`matvec`](super::matvec)'s does: the chunks of 8 left continue at vector 0, a ragged tail
//! zero-padded. That is the order of `linear`'s one-row product, so one row against a decoded
//! weight gives `linear`'s bits.

use super::simd::{MulAdd, Simd, LANES};
use crate::quant::{
    f16_to_f32, Block, BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K,
    BlockQ8_0, BlockQ8_1, BlockQ8_K,
};

/// A weight block format's q8-mode dot with its activation format.
pub(crate) trait QDot: Block {
    /// The activation block (`vec_dot_type`).
    type Act: Q8Act;
    /// The dot of a weight row (`w`: whole blocks) with its activations (one block per weight
    /// block).
    fn dot_row(w: &[u8], a: &[Self::Act]) -> f32;
    /// The activations `a`, named by this weight format.
    fn acts(a: &[Self::Act]) -> Q8Acts<'_>;
}

/// An activation block of the q8 mode, with what a vector loop wants of it widened once.
pub(crate) trait Q8Act: Copy + Send + Sync + Default {
    /// The block's scale as f32 (exact: an f16 widened, or the f32 itself).
    fn scale(&self) -> f32;
    /// `Q8_1`'s `s` as f32; `0` for the other formats.
    fn min(&self) -> f32 {
        0.0
    }
    /// The sum of the 32-value block's quants; `0` for `Q8_K` (which carries its `bsums`).
    fn qsum(&self) -> i32 {
        0
    }
    /// This format's buffer in `s`, and the side values'.
    fn buffers(s: &mut QScratch) -> Buffers<'_, Self>;
}

/// An activation format's buffers in a [`QScratch`]: its blocks and their [`Q8Side`]s.
pub(crate) type Buffers<'s, A> = (&'s mut alloc::vec::Vec<A>, &'s mut alloc::vec::Vec<Q8Side>);

/// The buffers a q8-mode product quantizes its activations into, kept by a caller that runs
/// products back to back (a decoder's step) so that, once grown, they are reused instead of
/// allocated again.
#[derive(Default)]
pub(crate) struct QScratch {
    q8_0: alloc::vec::Vec<BlockQ8_0>,
    q8_1: alloc::vec::Vec<BlockQ8_1>,
    q8_k: alloc::vec::Vec<BlockQ8_K>,
    side: alloc::vec::Vec<Q8Side>,
}

impl Q8Act for BlockQ8_0 {
    fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }
    fn buffers(s: &mut QScratch) -> Buffers<'_, Self> {
        (&mut s.q8_0, &mut s.side)
    }
    fn qsum(&self) -> i32 {
        self.qs.iter().map(|&q| q as i32).sum()
    }
}

impl Q8Act for BlockQ8_1 {
    fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }
    fn buffers(s: &mut QScratch) -> Buffers<'_, Self> {
        (&mut s.q8_1, &mut s.side)
    }
    fn min(&self) -> f32 {
        f16_to_f32(self.s)
    }
    fn qsum(&self) -> i32 {
        self.qs.iter().map(|&q| q as i32).sum()
    }
}

impl Q8Act for BlockQ8_K {
    fn scale(&self) -> f32 {
        self.d
    }
    fn buffers(s: &mut QScratch) -> Buffers<'_, Self> {
        (&mut s.q8_k, &mut s.side)
    }
}

/// One activation block's values widened once per call ([`Q8Act`]): what the vector loops
/// read instead of converting them again for every weight row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Q8Side {
    /// [`Q8Act::scale`].
    pub scale: f32,
    /// [`Q8Act::min`].
    pub min: f32,
    /// [`Q8Act::qsum`].
    pub qsum: i32,
}

impl Q8Side {
    /// The side values of `a`.
    pub(crate) fn of<A: Q8Act>(a: &A) -> Self {
        Self {
            scale: a.scale(),
            min: a.min(),
            qsum: a.qsum(),
        }
    }
}

/// A q8-mode call's quantized activations, named by the weight format they go with (so a
/// weight and activations of different formats cannot meet).
#[derive(Clone, Copy)]
pub(crate) enum Q8Acts<'a> {
    /// `Q8_0` weights.
    Q8_0(&'a [BlockQ8_0]),
    /// `Q4_0` weights.
    Q4_0(&'a [BlockQ8_0]),
    /// `Q5_0` weights.
    Q5_0(&'a [BlockQ8_0]),
    /// `Q4_1` weights.
    Q4_1(&'a [BlockQ8_1]),
    /// `Q5_1` weights.
    Q5_1(&'a [BlockQ8_1]),
    /// `Q4_K` weights.
    Q4K(&'a [BlockQ8_K]),
    /// `Q5_K` weights.
    Q5K(&'a [BlockQ8_K]),
    /// `Q6_K` weights.
    Q6K(&'a [BlockQ8_K]),
}

/// One call's q8-mode operands: `m` activation rows of `blocks` blocks each (`acts`, row after
/// row, with `side` beside them) against weight rows of as many blocks, `row_bytes` bytes
/// each, back to back in `w`.
pub(crate) struct Q8Rows<'a> {
    /// The activation blocks.
    pub acts: Q8Acts<'a>,
    /// Each activation block's widened values, in the same order (read by the vector loops;
    /// the portable one reads the blocks themselves).
    #[cfg_attr(not(all(target_arch = "x86_64", feature = "std")), allow(dead_code))]
    pub side: &'a [Q8Side],
    /// The weight's bytes.
    pub w: &'a [u8],
    /// Bytes per weight row.
    pub row_bytes: usize,
    /// Blocks per row.
    pub blocks: usize,
    /// Activation rows.
    pub m: usize,
}

/// Row `j` of `row_bytes` bytes each in `w` (none past the end, which no caller asks for).
#[inline(always)]
fn row_of(w: &[u8], row_bytes: usize, j: usize) -> &[u8] {
    let at = j.saturating_mul(row_bytes);
    w.get(at..at.saturating_add(row_bytes)).unwrap_or(&[])
}

impl<'a> Q8Rows<'a> {
    /// Weight row `j`'s bytes (none past the end, which no caller asks for).
    #[inline(always)]
    pub(crate) fn row(&self, j: usize) -> &'a [u8] {
        row_of(self.w, self.row_bytes, j)
    }
}

/// A compiled q8-mode loop: the output columns `cols` of `r`'s product into `out`,
/// column-major (`r.m` values a column). Every variant gives the bits of [`q8_portable`].
pub(crate) type Q8Fn = fn(&Q8Rows<'_>, core::ops::Range<usize>, &mut [f32]);

/// The q8-mode columns `cols` of weight format `W` with the activations `acts`.
fn q8_columns<W: QDot>(
    r: &Q8Rows<'_>,
    acts: &[W::Act],
    cols: core::ops::Range<usize>,
    out: &mut [f32],
) {
    for (j, values) in cols.zip(out.chunks_exact_mut(r.m)) {
        let row = r.row(j);
        for (v, a) in values.iter_mut().zip(acts.chunks_exact(r.blocks)) {
            *v = W::dot_row(row, a);
        }
    }
}

/// The q8-mode columns in plain Rust: the definition ([`QDot::dot_row`] per output).
pub(crate) fn q8_portable(r: &Q8Rows<'_>, cols: core::ops::Range<usize>, out: &mut [f32]) {
    match r.acts {
        Q8Acts::Q8_0(a) => q8_columns::<BlockQ8_0>(r, a, cols, out),
        Q8Acts::Q4_0(a) => q8_columns::<BlockQ4_0>(r, a, cols, out),
        Q8Acts::Q5_0(a) => q8_columns::<BlockQ5_0>(r, a, cols, out),
        Q8Acts::Q4_1(a) => q8_columns::<BlockQ4_1>(r, a, cols, out),
        Q8Acts::Q5_1(a) => q8_columns::<BlockQ5_1>(r, a, cols, out),
        Q8Acts::Q4K(a) => q8_columns::<BlockQ4_K>(r, a, cols, out),
        Q8Acts::Q5K(a) => q8_columns::<BlockQ5_K>(r, a, cols, out),
        Q8Acts::Q6K(a) => q8_columns::<BlockQ6_K>(r, a, cols, out),
    }
}

/// The 32 weight quants of a 32-value block, as the signed integers they multiply.
#[inline(always)]
fn nibbles(qs: &[u8; 16], offset: i32) -> [i32; 32] {
    core::array::from_fn(|j| {
        let q = if j < 16 {
            qs[j] & 0x0f
        } else {
            qs[j - 16] >> 4
        };
        q as i32 - offset
    })
}

#[inline(always)]
fn fives(qs: &[u8; 16], qh: [u8; 4], offset: i32) -> [i32; 32] {
    let qh = u32::from_le_bytes(qh);
    core::array::from_fn(|j| {
        let low = if j < 16 {
            qs[j] & 0x0f
        } else {
            qs[j - 16] >> 4
        };
        (low as i32 | (((qh >> j) & 1) << 4) as i32) - offset
    })
}

#[inline(always)]
fn isum(w: &[i32; 32], a: &[i8; 32]) -> i32 {
    w.iter().zip(a).map(|(&w, &a)| w * a as i32).sum()
}

impl QDot for BlockQ8_0 {
    type Act = BlockQ8_0;
    fn acts(a: &[BlockQ8_0]) -> Q8Acts<'_> {
        Q8Acts::Q8_0(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_0]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let i: i32 =
                b.qs.iter()
                    .zip(&ab.qs)
                    .map(|(&w, &a)| w as i32 * a as i32)
                    .sum();
            sum += i as f32 * (f16_to_f32(b.d) * f16_to_f32(ab.d));
        }
        sum
    }
}

impl QDot for BlockQ4_0 {
    type Act = BlockQ8_0;
    fn acts(a: &[BlockQ8_0]) -> Q8Acts<'_> {
        Q8Acts::Q4_0(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_0]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let i = isum(&nibbles(&b.qs, 8), &ab.qs);
            sum += i as f32 * f16_to_f32(b.d) * f16_to_f32(ab.d);
        }
        sum
    }
}

impl QDot for BlockQ5_0 {
    type Act = BlockQ8_0;
    fn acts(a: &[BlockQ8_0]) -> Q8Acts<'_> {
        Q8Acts::Q5_0(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_0]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let i = isum(&fives(&b.qs, b.qh, 16), &ab.qs);
            sum += (f16_to_f32(b.d) * f16_to_f32(ab.d)) * i as f32;
        }
        sum
    }
}

impl QDot for BlockQ4_1 {
    type Act = BlockQ8_1;
    fn acts(a: &[BlockQ8_1]) -> Q8Acts<'_> {
        Q8Acts::Q4_1(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_1]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let i = isum(&nibbles(&b.qs, 0), &ab.qs);
            sum += (f16_to_f32(b.d) * f16_to_f32(ab.d)) * i as f32
                + f16_to_f32(b.m) * f16_to_f32(ab.s);
        }
        sum
    }
}

impl QDot for BlockQ5_1 {
    type Act = BlockQ8_1;
    fn acts(a: &[BlockQ8_1]) -> Q8Acts<'_> {
        Q8Acts::Q5_1(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_1]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let i = isum(&fives(&b.qs, b.qh, 0), &ab.qs);
            sum += (f16_to_f32(b.d) * f16_to_f32(ab.d)) * i as f32
                + f16_to_f32(b.m) * f16_to_f32(ab.s);
        }
        sum
    }
}

/// A K-quant block's integer dot with its activations: `Σ scale · q · a`.
#[inline(always)]
fn k_isum(q: &[i32; 256], scale_of: impl Fn(usize) -> i32, a: &BlockQ8_K) -> i32 {
    let mut isum = 0i32;
    for (e, (&q, &a)) in q.iter().zip(&a.qs).enumerate() {
        isum += scale_of(e) * (q * a as i32);
    }
    isum
}

/// `Σ bsums · min` of an activation block against a K-quant block's eight minima (each
/// minimum covers two sums of sixteen).
#[inline(always)]
pub(crate) fn k_mins_sum(a: &BlockQ8_K, mins: &[u8; 8]) -> i32 {
    a.bsums
        .iter()
        .enumerate()
        .map(|(j, &s)| s as i32 * mins[j / 2] as i32)
        .sum()
}

/// `Q4_K`/`Q5_K` against `Q8_K`, given each block's quants (`0..32`), scales and minima.
#[inline(always)]
fn k_min_dot<B: Block>(
    w: &[u8],
    a: &[BlockQ8_K],
    parts: impl Fn(&B) -> ([i32; 256], [u8; 8], [u8; 8], u16, u16),
) -> f32 {
    let mut sum = 0.0f32;
    for (wb, ab) in w.chunks_exact(B::BYTES).zip(a) {
        let (q, scales, mins, d, dmin) = parts(&B::read(wb));
        let isum = k_isum(&q, |e| scales[e / 32] as i32, ab);
        let msum = k_mins_sum(ab, &mins);
        let (dd, dm) = (f16_to_f32(d) * ab.d, f16_to_f32(dmin) * ab.d);
        sum += dd * isum as f32 - dm * msum as f32;
    }
    sum
}

#[inline(always)]
pub(crate) fn k_scales_mins(scales: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        (sc[j], mn[j]) = crate::quant::scale_min_k4(j, scales);
    }
    (sc, mn)
}

impl QDot for BlockQ4_K {
    type Act = BlockQ8_K;
    fn acts(a: &[BlockQ8_K]) -> Q8Acts<'_> {
        Q8Acts::Q4K(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_K]) -> f32 {
        k_min_dot::<Self>(w, a, |b| {
            let q = core::array::from_fn(|e| {
                let byte = b.qs[(e / 64) * 32 + e % 32];
                (if e % 64 < 32 { byte & 0x0f } else { byte >> 4 }) as i32
            });
            let (sc, mn) = k_scales_mins(&b.scales);
            (q, sc, mn, b.d, b.dmin)
        })
    }
}

impl QDot for BlockQ5_K {
    type Act = BlockQ8_K;
    fn acts(a: &[BlockQ8_K]) -> Q8Acts<'_> {
        Q8Acts::Q5K(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_K]) -> f32 {
        k_min_dot::<Self>(w, a, |b| {
            let q = core::array::from_fn(|e| {
                let (g, l) = (e / 64, e % 32);
                let byte = b.qs[g * 32 + l];
                let high = e % 64 >= 32;
                let low = if high { byte >> 4 } else { byte & 0x0f };
                let bit = (b.qh[l] >> (2 * g + high as usize)) & 1;
                (low | (bit << 4)) as i32
            });
            let (sc, mn) = k_scales_mins(&b.scales);
            (q, sc, mn, b.d, b.dmin)
        })
    }
}

impl QDot for BlockQ6_K {
    type Act = BlockQ8_K;
    fn acts(a: &[BlockQ8_K]) -> Q8Acts<'_> {
        Q8Acts::Q6K(a)
    }
    fn dot_row(w: &[u8], a: &[BlockQ8_K]) -> f32 {
        let mut sum = 0.0f32;
        for (wb, ab) in w.chunks_exact(Self::BYTES).zip(a) {
            let b = Self::read(wb);
            let q = b.quants().map(|q| q as i32);
            let isum = k_isum(&q, |e| b.scales[e / 16] as i32, ab);
            sum += (f16_to_f32(b.d) * ab.d) * isum as f32;
        }
        sum
    }
}

/// The accumulators of one exact-mode dot product: four vectors of [`LANES`].
pub(crate) type ExactAcc<S> = [<S as Simd>::V; 4];

/// Accumulates `x[i]·w[i]` into `acc` in the exact-mode order, for values starting at a
/// multiple of 32 of the row: whole groups of 32 to the four vectors; what is left (only at
/// a row's end) as chunks of 8 from vector 0 on, then a zero-padded ragged tail.
#[inline(always)]
pub(crate) fn exact_step<S: Simd, M: MulAdd>(
    s: S,
    mode: M,
    acc: &mut ExactAcc<S>,
    x: &[f32],
    w: &[f32],
) {
    let len = x.len().min(w.len());
    let (x, w) = (&x[..len], &w[..len]);
    let groups = len - len % (4 * LANES);
    let mut c = 0;
    while c < groups {
        for (u, a) in acc.iter_mut().enumerate() {
            let at = c + u * LANES;
            *a = mode.step(s, *a, s.load(&x[at..]), s.load(&w[at..]));
        }
        c += 4 * LANES;
    }
    let mut u = 0;
    while c + LANES <= len {
        acc[u] = mode.step(s, acc[u], s.load(&x[c..]), s.load(&w[c..]));
        c += LANES;
        u += 1;
    }
    if c < len {
        acc[u] = mode.step(s, acc[u], s.load_tail(&x[c..]), s.load_tail(&w[c..]));
    }
}

/// The result of an exact-mode dot product.
#[inline(always)]
pub(crate) fn exact_finish<S: Simd>(s: S, acc: &ExactAcc<S>) -> f32 {
    s.fold(s.add(s.add(acc[0], acc[1]), s.add(acc[2], acc[3])))
}

/// Values a float-typed weight row is decoded in at a time (the block formats: one block).
pub(crate) const EXACT_CHUNK: usize = 256;

/// The exact-mode dots of the rows `xs` (each `k` values) with one weight row `w` (`k`
/// values of a format that `decode(bytes, out)` decodes, `chunk` values in `chunk_bytes`
/// bytes at a time), into `out[r]`. The weight is decoded a chunk at a time into a buffer on
/// the stack, shared by every row of `xs`, four rows at a time.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn exact_dots<S: Simd, M: MulAdd>(
    s: S,
    mode: M,
    xs: &[&[f32]],
    w: &[u8],
    k: usize,
    chunk: usize,
    chunk_bytes: usize,
    decode: fn(&[u8], &mut [f32]),
    out: &mut [f32],
) {
    let mut buf = [0.0f32; EXACT_CHUNK];
    for (rows, out) in xs.chunks(4).zip(out.chunks_mut(4)) {
        let mut acc = [[s.zero(); 4]; 4];
        let mut at = 0;
        for bytes in w.chunks(chunk_bytes) {
            let len = chunk.min(k - at);
            let vals = &mut buf[..len];
            decode(bytes, vals);
            for (a, x) in acc.iter_mut().zip(rows) {
                exact_step(s, mode, a, &x[at..at + len], vals);
            }
            at += len;
        }
        for (o, a) in out.iter_mut().zip(&acc) {
            *o = exact_finish(s, a);
        }
    }
}

/// One call's exact-mode operands: the activation rows `xs` (each `k` values) and a weight of
/// rows of `k` values of `ty`, `row_bytes` bytes each, back to back in `w`.
pub(crate) struct QRows<'a> {
    /// The weight's element type.
    pub ty: crate::quant::GgmlType,
    /// The activation rows.
    pub xs: &'a [&'a [f32]],
    /// The weight's bytes.
    pub w: &'a [u8],
    /// Bytes per weight row.
    pub row_bytes: usize,
    /// Values per row.
    pub k: usize,
}

impl<'a> QRows<'a> {
    /// Weight row `j`'s bytes (none past the end, which no caller asks for).
    #[inline(always)]
    pub(crate) fn row(&self, j: usize) -> &'a [u8] {
        row_of(self.w, self.row_bytes, j)
    }
}

/// A compiled exact-mode loop: the output columns `cols` of `r`'s product into `out`,
/// column-major (`r.xs.len()` values a column, row by row).
pub(crate) type QExactFn = fn(&QRows<'_>, core::ops::Range<usize>, &mut [f32]);

/// The exact-mode columns `cols` on backend `s` in mode `mode`: each weight row decoded a
/// chunk at a time by the format's portable decode ([`exact_dots`]).
#[inline(always)]
pub(crate) fn exact_columns<S: Simd, M: MulAdd>(
    s: S,
    mode: M,
    r: &QRows<'_>,
    cols: core::ops::Range<usize>,
    out: &mut [f32],
) {
    let decode = crate::quant::block_decoder(r.ty);
    let (chunk, chunk_bytes) = if r.ty.block_len() == 1 {
        (EXACT_CHUNK, EXACT_CHUNK * r.ty.block_bytes())
    } else {
        (r.ty.block_len(), r.ty.block_bytes())
    };
    let m = r.xs.len();
    for (j, values) in cols.zip(out.chunks_exact_mut(m)) {
        exact_dots(
            s,
            mode,
            r.xs,
            r.row(j),
            r.k,
            chunk,
            chunk_bytes,
            decode,
            values,
        );
    }
}

/// [`exact_columns`] in plain Rust, unfused: the definition.
pub(crate) fn exact_portable(r: &QRows<'_>, cols: core::ops::Range<usize>, out: &mut [f32]) {
    exact_columns(super::simd::Scalar, super::simd::Unfused, r, cols, out)
}

/// [`exact_columns`] in plain Rust in the native mode (unfused too: plain Rust has no fused
/// step).
pub(crate) fn exact_native(r: &QRows<'_>, cols: core::ops::Range<usize>, out: &mut [f32]) {
    exact_columns(super::simd::Scalar, super::simd::Native, r, cols, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::simd::{Scalar, Unfused};
    use crate::quant::{f32_to_f16, quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K};

    #[test]
    fn q8_0_dot_is_the_integer_sum_times_the_scales_in_ggml_order() {
        let w = BlockQ8_0 {
            d: f32_to_f16(0.5),
            qs: core::array::from_fn(|j| j as i8 - 16),
        };
        let a = BlockQ8_0 {
            d: f32_to_f16(0.25),
            qs: [2; 32],
        };
        // Σ (j - 16)·2 over 0..32 = 2·(496 - 512) = -32; -32 · (0.5·0.25) = -4.
        assert_eq!(BlockQ8_0::dot_row(&w.to_le_bytes(), &[a]), -4.0);
    }

    #[test]
    fn q4_1_dot_adds_the_minimum_times_the_activation_sum() {
        let w = BlockQ4_1 {
            d: f32_to_f16(1.0),
            m: f32_to_f16(-2.0),
            qs: [0x31; 16], // values 1 (low) and 3 (high)
        };
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[16] = -1.0;
        let mut a = [BlockQ8_1::default()];
        quantize_row_q8_1(&x, &mut a).unwrap();
        // d_a = 1, qs = [127, 0.., -1, 0..], s = 126: 1·(1·127 + 3·(-1)) + (-2)·126 = -128.
        assert_eq!(BlockQ4_1::dot_row(&w.to_le_bytes(), &a), -128.0);
    }

    #[test]
    fn q4_0_dot_of_a_quantized_row_is_close_to_the_float_dot() {
        let x: [f32; 64] = core::array::from_fn(|j| ((j * 7 % 13) as f32 - 6.0) / 3.0);
        let mut a = [BlockQ8_0::default(); 2];
        quantize_row_q8_0(&x, &mut a).unwrap();
        let blocks = [
            BlockQ4_0 {
                d: f32_to_f16(0.1),
                qs: core::array::from_fn(|j| (j * 37 % 256) as u8),
            },
            BlockQ4_0 {
                d: f32_to_f16(-0.2),
                qs: core::array::from_fn(|j| (j * 91 % 256) as u8),
            },
        ];
        let bytes: alloc::vec::Vec<u8> = blocks.iter().flat_map(|b| b.to_le_bytes()).collect();
        let mut w = [0.0f32; 64];
        crate::quant::decode_row(crate::quant::GgmlType::Q4_0, &bytes, &mut w).unwrap();
        let exact: f32 = x.iter().zip(&w).map(|(x, w)| x * w).sum();
        let q8 = BlockQ4_0::dot_row(&bytes, &a);
        assert!(
            (q8 - exact).abs() < 0.02 * exact.abs().max(1.0),
            "{q8} vs {exact}"
        );
    }

    #[test]
    fn q6_k_dot_is_its_blocks_isum_times_the_scales() {
        let mut w = BlockQ6_K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [1; 16],
            d: f32_to_f16(1.0),
        };
        w.ql[0] = 0x01; // value 0: q = 1 - 32 = -31; every other value -32
        let mut x = [0.0f32; 256];
        x[0] = 1.0; // iscale -127: qs[0] = -127? no: max = 1 -> iscale = -127
        let mut a = [BlockQ8_K::ZERO];
        quantize_row_q8_K(&x, &mut a).unwrap();
        assert_eq!(a[0].qs[0], -127);
        // (1·(1/-127))·((-31)·(-127)) = 3937 / -127 = -31.
        assert_eq!(BlockQ6_K::dot_row(&w.to_le_bytes(), &a), -31.0);
    }

    #[test]
    fn q4_k_dot_is_each_blocks_isum_less_its_minima_in_one_step() {
        // Scales 1..=8 and minima 8..=1 (the 6-bit form of sub-blocks 0..4 only needs the
        // low bytes; 4..8 take the high nibbles of bytes 8..12 and the top bits of 0..8).
        let (sc, mn): ([u8; 8], [u8; 8]) = ([1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 1]);
        let mut scales = [0u8; 12];
        for j in 0..4 {
            scales[j] = sc[j];
            scales[j + 4] = mn[j];
            scales[j + 8] = sc[j + 4] | mn[j + 4] << 4;
        }
        assert_eq!(k_scales_mins(&scales), (sc, mn));
        let w = BlockQ4_K {
            d: f32_to_f16(0.5),
            dmin: f32_to_f16(0.25),
            scales,
            // Every value 3 (low nibbles) or 1 (high): sub-block 2c is 3s, 2c + 1 is 1s.
            qs: [0x13; 128],
        };
        let mut a = BlockQ8_K::ZERO;
        a.d = 2.0;
        a.qs = core::array::from_fn(|e| if e % 2 == 0 { 2 } else { -1 });
        a.bsums = [8; 16];
        // Σ scale·q·a: each sub-block of 32 sums a to 16, so Σ_j scale_j·q_j·16.
        let isum: i32 = (0..8).map(|j| sc[j] as i32 * [3, 1][j % 2] * 16).sum();
        // Σ bsums·min: two sums of 8 per minimum.
        let msum: i32 = mn.iter().map(|&m| 16 * m as i32).sum();
        assert_eq!((isum, msum), (1088, 576));
        let want = (0.5 * 2.0) * isum as f32 - (0.25 * 2.0) * msum as f32;
        assert_eq!(BlockQ4_K::dot_row(&w.to_le_bytes(), &[a]), want);
        assert_eq!(want, 800.0);
    }

    #[test]
    fn exact_steps_split_anywhere_on_32_give_the_whole_rows_bits() {
        let x: alloc::vec::Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin()).collect();
        let w: alloc::vec::Vec<f32> = (0..100).map(|i| (i as f32 * 0.11).cos()).collect();
        let (s, m) = (Scalar, Unfused);
        let mut whole = [s.zero(); 4];
        exact_step(s, m, &mut whole, &x, &w);
        let mut split = [s.zero(); 4];
        exact_step(s, m, &mut split, &x[..64], &w[..64]);
        exact_step(s, m, &mut split, &x[64..], &w[64..]);
        assert_eq!(
            exact_finish(s, &whole).to_bits(),
            exact_finish(s, &split).to_bits()
        );
    }
}
