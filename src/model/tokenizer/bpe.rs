//! The merge loop: a word's bytes, one symbol each, merged pair by pair, lowest rank first
//! and, between equal ranks, leftmost first (llama.cpp's order and the original BPE's).

use alloc::collections::BinaryHeap;
use core::cmp::Reverse;

use hashbrown::HashMap;

use super::TokenizerError;

/// The symbol of a byte whose character is no token: no merge names it, and it is dropped
/// from the output.
pub(super) const NO_TOKEN: u32 = u32::MAX;

/// What a pair of adjacent tokens merges into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Merge {
    /// Its index in `tokenizer.ggml.merges`: lower merges first.
    pub(super) rank: u32,
    /// The token the pair becomes.
    pub(super) id: u32,
}

/// The merges of a vocabulary, by the pair they join.
pub(super) type Merges = HashMap<(u32, u32), Merge>;

/// One symbol of the word being merged: a token and its live neighbours.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    id: u32,
    prev: Option<usize>,
    next: Option<usize>,
    /// False once merged into its left neighbour.
    live: bool,
}

/// A candidate merge: ordered by rank, then by the left symbol's position.
type Candidate = Reverse<(u32, usize, usize, u32, u32)>;

/// The scratch space of [`Bpe::encode_word`], kept between words so a long text allocates it
/// once.
#[derive(Debug, Default)]
pub(super) struct Bpe {
    symbols: alloc::vec::Vec<Symbol>,
    queue: BinaryHeap<Candidate>,
}

impl Bpe {
    /// Encodes one word, given as the token of each of its bytes, and calls `out` with each
    /// resulting token in order.
    pub(super) fn encode_word(
        &mut self,
        merges: &Merges,
        byte_ids: impl ExactSizeIterator<Item = u32>,
        out: &mut impl FnMut(u32) -> Result<(), TokenizerError>,
    ) -> Result<(), TokenizerError> {
        let n = byte_ids.len();
        if n <= 1 {
            for id in byte_ids.filter(|&id| id != NO_TOKEN) {
                out(id)?;
            }
            return Ok(());
        }
        self.symbols.clear();
        self.queue.clear();
        // At most one candidate per adjacent pair is live, but stale ones stay queued: a
        // word's queue holds at most one per merge done plus the first n - 1.
        let oom = |len| TokenizerError::OutOfMemory {
            what: "a word's symbols",
            len,
        };
        self.symbols.try_reserve(n).map_err(|_| oom(n))?;
        self.queue.try_reserve(n).map_err(|_| oom(n))?;
        self.symbols
            .extend(byte_ids.enumerate().map(|(i, id)| Symbol {
                id,
                prev: i.checked_sub(1),
                next: Some(i + 1).filter(|&j| j < n),
                live: true,
            }));
        for left in 1..n {
            self.consider(merges, left - 1, left);
        }
        while let Some(Reverse((_, left, right, left_id, right_id))) = self.queue.pop() {
            let (l, r) = (self.symbols[left], self.symbols[right]);
            // Stale: one side has merged since the candidate was queued.
            if !l.live || !r.live || l.next != Some(right) || l.id != left_id || r.id != right_id {
                continue;
            }
            let Some(merge) = merges.get(&(left_id, right_id)) else {
                continue;
            };
            self.symbols[left].id = merge.id;
            self.symbols[left].next = r.next;
            self.symbols[right].live = false;
            if let Some(after) = r.next {
                self.symbols[after].prev = Some(left);
                self.consider(merges, left, after);
            }
            if let Some(before) = l.prev {
                self.consider(merges, before, left);
            }
        }
        let mut at = Some(0);
        while let Some(i) = at {
            let Symbol { id, next, .. } = self.symbols[i];
            if id != NO_TOKEN {
                out(id)?;
            }
            at = next;
        }
        Ok(())
    }

    /// Queues the merge of the adjacent symbols `left` and `right`, if their pair has one.
    fn consider(&mut self, merges: &Merges, left: usize, right: usize) {
        let (left_id, right_id) = (self.symbols[left].id, self.symbols[right].id);
        if let Some(merge) = merges.get(&(left_id, right_id)) {
            self.queue
                .push(Reverse((merge.rank, left, right, left_id, right_id)));
        }
    }
}
