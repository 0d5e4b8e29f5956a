//! A Llama-shaped decoder, end to end on one schedule: prefill a prompt, then greedy decoding,
//! under `Sequential` and `hardware()`, with the positional K/V cache and the naive append one.
//!
//! `cargo run --release --features parallel --example decode [-- FLAGS]`
//!
//! Default dimensions are SmolLM2-135M's (30 layers, hidden 576, 9 query heads over 3 K/V
//! heads of 64, MLP 1536, vocabulary 49152, RoPE θ 100000) with deterministic synthetic weights
//! (nothing is downloaded); a 128-token prompt, 32 new tokens. Four runs (schedule × cache), a
//! table, and whether every run produced the same tokens and the same final logits, bit for bit.
//!
//! Columns: `prefill ms` (the prompt's forward pass), `decode tok/s` (decode steps per second,
//! the first token comes from the prefill), `attention ms` and `KV-cache ms` (time inside
//! attention and inside the cache's appends and views, summed over the decode steps),
//! `KV µs/token` (the cache time of one decode step, all layers). Below the table, the read
//! bandwidth of a decode step's weight stream under each schedule, and of the projections
//! alone (time inside `linear`, LM head included) with what the rest of a step adds per token.
//!
//! Flags: `--layers N --hidden N --heads N --kv-heads N --head-dim N --mlp N --vocab N
//! --theta X --prompt-len N --new-tokens N`, `--all-schedules` (also `dedicated(1..=4)`, and
//! `RayonSchedule` when built with `--features parallel,rayon`, with the positional cache), `--repeat N` (run each configuration N times and keep the fastest
//! of each timing, for a shared machine), `--malloc-defaults` (leave glibc's malloc as it is; by
//! default the example asks it to keep freed memory, see `keep_freed_memory`), `--small-pages`
//! (weights in ordinary pages; by default they are allocated with `Tensor::zeros_in_huge_pages`,
//! whose transparent huge pages a decode step's weight stream reads faster), `--json` (one
//! JSON object on the last line).

#[allow(dead_code)] // the test that shares the model uses other parts of it
#[path = "decode/model.rs"]
mod model;

use std::process::ExitCode;
use std::sync::Arc;

use model::{bits_hash, prompt, AppendCache, Config, Generation, Model};
use skainet_schedule::{dedicated, hardware, KernelError, KvCache, Schedule, Sequential};

struct Args {
    config: Config,
    prompt_len: usize,
    new_tokens: usize,
    json: bool,
    all_schedules: bool,
    malloc_defaults: bool,
    small_pages: bool,
    repeat: usize,
}

const USAGE: &str = "usage: decode [--layers N] [--hidden N] [--heads N] [--kv-heads N] \
[--head-dim N] [--mlp N] [--vocab N] [--theta X] [--prompt-len N] [--new-tokens N] \
[--repeat N] [--all-schedules] [--malloc-defaults] [--small-pages] [--json]";

fn parse() -> Result<Args, String> {
    let mut args = Args {
        config: Config::smollm2_135m(),
        prompt_len: 128,
        new_tokens: 32,
        json: false,
        all_schedules: false,
        repeat: 1,
        malloc_defaults: false,
        small_pages: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--json" => args.json = true,
            "--all-schedules" => args.all_schedules = true,
            "--malloc-defaults" => args.malloc_defaults = true,
            "--small-pages" => args.small_pages = true,
            "--help" | "-h" => return Err(USAGE.to_string()),
            _ => {
                let value = it.next().ok_or(format!("{flag} needs a value\n{USAGE}"))?;
                let n = || {
                    value
                        .parse::<usize>()
                        .map_err(|e| format!("{flag} {value}: {e}"))
                };
                let c = &mut args.config;
                match flag.as_str() {
                    "--layers" => c.layers = n()?,
                    "--hidden" => c.hidden = n()?,
                    "--heads" => c.heads = n()?,
                    "--kv-heads" => c.kv_heads = n()?,
                    "--head-dim" => c.head_dim = n()?,
                    "--mlp" => c.mlp = n()?,
                    "--vocab" => c.vocab = n()?,
                    "--theta" => {
                        c.rope_theta = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?
                    }
                    "--prompt-len" => args.prompt_len = n()?,
                    "--new-tokens" => args.new_tokens = n()?,
                    "--repeat" => args.repeat = n()?.max(1),
                    _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
                }
            }
        }
    }
    if args.prompt_len == 0 || args.new_tokens == 0 {
        return Err("--prompt-len and --new-tokens must be at least 1".to_string());
    }
    if args.config.vocab == 0 {
        return Err("--vocab must be at least 1".to_string());
    }
    Ok(args)
}

struct Run {
    schedule: String,
    cache: &'static str,
    generation: Generation,
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("decode: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every op returns a fresh tensor, and a prefill pass frees a few megabytes of them per layer.
/// glibc's malloc hands the top of its heap back to the OS whenever more than its trim threshold
/// (by default twice the largest block it has recently freed) lies free there, and the next layer
/// faults the same pages in again, zeroed by the kernel: on this decoder about 40 ms of a
/// 240 ms prefill, on one thread whatever the schedule. A long-running inference process keeps
/// that memory instead; so does this example unless `--malloc-defaults` is given. The weights
/// are allocated before, so the large ones stay in their own page-aligned mappings.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() -> &'static str {
    use std::os::raw::c_int;
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    // glibc's <malloc.h>.
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;
    // SAFETY: `mallopt` is glibc's documented, thread-safe interface for these two tuning
    // parameters; it changes when malloc returns memory to the OS, not what it hands out. Both
    // values are within its limits (the mapping threshold's maximum is 32 MiB on 64-bit).
    let set = unsafe {
        mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1
    };
    if set {
        "glibc malloc keeping freed memory (trim threshold 1 GiB, mmap threshold 32 MiB)"
    } else {
        "the C library's defaults (mallopt refused the settings)"
    }
}

/// Other C libraries keep their defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() -> &'static str {
    "the C library's defaults"
}

fn run(args: &Args) -> Result<bool, KernelError> {
    let c = &args.config;
    eprintln!(
        "building synthetic weights: {} layers, hidden {}, {} heads / {} kv heads of {}, mlp {}, vocab {}",
        c.layers, c.hidden, c.heads, c.kv_heads, c.head_dim, c.mlp, c.vocab
    );
    let model = Model::synthetic(c.clone(), !args.small_pages);
    let allocator = if args.malloc_defaults {
        "the C library's defaults"
    } else {
        keep_freed_memory()
    };
    let prompt = prompt(args.prompt_len, c.vocab);
    let mut configs: Vec<(Arc<dyn Schedule>, &'static str)> = vec![
        (Arc::new(Sequential), "positional"),
        (Arc::new(Sequential), "append"),
        (Arc::new(hardware()), "positional"),
        (Arc::new(hardware()), "append"),
    ];
    if args.all_schedules {
        for p in 1..=4 {
            let schedule = dedicated(p).expect("1..=4 is a valid parallelism");
            configs.push((Arc::new(schedule), "positional"));
        }
        #[cfg(feature = "rayon")]
        configs.push((
            Arc::new(skainet_schedule::RayonSchedule::global()),
            "positional",
        ));
    }
    // Untimed: starts the pool's threads and faults in the code paths before any measurement.
    for (schedule, _) in &configs[..3] {
        let warm = prompt.len().min(8);
        model.generate::<KvCache>(&prompt[..warm], 2, schedule.as_ref(), &mut |_| {})?;
    }
    // Repetitions go round the configurations, so a burst of load elsewhere on the machine
    // hits them all alike rather than one configuration's block.
    let mut best: Vec<Option<Generation>> = configs.iter().map(|_| None).collect();
    for rep in 0..args.repeat {
        for (i, (schedule, cache)) in configs.iter().enumerate() {
            let label = format!("{} × {cache}", schedule.name());
            eprintln!(
                "[{}/{}, repetition {}/{}] {label}: prefill of {} tokens",
                i + 1,
                configs.len(),
                rep + 1,
                args.repeat,
                prompt.len()
            );
            let mut progress = |done: usize| {
                if done.is_multiple_of(8) {
                    eprintln!("  {label}: {done}/{} tokens", args.new_tokens);
                }
            };
            let s = schedule.as_ref();
            let g = match *cache {
                "positional" => {
                    model.generate::<KvCache>(&prompt, args.new_tokens, s, &mut progress)?
                }
                _ => model.generate::<AppendCache>(&prompt, args.new_tokens, s, &mut progress)?,
            };
            best[i] = Some(match best[i].take() {
                None => g,
                Some(b) => fastest(b, g),
            });
        }
    }
    let runs: Vec<Run> = configs
        .iter()
        .zip(best)
        .map(|((schedule, cache), g)| Run {
            schedule: schedule.name().to_string(),
            cache,
            generation: g.expect("repeat is at least 1"),
        })
        .collect();

    let first = &runs[0].generation;
    let identical = runs.iter().all(|r| {
        r.generation.tokens == first.tokens
            && r.generation.logits.to_bits() == first.logits.to_bits()
    });
    println!(
        "decoder: {} layers, hidden {}, {}/{} heads of {}, mlp {}, vocab {}; prompt {}, {} new tokens",
        c.layers, c.hidden, c.heads, c.kv_heads, c.head_dim, c.mlp, c.vocab, args.prompt_len, args.new_tokens
    );
    let pages = if args.small_pages {
        "ordinary pages"
    } else {
        "memory advised for transparent huge pages"
    };
    println!("allocator: {allocator}; weights in {pages}");
    println!(
        "{:<14} {:<10} {:>11} {:>13} {:>13} {:>12} {:>12}",
        "schedule",
        "kv cache",
        "prefill ms",
        "decode tok/s",
        "attention ms",
        "KV-cache ms",
        "KV µs/token"
    );
    for r in &runs {
        let g = &r.generation;
        let steps = g.decode_steps.max(1) as f64;
        println!(
            "{:<14} {:<10} {:>11.1} {:>13.2} {:>13.2} {:>12.3} {:>12.1}",
            r.schedule,
            r.cache,
            ms(g.prefill),
            tokens_per_s(g),
            ms(g.timing.attention),
            ms(g.timing.kv_cache),
            ms(g.timing.kv_cache) * 1e3 / steps,
        );
    }
    let seq = &runs[0].generation;
    let hw = &runs[2].generation;
    println!(
        "hardware vs sequential (positional): prefill {:.2}x, decode {:.2}x; positional vs append KV-cache time: {:.3}x",
        seq.prefill.as_secs_f64() / hw.prefill.as_secs_f64(),
        tokens_per_s(hw) / tokens_per_s(seq),
        runs[0].generation.timing.kv_cache.as_secs_f64() / runs[1].generation.timing.kv_cache.as_secs_f64().max(1e-12),
    );
    let bytes = model.weight_bytes_per_token() as f64;
    println!(
        "a decode step reads {:.0} MB of weights: {:.1} GB/s sequential, {:.1} GB/s {}",
        bytes / 1e6,
        bytes * tokens_per_s(seq) / 1e9,
        bytes * tokens_per_s(hw) / 1e9,
        runs[2].schedule,
    );
    // The weight streams alone, and what the rest of a step (attention, norms, RoPE, the
    // cache, forks that do not pay) adds to each token.
    let per_token =
        |g: &Generation, d: std::time::Duration| d.as_secs_f64() / g.decode_steps.max(1) as f64;
    let (seq_proj, hw_proj) = (
        per_token(seq, seq.timing.projections),
        per_token(hw, hw.timing.projections),
    );
    println!(
        "the projections alone: {:.1} GB/s sequential, {:.1} GB/s {} ({:.2}x); the rest of a step: {:.3} ms and {:.3} ms",
        bytes / seq_proj.max(1e-12) / 1e9,
        bytes / hw_proj.max(1e-12) / 1e9,
        runs[2].schedule,
        seq_proj / hw_proj.max(1e-12),
        (per_token(seq, seq.decode) - seq_proj) * 1e3,
        (per_token(hw, hw.decode) - hw_proj) * 1e3,
    );
    println!(
        "tokens and final logits bit-identical across all {} runs: {}",
        runs.len(),
        if identical { "yes" } else { "NO" }
    );
    if args.json {
        println!("{}", json(&runs));
    }
    Ok(identical)
}

/// `b` with each timing the faster of `a`'s and `b`'s. Two repetitions of one configuration
/// must agree bit for bit; anything else is a bug worth stopping for.
fn fastest(a: Generation, mut b: Generation) -> Generation {
    assert!(
        a.tokens == b.tokens && a.logits.to_bits() == b.logits.to_bits(),
        "a repetition of one configuration changed the result"
    );
    b.prefill = b.prefill.min(a.prefill);
    b.decode = b.decode.min(a.decode);
    b.timing.attention = b.timing.attention.min(a.timing.attention);
    b.timing.kv_cache = b.timing.kv_cache.min(a.timing.kv_cache);
    b.timing.projections = b.timing.projections.min(a.timing.projections);
    b
}

fn tokens_per_s(g: &Generation) -> f64 {
    if g.decode_steps == 0 {
        return 0.0;
    }
    g.decode_steps as f64 / g.decode.as_secs_f64()
}

fn json(runs: &[Run]) -> String {
    let items: Vec<String> = runs
        .iter()
        .map(|r| {
            let g = &r.generation;
            let tokens: Vec<String> = g.tokens.iter().map(usize::to_string).collect();
            format!(
                "{{\"schedule\":\"{}\",\"kv_cache\":\"{}\",\"prefill_ms\":{:.3},\"decode_tokens_per_s\":{:.3},\"attention_ms\":{:.3},\"kv_cache_ms\":{:.3},\"projections_ms\":{:.3},\"tokens\":[{}],\"logits_bits_hash\":\"{:016x}\"}}",
                r.schedule,
                r.cache,
                ms(g.prefill),
                tokens_per_s(g),
                ms(g.timing.attention),
                ms(g.timing.kv_cache),
                ms(g.timing.projections),
                tokens.join(","),
                bits_hash(g.logits.data()),
            )
        })
        .collect();
    format!("{{\"runs\":[{}]}}", items.join(","))
}
