#![cfg(not(feature = "loom"))]
//! The positional K/V cache: in-place appends, prefix views, the capacity error, and
//! attention over the cache equal to attention over concatenated tensors.

mod common;

use common::{all_schedules, uniform};
use skainet_schedule::{
    scaled_dot_product_attention as sdpa, KernelError, KvCache, SdpaOptions, Sequential,
    ShapeError, Tensor,
};

/// `a` and `b` `[b, n, s, d]` joined along the positions.
fn concat(a: &Tensor, b: &Tensor) -> Tensor {
    let [bs, n, sa, d] = *a.shape() else { panic!() };
    let sb = b.shape()[2];
    let mut data = Vec::new();
    for bh in 0..bs * n {
        data.extend_from_slice(&a.data()[bh * sa * d..][..sa * d]);
        data.extend_from_slice(&b.data()[bh * sb * d..][..sb * d]);
    }
    Tensor::new(vec![bs, n, sa + sb, d], data).unwrap()
}

#[test]
fn appends_fill_the_prefix_in_order() {
    let mut cache = KvCache::new(2, 3, 10, 4).unwrap();
    let k1 = uniform(&[2, 3, 4, 4], 1);
    let v1 = uniform(&[2, 3, 4, 4], 2);
    let k2 = uniform(&[2, 3, 1, 4], 3);
    let v2 = uniform(&[2, 3, 1, 4], 4);
    cache.append(&k1, &v1).unwrap();
    cache.append(&k2, &v2).unwrap();
    assert_eq!(cache.len(), 5);
    assert_eq!(cache.keys().shape(), [2, 3, 5, 4]);
    assert_eq!(cache.keys().strides(), [120, 40, 4, 1]);
    assert_eq!(cache.keys().to_tensor().unwrap(), concat(&k1, &k2));
    assert_eq!(cache.values().to_tensor().unwrap(), concat(&v1, &v2));
}

#[test]
fn a_strided_append_writes_the_viewed_values() {
    // New keys laid out [b, t, nKV, hd] (a projection's natural layout), seen as [b, nKV, t, hd].
    let raw = uniform(&[1, 2, 3, 4], 5);
    let k = raw.view().permute(&[0, 2, 1, 3]).unwrap();
    let mut cache = KvCache::new(1, 3, 4, 4).unwrap();
    cache.append(&k, &k).unwrap();
    assert_eq!(cache.keys().to_tensor().unwrap(), k.to_tensor().unwrap());
}

#[test]
fn appending_past_the_capacity_is_an_error_that_writes_nothing() {
    let mut cache = KvCache::new(1, 2, 4, 8).unwrap();
    let three = uniform(&[1, 2, 3, 8], 1);
    cache.append(&three, &three).unwrap();
    let before = cache.clone();
    let two = uniform(&[1, 2, 2, 8], 2);
    let err = cache.append(&two, &two).unwrap_err();
    assert_eq!(
        err,
        KernelError::Shape(ShapeError::KvCacheFull {
            capacity: 4,
            len: 3,
            new: 2
        })
    );
    assert_eq!(
        err.to_string(),
        "kv_cache: appending 2 positions to the 3 filled exceeds the capacity of 4"
    );
    assert_eq!(cache, before);
}

#[test]
fn new_positions_of_another_shape_are_an_error() {
    let mut cache = KvCache::new(1, 2, 4, 8).unwrap();
    let k = uniform(&[1, 3, 1, 8], 1);
    let v = uniform(&[1, 2, 1, 8], 2);
    assert_eq!(
        cache.append(&k, &v),
        Err(KernelError::Shape(ShapeError::KvAppendShape {
            cache: vec![1, 2, 4, 8],
            k: vec![1, 3, 1, 8],
            v: vec![1, 2, 1, 8],
        }))
    );
    let v3 = uniform(&[1, 2, 2, 8], 2);
    let k2 = uniform(&[1, 2, 1, 8], 2);
    assert!(matches!(
        cache.append(&k2, &v3),
        Err(KernelError::Shape(ShapeError::KvAppendShape { .. }))
    ));
    assert!(cache.is_empty());
}

#[test]
fn an_oversized_cache_is_an_error_not_an_abort() {
    assert_eq!(
        KvCache::new(usize::MAX, 2, 2, 2),
        Err(KernelError::Shape(ShapeError::TooLarge {
            op: "kv_cache",
            shapes: vec![vec![usize::MAX, 2, 2, 2]],
        }))
    );
}

#[test]
fn clear_forgets_the_positions_and_keeps_the_capacity() {
    let mut cache = KvCache::new(1, 1, 3, 2).unwrap();
    let k = uniform(&[1, 1, 3, 2], 1);
    cache.append(&k, &k).unwrap();
    cache.clear();
    assert_eq!((cache.len(), cache.capacity()), (0, 3));
    cache.append(&k, &k).unwrap();
    assert_eq!(cache.keys().to_tensor().unwrap(), k);
}

#[test]
fn decode_attention_on_the_cache_equals_attention_on_concatenated_tensors() {
    let (heads, kv, hd) = (6, 2, 16);
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let mut cache = KvCache::new(1, kv, 64, hd).unwrap();
    let mut k_all = uniform(&[1, kv, 9, hd], 1);
    let mut v_all = uniform(&[1, kv, 9, hd], 2);
    cache.append(&k_all, &v_all).unwrap();
    for step in 0..5u32 {
        let k = uniform(&[1, kv, 1, hd], 10 + step);
        let v = uniform(&[1, kv, 1, hd], 20 + step);
        cache.append(&k, &v).unwrap();
        k_all = concat(&k_all, &k);
        v_all = concat(&v_all, &v);
        let q = uniform(&[1, heads, 1, hd], 30 + step);
        let want = sdpa(&q, &k_all, &v_all, None, &options, &Sequential).unwrap();
        for s in all_schedules() {
            let got = sdpa(&q, cache.keys(), cache.values(), None, &options, s.as_ref()).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "step {step} {}", s.name());
        }
    }
}
