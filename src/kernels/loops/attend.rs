//! The attention of one (batch, head) unit, in a fixed order, with an online softmax over
//! key tiles.
//!
//! Keys go in tiles of [`KEY_TILE`], counted from key 0 — a constant of the kernel, so every
//! row meets the same tile boundaries whatever the schedule, the row block or the backend. Per
//! query row `i` and tile, over the keys of the tile it may see (`j < visible(i)`: keys hidden
//! by the causal mask are never computed):
//!
//! 1. `s_j = dot(q_i, k_j) · scale + mask[i, j]`, each dot product one chain over the head
//!    dimension in increasing order ([`scores_block`]);
//! 2. the tile's max `t` (lane maxima, then a fixed fold, [`scale_mask_max`]), the running max
//!    `m' = max(m, t)`, `α = exp(m - m')`, the weights `p_j = exp(s_j - m')` and the running
//!    sum `l' = l·α + Σ p_j` (a lane [`sum_from`]);
//! 3. the output row `o' = o·α + Σ_j p_j · v_j`, accumulated in increasing `j`
//!    ([`weigh_rows`]).
//!
//! and at the end `o / l`. So a unit needs scratch for one tile, not for all `Sk` keys. A row's
//! arithmetic depends on nothing but its own inputs and the constants — not on which rows
//! share a block, nor which units share a task — so every schedule and every backend gets the
//! same bits in the portable mode; the native mode fuses the multiply-adds of steps 1 and 3
//! and, on the AVX-512 kernel, evaluates step 2's `exp` in fused steps of its own (within
//! 3·10⁻⁷ of the true value) and reads the queries in place.
//!
//! The loop nest only decides what is loaded when: rows go in groups of [`GROUP`] whose queries
//! are packed once; each key tile is packed transposed once per group and used by every block
//! of [`ROWS`] rows, whose rows share every key and value load.
//! Where a compiled variant has a [`wide`] block kernel (AVX-512), a full block's products run
//! 64 columns at a time on it, in the same chains. A decode group (one query row per head,
//! the heads of a GQA group stacked as its rows, or any group of fewer than [`ROWS`] rows)
//! packs nothing: it reads each key row in place, eight at a time through a register
//! transpose shared by up to [`ROWS`] rows ([`RowScores`]; a block of four, and a lone row
//! from cache or in the native mode, 32 at a time on the wide kernel), weighs V rows in place
//! ([`StreamWeigh`]; a lone row 64 columns at a time on the wide kernel), and requests K and V
//! rows ahead of their use ([`AHEAD`], [`AHEAD_WIDE`], [`AHEAD_LONE`], [`AHEAD_LONE_WIDE`]), so
//! that one core keeps enough memory reads in flight to stream them. A lone row, and stacked
//! rows on the wide kernels, take each phase over a span of tiles ([`SPAN`]) before the next
//! phase, in the same per-row order.

#[path = "attend_avx512.rs"]
pub(crate) mod wide;

use self::wide::Wide;
use super::exp::exp;
use super::lanes::{scale_mask_max, scores_block, sum_from, weigh_rows};
use super::simd::{prefetch_l1, prefetch_l2, MulAdd, Phase, Simd, LANES};

/// Query rows that share each key and value load.
pub(crate) const ROWS: usize = 4;
/// Query rows whose queries are packed at once (so each key tile is packed once per group).
pub(crate) const GROUP: usize = 64;
/// Keys per tile of the online softmax: 128 keys of head_dim 64 are 32 KiB of packed K, inside
/// L1 beside the tile's scores. A multiple of [`LANES`].
pub(crate) const KEY_TILE: usize = 128;

/// How far ahead of the keys and values it is using a decode step requests rows (into L2, so
/// that they do not evict the tile in use from L1): one tile, 32 KiB each of K and V at
/// head_dim 64 (measured: L1 requests one tile ahead 70 %, two tiles 80 %, L2 requests one or
/// two tiles about 84 %, four tiles less again, of one core's read bandwidth at 64 MiB; two
/// tiles, or touching each page eight tiles ahead as well, gained nothing at 256 MiB). The
/// requests for both go out a few lines at a time from the score loop, spread over its
/// arithmetic: issued in bursts (a tile's rows back to back) they cost a quarter of one core's
/// throughput at 64 MiB. Where the wide kernels run (a block of four stacked rows), each
/// phase requests its own stream at the pace it reads it, K from the scores and V from the
/// weighted sum: from the score kernel, twice as fast as the 8-lane one, the requests for
/// both ran ahead of memory and read 47 % of a same-size stream, paced 74 % (h32/kv8, 64 MiB);
/// they go [`AHEAD_WIDE`] keys ahead. A group of fewer than four rows over K and V in memory
/// goes [`AHEAD_LONE`].
const AHEAD: usize = KEY_TILE;

/// How far ahead a block of four stacked decode rows on the wide kernels requests keys (from
/// its score kernel) and values (from its weighted sum): half a tile. Such a block spends four
/// rows' arithmetic per key, so half a tile is as long ahead in time as a lone row's whole
/// tile; a whole tile ahead left the requests waiting behind each other in the L2 (measured
/// on h32/kv8, four processes alternating: 64 MiB +3 to +6 %, 2 MiB in the last-level cache
/// +3 to +8 %, a quarter tile 2 to 8 % slower than a whole one, three quarters as fast as a
/// whole one; a one-tile call in L2 pays for requests that hit, 3–5 % in the native mode).
/// The requests go into L1 (`prefetcht0`), not L2: from 64 MiB, three processes alternating,
/// 37.9–42.3 → 40.4–41.8 GiB/s portable and 38.6–41.6 → 42.1–44.5 native; in cache the same;
/// 48 keys ahead read as 64 did, 96 and 128 keys less.
const AHEAD_WIDE: usize = KEY_TILE / 2;

/// How far ahead a decode group of fewer than [`ROWS`] rows over K and V in memory (not
/// [`Head::cached`]), or a lone row on the 8-lane loop anywhere ([`Head::requests_close`]),
/// requests keys (from its score loop) and values (from its weighted sum, eight keys at a time
/// for all its rows), each at the pace it reads them: 48 keys, 12 KiB of
/// each at head_dim 64, into L1. Its score loop reads eight key rows at once, a line of each,
/// an order the hardware prefetchers follow less well than a row-major stream (a loop reading
/// K in that order with as much arithmetic per line reads a quarter less than one reading
/// row-major); requests that close, into L1, make up for it. On this machine they are what
/// keeps the reads in flight: requesting every other line instead (leaving the rest to the
/// hardware) read 15–19 GiB/s instead of 40 at 64 MiB. Measured on 8 heads × 65 536 keys
/// (256 MiB, huge pages), in one process beside a stream of the same buffers: 73–76 % of that
/// stream portable, 75–76 % native with requests one tile ahead into L2 from the score loop
/// for both; 90 % and 86–87 % 32 keys ahead into L1. A whole tile into L1 was 70 %
/// ([`AHEAD`]). From 32 keys to 48, alternating processes three times on 8 heads × 16 384
/// keys (64 MiB): 37.3–39.3 → 39.3–42.9 GiB/s portable, 35.0–38.1 → 38.1–40.1 native; 32
/// heads × 4096 keys +2 to +6 %; at 256 MiB the same within the runs' spread; on the AVX2
/// variant a lone row +4 %, a pair +4 %, three rows the same; 40 keys read less than 48, and
/// 56, 64 or 80 keys no more. Groups of three rows (24 query heads on 8, 64 MiB) went from
/// 52–65 % to 68–80 % of their stream with these requests, of two from 68–77 % to 74–82 %
/// (on the wide kernels such groups are now padded to four instead).
const AHEAD_LONE: usize = 48;

/// How far ahead a lone decode row on the wide kernels requests keys (from
/// [`Wide::scores_1x32`], a line per line it reads) and values (from
/// [`Wide::weigh_1x64_ahead`], the same way), into L1: 32 keys, one call of the score kernel.
/// Reading 32 keys per call at about twice the 8-lane loop's pace, it wants its requests
/// closer than [`AHEAD_LONE`]: on 8 heads × 16 384 keys (64 MiB), 16 keys ahead read 34–37
/// GiB/s, 24 keys 37–42, 32 and 40 keys 42–46, 64 keys 39–43, 128 keys 36–38 (native).
const AHEAD_LONE_WIDE: usize = 32;

/// Key tiles a decode group goes through per phase (every tile's scores, then every tile's
/// softmax, then every tile's weighted sum; at most as many as the scratch holds scores for,
/// [`GROUP`] rows' worth), where it is a lone row or stacked rows in whole blocks of [`ROWS`] on
/// the wide kernels.
///
/// Stacked rows: K and V each stream through 16 tiles at a stretch, each phase requesting its
/// own stream, instead of taking turns every tile. Measured on 32 query heads on 8 K/V heads (64
/// MiB), the code before and after alternating twice: 33.9–34.7 → 44.2–44.5 GiB/s portable,
/// 41.5–42.9 → 46.9 native; 24 on 8 (padded to four) 37.7–39.4 → 45.5–45.8 and 41.4–42.4 →
/// 47.6–48.0; in cache (2 MiB) the same or faster. Spans of 8 and 2 tiles read less (32 on 8
/// portable: 42.0–43.4 and 40.2–40.3 where 16 read 44.2).
///
/// A lone row: its tiles' scores lie back to back, so it scores a whole span in one pass of its
/// score loop rather than one per tile (a span scored a tile at a time read no faster). The
/// code before and after alternating twice: 8 heads × 1024 keys (4 MiB, in cache) 46.9–47.6 →
/// 42.8–42.9 µs, × 4096 (16 MiB) 184–211 → 169–183 µs; × 16 384 (64 MiB) 41.3–41.8 → 44.7–44.9
/// GiB/s portable, 43.6–44.3 → 45.4–45.8 native; × 65 536 (256 MiB) the same or faster. A span
/// of 64 tiles measured the same as 16.
const SPAN: usize = 16;

const _: () = assert!(KEY_TILE.is_multiple_of(LANES) && GROUP.is_multiple_of(ROWS));

/// One (batch, head) unit's operands, already resolved from the tensors (GQA by index).
#[derive(Clone, Copy)]
pub(crate) struct Head<'a> {
    /// `[sq, hd]`, row-major.
    pub q: &'a [f32],
    /// `[sk, hd]` of the K/V head this query head reads.
    pub k: &'a [f32],
    /// `[sk, hd]`.
    pub v: &'a [f32],
    /// The additive mask rows for this unit and the distance between rows (0 when the mask
    /// broadcasts one row to every query); each row has `sk` values.
    pub mask: Option<(&'a [f32], usize)>,
    pub sq: usize,
    pub sk: usize,
    pub hd: usize,
    pub scale: f32,
    pub causal: bool,
    /// Each row is the one-row decode step of its own query head (the heads of a GQA group
    /// stacked): the rows share every key and value but no packed tile, so K is read in place
    /// like a lone row's and K and V stream through once for all of them.
    pub decode: bool,
    /// K and V of the whole call are taken to fit in the last-level cache (at most
    /// [`CACHED_KV_BYTES`]): a lone decode row then scores 32 keys at a time on the wide
    /// kernel, where there is one, in either mode. From memory the portable mode's 8-lane
    /// loop, with its requests close ahead into L1 ([`AHEAD_LONE`]), reads as fast as the wide
    /// kernel from 64 MiB and 7–15 % faster from 256 MiB (measured), so larger K and V keep
    /// it; the native mode's wide kernel reads faster from memory too
    /// ([`Wide::lone_from_memory`]). The bits are the same either way.
    pub cached: bool,
}

/// The K and V bytes of a call up to which a lone decode row is taken to read them from
/// cache (measured on a 32 MiB L3, when the wide kernel requested its keys a tile ahead into
/// L2 and no values: at 16 MiB it read 1.5 times as fast as the 8-key loop, at 24 MiB as
/// fast, at 64 MiB 5 to 13 % slower; with its requests close ahead into L1 and the values
/// weighed 64 columns at a time it reads 48–49 GiB/s at 16 MiB portable where it read 44).
pub(crate) const CACHED_KV_BYTES: u64 = 16 << 20;

impl Head<'_> {
    /// Whether a group of `rows` rows requests its keys (from the score loop) and values (from
    /// the weighted sum) [`AHEAD_LONE`] on into L1: fewer than a block of rows over K and V in
    /// memory, or a lone row wherever K and V are. A lone row scores a whole span before it
    /// weighs any of it ([`SPAN`]), so values requested from its score loop (a tile on, into L2,
    /// as stacked rows in cache request them) came long before it read them: on the AVX2 variant
    /// from cache, 8 heads × 4096 keys (16 MiB), requesting them from the weighted sum instead
    /// took 341–397 → 332–342 µs portable and 390–415 → 359–369 µs native (two runs, each
    /// alternating twice), 8 × 1024 keys 81–84 → 83–86 µs and 92–96 → 92–93 µs; the wide
    /// kernels' lone rows, which request their own streams, the same. Both phases ask this one
    /// question, so exactly one of them requests each stream.
    #[inline(always)]
    fn requests_close(&self, rows: usize) -> bool {
        rows == 1 || (rows < ROWS && !self.cached)
    }

    /// How many keys row `i` sees: bottom-right aligned when causal (`j <= i + sk - sq`;
    /// validated `sq <= sk`), all of them otherwise.
    #[inline(always)]
    fn visible(&self, i: usize) -> usize {
        if self.causal {
            i + 1 + self.sk - self.sq
        } else {
            self.sk
        }
    }
}

/// Scratch [`attend_head`] needs for head dimension `hd`: a transposed key tile, a group's
/// packed queries and a group's scores for one tile — bounded by the constants and `hd`, not
/// by the number of keys (saturating: a length no allocation can serve is refused by the
/// allocation, not by an overflow).
pub(crate) fn scratch_len(hd: usize) -> usize {
    hd.saturating_mul(KEY_TILE + GROUP)
        .saturating_add(GROUP * KEY_TILE)
        .saturating_add(ALIGN)
}

/// Values of slack at the start of the scratch, so that the tiles can start on a 64-byte line:
/// every part is a multiple of 16 values long, so then every 16-value chunk the kernels load
/// and store lies in one cache line.
const ALIGN: usize = 16;

/// The running softmax state of a group's rows.
struct Rows {
    /// The largest score so far (`-inf` while every key seen was hidden).
    top: [f32; GROUP],
    /// `Σ exp(s_j - top)` so far; NaN once a NaN score was met.
    total: [f32; GROUP],
    /// This tile's rescaling of the row's output, `exp(old top - new top)`.
    alpha: [f32; GROUP],
    /// How many keys of this tile the row weighs.
    counts: [usize; GROUP],
}

/// Writes the unit's `[sq, hd]` output into `out`, with multiply-adds in `mode`; `scratch`
/// holds [`scratch_len`] values.
#[inline(always)]
pub(crate) fn attend_head<S: Simd, M: MulAdd, W: Wide>(
    s: S,
    mode: M,
    wide: W,
    h: &Head<'_>,
    out: &mut [f32],
    scratch: &mut [f32],
) {
    let hd = h.hd;
    if hd == 0 {
        return;
    }
    let skip = match scratch.as_ptr().align_offset(64) {
        at if at < ALIGN => at,
        _ => 0,
    };
    let scratch = &mut scratch[skip..];
    let (kt, rest) = scratch.split_at_mut(hd * KEY_TILE);
    let (qt, scores) = rest.split_at_mut(hd * GROUP);
    let scores = &mut scores[..GROUP * KEY_TILE];
    let mut g0 = 0;
    while g0 < h.sq {
        let rows = GROUP.min(h.sq - g0);
        let group = &mut out[g0 * hd..(g0 + rows) * hd];
        group.fill(0.0);
        let mut state = Rows {
            top: [f32::NEG_INFINITY; GROUP],
            total: [0.0; GROUP],
            alpha: [1.0; GROUP],
            counts: [0; GROUP],
        };
        // A decode step (or rows too few for a block) reads each tile's keys in place, with the
        // queries where they are: nothing to pack.
        let decode = rows < ROWS || h.decode;
        // Otherwise the native mode's wide kernel reads the queries in place; else they are
        // packed once per group, here or at the first block that kernel refuses.
        let mut packed = false;
        if !decode && !wide.scores_in_place() {
            pack_queries(h, g0, rows, qt);
            packed = true;
        }
        // A decode group whose last block would have two or three rows, on the wide kernels,
        // is padded to whole blocks of four: its last query row repeated into `kt` (unused by
        // a decode step), its output accumulated there. Four rows on those kernels take less
        // time per key than three or two on the 8-lane ones (three rows from the last-level
        // cache: 23–24 → 48–56 GiB/s of K and V; two: 34 → 50–57). Only the real rows go
        // through the softmax (a padding row's scores stay raw and its output is never read),
        // and each row's bits are its own.
        let wide_blocks = h.decode && wide.blocks_of_four() && hd.is_multiple_of(64);
        let all = match rows % ROWS {
            2 | 3 if wide_blocks => rows.next_multiple_of(ROWS),
            _ => rows,
        };
        let padded = all != rows;
        let (kt, pad) = match padded {
            true => (&mut [][..], &mut *kt),
            false => (&mut *kt, &mut [][..]),
        };
        let (qp, op) = pad.split_at_mut(pad.len().min(all * hd));
        let op_len = op.len().min(all * hd);
        let op = &mut op[..op_len];
        let hp = match padded {
            true => {
                for (r, row) in qp.chunks_exact_mut(hd).enumerate() {
                    let at = (g0 + r.min(rows - 1)) * hd;
                    row.copy_from_slice(&h.q[at..at + hd]);
                }
                op.fill(0.0);
                Head {
                    q: &*qp,
                    mask: None,
                    sq: all,
                    causal: false,
                    ..*h
                }
            }
            false => *h,
        };
        // What a decode step's phases read: the padded rows, or the group's own.
        let (dh, dg0, drows) = match padded {
            true => (&hp, 0, all),
            false => (h, g0, rows),
        };
        let seen = h.visible(g0 + rows - 1);
        if decode {
            // A decode step (or rows too few for a block) reads each tile's keys in place, so
            // K is streamed once and never packed. A lone row, and stacked rows in whole blocks
            // on the wide kernels, go a span of [`SPAN`] tiles at a time: every tile's scores,
            // then every tile's softmax, then every tile's weighted sum (the scores of a span's
            // tiles fill the scratch the group's other rows would use); any other group a tile
            // at a time.
            // Each row's arithmetic is the one of a tile at a time, in the same order: a tile's
            // scores do not depend on the softmax state, and a tile's weighted sum uses its own
            // tile's weights and rescaling, kept per tile.
            let span = match drows == 1 || (wide_blocks && drows % ROWS == 0) {
                true => (GROUP / drows).min(SPAN),
                false => 1,
            };
            let mut alphas = [0.0f32; GROUP];
            let mut tile_counts = [0usize; GROUP];
            let mut t0 = 0;
            while t0 < seen {
                let tiles = span.min((seen - t0).div_ceil(KEY_TILE));
                let tile_scores = |t: usize| t * drows * KEY_TILE..(t + 1) * drows * KEY_TILE;
                for t in 0..tiles {
                    let at = t0 + t * KEY_TILE;
                    let n = KEY_TILE.min(seen - at);
                    // Padding rows see what the last real row sees.
                    for r in 0..drows {
                        let c = h.visible(g0 + r.min(rows - 1)).saturating_sub(at).min(n);
                        tile_counts[t * drows + r] = c;
                    }
                }
                // A lone row's tiles' scores lie back to back (one row per tile): it scores the
                // whole span in one pass, over all its tiles' keys. Other groups score tile by
                // tile.
                let passes = match drows {
                    1 => 1,
                    _ => tiles,
                };
                for t in 0..passes {
                    let scores = match drows {
                        1 => {
                            state.counts[0] = tile_counts[..tiles].iter().sum();
                            &mut scores[..]
                        }
                        _ => {
                            let counts = &tile_counts[t * drows..(t + 1) * drows];
                            state.counts[..drows].copy_from_slice(counts);
                            &mut scores[tile_scores(t)]
                        }
                    };
                    s.outlined(RowScores {
                        mode,
                        wide,
                        h: dh,
                        g0: dg0,
                        rows: drows,
                        t0: t0 + t * KEY_TILE,
                        counts: &state.counts,
                        scores,
                    });
                }
                for t in 0..tiles {
                    let counts = &tile_counts[t * drows..(t + 1) * drows];
                    state.counts[..drows].copy_from_slice(counts);
                    s.outlined(Softmax {
                        wide,
                        h,
                        g0,
                        rows,
                        t0: t0 + t * KEY_TILE,
                        scores: &mut scores[tile_scores(t)],
                        state: &mut state,
                    });
                    alphas[t * drows..t * drows + rows].copy_from_slice(&state.alpha[..rows]);
                }
                for t in 0..tiles {
                    let counts = &tile_counts[t * drows..(t + 1) * drows];
                    state.counts[..drows].copy_from_slice(counts);
                    state.alpha[..rows].copy_from_slice(&alphas[t * drows..t * drows + rows]);
                    s.outlined(StreamWeigh {
                        mode,
                        wide,
                        h: dh,
                        rows: drows,
                        t0: t0 + t * KEY_TILE,
                        scores: &scores[tile_scores(t)],
                        state: &state,
                        group: match padded {
                            true => &mut *op,
                            false => &mut *group,
                        },
                    });
                }
                t0 += tiles * KEY_TILE;
            }
        }
        // Any other group a tile at a time (a decode group went above).
        let mut t0 = 0;
        while !decode && t0 < seen {
            let n = KEY_TILE.min(seen - t0);
            for (r, c) in state.counts[..rows].iter_mut().enumerate() {
                *c = h.visible(g0 + r).saturating_sub(t0).min(n);
            }
            s.outlined(PackKeys { wide, h, t0, n, kt });
            s.outlined(Scores {
                t0,
                n,
                mode,
                wide,
                h,
                g0,
                rows,
                counts: &state.counts,
                qt: &mut *qt,
                packed: &mut packed,
                kt,
                scores,
            });
            s.outlined(Softmax {
                wide,
                h,
                g0,
                rows,
                t0,
                scores,
                state: &mut state,
            });
            s.outlined(Weigh {
                mode,
                wide,
                h,
                rows,
                t0,
                scores,
                state: &state,
                group,
            });
            t0 += KEY_TILE;
        }
        if padded {
            group.copy_from_slice(&op[..rows * hd]);
        }
        for (r, o) in group.chunks_exact_mut(hd).enumerate() {
            let (top, total) = (state.top[r], state.total[r]);
            if top == f32::NEG_INFINITY && total == 0.0 {
                // Every key hidden (or none at all): zeros, never 0/0.
                o.fill(0.0);
            } else {
                for x in o.iter_mut() {
                    *x /= total;
                }
            }
        }
        g0 += rows;
    }
}

/// Packs the group's full blocks of [`ROWS`] query rows transposed, `qt[b·ROWS·hd + d·ROWS +
/// r] = q[g0 + b·ROWS + r][d]`, so that a block's step `d` reads its four values together.
fn pack_queries(h: &Head<'_>, g0: usize, rows: usize, qt: &mut [f32]) {
    let hd = h.hd;
    let blocks = rows / ROWS;
    let q = &h.q[g0 * hd..(g0 + blocks * ROWS) * hd];
    for (qb, dst) in q
        .chunks_exact(ROWS * hd)
        .zip(qt.chunks_exact_mut(ROWS * hd))
    {
        for (r, row) in qb.chunks_exact(hd).enumerate() {
            for (d, &x) in row.iter().enumerate() {
                dst[d * ROWS + r] = x;
            }
        }
    }
}

/// Packs keys `t0 .. t0 + n` transposed, `kt[d·KEY_TILE + j] = k[t0 + j][d]`, and zeroes the
/// columns up to the next multiple of [`LANES`] (their scores are computed, never read).
struct PackKeys<'a, 'h, W> {
    wide: W,
    h: &'a Head<'h>,
    t0: usize,
    n: usize,
    kt: &'a mut [f32],
}

impl<S: Simd, W: Wide> Phase<S> for PackKeys<'_, '_, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self { wide, h, t0, n, kt } = self;
        let hd = h.hd;
        let padded = n.next_multiple_of(LANES);
        let keys = &h.k[t0 * hd..(t0 + n) * hd];
        let (whole, dims) = (n - n % LANES, hd - hd % LANES);
        // Whole blocks of 16 keys on the wide kernel where there is one (the same values),
        // else 8 × 8 blocks through registers, then the ragged edges one value at a time. The
        // tile's values and the next tile's keys are requested by the phases after this one
        // ([`Scores`], [`Weigh`]), spread over their arithmetic: issued here, in a burst beside
        // the packing's own reads, they held it up (Sk 1024 to 64 Ki 3–12 % slower).
        let done = wide.pack_keys(keys, hd, n, kt, KEY_TILE);
        for j in (done..whole).step_by(LANES) {
            let block = &keys[j * hd..(j + LANES) * hd];
            for d in (0..dims).step_by(LANES) {
                let rows: [S::V; LANES] =
                    core::array::from_fn(|r| s.load(&block[r * hd + d..r * hd + d + LANES]));
                for (r, v) in s.transpose8(rows).into_iter().enumerate() {
                    let at = (d + r) * KEY_TILE + j;
                    s.store(v, &mut kt[at..at + LANES]);
                }
            }
            for d in dims..hd {
                for (r, key) in block.chunks_exact(hd).enumerate() {
                    kt[d * KEY_TILE + j + r] = key[d];
                }
            }
        }
        for (d, dst) in kt.chunks_exact_mut(KEY_TILE).enumerate().take(hd) {
            for (x, key) in dst[whole..n]
                .iter_mut()
                .zip(keys[whole * hd..].chunks_exact(hd))
            {
                *x = key[d];
            }
            dst[n..padded].fill(0.0);
        }
    }
}

/// The raw dot products of the group's rows with the tile's keys that each row's block sees,
/// into `scores[r · KEY_TILE + j]`.
struct Scores<'a, 'h, M, W> {
    /// The tile's first key and its number of keys (whose values this phase requests).
    t0: usize,
    n: usize,
    mode: M,
    wide: W,
    h: &'a Head<'h>,
    g0: usize,
    rows: usize,
    counts: &'a [usize; GROUP],
    qt: &'a mut [f32],
    /// Whether `qt` holds the group's packed queries (else they are read in place).
    packed: &'a mut bool,
    kt: &'a [f32],
    scores: &'a mut [f32],
}

impl<S: Simd, M: MulAdd, W: Wide> Phase<S> for Scores<'_, '_, M, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            t0,
            n,
            mode,
            wide,
            h,
            g0,
            rows,
            counts,
            qt,
            packed,
            kt,
            scores,
        } = self;
        let hd = h.hd;
        let blocks = rows / ROWS;
        // The tile's values, read by the weighted sum next, requested a part per block.
        let values = &h.v[t0 * hd..(t0 + n) * hd];
        let part = values.len().div_ceil(blocks.max(1)).next_multiple_of(16);
        for b in 0..blocks {
            let at = (b * part).min(values.len());
            prefetch_l2(&values[at..(at + part).min(values.len())]);
            // The last row of a block sees the most keys; the columns the others do not see
            // are computed and never read.
            let cols = counts[b * ROWS + ROWS - 1].next_multiple_of(LANES);
            let out = &mut scores[b * ROWS * KEY_TILE..(b + 1) * ROWS * KEY_TILE];
            if !*packed {
                let row0 = g0 + b * ROWS;
                let q = &h.q[row0 * hd..(row0 + ROWS) * hd];
                if scores_in_place(wide, q, hd, kt, cols, out) {
                    continue;
                }
                pack_queries(h, g0, rows, qt);
                *packed = true;
            }
            let q = &qt[b * ROWS * hd..(b + 1) * ROWS * hd];
            let mut col = 0;
            while col + 64 <= cols {
                // From zero, as the 8-lane kernel starts its chains.
                let (kt, c) = (&kt[col..], &mut out[col..]);
                if !wide.block_4x64_from_zero(q, ROWS, 1, kt, KEY_TILE, hd, c, KEY_TILE) {
                    break;
                }
                col += 64;
            }
            while col + 2 * LANES <= cols {
                scores_block::<S, M, ROWS, 2>(s, mode, q, kt, KEY_TILE, col, out, KEY_TILE);
                col += 2 * LANES;
            }
            if col < cols {
                scores_block::<S, M, ROWS, 1>(s, mode, q, kt, KEY_TILE, col, out, KEY_TILE);
            }
        }
        for r in blocks * ROWS..rows {
            let cols = counts[r].next_multiple_of(LANES);
            let q = &h.q[(g0 + r) * hd..(g0 + r + 1) * hd];
            let out = &mut scores[r * KEY_TILE..(r + 1) * KEY_TILE];
            let mut col = 0;
            while col + 4 * LANES <= cols {
                scores_block::<S, M, 1, 4>(s, mode, q, kt, KEY_TILE, col, out, KEY_TILE);
                col += 4 * LANES;
            }
            while col < cols {
                scores_block::<S, M, 1, 1>(s, mode, q, kt, KEY_TILE, col, out, KEY_TILE);
                col += LANES;
            }
        }
    }
}

/// A block's scores over its first `cols` columns on the wide kernel, the queries read in
/// place (`q`: the block's [`ROWS`] rows); `false` where the kernel refused. The columns up to
/// the next 16 (at most [`KEY_TILE`], a multiple of 16) are computed from whatever the tile
/// holds there and never read.
#[inline(always)]
fn scores_in_place<W: Wide>(
    wide: W,
    q: &[f32],
    hd: usize,
    kt: &[f32],
    cols: usize,
    out: &mut [f32],
) -> bool {
    let end = cols.next_multiple_of(16);
    let mut col = 0;
    while col < end {
        let chunks = ((end - col) / 16).min(4);
        let (kt, c) = (&kt[col..], &mut out[col..]);
        if !wide.block_4x16n_from_zero(chunks, q, 1, hd, kt, KEY_TILE, hd, c, KEY_TILE) {
            return false;
        }
        col += 16 * chunks;
    }
    true
}

/// Whether a decode block's weighted sum requests the values wanted later (on the wide kernel,
/// at the pace it reads values), so that its score phase requests only keys: a full block
/// whose rows see the same keys, in whole 64-value rows.
#[inline(always)]
fn values_by_weigh(hd: usize, counts: &[usize]) -> bool {
    counts.len() == ROWS && hd.is_multiple_of(64) && counts.iter().all(|&c| c == counts[0])
}

/// The raw dot products of each of a decode group's rows with the tile's keys it sees,
/// straight from the key rows, into `scores[r · KEY_TILE + j]`. Eight keys at a time are
/// transposed in registers and used by up to [`ROWS`] rows at once, so each key's chain over
/// `d` is the one of [`scores_block`] (from `+0.0`, increasing `d`, in `mode`): the same bits
/// as the packed path, with no packed tile written and read back.
struct RowScores<'a, 'h, M, W> {
    mode: M,
    wide: W,
    h: &'a Head<'h>,
    g0: usize,
    rows: usize,
    t0: usize,
    counts: &'a [usize; GROUP],
    scores: &'a mut [f32],
}

impl<S: Simd, M: MulAdd, W: Wide> Phase<S> for RowScores<'_, '_, M, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            mode,
            wide,
            h,
            g0,
            rows,
            t0,
            counts,
            scores,
        } = self;
        let mut r0 = 0;
        while r0 < rows {
            let block = ROWS.min(rows - r0);
            // A lone row's scores may run on over several tiles, back to back (a span, see
            // [`attend_head`]); other rows' hold a tile each.
            let end = match rows {
                1 => scores.len(),
                _ => (r0 + block) * KEY_TILE,
            };
            // The rows of a block share each transposed chunk of keys; a pair of rows or a lone
            // row also takes two chunks at a time, chains enough to hide their additions'
            // latency (three rows: measured, two chunks gained nothing).
            let tile = RowTile {
                wide,
                h,
                g0,
                r0,
                t0,
                counts: &counts[r0..r0 + block],
                scores: &mut scores[r0 * KEY_TILE..end],
                ahead: r0 == 0,
            };
            match block {
                4 => tile.run::<S, M, 4, 1>(s, mode),
                3 => tile.run::<S, M, 3, 1>(s, mode),
                2 => tile.run::<S, M, 2, 2>(s, mode),
                _ => tile.run::<S, M, 1, 2>(s, mode),
            }
            r0 += block;
        }
    }
}

/// The scores of one block of up to [`ROWS`] decode rows against a key tile.
struct RowTile<'a, 'h, W> {
    wide: W,
    h: &'a Head<'h>,
    g0: usize,
    r0: usize,
    t0: usize,
    /// The block's rows' visible keys in this tile (a lone row's: in its span, see
    /// [`RowScores`]), nondecreasing.
    counts: &'a [usize],
    /// The block's rows of scores, [`KEY_TILE`] apart.
    scores: &'a mut [f32],
    /// Whether this block requests the keys [`AHEAD`] (the first block of a group does).
    ahead: bool,
}

impl<W: Wide> RowTile<'_, '_, W> {
    /// Rows `R` at once, `8·C` keys at a time while whole chunks last, then eight, then one by
    /// one; a block of four rows goes 32 keys at a time on the wide kernel first, where there
    /// is one (the same chains). The last row sees the most keys; the columns the others do
    /// not see are computed and never read.
    #[inline(always)]
    fn run<S: Simd, M: MulAdd, const R: usize, const C: usize>(self, s: S, mode: M) {
        let Self {
            wide,
            h,
            g0,
            r0,
            t0,
            counts,
            scores,
            ahead,
        } = self;
        let hd = h.hd;
        let count = counts[R - 1];
        let row0 = g0 + r0;
        let q = &h.q[row0 * hd..(row0 + R) * hd];
        let keys = &h.k[t0 * hd..(t0 + count) * hd];
        // The key rows `by` keys on from the `n` from `j` ([`AHEAD`], or [`AHEAD_WIDE`] on
        // the four-row wide kernel), requested by the first block only.
        let later = |by: usize, j: usize, n: usize| -> [&[f32]; 2] {
            let at = (t0 + by + j) * hd..(t0 + by + j + n) * hd;
            match ahead {
                true => [
                    h.k.get(at.clone()).unwrap_or(&[]),
                    h.v.get(at).unwrap_or(&[]),
                ],
                false => [&[], &[]],
            }
        };
        let mut j = 0;
        if R == 1 && (h.cached || wide.lone_from_memory()) {
            // A lone row, over K and V in cache or in the native mode: 32 keys at a time on
            // the wide kernel, where there is one, which requests the keys [`AHEAD_LONE_WIDE`]
            // on (its weighted sum requests the values).
            while j + 32 <= count {
                let [keys_later, _] = later(AHEAD_LONE_WIDE, j, 32);
                let block = &keys[j * hd..(j + 32) * hd];
                if !wide.scores_1x32(q, block, keys_later, &mut scores[j..]) {
                    break;
                }
                j += 32;
            }
        }
        while R == 4 && j + 32 <= count {
            // Four rows against 32 keys: chains of 16 lanes, the four rows against 16 keys at
            // a time (the transposes of the keys fill the wait between their steps), where
            // 8-lane chains of four rows wait on their latency. It requests a line of the keys
            // wanted later per line it reads; the weighted sum requests the values the same
            // way, both [`AHEAD_WIDE`] keys on.
            let block = &keys[j * hd..(j + 32) * hd];
            let [k_later, v_later] = later(AHEAD_WIDE, j, 32);
            if !wide.scores_4x32(q, hd, block, k_later, &mut scores[j..], KEY_TILE) {
                break;
            }
            if k_later.len() != 32 * hd {
                prefetch_l1(k_later);
            }
            if !values_by_weigh(hd, counts) {
                prefetch_l1(v_later);
            }
            j += 32;
        }
        // A group of fewer than four rows from memory requests only its keys, [`AHEAD_LONE`]
        // on into L1 (its weighted sum requests the values); other blocks both, [`AHEAD`] on
        // into L2. (Only a group's first block requests anything.)
        let close = h.requests_close(R);
        let rows_later = |j: usize, n: usize| match close {
            true => Later {
                rows: [later(AHEAD_LONE, j, n)[0], &[]],
                into_l1: true,
            },
            false => Later {
                rows: later(AHEAD, j, n),
                into_l1: false,
            },
        };
        while j + C * LANES <= count {
            let block = &keys[j * hd..(j + C * LANES) * hd];
            let later = rows_later(j, C * LANES);
            row_scores::<S, M, R, C>(s, mode, q, block, later, &mut scores[j..], KEY_TILE);
            j += C * LANES;
        }
        while j + LANES <= count {
            let block = &keys[j * hd..(j + LANES) * hd];
            let later = rows_later(j, LANES);
            row_scores::<S, M, R, 1>(s, mode, q, block, later, &mut scores[j..], KEY_TILE);
            j += LANES;
        }
        for (r, q) in q.chunks_exact(hd).enumerate() {
            let out = &mut scores[r * KEY_TILE + j..r * KEY_TILE + count];
            for (x, key) in out.iter_mut().zip(keys[j * hd..].chunks_exact(hd)) {
                let mut acc = 0.0;
                for (&a, &b) in q.iter().zip(key) {
                    acc = mode.step1(s, acc, a, b);
                }
                *x = acc;
            }
        }
    }
}

/// Rows a score loop requests while it reads the rows it uses now.
#[derive(Clone, Copy)]
struct Later<'a> {
    /// Key rows and value rows wanted later (either may be empty).
    rows: [&'a [f32]; 2],
    /// Into L1 (a group of fewer than four rows from memory, [`AHEAD_LONE`] on) rather than L2.
    into_l1: bool,
}

/// `out[r·out_stride + x] = Σ_d q[r·hd + d] · keys[x·hd + d]` for the `R` query rows of `q`
/// and the `8·C` key rows of `keys`, each one chain over `d` in increasing order from `+0.0`:
/// whole chunks of eight dimensions through an 8 × 8 register transpose shared by the `R`
/// rows, the ragged dimensions one value at a time, rounded as a lane is. The rows of `later`
/// are requested a few lines per chunk.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..C` unroll into registers
fn row_scores<S: Simd, M: MulAdd, const R: usize, const C: usize>(
    s: S,
    mode: M,
    q: &[f32],
    keys: &[f32],
    later: Later<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    const { assert!(C <= 4) };
    let hd = q.len() / R;
    let dims = hd - hd % LANES;
    let mut acc = [[s.zero(); C]; R];
    let mut d = 0;
    // One chunk of eight keys: its transpose, then its steps for every row. A macro, spelled
    // out per chunk rather than a loop over `c`: a loop this long is not unrolled, and an
    // accumulator indexed by a loop counter lives in memory, not in a register.
    macro_rules! chunk {
        ($c:literal) => {
            if $c < C {
                let block = &keys[$c * LANES * hd..($c + 1) * LANES * hd];
                let rows: [S::V; LANES] =
                    core::array::from_fn(|x| s.load(&block[x * hd + d..x * hd + d + LANES]));
                let ke = s.transpose8(rows);
                for r in 0..R {
                    let qd = &q[r * hd + d..r * hd + d + LANES];
                    for (&qe, &k) in qd.iter().zip(&ke) {
                        acc[r][$c] = mode.step(s, acc[r][$c], s.splat(qe), k);
                    }
                }
            }
        };
    }
    while d < dims {
        // The rows wanted later, a few lines per chunk of dimensions: requests spread over the
        // arithmetic keep misses from queueing up behind one burst.
        for rows in later.rows {
            let part = rows.len().div_ceil(dims / LANES).next_multiple_of(16);
            let at = (d / LANES * part).min(rows.len());
            let lines = &rows[at..(at + part).min(rows.len())];
            match later.into_l1 {
                true => prefetch_l1(lines),
                false => prefetch_l2(lines),
            }
        }
        chunk!(0);
        chunk!(1);
        chunk!(2);
        chunk!(3);
        d += LANES;
    }
    for r in 0..R {
        for c in 0..C {
            let at = r * out_stride + c * LANES;
            s.store(acc[r][c], &mut out[at..at + LANES]);
        }
    }
    if dims < hd {
        for r in 0..R {
            let q = &q[r * hd..(r + 1) * hd];
            let out = &mut out[r * out_stride..r * out_stride + C * LANES];
            for (x, key) in out.iter_mut().zip(keys.chunks_exact(hd)) {
                for d in dims..hd {
                    *x = mode.step1(s, *x, q[d], key[d]);
                }
            }
        }
    }
}

/// Turns one tile's raw scores into weights in place and moves each row's running max and
/// sum on (step 2 of the module docs).
struct Softmax<'a, 'h, W> {
    wide: W,
    h: &'a Head<'h>,
    g0: usize,
    rows: usize,
    t0: usize,
    scores: &'a mut [f32],
    state: &'a mut Rows,
}

impl<S: Simd, W: Wide> Phase<S> for Softmax<'_, '_, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            wide,
            h,
            g0,
            rows,
            t0,
            scores,
            state,
        } = self;
        // Two passes over the rows: every row's max first, then every row's weights. A row's
        // weights wait on its max, so run back to back they would drain the pipeline once per
        // row; this way the next row's weights never wait on this row's max. Likewise the
        // rescalings `α = exp(old max - new max)` go all at once between the passes: `shift`
        // holds each row's exponent, 0 (so `α = 1`) for a row whose max did not move on.
        let mut shift = [0.0f32; GROUP];
        for r in 0..rows {
            let count = state.counts[r];
            if count == 0 {
                continue;
            }
            let i = g0 + r;
            let row = &mut scores[r * KEY_TILE..r * KEY_TILE + count];
            let mask = h.mask.map(|(mask, stride)| {
                let at = i * stride + t0;
                &mask[at..at + count]
            });
            let old = state.top[r];
            let tile = scale_mask_max(s, row, h.scale, mask);
            let top = if tile > old { tile } else { old };
            if top == f32::NEG_INFINITY {
                // Every key so far hidden: weights 0, so that a NaN in `v` still reaches the
                // row if a later key is seen. The max skips NaN (see `scale_mask_max`); a NaN
                // score keeps its NaN weight and makes the sum NaN, as it would against a
                // finite max. The second pass leaves the row alone (its max stays `-inf`).
                let mut nan = false;
                for x in row.iter_mut() {
                    if x.is_nan() {
                        nan = true;
                    } else {
                        *x = 0.0;
                    }
                }
                if nan {
                    state.total[r] = f32::NAN;
                }
                continue;
            }
            shift[r] = old - top;
            state.top[r] = top;
        }
        // `exp(x - 0)` is `exp(x)`: subtracting +0.0 changes no value, not even -0.0.
        let shift = &mut shift[..rows];
        let done = wide.exp_shifted(shift, 0.0, &mut [0.0; LANES]);
        for x in shift[done..].iter_mut() {
            *x = exp(*x);
        }
        state.alpha[..rows].copy_from_slice(shift);
        for r in 0..rows {
            let (count, top) = (state.counts[r], state.top[r]);
            if count == 0 || top == f32::NEG_INFINITY {
                continue;
            }
            let row = &mut scores[r * KEY_TILE..r * KEY_TILE + count];
            // Whole chunks of 16 on the wide kernel where there is one, which also adds them
            // to the row's lanes of the sum; the same bits.
            let mut lanes = [0.0f32; LANES];
            let done = wide.exp_shifted(row, top, &mut lanes);
            let row = &mut row[done..];
            for x in row.iter_mut() {
                *x = exp(*x - top);
            }
            state.total[r] = state.total[r] * state.alpha[r] + sum_from(s, s.load(&lanes), row);
        }
    }
}

/// Multiplies each of the first `rows` output rows (`hd` values each) by its `α`, the factor
/// that carries its sums over to the new running max; a row whose max did not move is left as is.
#[inline(always)]
fn rescale(group: &mut [f32], hd: usize, rows: usize, state: &Rows) {
    for (o, &alpha) in group.chunks_exact_mut(hd).zip(&state.alpha).take(rows) {
        if alpha != 1.0 {
            for x in o.iter_mut() {
                *x *= alpha;
            }
        }
    }
}

/// Rescales the group's output rows by their `α` and adds the tile's weighted values (step 3
/// of the module docs).
struct Weigh<'a, 'h, M, W> {
    mode: M,
    wide: W,
    h: &'a Head<'h>,
    rows: usize,
    t0: usize,
    scores: &'a [f32],
    state: &'a Rows,
    group: &'a mut [f32],
}

impl<S: Simd, M: MulAdd, W: Wide> Phase<S> for Weigh<'_, '_, M, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            mode,
            wide,
            h,
            rows,
            t0,
            scores,
            state,
            group,
        } = self;
        let hd = h.hd;
        let v = &h.v[t0 * hd..];
        rescale(group, hd, rows, state);
        // The next tile's keys, requested a part per block of rows for the next packing.
        let next = h.k.get((t0 + KEY_TILE) * hd..).unwrap_or(&[]);
        let next = &next[..next.len().min(KEY_TILE * hd)];
        let part = next
            .len()
            .div_ceil(rows.div_ceil(ROWS))
            .next_multiple_of(16);
        let mut r0 = 0;
        while r0 < rows {
            let at = (r0 / ROWS * part).min(next.len());
            prefetch_l2(&next[at..(at + part).min(next.len())]);
            let block = ROWS.min(rows - r0);
            let counts = &state.counts[r0..r0 + block];
            // The keys every row of a full block weighs share their loads; the rest go row by
            // row. Per element the additions stay in increasing key order.
            let shared = if block == ROWS {
                let shared = counts.iter().copied().min().unwrap_or(0);
                let out = &mut group[r0 * hd..(r0 + ROWS) * hd];
                let w = &scores[r0 * KEY_TILE..];
                // Whole rows of 64 values on the wide kernel, if there is one, else all on
                // the 8-lane one; per element the chain is the same.
                let by_wide = hd % 64 == 0
                    && (0..hd).step_by(64).all(|c| {
                        wide.block_4x64(w, 1, KEY_TILE, &v[c..], hd, shared, &mut out[c..], hd)
                    });
                if !by_wide {
                    weigh_rows::<S, M, ROWS>(s, mode, out, w, KEY_TILE, shared, v, hd);
                }
                shared
            } else {
                0
            };
            for (r, &count) in (r0..).zip(counts) {
                if shared < count {
                    let out = &mut group[r * hd..(r + 1) * hd];
                    let w = &scores[r * KEY_TILE + shared..r * KEY_TILE + count];
                    let rows = &v[shared * hd..];
                    weigh_rows::<S, M, 1>(s, mode, out, w, 0, count - shared, rows, hd);
                }
            }
            r0 += block;
        }
    }
}

/// A decode group's [`Weigh`]: rescales each output row by its `α` and adds the tile's
/// weighted values (requested [`AHEAD`] by [`RowScores`], or by this phase: [`AHEAD_WIDE`]
/// where the four-row wide kernel runs, [`AHEAD_LONE`] for fewer than four rows from memory;
/// V streams from memory once for all the rows). Blocks of [`ROWS`] rows, or a group of
/// fewer, that weigh the same keys share each value load; per element the additions stay in
/// increasing key order, as in [`Weigh`].
struct StreamWeigh<'a, 'h, M, W> {
    mode: M,
    wide: W,
    h: &'a Head<'h>,
    rows: usize,
    t0: usize,
    scores: &'a [f32],
    state: &'a Rows,
    group: &'a mut [f32],
}

impl<S: Simd, M: MulAdd, W: Wide> Phase<S> for StreamWeigh<'_, '_, M, W> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            mode,
            wide,
            h,
            rows,
            t0,
            scores,
            state,
            group,
        } = self;
        let hd = h.hd;
        let v = &h.v[t0 * hd..];
        rescale(group, hd, rows, state);
        let counts = &state.counts[..rows];
        let mut r0 = 0;
        while r0 < rows {
            let block = ROWS.min(rows - r0);
            let n = counts[r0];
            let out = &mut group[r0 * hd..(r0 + block) * hd];
            // A lone row on the wide kernel, where there is one: whole rows of 64 values at a
            // time, requesting the values as far on as the score phase requested the keys (the
            // additions per element in increasing key order, as everywhere).
            let lone = rows == 1 && hd % 64 == 0 && {
                let ahead = match h.cached || wide.lone_from_memory() {
                    true => AHEAD_LONE_WIDE,
                    false => AHEAD_LONE,
                };
                (0..hd).step_by(64).all(|c| {
                    let later = h.v.get((t0 + ahead) * hd + c..).unwrap_or(&[]);
                    let out = &mut out[c..c + 64];
                    wide.weigh_1x64_ahead(&scores[..n], &v[c..], hd, n, out, later)
                })
            };
            if lone {
                // Done on the wide kernel.
            } else if block == ROWS && counts[r0..r0 + ROWS].iter().all(|&c| c == n) {
                let w = &scores[r0 * KEY_TILE..];
                // The first block requests the values wanted later (the score phase requested
                // only keys where the wide score kernel ran: the same condition).
                let later = match r0 == 0 && values_by_weigh(hd, &counts[r0..r0 + ROWS]) {
                    true => h.v.get((t0 + AHEAD_WIDE) * hd..).unwrap_or(&[]),
                    false => &[],
                };
                let by_wide = hd % 64 == 0
                    && (0..hd).step_by(64).all(|c| {
                        let later = later.get(c..).unwrap_or(&[]);
                        wide.block_4x64_ahead(
                            w,
                            1,
                            KEY_TILE,
                            &v[c..],
                            hd,
                            n,
                            &mut out[c..],
                            hd,
                            later,
                        )
                    });
                if !by_wide {
                    weigh_rows::<S, M, ROWS>(s, mode, out, w, KEY_TILE, n, v, hd);
                }
            } else if h.requests_close(rows) {
                // Fewer than four rows from memory: eight keys at a time for all the rows, each
                // step requesting the values [`AHEAD_LONE`] keys on; rows that see the same
                // keys share each value load, else each weighs the keys it sees. The additions
                // per element stay in increasing key order.
                let even = counts[..block].iter().all(|&c| c == n);
                let last = counts[block - 1];
                let mut j = 0;
                while j < last {
                    let end = (j + LANES).min(last);
                    let at = (t0 + AHEAD_LONE + j) * hd..(t0 + AHEAD_LONE + end) * hd;
                    prefetch_l1(h.v.get(at).unwrap_or(&[]));
                    let (w, v) = (&scores[j..], &v[j * hd..]);
                    match block {
                        3 if even => {
                            weigh_rows::<S, M, 3>(s, mode, out, w, KEY_TILE, end - j, v, hd)
                        }
                        2 if even => {
                            weigh_rows::<S, M, 2>(s, mode, out, w, KEY_TILE, end - j, v, hd)
                        }
                        _ => {
                            for (r, o) in out.chunks_exact_mut(hd).enumerate() {
                                let seen = end.min(counts[r]);
                                let w = &w[r * KEY_TILE..];
                                if j < seen {
                                    weigh_rows::<S, M, 1>(s, mode, o, w, 0, seen - j, v, hd);
                                }
                            }
                        }
                    }
                    j = end;
                }
            } else {
                for (r, o) in (r0..).zip(out.chunks_exact_mut(hd)) {
                    let w = &scores[r * KEY_TILE..r * KEY_TILE + counts[r]];
                    weigh_rows::<S, M, 1>(s, mode, o, w, 0, counts[r], v, hd);
                }
            }
            r0 += block;
        }
    }
}
