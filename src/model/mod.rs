//! The model lane (feature `model`): a llama-architecture model read from a GGUF file and run
//! on the crate's scheduled ops, its tokenizer, its chat template, and token sampling.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use skainet_schedule::gguf::GgufFile;
//! use skainet_schedule::model::{CacheKind, Llama, Logits, Sampler, Sampling, Tokenizer};
//! use skainet_schedule::{Activations, Sequential};
//!
//! let file = GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let model = Llama::from_gguf(file.gguf())?;
//! let tokenizer = Tokenizer::from_gguf(file.gguf())?;
//! let prompt = tokenizer.encode("The capital of France is", true)?;
//! let mut cache = model.cache(CacheKind::Positional, prompt.len() + 8)?;
//! let mut sampler = Sampler::new(Sampling::GREEDY);
//! let mut logits = model.forward(&prompt, &mut cache, Logits::Last, Activations::Exact, &Sequential)?;
//! let mut text = tokenizer.decoder(false);
//! for _ in 0..8 {
//!     let next = sampler.next(logits.data()).expect("finite logits");
//!     print!("{}", text.push(next)?);
//!     logits = model.forward(&[next], &mut cache, Logits::Last, Activations::Exact, &Sequential)?;
//! }
//! # Ok(()) }
//! ```

mod chat;
mod llama;
mod sample;
mod step_graph;
mod tokenizer;

pub use chat::{render_chat, ChatError, ChatMessage};
pub use llama::{CacheKind, Llama, LlamaCache, LlamaConfig, Logits, ModelError};
pub use sample::{argmax, Sampler, Sampling};
pub use tokenizer::{TokenDecoder, TokenKind, Tokenizer, TokenizerError, TokenizerParts};
