//! Text from a GGUF model on the crate's schedules.
//!
//! `cargo run --release --features model,parallel --example generate -- [FLAGS]`
//!
//! Without `--model` it reads the file `scripts/fetch_model.sh` fetches (SmolLM2-135M-Instruct,
//! Q4_1), running the script first if the file is not there. Text streams to stdout as it is
//! generated; the load's progress goes to stderr. `--table` runs the proposal's table
//! (sequential and hardware × positional and append caches) and checks that every row wrote
//! the same tokens with the same logits bits. Exit status 2 and one line for bad arguments; 1
//! and one line for a bad model file or any other failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use skainet_schedule::gguf::GgufFile;
use skainet_schedule::model::{
    render_chat, CacheKind, ChatMessage, Llama, Logits, Sampler, Sampling, Tokenizer,
};
use skainet_schedule::{dedicated, hardware, Activations, Schedule, Sequential, Tensor};

const USAGE: &str = "usage: generate [--model PATH] [--huge-pages] [--prompt TEXT] [--chat] [--max-tokens N] \
[--ignore-eos] [--temperature T] [--top-p P] [--seed S] [--schedule sequential|hardware|dedicated:N] \
[--activations exact|q8] [--kv positional|append] [--table] [--bench [--prompt-len N] \
[--new-tokens N] [--repeat N]] [--tokenize] [--dump-logits PATH] [--json]";

const DEFAULT_PROMPT: &str = "What is the capital of France?";

#[derive(Debug, Clone)]
struct Args {
    model: Option<PathBuf>,
    prompt: String,
    chat: bool,
    max_tokens: usize,
    ignore_eos: bool,
    huge_pages: bool,
    sampling: Sampling,
    schedule: String,
    activations: Activations,
    kv: CacheKind,
    table: bool,
    bench: bool,
    prompt_len: usize,
    new_tokens: usize,
    repeat: usize,
    tokenize: bool,
    dump_logits: Option<PathBuf>,
    json: bool,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        model: None,
        prompt: DEFAULT_PROMPT.to_string(),
        chat: false,
        max_tokens: 128,
        ignore_eos: false,
        huge_pages: false,
        sampling: Sampling::GREEDY,
        schedule: "hardware".into(),
        activations: Activations::Exact,
        kv: CacheKind::Positional,
        table: false,
        bench: false,
        prompt_len: 128,
        new_tokens: 32,
        repeat: 1,
        tokenize: false,
        dump_logits: None,
        json: false,
    };
    let mut prompt_given = false;
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        fn number<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{flag} {v:?} is not a valid number"))
        }
        match flag.as_str() {
            "--model" | "-m" => a.model = Some(PathBuf::from(value(&flag)?)),
            "--prompt" | "-p" => {
                a.prompt = value(&flag)?;
                prompt_given = true;
            }
            "--chat" => a.chat = true,
            "--max-tokens" | "-n" => a.max_tokens = number(&flag, value(&flag)?)?,
            "--ignore-eos" => a.ignore_eos = true,
            "--huge-pages" => a.huge_pages = true,
            "--temperature" | "--temp" => {
                let t: f32 = number(&flag, value(&flag)?)?;
                if !(t >= 0.0 && t.is_finite()) {
                    return Err(format!("{flag} {t} must be a finite value >= 0"));
                }
                a.sampling.temperature = t;
            }
            "--top-p" => {
                let p: f32 = number(&flag, value(&flag)?)?;
                if !(p > 0.0 && p <= 1.0) {
                    return Err(format!("{flag} {p} must be in (0, 1]"));
                }
                a.sampling.top_p = p;
            }
            "--seed" => a.sampling.seed = number(&flag, value(&flag)?)?,
            "--schedule" => {
                let s = value(&flag)?;
                schedule_for(&s)?;
                a.schedule = s;
            }
            "--activations" => {
                a.activations = match value(&flag)?.as_str() {
                    "exact" => Activations::Exact,
                    "q8" => Activations::Q8,
                    other => return Err(format!("--activations {other:?}: exact or q8")),
                }
            }
            "--kv" => {
                a.kv = match value(&flag)?.as_str() {
                    "positional" => CacheKind::Positional,
                    "append" => CacheKind::Append,
                    other => return Err(format!("--kv {other:?}: positional or append")),
                }
            }
            "--table" => a.table = true,
            "--bench" => a.bench = true,
            "--prompt-len" => a.prompt_len = number(&flag, value(&flag)?)?,
            "--new-tokens" => a.new_tokens = number(&flag, value(&flag)?)?,
            "--repeat" => a.repeat = number::<usize>(&flag, value(&flag)?)?.max(1),
            "--tokenize" => a.tokenize = true,
            "--dump-logits" => a.dump_logits = Some(PathBuf::from(value(&flag)?)),
            "--json" => a.json = true,
            "--help" | "-h" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?} ({USAGE})")),
        }
    }
    if a.bench && (a.prompt_len == 0 || a.new_tokens == 0) {
        return Err("--prompt-len and --new-tokens must be at least 1".into());
    }
    if a.chat && !prompt_given && a.prompt.is_empty() {
        return Err("--chat needs --prompt TEXT".into());
    }
    Ok(a)
}

fn schedule_for(name: &str) -> Result<Box<dyn Schedule>, String> {
    match name {
        "sequential" => Ok(Box::new(Sequential)),
        "hardware" => Ok(Box::new(hardware())),
        _ => {
            let p = name.strip_prefix("dedicated:").ok_or_else(|| {
                format!("--schedule {name:?}: sequential, hardware or dedicated:N")
            })?;
            let p: usize = p
                .parse()
                .map_err(|_| format!("--schedule {name:?}: N must be a positive integer"))?;
            dedicated(p)
                .map(|s| Box::new(s) as Box<dyn Schedule>)
                .map_err(|e| format!("--schedule {name:?}: {e}"))
        }
    }
}

/// The model `scripts/fetch_model.sh` fetches, running it when the file is not there yet.
fn default_model() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.exists() {
        return Ok(path);
    }
    eprintln!(
        "generate: no model at {}; running scripts/fetch_model.sh",
        path.display()
    );
    let out = std::process::Command::new(root.join("scripts/fetch_model.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run scripts/fetch_model.sh: {e}"))?;
    if !out.status.success() {
        return Err("scripts/fetch_model.sh failed".into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("").trim();
    Ok(PathBuf::from(last))
}

/// FNV-1a over the bit patterns of `xs`: equal hashes for bit-identical logits.
fn bits_hash(xs: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in xs {
        for byte in x.to_bits().to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

struct Run {
    schedule: String,
    kv: CacheKind,
    activations: Activations,
    prefill: Duration,
    prompt_tokens: usize,
    decode: Duration,
    decode_steps: usize,
    tokens: Vec<u32>,
    text: String,
    logits_hash: u64,
    attention: Duration,
    kv_cache: Duration,
}

/// Prefill `prompt`, then up to `max_new` tokens; `emit` sees each token's text as it comes.
#[allow(clippy::too_many_arguments)]
fn generate(
    model: &Llama<'_>,
    tok: &Tokenizer,
    prompt: &[u32],
    max_new: usize,
    stop_at_eos: bool,
    sampling: Sampling,
    kv: CacheKind,
    activations: Activations,
    schedule_name: &str,
    emit: &mut dyn FnMut(&str),
) -> Result<Run, String> {
    let schedule = schedule_for(schedule_name)?;
    let schedule = schedule.as_ref();
    let mut cache = model
        .cache(kv, prompt.len() + max_new)
        .map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(sampling);
    let mut decoder = tok.decoder(false);
    let mut text = String::new();
    let t = Instant::now();
    let mut logits = model
        .forward(prompt, &mut cache, Logits::Last, activations, schedule)
        .map_err(|e| e.to_string())?
        .data()
        .to_vec();
    let prefill = t.elapsed();
    let mut tokens = Vec::new();
    let t = Instant::now();
    let mut steps = 0;
    while tokens.len() < max_new {
        let next = sampler
            .next(&logits)
            .ok_or("the logits hold no finite value")?;
        tokens.push(next);
        if stop_at_eos && Some(next) == tok.eos() {
            break;
        }
        let piece = decoder.push(next).map_err(|e| e.to_string())?;
        text.push_str(piece);
        emit(piece);
        if tokens.len() == max_new {
            break;
        }
        // A decode step writes its logits into the cache's own buffer (it allocates nothing).
        let step = model
            .step(next, &mut cache, activations, schedule)
            .map_err(|e| e.to_string())?;
        logits.copy_from_slice(step);
        steps += 1;
    }
    let decode = t.elapsed();
    let rest = decoder.finish();
    text.push_str(rest);
    emit(rest);
    Ok(Run {
        schedule: schedule.name().to_string(),
        kv,
        activations,
        prefill,
        prompt_tokens: prompt.len(),
        decode,
        decode_steps: steps,
        tokens,
        text,
        logits_hash: bits_hash(&logits),
        attention: cache.attention_time(),
        kv_cache: cache.kv_cache_time(),
    })
}

fn kv_name(kv: CacheKind) -> &'static str {
    match kv {
        CacheKind::Positional => "positional",
        CacheKind::Append => "append",
    }
}

fn mode_name(a: Activations) -> &'static str {
    match a {
        Activations::Exact => "exact",
        _ => "q8",
    }
}

fn per_s(n: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn ids_json(ids: &[u32]) -> String {
    let v: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!("[{}]", v.join(","))
}

fn run(args: Args) -> Result<(), String> {
    let path = match &args.model {
        Some(p) => p.clone(),
        None => default_model()?,
    };
    let t = Instant::now();
    let file = if args.huge_pages {
        eprintln!("generate: reading {} into huge pages", path.display());
        GgufFile::load_in_huge_pages(&path)
    } else {
        eprintln!("generate: mapping {}", path.display());
        GgufFile::open(&path)
    }
    .map_err(|e| e.to_string())?;
    let gguf = file.gguf();
    let model = Llama::from_gguf(gguf).map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_gguf(gguf).map_err(|e| e.to_string())?;
    let c = model.config();
    eprintln!(
        "generate: {} blocks, width {}, {} heads over {} K/V heads of {}, FFN {}, vocabulary {}, \
         rope base {}; {:.1} MB of weights a token; ready in {:.0} ms",
        c.blocks,
        c.dim,
        c.heads,
        c.kv_heads,
        c.head_dim,
        c.ffn,
        c.vocab,
        c.rope_base,
        model.weight_bytes_per_token() as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1e3
    );
    let text = if args.chat {
        let template = gguf
            .get_str("tokenizer.chat_template")
            .map_err(|e| format!("--chat: {e}"))?;
        render_chat(
            template,
            &[ChatMessage {
                role: "user",
                content: &args.prompt,
            }],
            true,
        )
        .map_err(|e| e.to_string())?
    } else {
        args.prompt.clone()
    };
    let prompt = if args.bench {
        // A fixed synthetic prompt, as llama-bench's pp: ids spread over the vocabulary.
        (0..args.prompt_len)
            .map(|i| ((i * 7919 + 13) % c.vocab) as u32)
            .collect()
    } else {
        tok.encode(&text, true).map_err(|e| e.to_string())?
    };
    if prompt.is_empty() {
        return Err("the prompt has no tokens".into());
    }
    if args.tokenize {
        println!("{}", ids_json(&prompt));
        return Ok(());
    }
    if let Some(out) = &args.dump_logits {
        let schedule = schedule_for(&args.schedule)?;
        let mut cache = model
            .cache(CacheKind::Positional, prompt.len())
            .map_err(|e| e.to_string())?;
        let logits: Tensor = model
            .forward(
                &prompt,
                &mut cache,
                Logits::All,
                args.activations,
                schedule.as_ref(),
            )
            .map_err(|e| e.to_string())?;
        std::fs::write(out, skainet_schedule::graph::npy::to_bytes(&logits))
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        eprintln!(
            "generate: wrote logits {:?} to {}",
            logits.shape(),
            out.display()
        );
        return Ok(());
    }
    let mut runs = Vec::new();
    if args.table || args.bench {
        let configs: Vec<(String, CacheKind)> = if args.table {
            ["sequential", "hardware"]
                .iter()
                .flat_map(|s| {
                    [CacheKind::Positional, CacheKind::Append].map(|kv| (s.to_string(), kv))
                })
                .collect()
        } else {
            vec![(args.schedule.clone(), args.kv)]
        };
        let (max_new, stop) = if args.bench {
            (args.new_tokens, false)
        } else {
            (args.max_tokens, !args.ignore_eos)
        };
        for (schedule, kv) in configs {
            let mut best: Option<Run> = None;
            for _ in 0..args.repeat {
                let r = generate(
                    &model,
                    &tok,
                    &prompt,
                    max_new,
                    stop,
                    args.sampling,
                    kv,
                    args.activations,
                    &schedule,
                    &mut |_| {},
                )?;
                let faster = best
                    .as_ref()
                    .is_none_or(|b| r.prefill + r.decode < b.prefill + b.decode);
                if faster {
                    best = Some(r);
                }
            }
            runs.extend(best);
        }
        println!(
            "{:<14} {:<11} {:<6} {:>11} {:>12} {:>13} {:>13} {:>12}",
            "schedule",
            "kv cache",
            "mode",
            "prefill ms",
            "prefill t/s",
            "decode t/s",
            "attention ms",
            "kv cache ms"
        );
        for r in &runs {
            println!(
                "{:<14} {:<11} {:<6} {:>11.1} {:>12.1} {:>13.1} {:>13.2} {:>12.2}",
                r.schedule,
                kv_name(r.kv),
                mode_name(r.activations),
                r.prefill.as_secs_f64() * 1e3,
                per_s(r.prompt_tokens, r.prefill),
                per_s(r.decode_steps, r.decode),
                r.attention.as_secs_f64() * 1e3,
                r.kv_cache.as_secs_f64() * 1e3
            );
        }
        let same = runs
            .windows(2)
            .all(|w| w[0].tokens == w[1].tokens && w[0].logits_hash == w[1].logits_hash);
        println!(
            "tokens and final logits bit-identical across all {} runs: {}",
            runs.len(),
            if same { "yes" } else { "NO" }
        );
        if !args.bench {
            if let Some(r) = runs.first() {
                println!("text: {}", r.text);
            }
        }
        if !same {
            return Err("the runs disagree: a schedule changed the result".into());
        }
    } else {
        let stdout = std::io::stdout();
        let r = generate(
            &model,
            &tok,
            &prompt,
            args.max_tokens,
            !args.ignore_eos,
            args.sampling,
            args.kv,
            args.activations,
            &args.schedule,
            &mut |piece| {
                let mut out = stdout.lock();
                let _ = out.write_all(piece.as_bytes());
                let _ = out.flush();
            },
        )?;
        println!();
        eprintln!(
            "generate: {} prompt tokens in {:.1} ms ({:.1} t/s), {} tokens at {:.1} t/s, {}",
            r.prompt_tokens,
            r.prefill.as_secs_f64() * 1e3,
            per_s(r.prompt_tokens, r.prefill),
            r.tokens.len(),
            per_s(r.decode_steps, r.decode),
            r.schedule
        );
        runs.push(r);
    }
    if args.json {
        let items: Vec<String> = runs
            .iter()
            .map(|r| {
                format!(
                    "{{\"schedule\":{},\"kv_cache\":\"{}\",\"activations\":\"{}\",\"prefill_ms\":{:.3},\"prefill_tokens_per_s\":{:.3},\"decode_tokens_per_s\":{:.3},\"attention_ms\":{:.3},\"kv_cache_ms\":{:.3},\"tokens\":{},\"text\":{},\"logits_bits_hash\":\"{:016x}\"}}",
                    json_str(&r.schedule),
                    kv_name(r.kv),
                    mode_name(r.activations),
                    r.prefill.as_secs_f64() * 1e3,
                    per_s(r.prompt_tokens, r.prefill),
                    per_s(r.decode_steps, r.decode),
                    r.attention.as_secs_f64() * 1e3,
                    r.kv_cache.as_secs_f64() * 1e3,
                    ids_json(&r.tokens),
                    json_str(&r.text),
                    r.logits_hash
                )
            })
            .collect();
        println!(
            "{{\"model\":{},\"weight_bytes_per_token\":{},\"prompt_tokens\":{},\"runs\":[{}]}}",
            json_str(&path.display().to_string()),
            model.weight_bytes_per_token(),
            ids_json(&prompt),
            items.join(",")
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("generate: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::from(1)
        }
    }
}
