//! One decode step of a [`Llama`] as a graph of the compile lane: what [`Llama::step`]
//! computes, written with the graph builder so that it exports to StableHLO (the inputs and
//! results are listed on [`Llama::step_graph`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::llama::{Llama, LlamaCache, ModelError};
use crate::graph::{Graph, GraphBuilder, GraphError, ScheduleHint, Value};
use crate::kernels::step::angle_table;
use crate::quant;
use crate::{KernelError, QMatrix, SdpaOptions, Tensor};

fn rows() -> ScheduleHint {
    ScheduleHint::parallel(["rows"]).expect("an identifier")
}

fn batch_heads() -> ScheduleHint {
    ScheduleHint::parallel(["batch", "heads"]).expect("two identifiers")
}

impl Llama<'_> {
    /// The decode step after a prefix of `prefix` positions as a graph. Run eagerly on
    /// [`step_graph_inputs`](Self::step_graph_inputs), its logits are the bits of
    /// [`step`](Self::step) in [`Activations::Exact`](crate::Activations::Exact) mode.
    ///
    /// Its inputs, in this order (the order of `main`'s parameters in the export):
    ///
    /// 1. `token` `[1]` and `position` `[1]`: the new token's id and its position, f32 values
    ///    holding whole numbers (every graph value is f32);
    /// 2. for every block `i`, `k_prefix.i` and `v_prefix.i` `[1, nKV, prefix, hd]`: the keys
    ///    (already rotated) and values of the positions before it;
    /// 3. `rope_cos` and `rope_sin` `[context, hd/2]`: the cosines and sines of every
    ///    position's rotary angles, the eager kernels' f64 angles rounded once;
    /// 4. the weights, decoded to f32: `token_embd` `[vocab, d]`, then per block
    ///    `blk.i.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
    ///    ffn_down}` (projections `[out, in]`, as the file stores them), `output_norm`, and
    ///    `output` unless the file ties the head to the embedding (then `token_embd` serves
    ///    both).
    ///
    /// Its results: the logits `[1, vocab]`, then every block's new key and value rows
    /// `k_new.i`, `v_new.i` `[1, nKV, 1, hd]` (the key rotated), what a caller appends to its
    /// cache.
    ///
    /// Weights are inputs, not constants: the module holds none, stays small whatever the
    /// model, and runs any weights of its shapes. The position is data too: the rotary angles
    /// are the tables' rows picked by an `embedding` of `position` (adjacent pairs, GGUF's
    /// layout of Q and K). Grouped-query attention reads the `nKV` heads by index; the one
    /// `concat` per K and V is the cache append along the positions. Every op that computes
    /// carries a structural hint (`rows`; attention `batch, heads`), never a core count;
    /// `reshape` and `concat` have nothing to split.
    ///
    /// # Errors
    ///
    /// [`GraphError::BadShape`] with [`ShapeError::TooLarge`](crate::ShapeError::TooLarge)
    /// when a prefix input would hold more values than a tensor can.
    pub fn step_graph(&self, prefix: usize) -> Result<Graph, GraphError> {
        let c = self.config();
        let (d, hd, half) = (c.dim, c.head_dim, c.head_dim / 2);
        let (nq, nkv) = (c.heads * hd, c.kv_heads * hd);
        let mut b = GraphBuilder::new();
        let token = b.input("token", [1])?;
        let position = b.input("position", [1])?;
        let mut prefixes = Vec::with_capacity(c.blocks);
        for i in 0..c.blocks {
            let cache = [1, c.kv_heads, prefix, hd];
            prefixes.push([
                b.input(&format!("k_prefix.{i}"), cache)?,
                b.input(&format!("v_prefix.{i}"), cache)?,
            ]);
        }
        let rope_cos = b.input("rope_cos", [c.context, half])?;
        let rope_sin = b.input("rope_sin", [c.context, half])?;
        let embd = b.input("token_embd", [c.vocab, d])?;

        let x = b
            .embedding(embd, token)
            .id("embed")
            .schedule(rows())
            .finish()?;
        let cos = b
            .embedding(rope_cos, position)
            .id("cos")
            .schedule(rows())
            .finish()?;
        let sin = b
            .embedding(rope_sin, position)
            .id("sin")
            .schedule(rows())
            .finish()?;
        let mut x = x;
        let mut new_kv = Vec::with_capacity(c.blocks);
        for (i, [k_prefix, v_prefix]) in prefixes.into_iter().enumerate() {
            let n = |what: &str| format!("blk.{i}.{what}");
            let w = |b: &mut GraphBuilder, what: &str, shape: Vec<usize>| b.input(&n(what), shape);
            let attn_norm = w(&mut b, "attn_norm", alloc::vec![d])?;
            let wq = w(&mut b, "attn_q", alloc::vec![nq, d])?;
            let wk = w(&mut b, "attn_k", alloc::vec![nkv, d])?;
            let wv = w(&mut b, "attn_v", alloc::vec![nkv, d])?;
            let wo = w(&mut b, "attn_output", alloc::vec![d, nq])?;
            let ffn_norm = w(&mut b, "ffn_norm", alloc::vec![d])?;
            let w_gate = w(&mut b, "ffn_gate", alloc::vec![c.ffn, d])?;
            let w_up = w(&mut b, "ffn_up", alloc::vec![c.ffn, d])?;
            let w_down = w(&mut b, "ffn_down", alloc::vec![d, c.ffn])?;

            let row_op = |op: crate::graph::OpBuilder<'_>, what: &str| {
                op.id(n(what)).schedule(rows()).finish()
            };
            let h = row_op(b.rms_norm(x, attn_norm, c.rms_eps), "attn_norm_out")?;
            // One token: `[1, heads·hd]` is `[1, heads, 1, hd]` without moving a value.
            let head_view = |b: &mut GraphBuilder, v: Value, heads: usize, what: &str| {
                b.reshape(v, [1, heads, 1, hd]).id(n(what)).finish()
            };
            let q = row_op(b.linear(h, wq), "q_proj")?;
            let q = head_view(&mut b, q, c.heads, "q_heads")?;
            let q = row_op(b.rope_tables(q, cos, sin, true), "q_rope")?;
            let k = row_op(b.linear(h, wk), "k_proj")?;
            let k = head_view(&mut b, k, c.kv_heads, "k_heads")?;
            let k = row_op(b.rope_tables(k, cos, sin, true), "k_rope")?;
            let v = row_op(b.linear(h, wv), "v_proj")?;
            let v = head_view(&mut b, v, c.kv_heads, "v_heads")?;
            let keys = b.concat(k_prefix, k, 2).id(n("k_append")).finish()?;
            let values = b.concat(v_prefix, v, 2).id(n("v_append")).finish()?;
            let causal = SdpaOptions {
                scale: None,
                causal: true,
            };
            let a = b
                .sdpa(q, keys, values, None, causal)
                .id(n("attn"))
                .schedule(batch_heads())
                .finish()?;
            let a = b.reshape(a, [1, nq]).id(n("attn_rows")).finish()?;
            let o = row_op(b.linear(a, wo), "o_proj")?;
            x = row_op(b.add(x, o), "attn_residual")?;
            let h = row_op(b.rms_norm(x, ffn_norm, c.rms_eps), "ffn_norm_out")?;
            let gate = row_op(b.linear(h, w_gate), "gate_proj")?;
            let up = row_op(b.linear(h, w_up), "up_proj")?;
            let act = row_op(b.silu_mul(gate, up), "silu")?;
            let down = row_op(b.linear(act, w_down), "down_proj")?;
            x = row_op(b.add(x, down), "ffn_residual")?;
            new_kv.push([k, v]);
        }
        let output_norm = b.input("output_norm", [d])?;
        let head = if self.tied_output() {
            embd
        } else {
            b.input("output", [c.vocab, d])?
        };
        let h = b
            .rms_norm(x, output_norm, c.rms_eps)
            .id("output_norm_out")
            .schedule(rows())
            .finish()?;
        let logits = b.linear(h, head).id("logits").schedule(rows()).finish()?;
        b.output(logits)?;
        for [k, v] in new_kv {
            b.output(k)?;
            b.output(v)?;
        }
        b.build()
    }

    /// The inputs of [`step_graph`](Self::step_graph)`(cache.len())` for a step of `token`
    /// at position `cache.len()` after the positions `cache` holds, named and in the graph's
    /// order: the token, the position, every block's cached keys and values, the rotary tables
    /// and every weight decoded to f32 (for SmolLM2-135M about 540 MB).
    ///
    /// # Errors
    ///
    /// [`ModelError::TokenOutOfRange`]; [`ModelError::CacheFull`] when the cache is not this
    /// model's or its position is past the model's context (the rotary tables' rows);
    /// [`ModelError::Quant`] for a weight that does not decode; [`ModelError::Kernel`] when
    /// memory cannot be had.
    pub fn step_graph_inputs(
        &self,
        token: u32,
        cache: &LlamaCache,
    ) -> Result<Vec<(String, Tensor)>, ModelError> {
        let c = self.config();
        if token as usize >= c.vocab {
            return Err(ModelError::TokenOutOfRange {
                id: token,
                vocab: c.vocab,
            });
        }
        let position = cache.len();
        if cache.blocks() != c.blocks || position >= c.context {
            return Err(ModelError::CacheFull {
                len: position,
                adding: 1,
                capacity: c.context.min(cache.capacity()),
            });
        }
        let scalar = |x: usize| Tensor::new(alloc::vec![1], alloc::vec![x as f32]);
        let mut inputs: Vec<(String, Tensor)> = Vec::new();
        inputs.push(("token".into(), scalar(token as usize)?));
        inputs.push(("position".into(), scalar(position)?));
        for i in 0..c.blocks {
            let (k, v) = cache.block_keys_values(i);
            inputs.push((format!("k_prefix.{i}"), k.to_tensor()?));
            inputs.push((format!("v_prefix.{i}"), v.to_tensor()?));
        }
        let (hd, half) = (c.head_dim, c.head_dim / 2);
        let table = angle_table(0, c.context, hd, c.rope_base).ok_or(KernelError::Scratch {
            op: "rope",
            elements: c.context.saturating_mul(half),
        })?;
        let column = |j: usize| -> Result<Tensor, ModelError> {
            Ok(Tensor::new(
                alloc::vec![c.context, half],
                table.iter().map(|cs| cs[j]).collect(),
            )?)
        };
        inputs.push(("rope_cos".into(), column(0)?));
        inputs.push(("rope_sin".into(), column(1)?));
        inputs.push(("token_embd".into(), decoded("token_embd", self.embd)?));
        for (i, blk) in self.blocks.iter().enumerate() {
            let n = |what: &str| format!("blk.{i}.{what}");
            inputs.push((n("attn_norm"), blk.attn_norm.clone()));
            for (what, m) in [
                ("attn_q", blk.wq),
                ("attn_k", blk.wk),
                ("attn_v", blk.wv),
                ("attn_output", blk.wo),
            ] {
                inputs.push((n(what), decoded(&n(what), m)?));
            }
            inputs.push((n("ffn_norm"), blk.ffn_norm.clone()));
            for (what, m) in [
                ("ffn_gate", blk.w_gate),
                ("ffn_up", blk.w_up),
                ("ffn_down", blk.w_down),
            ] {
                inputs.push((n(what), decoded(&n(what), m)?));
            }
        }
        inputs.push(("output_norm".into(), self.output_norm.clone()));
        if !self.tied_output() {
            inputs.push(("output".into(), decoded("output", self.output)?));
        }
        Ok(inputs)
    }
}

/// `m` decoded to an f32 tensor `[rows, cols]`.
fn decoded(name: &str, m: QMatrix<'_>) -> Result<Tensor, ModelError> {
    let (rows, cols) = (m.rows(), m.cols());
    let mut out = Tensor::zeros(alloc::vec![rows, cols])?;
    if cols == 0 {
        return Ok(out);
    }
    for (r, row) in out.data_mut().chunks_exact_mut(cols).enumerate() {
        let bytes = m.row(r).unwrap_or_default();
        quant::decode_row(m.ty(), bytes, row).map_err(|error| ModelError::Quant {
            name: name.into(),
            error,
        })?;
    }
    Ok(out)
}
