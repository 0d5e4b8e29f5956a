//! Choosing the next token from logits: greedy, or temperature and top-p sampling from a
//! seeded generator, so that a seed always gives the same text.

use alloc::vec::Vec;

/// How [`Sampler::next`] picks a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// `0` (or below) is greedy: the largest logit, the first of equal ones.
    pub temperature: f32,
    /// Nucleus sampling: the smallest set of most likely tokens whose probabilities reach
    /// `top_p` (`1` keeps every token).
    pub top_p: f32,
    /// The generator's seed.
    pub seed: u64,
}

impl Sampling {
    /// Greedy decoding (llama.cpp's `--temp 0`).
    pub const GREEDY: Sampling = Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
    };
}

/// A token picker with its own generator state (SplitMix64: small, seedable, the same
/// sequence on every target).
#[derive(Debug, Clone)]
pub struct Sampler {
    sampling: Sampling,
    state: u64,
    scratch: Vec<(f32, u32)>,
}

/// The index of the largest value, the first of equal ones; NaN never wins. `None` for an
/// empty slice.
pub fn argmax(xs: &[f32]) -> Option<u32> {
    let mut best: Option<usize> = None;
    for (i, &x) in xs.iter().enumerate() {
        match best {
            None if !x.is_nan() => best = Some(i),
            Some(b) if x > xs[b] => best = Some(i),
            _ => {}
        }
    }
    best.and_then(|b| u32::try_from(b).ok())
}

impl Sampler {
    /// A sampler; its generator starts from `sampling.seed`.
    pub fn new(sampling: Sampling) -> Sampler {
        Sampler {
            sampling,
            state: sampling.seed,
            scratch: Vec::new(),
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next token for `logits` (one row of the vocabulary), or `None` when there is no
    /// finite logit to choose from.
    pub fn next(&mut self, logits: &[f32]) -> Option<u32> {
        let Sampling {
            temperature, top_p, ..
        } = self.sampling;
        if temperature.is_nan() || temperature <= 0.0 {
            return argmax(logits);
        }
        let max = logits[argmax(logits)? as usize];
        if !max.is_finite() {
            return argmax(logits);
        }
        // Probabilities in f64, most likely first (ties by id, so the order is total).
        self.scratch.clear();
        self.scratch.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_finite())
                .map(|(i, &x)| (x, i as u32)),
        );
        self.scratch
            .sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let t = f64::from(temperature);
        let bits = self.next_u64() >> 11;
        let weights = self
            .scratch
            .iter()
            .map(|&(x, _)| libm::exp((f64::from(x) - f64::from(max)) / t));
        let total: f64 = weights.clone().sum();
        let keep = if top_p < 1.0 {
            let mut acc = 0.0;
            let mut n = 0;
            for w in weights.clone() {
                acc += w / total;
                n += 1;
                if acc >= f64::from(top_p) {
                    break;
                }
            }
            n.max(1)
        } else {
            self.scratch.len()
        };
        let kept: f64 = weights.clone().take(keep).sum();
        // A uniform draw in [0, kept): 53 random bits.
        let u = bits as f64 / (1u64 << 53) as f64 * kept;
        let mut acc = 0.0;
        for (w, &(_, id)) in weights.zip(&self.scratch).take(keep) {
            acc += w;
            if u < acc {
                return Some(id);
            }
        }
        self.scratch.get(keep - 1).map(|&(_, id)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_largest_and_skips_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), Some(1));
        assert_eq!(argmax(&[f32::NAN, -1.0, f32::NAN]), Some(1));
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[f32::NAN]), None);
        let mut s = Sampler::new(Sampling::GREEDY);
        assert_eq!(s.next(&[0.5, -2.0, 7.0]), Some(2));
    }

    #[test]
    fn a_seed_gives_the_same_tokens_and_another_seed_other_ones() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let draw = |seed| {
            let mut s = Sampler::new(Sampling {
                temperature: 1.0,
                top_p: 1.0,
                seed,
            });
            (0..32)
                .map(|_| s.next(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn top_p_keeps_only_the_nucleus() {
        // One token holds almost all the mass: top-p 0.5 must always pick it.
        let mut logits = [0.0f32; 20];
        logits[13] = 20.0;
        let mut s = Sampler::new(Sampling {
            temperature: 1.0,
            top_p: 0.5,
            seed: 3,
        });
        assert!((0..100).all(|_| s.next(&logits) == Some(13)));
    }
}
