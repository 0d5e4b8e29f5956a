#![cfg(not(feature = "loom"))]
//! The decode example's model at small dimensions: the same tokens and the same final logits,
//! bit for bit, under every schedule and with either K/V cache.

mod common;

#[path = "../examples/decode/model.rs"]
#[allow(dead_code)] // the example uses the rest
mod model;

use common::{all_schedules, Order, OutOfOrder};
use model::{prompt, AppendCache, Config, Generation, Model};
use skainet_schedule::{KvCache, Schedule, Sequential};

const PROMPT: usize = 48;
const NEW: usize = 6;

fn generate<C: model::Cache>(model: &Model, schedule: &dyn Schedule) -> Generation {
    let p = prompt(PROMPT, model.config.vocab);
    model
        .generate::<C>(&p, NEW, schedule, &mut |_| {})
        .expect("valid dimensions")
}

#[test]
fn tokens_and_logits_are_identical_under_every_schedule_and_cache() {
    let model = Model::synthetic(Config::tiny(), false);
    let want = generate::<KvCache>(&model, &Sequential);
    assert_eq!(want.tokens.len(), NEW);
    assert_eq!(want.logits.shape(), [1, 4096]);
    let append = generate::<AppendCache>(&model, &Sequential);
    assert_eq!(append.tokens, want.tokens, "append cache");
    assert_eq!(
        append.logits.to_bits(),
        want.logits.to_bits(),
        "append cache"
    );
    for s in all_schedules() {
        for (cache, got) in [
            ("positional", generate::<KvCache>(&model, s.as_ref())),
            ("append", generate::<AppendCache>(&model, s.as_ref())),
        ] {
            assert_eq!(got.tokens, want.tokens, "{} {cache}", s.name());
            assert_eq!(
                got.logits.to_bits(),
                want.logits.to_bits(),
                "{} {cache}",
                s.name()
            );
        }
    }
}

#[test]
fn the_small_decoder_really_splits_its_work() {
    let model = Model::synthetic(Config::tiny(), false);
    let schedule = OutOfOrder::new(3, Order::Reversed);
    generate::<KvCache>(&model, &schedule);
    // The LM head of every step, the prefill's products and attention, at least.
    assert!(schedule.regions() >= NEW, "{} regions", schedule.regions());
}

#[test]
fn the_positional_cache_holds_the_prompt_and_the_decoded_tokens() {
    let model = Model::synthetic(Config::tiny(), false);
    let p = prompt(PROMPT, model.config.vocab);
    let mut caches: Vec<KvCache> = model.caches(PROMPT + NEW).unwrap();
    let mut timing = model::Timing::default();
    model
        .forward(&p, &mut caches, &Sequential, &mut timing)
        .unwrap();
    model
        .forward(&[1], &mut caches, &Sequential, &mut timing)
        .unwrap();
    assert!(caches.iter().all(|c| c.len() == PROMPT + 1));
    assert_eq!(caches[0].keys().shape(), [1, 2, PROMPT + 1, 16]);
}
