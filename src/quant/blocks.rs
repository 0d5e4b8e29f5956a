//! One `#[repr(C)]` struct per block format, its size checked at compile time, read from and
//! written to its little-endian bytes, and its exact decode — the definition every faster path
//! must match bit for bit.
//!
//! The decodes are ggml's `dequantize_row_*` (`ggml-quants.c`), operation for operation: each
//! value is one or two f32 roundings of the f16 scales widened exactly
//! ([`f16_to_f32`]), in ggml's order — `d·q` for the symmetric formats, `d·q + m` for
//! `Q4_1`/`Q5_1`, `(d·sc)·q − dmin·m` for `Q4_K`/`Q5_K`, `(d·sc)·q` for `Q6_K` — the same
//! bits as the `gguf` Python package's `gguf.quants.dequantize`.

use super::format::GgmlType;
use super::half::f16_to_f32;

/// Copies `N` bytes of `b` from `at` (constant offsets of a fixed-size block).
#[inline(always)]
fn take<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

#[inline(always)]
fn half(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(take(b, at))
}

/// `Q8_0`: 32 values `d·q`, `q` a signed byte.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ8_0 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// The 32 quants.
    pub qs: [i8; 32],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);

/// `Q4_0`: 32 values `d·(q − 8)`, `q` 4 bits: value `j` in the low nibble of `qs[j]`, value
/// `j + 16` in its high nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ4_0 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// The 32 nibbles.
    pub qs: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_0>() == 18);

/// `Q4_1`: 32 values `d·q + m`, `q` 4 bits laid out as in [`BlockQ4_0`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ4_1 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// The minimum, IEEE half bits.
    pub m: u16,
    /// The 32 nibbles.
    pub qs: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_1>() == 20);

/// `Q5_0`: 32 values `d·(q − 16)`, `q` 5 bits: the low four as in [`BlockQ4_0`], the fifth of
/// value `j` bit `j` of `qh` (little-endian `u32`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ5_0 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// The fifth bits, little-endian.
    pub qh: [u8; 4],
    /// The low nibbles.
    pub qs: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<BlockQ5_0>() == 22);

/// `Q5_1`: 32 values `d·q + m`, `q` 5 bits laid out as in [`BlockQ5_0`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockQ5_1 {
    /// The scale, IEEE half bits.
    pub d: u16,
    /// The minimum, IEEE half bits.
    pub m: u16,
    /// The fifth bits, little-endian.
    pub qh: [u8; 4],
    /// The low nibbles.
    pub qs: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<BlockQ5_1>() == 24);

/// `Q4_K`: 256 values in 8 sub-blocks of 32; sub-block `s` is `(d·sc[s])·q − dmin·m[s]` with
/// 6-bit `sc`, `m` packed in `scales` (see [`scale_min_k4`]) and 4-bit `q`: in each 64 values,
/// the first 32 the low nibbles of 32 bytes of `qs`, the next 32 their high nibbles.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ4_K {
    /// The super-scale, IEEE half bits.
    pub d: u16,
    /// The super-minimum, IEEE half bits.
    pub dmin: u16,
    /// Eight 6-bit scales and eight 6-bit minima.
    pub scales: [u8; 12],
    /// The 256 nibbles.
    pub qs: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_K>() == 144);

/// `Q5_K`: as [`BlockQ4_K`] with a fifth bit per value: value `64·g + l` (`l < 32`) has bit
/// `2g` of `qh[l]`, value `64·g + 32 + l` bit `2g + 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ5_K {
    /// The super-scale, IEEE half bits.
    pub d: u16,
    /// The super-minimum, IEEE half bits.
    pub dmin: u16,
    /// Eight 6-bit scales and eight 6-bit minima.
    pub scales: [u8; 12],
    /// The fifth bits.
    pub qh: [u8; 32],
    /// The low nibbles.
    pub qs: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockQ5_K>() == 176);

/// `Q6_K`: 256 values in 16 sub-blocks of 16; sub-block `s` is `(d·scales[s])·(q − 32)` with a
/// signed 8-bit scale and 6-bit `q`: low four bits in `ql`, high two in `qh` (each half of 128
/// values: `ql[0..64]` low then high nibbles, `qh[0..32]` four 2-bit fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockQ6_K {
    /// The low four bits.
    pub ql: [u8; 128],
    /// The high two bits.
    pub qh: [u8; 64],
    /// The 16 signed scales.
    pub scales: [i8; 16],
    /// The super-scale, IEEE half bits.
    pub d: u16,
}
const _: () = assert!(core::mem::size_of::<BlockQ6_K>() == 210);

/// Scale and minimum `j` (`0..8`) of a K-quant block's 12 packed bytes (ggml's
/// `get_scale_min_k4`): for `j < 4` the low six bits of bytes `j` and `j + 4`; for `j >= 4`
/// a nibble of byte `j + 4` (low: scale, high: minimum) below the top two bits of byte
/// `j − 4` (scale) or `j` (minimum).
///
/// ```
/// use skainet_schedule::quant::scale_min_k4;
/// let mut s = [0u8; 12];
/// s[1] = 0b10_000101; // scale 1: 5; top bits of scale 5: 0b10
/// s[5] = 0b11_001001; // minimum 1: 9; top bits of minimum 5: 0b11
/// s[9] = 0x7c;        // low nibbles of scale 5 (0xc) and minimum 5 (0x7)
/// assert_eq!(scale_min_k4(1, &s), (5, 9));
/// assert_eq!(scale_min_k4(5, &s), (0b10_1100, 0b11_0111));
/// ```
#[inline(always)]
pub const fn scale_min_k4(j: usize, scales: &[u8; 12]) -> (u8, u8) {
    let j = j % 8;
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        (
            (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4),
            (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
        )
    }
}

impl BlockQ8_0 {
    /// Values per block.
    pub const LEN: usize = 32;
    /// Bytes per block.
    pub const BYTES: usize = 34;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 34]) -> Self {
        Self {
            d: half(b, 0),
            qs: take::<32>(b, 2).map(|q| q as i8),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 34] {
        let mut b = [0u8; 34];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        for (o, q) in b[2..].iter_mut().zip(self.qs) {
            *o = q as u8;
        }
        b
    }

    /// The 32 values, `q·d`.
    #[inline]
    pub fn decode(&self, out: &mut [f32; 32]) {
        let d = f16_to_f32(self.d);
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

impl BlockQ4_0 {
    /// Values per block.
    pub const LEN: usize = 32;
    /// Bytes per block.
    pub const BYTES: usize = 18;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 18]) -> Self {
        Self {
            d: half(b, 0),
            qs: take(b, 2),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 18] {
        let mut b = [0u8; 18];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..].copy_from_slice(&self.qs);
        b
    }

    /// The 32 values, `(q − 8)·d`.
    #[inline]
    pub fn decode(&self, out: &mut [f32; 32]) {
        let d = f16_to_f32(self.d);
        let (lo, hi) = out.split_at_mut(16);
        for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&self.qs) {
            *l = ((q & 0x0f) as i32 - 8) as f32 * d;
            *h = ((q >> 4) as i32 - 8) as f32 * d;
        }
    }
}

impl BlockQ4_1 {
    /// Values per block.
    pub const LEN: usize = 32;
    /// Bytes per block.
    pub const BYTES: usize = 20;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 20]) -> Self {
        Self {
            d: half(b, 0),
            m: half(b, 2),
            qs: take(b, 4),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..4].copy_from_slice(&self.m.to_le_bytes());
        b[4..].copy_from_slice(&self.qs);
        b
    }

    /// The 32 values, `q·d + m` (two roundings).
    #[inline]
    pub fn decode(&self, out: &mut [f32; 32]) {
        let (d, m) = (f16_to_f32(self.d), f16_to_f32(self.m));
        let (lo, hi) = out.split_at_mut(16);
        for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&self.qs) {
            *l = (q & 0x0f) as f32 * d + m;
            *h = (q >> 4) as f32 * d + m;
        }
    }
}

/// The fifth bits of a 32-value block: value `j`'s is bit `j` of the little-endian `qh`, as
/// `0x10` or `0`.
#[inline(always)]
fn fifth_bits(qh: [u8; 4], j: usize) -> (u8, u8) {
    let qh = u32::from_le_bytes(qh);
    (
        (((qh >> j) << 4) & 0x10) as u8,
        ((qh >> (j + 12)) & 0x10) as u8,
    )
}

impl BlockQ5_0 {
    /// Values per block.
    pub const LEN: usize = 32;
    /// Bytes per block.
    pub const BYTES: usize = 22;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 22]) -> Self {
        Self {
            d: half(b, 0),
            qh: take(b, 2),
            qs: take(b, 6),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 22] {
        let mut b = [0u8; 22];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..6].copy_from_slice(&self.qh);
        b[6..].copy_from_slice(&self.qs);
        b
    }

    /// The 32 values, `(q − 16)·d`.
    #[inline]
    pub fn decode(&self, out: &mut [f32; 32]) {
        let d = f16_to_f32(self.d);
        let (lo, hi) = out.split_at_mut(16);
        for (j, ((l, h), &q)) in lo.iter_mut().zip(hi).zip(&self.qs).enumerate() {
            let (h0, h1) = fifth_bits(self.qh, j);
            *l = (((q & 0x0f) | h0) as i32 - 16) as f32 * d;
            *h = (((q >> 4) | h1) as i32 - 16) as f32 * d;
        }
    }
}

impl BlockQ5_1 {
    /// Values per block.
    pub const LEN: usize = 32;
    /// Bytes per block.
    pub const BYTES: usize = 24;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 24]) -> Self {
        Self {
            d: half(b, 0),
            m: half(b, 2),
            qh: take(b, 4),
            qs: take(b, 8),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..4].copy_from_slice(&self.m.to_le_bytes());
        b[4..8].copy_from_slice(&self.qh);
        b[8..].copy_from_slice(&self.qs);
        b
    }

    /// The 32 values, `q·d + m` (two roundings).
    #[inline]
    pub fn decode(&self, out: &mut [f32; 32]) {
        let (d, m) = (f16_to_f32(self.d), f16_to_f32(self.m));
        let (lo, hi) = out.split_at_mut(16);
        for (j, ((l, h), &q)) in lo.iter_mut().zip(hi).zip(&self.qs).enumerate() {
            let (h0, h1) = fifth_bits(self.qh, j);
            *l = ((q & 0x0f) | h0) as f32 * d + m;
            *h = ((q >> 4) | h1) as f32 * d + m;
        }
    }
}

/// The scales and minima of a K-quant block as f32: `d·sc[s]` and `dmin·m[s]`.
#[inline(always)]
pub(crate) fn k_scales(d: u16, dmin: u16, scales: &[u8; 12]) -> ([f32; 8], [f32; 8]) {
    k_scales_widened(f16_to_f32(d), f16_to_f32(dmin), scales)
}

/// [`k_scales`] with `d` and `dmin` already widened (by a vector loop's own conversion, which
/// gives [`f16_to_f32`]'s bits).
#[inline(always)]
pub(crate) fn k_scales_widened(d: f32, dmin: f32, scales: &[u8; 12]) -> ([f32; 8], [f32; 8]) {
    let mut ds = [0.0; 8];
    let mut ms = [0.0; 8];
    for s in 0..8 {
        let (sc, m) = scale_min_k4(s, scales);
        ds[s] = d * sc as f32;
        ms[s] = dmin * m as f32;
    }
    (ds, ms)
}

impl BlockQ4_K {
    /// Values per block.
    pub const LEN: usize = 256;
    /// Bytes per block.
    pub const BYTES: usize = 144;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 144]) -> Self {
        Self {
            d: half(b, 0),
            dmin: half(b, 2),
            scales: take(b, 4),
            qs: take(b, 16),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 144] {
        let mut b = [0u8; 144];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..4].copy_from_slice(&self.dmin.to_le_bytes());
        b[4..16].copy_from_slice(&self.scales);
        b[16..].copy_from_slice(&self.qs);
        b
    }

    /// The 256 values, `(d·sc)·q − dmin·m` per sub-block (each product rounded, then the
    /// difference).
    #[inline]
    pub fn decode(&self, out: &mut [f32; 256]) {
        let (ds, ms) = k_scales(self.d, self.dmin, &self.scales);
        for (g, (chunk, qs)) in out
            .chunks_exact_mut(64)
            .zip(self.qs.chunks_exact(32))
            .enumerate()
        {
            let (lo, hi) = chunk.split_at_mut(32);
            let (d1, m1, d2, m2) = (ds[2 * g], ms[2 * g], ds[2 * g + 1], ms[2 * g + 1]);
            for ((l, h), &q) in lo.iter_mut().zip(hi).zip(qs) {
                *l = d1 * (q & 0x0f) as f32 - m1;
                *h = d2 * (q >> 4) as f32 - m2;
            }
        }
    }
}

impl BlockQ5_K {
    /// Values per block.
    pub const LEN: usize = 256;
    /// Bytes per block.
    pub const BYTES: usize = 176;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 176]) -> Self {
        Self {
            d: half(b, 0),
            dmin: half(b, 2),
            scales: take(b, 4),
            qh: take(b, 16),
            qs: take(b, 48),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 176] {
        let mut b = [0u8; 176];
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        b[2..4].copy_from_slice(&self.dmin.to_le_bytes());
        b[4..16].copy_from_slice(&self.scales);
        b[16..48].copy_from_slice(&self.qh);
        b[48..].copy_from_slice(&self.qs);
        b
    }

    /// The 256 values, `(d·sc)·q − dmin·m` per sub-block.
    #[inline]
    pub fn decode(&self, out: &mut [f32; 256]) {
        let (ds, ms) = k_scales(self.d, self.dmin, &self.scales);
        for (g, (chunk, qs)) in out
            .chunks_exact_mut(64)
            .zip(self.qs.chunks_exact(32))
            .enumerate()
        {
            let (lo, hi) = chunk.split_at_mut(32);
            let (d1, m1, d2, m2) = (ds[2 * g], ms[2 * g], ds[2 * g + 1], ms[2 * g + 1]);
            let (u1, u2) = (1u8 << (2 * g), 2u8 << (2 * g));
            for (((l, h), &q), &qh) in lo.iter_mut().zip(hi).zip(qs).zip(&self.qh) {
                let q1 = (q & 0x0f) + if qh & u1 != 0 { 16 } else { 0 };
                let q2 = (q >> 4) + if qh & u2 != 0 { 16 } else { 0 };
                *l = d1 * q1 as f32 - m1;
                *h = d2 * q2 as f32 - m2;
            }
        }
    }
}

impl BlockQ6_K {
    /// Values per block.
    pub const LEN: usize = 256;
    /// Bytes per block.
    pub const BYTES: usize = 210;

    /// The block stored in `b`.
    pub fn from_le_bytes(b: &[u8; 210]) -> Self {
        Self {
            ql: take(b, 0),
            qh: take(b, 128),
            scales: take::<16>(b, 192).map(|s| s as i8),
            d: half(b, 208),
        }
    }

    /// The block's stored bytes.
    pub fn to_le_bytes(&self) -> [u8; 210] {
        let mut b = [0u8; 210];
        b[..128].copy_from_slice(&self.ql);
        b[128..192].copy_from_slice(&self.qh);
        for (o, s) in b[192..208].iter_mut().zip(self.scales) {
            *o = s as u8;
        }
        b[208..].copy_from_slice(&self.d.to_le_bytes());
        b
    }

    /// The 6-bit values minus 32, in value order.
    #[inline(always)]
    pub(crate) fn quants(&self) -> [i8; 256] {
        let mut out = [0i8; 256];
        for ((o, ql), qh) in out
            .chunks_exact_mut(128)
            .zip(self.ql.chunks_exact(64))
            .zip(self.qh.chunks_exact(32))
        {
            for l in 0..32 {
                let h = qh[l];
                o[l] = ((ql[l] & 0x0f) | ((h & 3) << 4)) as i8 - 32;
                o[l + 32] = ((ql[l + 32] & 0x0f) | (((h >> 2) & 3) << 4)) as i8 - 32;
                o[l + 64] = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                o[l + 96] = ((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        out
    }

    /// The 256 values, `(d·scale)·(q − 32)` per sub-block of 16.
    #[inline]
    pub fn decode(&self, out: &mut [f32; 256]) {
        let d = f16_to_f32(self.d);
        let q = self.quants();
        for ((o, q), &sc) in out
            .chunks_exact_mut(16)
            .zip(q.chunks_exact(16))
            .zip(&self.scales)
        {
            let ds = d * sc as f32;
            for (o, &q) in o.iter_mut().zip(q) {
                *o = ds * q as f32;
            }
        }
    }
}

/// The weight formats' geometry agrees with [`GgmlType`]'s.
const _: () = {
    assert!(BlockQ8_0::BYTES == GgmlType::Q8_0.block_bytes());
    assert!(BlockQ4_0::BYTES == GgmlType::Q4_0.block_bytes());
    assert!(BlockQ4_1::BYTES == GgmlType::Q4_1.block_bytes());
    assert!(BlockQ5_0::BYTES == GgmlType::Q5_0.block_bytes());
    assert!(BlockQ5_1::BYTES == GgmlType::Q5_1.block_bytes());
    assert!(BlockQ4_K::BYTES == GgmlType::Q4_K.block_bytes());
    assert!(BlockQ5_K::BYTES == GgmlType::Q5_K.block_bytes());
    assert!(BlockQ6_K::BYTES == GgmlType::Q6_K.block_bytes());
    assert!(BlockQ8_0::LEN == GgmlType::Q8_0.block_len());
    assert!(BlockQ4_K::LEN == GgmlType::Q4_K.block_len());
};
