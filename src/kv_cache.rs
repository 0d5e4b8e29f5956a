//! [`KvCache`]: the keys and values of one attention layer, preallocated and appended in place.

use alloc::vec;

use crate::kernels::KernelError;
use crate::pages::{try_zeroed_in, Values};
use crate::shape;
use crate::tensor::{TensorError, TensorView};
use crate::ShapeError;

/// The keys and values of one attention layer: two `[b, nKV, capacity, hd]` buffers allocated
/// once, filled position by position.
///
/// [`append`](Self::append) writes the new positions in place — O(new positions), whatever
/// the cache already holds — and [`keys`](Self::keys) / [`values`](Self::values) are views of
/// the filled prefix that attention reads without a copy (strides
/// `[nKV·capacity·hd, capacity·hd, hd, 1]`). Attention over these views gives the same bits as
/// attention over compact tensors of the same values.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{scaled_dot_product_attention, KvCache, SdpaOptions, Sequential, Tensor};
///
/// let (heads, kv_heads, hd) = (4, 2, 8);
/// let mut cache = KvCache::new(1, kv_heads, 16, hd).unwrap();
/// for step in 0..3 {
///     let k = Tensor::from_fn(vec![1, kv_heads, 1, hd], |i| (step * 16 + i) as f32 * 0.01).unwrap();
///     let v = Tensor::from_fn(vec![1, kv_heads, 1, hd], |i| i as f32).unwrap();
///     cache.append(&k, &v).unwrap();
/// }
/// assert_eq!(cache.len(), 3);
/// assert_eq!(cache.keys().shape(), [1, 2, 3, 8]);
///
/// let q = Tensor::from_fn(vec![1, heads, 1, hd], |i| i as f32 * 0.1).unwrap();
/// let options = SdpaOptions { scale: None, causal: true };
/// let out = scaled_dot_product_attention(&q, cache.keys(), cache.values(), None, &options, &Sequential)
///     .unwrap();
/// assert_eq!(out.shape(), [1, 4, 1, 8]);
///
/// // Past the capacity: an error, and nothing is written.
/// let big = Tensor::zeros(vec![1, kv_heads, 14, hd]).unwrap();
/// assert!(cache.append(&big, &big).is_err());
/// assert_eq!(cache.len(), 3);
/// # }
/// ```
#[derive(Clone, PartialEq)]
pub struct KvCache {
    keys: Values,
    values: Values,
    shape: [usize; 4],
    len: usize,
}

/// The shape and fill, not the buffers.
impl core::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KvCache")
            .field("shape", &self.shape)
            .field("len", &self.len)
            .finish()
    }
}

impl KvCache {
    /// An empty cache for `batch` sequences of `kv_heads` heads of `head_dim` values, holding
    /// at most `capacity` positions.
    ///
    /// # Errors
    ///
    /// [`KernelError::Shape`] ([`ShapeError::TooLarge`], op `kv_cache`) when a buffer would hold
    /// more than [`MAX_ELEMENTS`](crate::shape::MAX_ELEMENTS) values;
    /// [`KernelError::Tensor`] ([`TensorError::Alloc`]) when the memory cannot be had.
    pub fn new(
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
    ) -> Result<Self, KernelError> {
        Self::new_in(batch, kv_heads, capacity, head_dim, false)
    }

    /// As [`new`](Self::new), with both buffers' memory advised for transparent huge pages
    /// before it is first written (see [`Tensor::zeros_in_huge_pages`](crate::Tensor::zeros_in_huge_pages)):
    /// for a long context, whose every decode step reads the whole filled prefix. The values,
    /// and every result computed from them, are those of [`new`](Self::new).
    ///
    /// ```
    /// use skainet_schedule::KvCache;
    ///
    /// let cache = KvCache::with_huge_pages(1, 8, 4096, 64).unwrap(); // 8 MiB per buffer
    /// assert_eq!((cache.capacity(), cache.len()), (4096, 0));
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_huge_pages(
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
    ) -> Result<Self, KernelError> {
        Self::new_in(batch, kv_heads, capacity, head_dim, true)
    }

    fn new_in(
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
        huge: bool,
    ) -> Result<Self, KernelError> {
        let shape = [batch, kv_heads, capacity, head_dim];
        let Some(n) = shape::element_count(&shape) else {
            return Err(ShapeError::TooLarge {
                op: "kv_cache",
                shapes: vec![shape.to_vec()],
            }
            .into());
        };
        let alloc = || {
            try_zeroed_in(n, huge).ok_or(TensorError::Alloc {
                shape: shape.to_vec(),
            })
        };
        Ok(Self {
            keys: alloc()?,
            values: alloc()?,
            shape,
            len: 0,
        })
    }

    /// The positions filled so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions it holds.
    pub fn capacity(&self) -> usize {
        self.shape[2]
    }

    /// The buffers' shape `[b, nKV, capacity, hd]`.
    pub fn shape(&self) -> [usize; 4] {
        self.shape
    }

    /// Forgets every position (the buffers stay allocated).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Writes `k` and `v`, each `[b, nKV, t, hd]` (any strides), at positions
    /// `len..len + t` in place, then counts them as filled. Costs O(t), not O(len).
    ///
    /// # Errors
    ///
    /// [`KernelError::Shape`] with [`ShapeError::KvAppendShape`] when `k`/`v` do not fit the
    /// cache's `b`, `nKV`, `hd` or differ in length, or [`ShapeError::KvCacheFull`] when
    /// `len + t` exceeds the capacity. Nothing is written then.
    pub fn append<'a>(
        &mut self,
        k: impl Into<TensorView<'a>>,
        v: impl Into<TensorView<'a>>,
    ) -> Result<(), KernelError> {
        let (k, v) = (k.into(), v.into());
        let new = shape::kv_append(&self.shape, self.len, k.shape(), v.shape())?;
        let [b, kv_heads, capacity, hd] = self.shape;
        if new == 0 || hd == 0 {
            return Ok(());
        }
        for (src, dst) in [(&k, &mut self.keys), (&v, &mut self.values)] {
            let (data, st) = (src.buffer(), src.strides());
            for bi in 0..b {
                for h in 0..kv_heads {
                    // One (batch, head) of the new positions, into its slot after the prefix.
                    let start = ((bi * kv_heads + h) * capacity + self.len) * hd;
                    let slot = &mut dst[start..start + new * hd];
                    for (p, row) in slot.chunks_exact_mut(hd).enumerate() {
                        // In bounds: (bi, h, p, ..) is inside the view, which was checked.
                        let at = src.offset() + bi * st[0] + h * st[1] + p * st[2];
                        if st[3] == 1 {
                            row.copy_from_slice(&data[at..at + hd]);
                        } else {
                            for (j, x) in row.iter_mut().enumerate() {
                                *x = data[at + j * st[3]];
                            }
                        }
                    }
                }
            }
        }
        self.len += new;
        Ok(())
    }

    /// Appends one position: `k` and `v` each `[b, nKV, hd]` (`b·nKV·hd` values), the new
    /// position of every (batch, head), without a view (a decoder's step allocates nothing).
    ///
    /// # Errors
    ///
    /// As [`append_compact`](Self::append_compact) for `t = 1`.
    #[cfg(feature = "model")]
    pub(crate) fn append_position(&mut self, k: &[f32], v: &[f32]) -> Result<(), KernelError> {
        self.append_compact(k, v, 1)
    }

    /// Appends `t` positions: `k` and `v` each a compact `[b, nKV, t, hd]` (`b·nKV·t·hd`
    /// values), without a view (a decoder's prefill allocates nothing).
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append); [`ShapeError::KvAppendShape`] when `k` or `v` is not
    /// `b·nKV·t·hd` values long.
    #[cfg(feature = "model")]
    pub(crate) fn append_compact(
        &mut self,
        k: &[f32],
        v: &[f32],
        t: usize,
    ) -> Result<(), KernelError> {
        let [b, kv_heads, capacity, hd] = self.shape;
        let new = [b, kv_heads, t, hd];
        let len = b
            .saturating_mul(kv_heads)
            .saturating_mul(t)
            .saturating_mul(hd);
        if k.len() != len || v.len() != len {
            return Err(ShapeError::KvAppendShape {
                cache: self.shape.to_vec(),
                k: vec![k.len()],
                v: vec![v.len()],
            }
            .into());
        }
        shape::kv_append(&self.shape, self.len, &new, &new)?;
        if hd == 0 || t == 0 {
            return Ok(());
        }
        for (src, dst) in [(k, &mut self.keys), (v, &mut self.values)] {
            // (batch, head) `bh`'s `t` positions, into its slot after the prefix.
            for (bh, from) in src.chunks_exact(t * hd).enumerate() {
                let start = (bh * capacity + self.len) * hd;
                dst[start..start + t * hd].copy_from_slice(from);
            }
        }
        self.len += t;
        Ok(())
    }

    /// The key and value buffers, `[b, nKV, capacity, hd]` each, whose first `len` positions
    /// per (batch, head) are filled.
    #[cfg(feature = "model")]
    pub(crate) fn buffers(&self) -> (&[f32], &[f32]) {
        (&self.keys, &self.values)
    }

    /// The filled keys, `[b, nKV, len, hd]`, as a view of the buffer (no copy).
    pub fn keys(&self) -> TensorView<'_> {
        self.prefix(&self.keys)
    }

    /// The filled values, `[b, nKV, len, hd]`, as a view of the buffer (no copy).
    pub fn values(&self) -> TensorView<'_> {
        self.prefix(&self.values)
    }

    fn prefix<'a>(&self, buffer: &'a [f32]) -> TensorView<'a> {
        let [b, kv_heads, capacity, hd] = self.shape;
        let strides = vec![kv_heads * capacity * hd, capacity * hd, hd, 1];
        // The prefix of a buffer of exactly [b, nKV, capacity, hd] values, len <= capacity.
        TensorView::trusted(buffer, vec![b, kv_heads, self.len, hd], strides, 0)
    }
}

#[cfg(all(test, feature = "model", not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::Tensor;

    #[test]
    fn compact_positions_are_appended_as_their_view_would_be() {
        let (b, kv, hd) = (2, 3, 4);
        let new = |t: usize, seed: f32| {
            let n = b * kv * t * hd;
            let data = (0..n).map(|i| i as f32 + seed).collect();
            Tensor::new(vec![b, kv, t, hd], data).unwrap()
        };
        let mut by_view = KvCache::new(b, kv, 8, hd).unwrap();
        let mut compact = KvCache::new(b, kv, 8, hd).unwrap();
        for (t, seed) in [(3, 0.5), (1, 100.5), (2, 200.5)] {
            let (k, v) = (new(t, seed), new(t, -seed));
            by_view.append(&k, &v).unwrap();
            compact.append_compact(k.data(), v.data(), t).unwrap();
        }
        assert_eq!(compact.len(), 6);
        assert_eq!(compact.buffers(), by_view.buffers());
        // A length that is not `t` positions, and more positions than fit, write nothing.
        let (k, v) = (new(3, 0.0), new(3, 0.0));
        let short = compact.append_compact(&k.data()[1..], v.data(), 3);
        assert!(matches!(
            short,
            Err(KernelError::Shape(ShapeError::KvAppendShape { .. }))
        ));
        let full = compact.append_compact(k.data(), v.data(), 3);
        assert!(matches!(
            full,
            Err(KernelError::Shape(ShapeError::KvCacheFull { .. }))
        ));
        assert_eq!(compact.len(), 6);
        assert_eq!(compact.buffers(), by_view.buffers());
    }
}
