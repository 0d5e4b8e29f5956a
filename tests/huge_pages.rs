#![cfg(not(feature = "loom"))]
//! Tensors and K/V caches in transparent huge pages: the values, the errors and every result
//! of the usual ones, and on Linux memory whose whole 2 MiB pages the kernel was advised
//! about.

mod common;

use common::{all_schedules, uniform};
use skainet_schedule::shape::MAX_ELEMENTS;
use skainet_schedule::{
    scaled_dot_product_attention as sdpa, KernelError, KvCache, SdpaOptions, ShapeError, Tensor,
    TensorError,
};

#[test]
fn a_tensor_in_huge_pages_holds_zeros_and_refuses_what_zeros_refuses() {
    let shape = vec![3, 1 << 20]; // 12 MiB: at least five whole huge pages
    let t = Tensor::zeros_in_huge_pages(shape.clone()).unwrap();
    assert_eq!(t.shape(), &shape[..]);
    assert_eq!(t.data().len(), 3 << 20);
    assert!(t.data().iter().all(|x| x.to_bits() == 0));
    assert_eq!(Tensor::zeros_in_huge_pages(vec![]).unwrap().data(), [0.0]);
    assert_eq!(Tensor::zeros_in_huge_pages(vec![0, 5]).unwrap().data(), []);
    for zeros in [Tensor::zeros, Tensor::zeros_in_huge_pages] {
        assert_eq!(
            zeros(vec![usize::MAX, 2]),
            Err(TensorError::TooLarge {
                shape: vec![usize::MAX, 2]
            })
        );
        // Within the element limit, but 2^63 bytes no allocator can give: an error value.
        assert_eq!(
            zeros(vec![MAX_ELEMENTS]),
            Err(TensorError::Alloc {
                shape: vec![MAX_ELEMENTS]
            })
        );
    }
}

#[test]
fn a_cache_in_huge_pages_gives_the_bits_of_a_plain_one_and_the_same_errors() {
    let (heads, kv_heads, hd, capacity) = (4, 2, 64, 8192); // 4 MiB per buffer
    let mut plain = KvCache::new(1, kv_heads, capacity, hd).unwrap();
    let mut huge = KvCache::with_huge_pages(1, kv_heads, capacity, hd).unwrap();
    assert_eq!(huge.shape(), [1, kv_heads, capacity, hd]);
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    for (step, t) in [(0, 3000), (1, 1), (2, 5000)] {
        let k = uniform(&[1, kv_heads, t, hd], 2 * step);
        let v = uniform(&[1, kv_heads, t, hd], 2 * step + 1);
        plain.append(&k, &v).unwrap();
        huge.append(&k, &v).unwrap();
        let q = uniform(&[1, heads, 1, hd], 100 + step);
        for schedule in all_schedules() {
            let want = sdpa(&q, plain.keys(), plain.values(), None, &causal, &*schedule).unwrap();
            let got = sdpa(&q, huge.keys(), huge.values(), None, &causal, &*schedule).unwrap();
            let bits = |t: &Tensor| t.data().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "step {step}");
        }
    }
    assert_eq!(huge.len(), 8001);
    assert_eq!(
        KvCache::with_huge_pages(usize::MAX, 2, 2, 2),
        Err(KernelError::Shape(ShapeError::TooLarge {
            op: "kv_cache",
            shapes: vec![vec![usize::MAX, 2, 2, 2]],
        }))
    );
    for cache in [KvCache::new, KvCache::with_huge_pages] {
        assert_eq!(
            cache(1, 1, MAX_ELEMENTS, 1),
            Err(KernelError::Tensor(TensorError::Alloc {
                shape: vec![1, 1, MAX_ELEMENTS, 1]
            }))
        );
    }
}

/// The `VmFlags` of the mapping of this process that holds `address` (`/proc/self/smaps`).
#[cfg(target_os = "linux")]
fn vm_flags_at(address: usize) -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux has /proc/self/smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split(' ').next().and_then(|r| r.split_once('-'));
        let bounds = range.and_then(|(a, b)| {
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        });
        if let Some((start, end)) = bounds {
            inside = (start..end).contains(&address);
        } else if let (true, Some(flags)) = (inside, line.strip_prefix("VmFlags:")) {
            return flags.split_whitespace().map(str::to_owned).collect();
        }
    }
    panic!("no mapping holds {address:#x}")
}

/// The first 2 MiB-aligned address inside `values`.
#[cfg(target_os = "linux")]
fn first_huge_page(values: &[f32]) -> usize {
    (values.as_ptr() as usize).next_multiple_of(2 << 20)
}

#[cfg(target_os = "linux")]
#[test]
fn linux_is_advised_about_huge_pages_only_where_they_were_asked_for() {
    // A kernel without transparent huge pages refuses the advice (and has no such directory).
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        return;
    }
    let huge = Tensor::zeros_in_huge_pages(vec![8 << 20]).unwrap(); // 32 MiB
    let plain = Tensor::zeros(vec![8 << 20]).unwrap();
    let cache = KvCache::with_huge_pages(1, 8, 8192, 64).unwrap(); // 16 MiB per buffer
    let has_hg = |values: &[f32]| vm_flags_at(first_huge_page(values)).contains(&"hg".into());
    assert!(has_hg(huge.data()));
    assert!(has_hg(cache.keys().buffer()));
    assert!(has_hg(cache.values().buffer()));
    assert!(!has_hg(plain.data()));
}
