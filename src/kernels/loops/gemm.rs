//! A packed, register-blocked matrix product in the loop nest of BLIS: one output tile at a
//! time, packing, a micro-kernel, and the loop over `KC`-deep slices, each named.
//!
//! [`gemm_tile`] packs a `KC`-deep slice of the tile's rows of A into [`MR`]-row panels and of
//! its columns of B into [`NR`]-column panels, then runs [`micro`] on every pair. The
//! micro-kernel keeps one accumulator per output element and carries it through the output
//! between slices, so every element is `((0 + a₀·b₀) + a₁·b₁) + …` in increasing inner index:
//! the bits depend on neither the tile, the blocking, nor the backend, only on the
//! [`MulAdd`] step (two roundings in the portable mode, the backend's own in the native one).

use core::ops::Range;

use super::simd::{MulAdd, Simd, LANES};

/// Rows of the micro-kernel's tile of the output.
pub(crate) const MR: usize = 6;
/// Columns of the micro-kernel's tile: two vectors, so `MR × 2` accumulators fill twelve of
/// AVX2's sixteen registers and leave room for the two B vectors and a broadcast.
pub(crate) const NR: usize = 2 * LANES;
/// Depth of a packed slice: a `KC × NR` panel of B (16 KiB) stays in L1 while the `MR`-row
/// panels of A stream past it from L2.
pub(crate) const KC: usize = 256;

/// A read-only matrix with element `(i, j)` at `data[i·row_stride + j·col_stride]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

/// One output tile of `a · b`: `a` is `[m, k]`, `b` is `[k, n]`; the tile is `rows × cols`.
#[derive(Debug, Clone)]
pub(crate) struct GemmTile<'a> {
    pub a: Strided<'a>,
    pub b: Strided<'a>,
    pub k: usize,
    pub rows: Range<usize>,
    pub cols: Range<usize>,
}

/// The packing buffer [`gemm_tile`] needs for a `rows × cols` tile of depth `k`.
pub(crate) fn pack_len(rows: usize, cols: usize, k: usize) -> usize {
    (rows.div_ceil(MR) * MR + cols.div_ceil(NR) * NR) * k.min(KC)
}

/// Writes the tile `t` to `out` (row-major, `cols.len()` values a row), using `pack` (at least
/// [`pack_len`] values) for the packed panels.
#[inline(always)]
pub(crate) fn gemm_tile<S: Simd, M: MulAdd>(
    s: S,
    mode: M,
    t: &GemmTile<'_>,
    out: &mut [f32],
    pack: &mut [f32],
) {
    let (tm, tn) = (t.rows.len(), t.cols.len());
    let out = &mut out[..tm * tn];
    out.fill(0.0);
    if t.k == 0 || tm == 0 || tn == 0 {
        return;
    }
    let (pa, pb) = pack.split_at_mut(tm.div_ceil(MR) * MR * t.k.min(KC));
    let mut pc = 0;
    while pc < t.k {
        let kc = KC.min(t.k - pc);
        let pa = &mut pa[..tm.div_ceil(MR) * MR * kc];
        let pb = &mut pb[..tn.div_ceil(NR) * NR * kc];
        for (jp, panel) in pb.chunks_exact_mut(NR * kc).enumerate() {
            let j0 = t.cols.start + jp * NR;
            let b = t.b;
            let valid = (t.cols.end - j0).min(NR);
            pack_panel::<NR>(b.data, b.col_stride, b.row_stride, j0, valid, pc, panel);
        }
        for (ip, panel) in pa.chunks_exact_mut(MR * kc).enumerate() {
            let i0 = t.rows.start + ip * MR;
            let a = t.a;
            let valid = (t.rows.end - i0).min(MR);
            pack_panel::<MR>(a.data, a.row_stride, a.col_stride, i0, valid, pc, panel);
        }
        for (jp, b_panel) in pb.chunks_exact(NR * kc).enumerate() {
            let j0 = jp * NR;
            for (ip, a_panel) in pa.chunks_exact(MR * kc).enumerate() {
                let i0 = ip * MR;
                let c = &mut out[i0 * tn + j0..];
                micro(
                    s,
                    mode,
                    a_panel,
                    b_panel,
                    c,
                    tn,
                    (tm - i0).min(MR),
                    (tn - j0).min(NR),
                );
            }
        }
        pc += kc;
    }
}

/// Packs a panel of `W` lines (rows of A, columns of B) over the depth `pc..`:
/// `dst[p·W + i] = data[(start + i)·line_stride + (pc + p)·depth_stride]` for `i < valid`, and
/// zeros for `valid ≤ i < W`. `dst.len() / W` is the depth packed.
#[inline(always)]
fn pack_panel<const W: usize>(
    data: &[f32],
    line_stride: usize,
    depth_stride: usize,
    start: usize,
    valid: usize,
    pc: usize,
    dst: &mut [f32],
) {
    if line_stride == 1 {
        // The lines are adjacent in memory: one copy per depth step.
        for (p, step) in dst.chunks_exact_mut(W).enumerate() {
            let base = start + (pc + p) * depth_stride;
            step[..valid].copy_from_slice(&data[base..base + valid]);
            step[valid..].fill(0.0);
        }
    } else {
        // One line at a time, reading it along its depth.
        for i in 0..W {
            if i < valid {
                let base = (start + i) * line_stride + pc * depth_stride;
                for (p, step) in dst.chunks_exact_mut(W).enumerate() {
                    step[i] = data[base + p * depth_stride];
                }
            } else {
                for step in dst.chunks_exact_mut(W) {
                    step[i] = 0.0;
                }
            }
        }
    }
}

/// `c[i·ldc + j] = (… (c + a[0][i]·b[0][j]) + a[1][i]·b[1][j]) …` over the packed depth, for
/// `i < mr`, `j < nr`: `a` is an `MR`-row panel, `b` an `NR`-column panel of the same depth.
/// A partial tile runs through a full-size copy, so every element gets the same steps.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)] // index loops unroll into registers
fn micro<S: Simd, M: MulAdd>(
    s: S,
    mode: M,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    ldc: usize,
    mr: usize,
    nr: usize,
) {
    let full = mr == MR && nr == NR;
    let mut edge = [[0.0f32; NR]; MR];
    if !full {
        for i in 0..mr {
            edge[i][..nr].copy_from_slice(&c[i * ldc..i * ldc + nr]);
        }
    }
    let mut acc = [[s.zero(); 2]; MR];
    for i in 0..MR {
        let row: &[f32] = if full {
            &c[i * ldc..i * ldc + NR]
        } else {
            &edge[i]
        };
        acc[i] = [s.load(&row[..LANES]), s.load(&row[LANES..NR])];
    }
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let b0 = s.load(&bp[..LANES]);
        let b1 = s.load(&bp[LANES..NR]);
        for i in 0..MR {
            let av = s.splat(ap[i]);
            acc[i][0] = mode.step(s, acc[i][0], av, b0);
            acc[i][1] = mode.step(s, acc[i][1], av, b1);
        }
    }
    if full {
        for i in 0..MR {
            let row = &mut c[i * ldc..i * ldc + NR];
            s.store(acc[i][0], &mut row[..LANES]);
            s.store(acc[i][1], &mut row[LANES..]);
        }
    } else {
        for i in 0..mr {
            s.store(acc[i][0], &mut edge[i][..LANES]);
            s.store(acc[i][1], &mut edge[i][LANES..]);
            c[i * ldc..i * ldc + nr].copy_from_slice(&edge[i][..nr]);
        }
    }
}
