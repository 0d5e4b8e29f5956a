#![cfg(not(feature = "loom"))]
//! The schedule contract of SPEC §1, asserted exactly.

use std::ops::Range;
use std::sync::Mutex;

use skainet_schedule::{tasks_for, Chunks, DisjointError, Schedule, ScheduleExt, Sequential};

/// Runs the shared chunking inline, in order, on the calling thread: the arithmetic of a
/// parallel schedule without threads.
struct InlineChunks(usize);

impl Schedule for InlineChunks {
    fn parallelism(&self) -> usize {
        self.0
    }
    fn name(&self) -> &str {
        "inline-chunks"
    }
    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        for r in Chunks::new(n, grain, self.0).iter() {
            body(r.start, r.end);
        }
    }
}

/// Breaks the contract on purpose: hands every body the whole range twice.
struct Overlapping;

impl Schedule for Overlapping {
    fn parallelism(&self) -> usize {
        2
    }
    fn name(&self) -> &str {
        "overlapping"
    }
    fn for_range(&self, n: usize, _grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        body(0, n);
        body(0, n);
    }
}

/// Breaks the contract on purpose: reaches one unit past the end.
struct PastTheEnd;

impl Schedule for PastTheEnd {
    fn parallelism(&self) -> usize {
        1
    }
    fn name(&self) -> &str {
        "past-the-end"
    }
    fn for_range(&self, n: usize, _grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        body(0, n + 1);
    }
}

fn ranges_of(schedule: &dyn Schedule, n: usize, grain: usize) -> Vec<(usize, usize)> {
    let seen = Mutex::new(Vec::new());
    schedule.for_range(n, grain, &|s, e| seen.lock().unwrap().push((s, e)));
    seen.into_inner().unwrap()
}

#[test]
fn sequential_runs_one_range_and_ignores_grain() {
    assert_eq!(ranges_of(&Sequential, 7, 3), vec![(0, 7)]);
}

#[test]
fn zero_units_call_nothing() {
    assert_eq!(ranges_of(&Sequential, 0, 1), vec![]);
    assert_eq!(ranges_of(&InlineChunks(4), 0, 1), vec![]);
}

#[test]
fn for_each_visits_every_index_once_in_order() {
    let seen = Mutex::new(Vec::new());
    Sequential.for_each(5, 1, &|i| seen.lock().unwrap().push(i));
    assert_eq!(seen.into_inner().unwrap(), vec![0, 1, 2, 3, 4]);
}

#[test]
fn chunked_ranges_are_exact_and_never_empty() {
    assert_eq!(
        ranges_of(&InlineChunks(4), 5, 1),
        vec![(0, 2), (2, 4), (4, 5)]
    );
    assert_eq!(
        ranges_of(&InlineChunks(8), 100, 40),
        vec![(0, 34), (34, 68), (68, 100)]
    );
    assert_eq!(
        ranges_of(&InlineChunks(3), 10, 1),
        vec![(0, 4), (4, 8), (8, 10)]
    );
}

#[test]
fn body_calls_equal_tasks_for_when_no_chunk_is_empty() {
    for (n, grain, p) in [(1000, 1, 8), (4097, 17, 3), (255, 1, 4), (7, 1, 8)] {
        assert_eq!(
            ranges_of(&InlineChunks(p), n, grain).len(),
            tasks_for(n, grain, p),
            "n={n} grain={grain} p={p}"
        );
    }
}

#[test]
fn try_for_range_returns_the_first_error_and_skips_later_chunks() {
    let ran = Mutex::new(Vec::new());
    let result = InlineChunks(4).try_for_range(8, 1, &|s, e| {
        ran.lock().unwrap().push((s, e));
        if s == 2 {
            Err(format!("chunk {s}..{e} failed"))
        } else {
            Ok(())
        }
    });
    assert_eq!(result, Err("chunk 2..4 failed".to_string()));
    assert_eq!(ran.into_inner().unwrap(), vec![(0, 2), (2, 4)]);
}

#[test]
fn try_for_range_is_ok_when_every_chunk_is() {
    let r: Result<(), ()> = InlineChunks(3).try_for_range(9, 1, &|_, _| Ok(()));
    assert_eq!(r, Ok(()));
}

#[test]
fn for_chunks_mut_hands_each_range_its_own_elements() {
    let mut out = vec![0usize; 12];
    let seen = Mutex::new(Vec::<Range<usize>>::new());
    InlineChunks(3)
        .for_chunks_mut("fill", &mut out, 2, 1, &|units, chunk: &mut [usize]| {
            assert_eq!(chunk.len(), units.len() * 2);
            for (k, x) in chunk.iter_mut().enumerate() {
                *x = units.start * 2 + k;
            }
            seen.lock().unwrap().push(units);
        })
        .unwrap();
    assert_eq!(out, (0..12).collect::<Vec<_>>());
    assert_eq!(seen.into_inner().unwrap(), vec![0..2, 2..4, 4..6]);
}

#[test]
fn for_chunks_mut_rejects_a_ragged_buffer() {
    let mut out = vec![0u8; 7];
    let r = Sequential.for_chunks_mut("fill", &mut out, 2, 1, &|_, _| {
        panic!("must not run");
    });
    assert_eq!(
        r,
        Err(DisjointError::RaggedLength {
            len: 7,
            unit_len: 2
        })
    );
}

#[test]
fn for_chunks_mut_rejects_a_zero_unit() {
    let mut out = vec![0u8; 4];
    let r = Sequential.for_chunks_mut("fill", &mut out, 0, 1, &|_, _| {
        panic!("must not run");
    });
    assert_eq!(r, Err(DisjointError::ZeroUnitLen));
}

#[test]
fn a_schedule_handing_out_overlapping_ranges_gets_an_error_not_aliasing() {
    let mut out = vec![0u8; 4];
    let calls = Mutex::new(0);
    let r = Overlapping.for_chunks_mut("fill", &mut out, 1, 1, &|_, chunk: &mut [u8]| {
        chunk.fill(1);
        *calls.lock().unwrap() += 1;
    });
    assert_eq!(r, Err(DisjointError::Overlap { unit: 0 }));
    assert_eq!(calls.into_inner().unwrap(), 1);
    assert_eq!(out, vec![1; 4]);
}

#[test]
fn a_schedule_reaching_past_the_end_gets_an_error() {
    let mut out = vec![0u8; 3];
    let r = PastTheEnd.for_chunks_mut("fill", &mut out, 1, 1, &|_, _| panic!("must not run"));
    assert_eq!(
        r,
        Err(DisjointError::OutOfBounds {
            units: 0..4,
            available: 3
        })
    );
}

#[test]
fn names_and_parallelism() {
    assert_eq!(Sequential.name(), "sequential");
    assert_eq!(Sequential.parallelism(), 1);
    let shared = Sequential::shared();
    assert_eq!(format!("{:?}", &*shared), "sequential");
}
