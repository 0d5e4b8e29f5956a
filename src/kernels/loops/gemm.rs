//! A packed, register-blocked matrix product in the loop nest of BLIS: one output tile at a
//! time, packing, a micro-kernel, and the loop over `KC`-deep slices, each named.
//!
//! [`gemm_tile`] packs a `KC`-deep slice of the tile's rows of A into `MR`-row panels and of
//! its columns of B into `NR`-column panels, then runs a [`MicroKernel`] on every pair:
//! [`Vectors`] on any [`Simd`] backend, or the AVX-512 one of `gemm_avx512.rs`. The
//! micro-kernel keeps one accumulator per output element and carries it through the output
//! between slices, so every element is `((0 + a₀·b₀) + a₁·b₁) + …` in increasing inner index:
//! the bits depend on neither the tile, the blocking, nor the backend, only on the
//! [`MulAdd`] step (two roundings in the portable mode, the backend's own in the native one).

use core::ops::Range;

use super::conv::Im2col;
use super::panel::{MAX_MR, MAX_NR};
use super::simd::{MulAdd, Simd, LANES};

/// A micro-kernel: `MR × NR` accumulators, one per output element, run over a packed
/// `MR`-row panel of A and `NR`-column panel of B of the same depth.
pub(crate) trait MicroKernel: Copy {
    /// Rows of its tile.
    const MR: usize;
    /// Columns of its tile.
    const NR: usize;
    /// Depth of a packed slice: a `KC × NR` panel of B stays in L1 while the `MR`-row panels
    /// of A stream past it from L2.
    const KC: usize;
    /// `c[i·ldc + j] = (… (c + a[0][i]·b[0][j]) + a[1][i]·b[1][j]) …` over the packed depth
    /// (`a.len() / MR` steps), for the whole `MR × NR` tile, each step as the mode rounds it.
    fn run(self, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize);
}

/// The largest `KC` of any micro-kernel: the depth packing buffers are sized for.
const MAX_KC: usize = 256;

/// A read-only matrix with element `(i, j)` at `data[i·row_stride + j·col_stride]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

/// Where the right operand of a product comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A matrix in memory.
    Strided(Strided<'a>),
    /// A convolution's input, read as its `[taps, pixels]` matrix.
    Im2col(Im2col<'a>),
}

/// One output tile of `init + a · b`: `a` is `[m, k]`, `b` is `[k, n]`; the tile is
/// `rows × cols`. Row `r` starts from `init[r]` (a convolution's bias), else from `0`.
#[derive(Debug, Clone)]
pub(crate) struct GemmTile<'a> {
    pub a: Strided<'a>,
    pub b: Source<'a>,
    pub k: usize,
    pub rows: Range<usize>,
    pub cols: Range<usize>,
    pub init: Option<&'a [f32]>,
}

/// Rows of A packed at once: an `MC × KC` block of A stays in L2 while the micro-kernel
/// walks the packed B block past it.
const MC: usize = 144;
/// Columns of B packed at once: a `KC × NC` block of B stays in L2 and is reused by every
/// `MC`-row block of the tile, so a tile of many rows packs each value of B once.
pub(crate) const NC: usize = 512;

/// The packing buffer [`gemm_tile`] needs for a `rows × cols` tile of depth `k`, whichever
/// micro-kernel runs.
pub(crate) fn pack_len(rows: usize, cols: usize, k: usize) -> usize {
    (rows.min(MC).div_ceil(MAX_MR) * MAX_MR + cols.min(NC).div_ceil(MAX_NR) * MAX_NR)
        * k.min(MAX_KC)
}

/// Writes the tile `t` to `out`, row `i` of the tile at `out[i·ldc..][..cols.len()]`, using
/// `pack` (at least [`pack_len`] values) for the packed blocks.
///
/// The loop nest of BLIS: for each `NC`-column block, for each `KC`-deep slice, B's block is
/// packed once and every `MC`-row block of A is packed and multiplied against it. Each
/// element's steps run in increasing inner index whatever the block sizes.
#[inline(always)]
pub(crate) fn gemm_tile<K: MicroKernel>(
    kernel: K,
    t: &GemmTile<'_>,
    out: &mut [f32],
    ldc: usize,
    pack: &mut [f32],
) {
    let (mr, nr) = (K::MR, K::NR);
    let (tm, tn) = (t.rows.len(), t.cols.len());
    if tm == 0 || tn == 0 {
        return;
    }
    let out = &mut out[..(tm - 1) * ldc + tn];
    let init = |out: &mut [f32], rows: Range<usize>, cols: Range<usize>| {
        for i in rows {
            let v = t.init.map_or(0.0, |init| init[t.rows.start + i]);
            out[i * ldc + cols.start..i * ldc + cols.end].fill(v);
        }
    };
    if t.k == 0 {
        init(out, 0..tm, 0..tn);
        return;
    }
    let mc_max = MC.min(tm).div_ceil(mr) * mr;
    let (pa, pb) = pack.split_at_mut(mc_max * t.k.min(K::KC));
    // Blocks of even width (a multiple of every `NR`), so the last one is not a sliver.
    let block = tn.div_ceil(tn.div_ceil(NC)).div_ceil(MAX_NR) * MAX_NR;
    for jc in (0..tn).step_by(block) {
        let nc = block.min(tn - jc);
        let mut pc = 0;
        while pc < t.k {
            let kc = K::KC.min(t.k - pc);
            let pb = &mut pb[..nc.div_ceil(nr) * nr * kc];
            for (jp, panel) in pb.chunks_exact_mut(nr * kc).enumerate() {
                let j0 = t.cols.start + jc + jp * nr;
                let valid = (t.cols.start + jc + nc - j0).min(nr);
                match t.b {
                    Source::Strided(b) => {
                        pack_panel(nr, b.data, b.col_stride, b.row_stride, j0, valid, pc, panel);
                    }
                    Source::Im2col(b) => b.pack(nr, j0, valid, pc, panel),
                }
            }
            for ic in (0..tm).step_by(MC) {
                let mc = MC.min(tm - ic);
                if pc == 0 {
                    // Each element starts from its initial value just before its first step.
                    init(out, ic..ic + mc, jc..jc + nc);
                }
                let pa = &mut pa[..mc.div_ceil(mr) * mr * kc];
                for (ip, panel) in pa.chunks_exact_mut(mr * kc).enumerate() {
                    let i0 = t.rows.start + ic + ip * mr;
                    let a = t.a;
                    let valid = (t.rows.start + ic + mc - i0).min(mr);
                    pack_panel(mr, a.data, a.row_stride, a.col_stride, i0, valid, pc, panel);
                }
                for (jp, b_panel) in pb.chunks_exact(nr * kc).enumerate() {
                    let j0 = jc + jp * nr;
                    for (ip, a_panel) in pa.chunks_exact(mr * kc).enumerate() {
                        let i0 = ic + ip * mr;
                        let (rows, cols) = ((ic + mc - i0).min(mr), (jc + nc - j0).min(nr));
                        let c = &mut out[i0 * ldc + j0..];
                        if rows == mr && cols == nr {
                            kernel.run(a_panel, b_panel, c, ldc);
                        } else {
                            // A partial tile runs whole on a copy, so its elements get the
                            // same steps.
                            let mut edge = [0.0f32; MAX_MR * MAX_NR];
                            for i in 0..rows {
                                edge[i * nr..i * nr + cols]
                                    .copy_from_slice(&c[i * ldc..i * ldc + cols]);
                            }
                            kernel.run(a_panel, b_panel, &mut edge, nr);
                            for i in 0..rows {
                                c[i * ldc..i * ldc + cols]
                                    .copy_from_slice(&edge[i * nr..i * nr + cols]);
                            }
                        }
                    }
                }
            }
            pc += kc;
        }
    }
}

/// Packs a panel of `w` lines (rows of A, columns of B) over the depth `pc..`:
/// `dst[p·w + i] = data[(start + i)·line_stride + (pc + p)·depth_stride]` for `i < valid`, and
/// zeros for `valid ≤ i < w`. `dst.len() / w` is the depth packed. The micro-kernels' widths
/// get a copy with `w` known at compile time (no call per step, lines held in registers).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the panel's geometry, named
fn pack_panel(
    w: usize,
    data: &[f32],
    line_stride: usize,
    depth_stride: usize,
    start: usize,
    valid: usize,
    pc: usize,
    dst: &mut [f32],
) {
    let geometry = Panel {
        line_stride,
        depth_stride,
        start,
        valid,
        pc,
    };
    match w {
        6 => pack_lines::<6>(data, &geometry, dst),
        12 => pack_lines::<12>(data, &geometry, dst),
        16 => pack_lines::<16>(data, &geometry, dst),
        32 => pack_lines::<32>(data, &geometry, dst),
        _ => pack_any(w, data, &geometry, dst),
    }
}

/// Where a panel's lines start and how they are laid out (see [`pack_panel`]).
struct Panel {
    line_stride: usize,
    depth_stride: usize,
    start: usize,
    valid: usize,
    pc: usize,
}

#[inline(always)]
fn pack_lines<const W: usize>(data: &[f32], g: &Panel, dst: &mut [f32]) {
    let depth = dst.len() / W;
    if g.line_stride == 1 {
        // The lines are adjacent in memory: one copy per depth step.
        for (p, step) in dst.chunks_exact_mut(W).enumerate() {
            let base = g.start + (g.pc + p) * g.depth_stride;
            if g.valid == W {
                step.copy_from_slice(&data[base..base + W]);
            } else {
                step[..g.valid].copy_from_slice(&data[base..base + g.valid]);
                step[g.valid..].fill(0.0);
            }
        }
    } else if g.depth_stride == 1 && g.valid == W && depth > 0 {
        // Each line is contiguous along the depth: read the W lines side by side.
        let lines: [&[f32]; W] = core::array::from_fn(|i| {
            let base = (g.start + i) * g.line_stride + g.pc;
            &data[base..base + depth]
        });
        for (p, step) in dst.chunks_exact_mut(W).enumerate() {
            for (x, line) in step.iter_mut().zip(&lines) {
                *x = line[p];
            }
        }
    } else {
        pack_any(W, data, g, dst);
    }
}

fn pack_any(w: usize, data: &[f32], g: &Panel, dst: &mut [f32]) {
    for i in 0..w {
        if i < g.valid {
            let base = (g.start + i) * g.line_stride + g.pc * g.depth_stride;
            for (p, step) in dst.chunks_exact_mut(w).enumerate() {
                step[i] = data[base + p * g.depth_stride];
            }
        } else {
            for step in dst.chunks_exact_mut(w) {
                step[i] = 0.0;
            }
        }
    }
}

/// The micro-kernel of every [`Simd`] backend: `6 × 16` (two vectors a row), so twelve
/// accumulators fill twelve of AVX2's sixteen registers and leave room for the two B vectors
/// and a broadcast.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vectors<S, M> {
    pub s: S,
    pub mode: M,
}

const VMR: usize = 6;
const VNR: usize = 2 * LANES;

impl<S: Simd, M: MulAdd> MicroKernel for Vectors<S, M> {
    const MR: usize = VMR;
    const NR: usize = VNR;
    const KC: usize = 256;

    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // index loops unroll into registers
    fn run(self, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize) {
        let Self { s, mode } = self;
        let mut acc = [[s.zero(); 2]; VMR];
        for i in 0..VMR {
            let row = &c[i * ldc..i * ldc + VNR];
            acc[i] = [s.load(&row[..LANES]), s.load(&row[LANES..VNR])];
        }
        for (ap, bp) in a.chunks_exact(VMR).zip(b.chunks_exact(VNR)) {
            let b0 = s.load(&bp[..LANES]);
            let b1 = s.load(&bp[LANES..VNR]);
            for i in 0..VMR {
                let av = s.splat(ap[i]);
                acc[i][0] = mode.step(s, acc[i][0], av, b0);
                acc[i][1] = mode.step(s, acc[i][1], av, b1);
            }
        }
        for i in 0..VMR {
            let row = &mut c[i * ldc..i * ldc + VNR];
            s.store(acc[i][0], &mut row[..LANES]);
            s.store(acc[i][1], &mut row[LANES..]);
        }
    }
}
