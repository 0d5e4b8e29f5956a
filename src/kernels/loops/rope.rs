//! Rotary position embedding: the angle table and one rotated row.

use alloc::vec::Vec;

/// `cos` and `sin` of `(offset + i) · theta^(-2j / hd)` for positions `i < len` and pairs
/// `j < hd / 2`, row-major by position, computed in f64 and rounded once: a position in the
/// thousands keeps its angle to f32 precision. `None` when it cannot be allocated.
pub(crate) fn angle_table(
    offset: usize,
    len: usize,
    hd: usize,
    theta: f32,
) -> Option<Vec<[f32; 2]>> {
    let mut table = Vec::new();
    table.try_reserve_exact(len.checked_mul(hd / 2)?).ok()?;
    let inv_freq = inv_frequencies(hd, theta)?;
    push_angles(offset, len, &inv_freq, &mut table);
    Some(table)
}

/// `theta^(-2j/hd)` in f64 for `j < hd/2`: the frequencies of [`angle_table`].
pub(crate) fn inv_frequencies(hd: usize, theta: f32) -> Option<Vec<f64>> {
    let half = hd / 2;
    let theta = f64::from(theta);
    let mut inv_freq = Vec::new();
    inv_freq.try_reserve_exact(half).ok()?;
    inv_freq.extend((0..half).map(|j| libm::pow(theta, -((2 * j) as f64) / hd as f64)));
    Some(inv_freq)
}

/// Appends to `table` the angles of positions `offset..offset + len` at the frequencies
/// `inv_freq` ([`inv_frequencies`]), as [`angle_table`] computes them (it allocates only where
/// `table` has no room for them).
pub(crate) fn push_angles(offset: usize, len: usize, inv_freq: &[f64], table: &mut Vec<[f32; 2]>) {
    for i in 0..len {
        let pos = (offset + i) as f64;
        for &f in inv_freq {
            let angle = pos * f;
            table.push([libm::cos(angle) as f32, libm::sin(angle) as f32]);
        }
    }
}

/// Rotates the pairs `(x[j], x[j + hd/2])` of one row by the angles of `cs` (rotate-half, the
/// Llama convention): `out[j] = x[j]·cos - x[j+h]·sin`, `out[j+h] = x[j+h]·cos + x[j]·sin`.
#[inline(always)]
pub(crate) fn rope_row(x: &[f32], cs: &[[f32; 2]], out: &mut [f32]) {
    let half = cs.len();
    let (x1, x2) = x.split_at(half);
    let (o1, o2) = out.split_at_mut(half);
    for j in 0..half {
        let [c, s] = cs[j];
        o1[j] = x1[j] * c - x2[j] * s;
        o2[j] = x2[j] * c + x1[j] * s;
    }
}

/// Rotates the adjacent pairs `(x[2j], x[2j+1])` of one row by the angles of `cs` (the
/// interleaved layout, llama.cpp's "normal" mode, in which GGUF stores Llama's Q and K rows):
/// `out[2j] = x[2j]·cos - x[2j+1]·sin`, `out[2j+1] = x[2j+1]·cos + x[2j]·sin`.
#[inline(always)]
pub(crate) fn rope_interleaved_row(x: &[f32], cs: &[[f32; 2]], out: &mut [f32]) {
    for ((o, x), &[c, s]) in out.chunks_exact_mut(2).zip(x.chunks_exact(2)).zip(cs) {
        o[0] = x[0] * c - x[1] * s;
        o[1] = x[1] * c + x[0] * s;
    }
}
