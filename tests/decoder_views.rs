#![cfg(not(feature = "loom"))]
//! Borrowed, strided views: bounds and stride errors, permute/narrow without copies, compact
//! copies with the exact values.

use skainet_schedule::{Tensor, TensorError, TensorView};

fn counting(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[test]
fn a_contiguous_view_needs_exactly_its_element_count() {
    let data = counting(5);
    assert_eq!(
        TensorView::new(&data, vec![2, 3]),
        Err(TensorError::LengthMismatch {
            shape: vec![2, 3],
            expected: 6,
            actual: 5
        })
    );
}

#[test]
fn a_view_reaching_past_its_buffer_is_an_error() {
    let data = counting(8);
    let err = TensorView::strided(&data, vec![2, 3], vec![5, 1], 1).unwrap_err();
    assert_eq!(
        err,
        TensorError::ViewOutOfBounds {
            shape: vec![2, 3],
            strides: vec![5, 1],
            offset: 1,
            len: 8
        }
    );
    assert_eq!(
        err.to_string(),
        "view of shape [2, 3] with strides [5, 1] at offset 1 reaches past the 8 values it borrows"
    );
}

#[test]
fn the_last_element_may_be_the_last_value_of_the_buffer() {
    let data = counting(8);
    let v = TensorView::strided(&data, vec![2, 3], vec![5, 1], 0).unwrap();
    assert_eq!(v.get(&[1, 2]), Some(7.0));
}

#[test]
fn strides_whose_reach_overflows_are_an_error() {
    let data = counting(4);
    assert!(matches!(
        TensorView::strided(&data, vec![2, 2], vec![usize::MAX, 1], 0),
        Err(TensorError::ViewOutOfBounds { .. })
    ));
}

#[test]
fn one_stride_per_dimension_is_required() {
    let data = counting(4);
    assert_eq!(
        TensorView::strided(&data, vec![2, 2], vec![1], 0),
        Err(TensorError::StrideRank {
            shape: vec![2, 2],
            strides: vec![1]
        })
    );
}

#[test]
fn an_empty_view_may_sit_at_the_end_but_not_beyond() {
    let data = counting(4);
    assert!(TensorView::strided(&data, vec![0, 3], vec![3, 1], 4).is_ok());
    assert!(TensorView::strided(&data, vec![0, 3], vec![3, 1], 5).is_err());
}

#[test]
fn a_strided_view_copies_to_the_compact_values() {
    // A [2, 2, capacity 4, 2] buffer read as its first 3 positions.
    let data = counting(32);
    let full = TensorView::strided(&data, vec![2, 2, 4, 2], vec![16, 8, 2, 1], 0).unwrap();
    let prefix = full.narrow(2, 0, 3).unwrap();
    let copy = prefix.to_tensor().unwrap();
    assert_eq!(copy.shape(), [2, 2, 3, 2]);
    assert_eq!(
        copy.data(),
        [
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 16.0, 17.0, 18.0, 19.0,
            20.0, 21.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0
        ]
    );
    assert!(!prefix.is_contiguous());
    assert_eq!(prefix.as_slice(), None);
}

#[test]
fn narrowing_a_middle_range_moves_the_offset() {
    let data = counting(12);
    let v = TensorView::new(&data, vec![3, 4]).unwrap();
    let mid = v.narrow(1, 1, 2).unwrap();
    assert_eq!(mid.offset(), 1);
    assert_eq!(
        mid.to_tensor().unwrap().data(),
        [1.0, 2.0, 5.0, 6.0, 9.0, 10.0]
    );
}

#[test]
fn narrowing_outside_a_dimension_is_an_error() {
    let data = counting(12);
    let v = TensorView::new(&data, vec![3, 4]).unwrap();
    let err = v.narrow(1, 3, 2).unwrap_err();
    assert_eq!(
        err,
        TensorError::Narrow {
            shape: vec![3, 4],
            dim: 1,
            start: 3,
            len: 2
        }
    );
    assert!(v.narrow(2, 0, 1).is_err());
    assert!(v.narrow(0, usize::MAX, 2).is_err());
}

#[test]
fn permute_is_a_transpose_without_a_copy() {
    let t = Tensor::from_fn(vec![2, 3], |i| i as f32).unwrap();
    let v = t.view().permute(&[1, 0]).unwrap();
    assert_eq!(v.shape(), [3, 2]);
    assert_eq!(v.strides(), [1, 3]);
    assert!(std::ptr::eq(v.buffer(), t.data()));
    assert_eq!(
        v.to_tensor().unwrap().data(),
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
}

#[test]
fn a_bad_permutation_is_an_error() {
    let t = Tensor::zeros(vec![2, 3]).unwrap();
    assert_eq!(
        t.view().permute(&[0, 0]),
        Err(TensorError::Permutation {
            shape: vec![2, 3],
            permutation: vec![0, 0]
        })
    );
}

#[test]
fn a_tensor_is_a_contiguous_view_of_itself() {
    let t = Tensor::from_fn(vec![2, 3, 4], |i| i as f32).unwrap();
    let v = TensorView::from(&t);
    assert_eq!(v.strides(), [12, 4, 1]);
    assert!(v.is_contiguous());
    assert_eq!(v.as_slice(), Some(t.data()));
    assert_eq!(v.to_tensor().unwrap(), t);
}

#[test]
fn views_are_equal_when_their_named_values_are() {
    let compact = Tensor::from_fn(vec![2, 2], |i| [0.0, 1.0, 4.0, 5.0][i]).unwrap();
    let data = counting(8);
    let strided = TensorView::strided(&data, vec![2, 2], vec![4, 1], 0).unwrap();
    assert_eq!(strided, compact.view());
    let other = TensorView::strided(&data, vec![2, 2], vec![4, 1], 1).unwrap();
    assert_ne!(strided, other);
    assert_ne!(strided, strided.permute(&[1, 0]).unwrap());
}

#[test]
fn debug_shows_the_layout_not_the_buffer() {
    let data = counting(1000);
    let v = TensorView::strided(&data, vec![2, 3], vec![100, 1], 7).unwrap();
    assert_eq!(
        format!("{v:?}"),
        "TensorView { shape: [2, 3], strides: [100, 1], offset: 7, buffer_len: 1000 }"
    );
}
