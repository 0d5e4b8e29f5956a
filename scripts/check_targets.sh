#!/usr/bin/env bash
# Same bits on four targets. Runs the fixed calls of examples/bits/suite.rs (grouped-query causal
# attention with a mask and a fully masked row, matmul, conv2d; portable arithmetic) and prints
# one line per run, `target <triple> <variant> <hash of every output bit>`, and one line
# `quant <triple> <variant> <hash>` for the quantized products (every block format, both
# activation modes, and the embedding lookup):
#   x86_64-unknown-linux-gnu   natively, every variant this CPU has (portable, sse2, avx2,
#                              avx512);
#   aarch64-unknown-linux-gnu  under qemu-aarch64 (portable, neon);
#   wasm32-wasip1              under node's built-in WASI (scripts/run_wasi.mjs);
#   thumbv7em-none-eabihf      the no_std core on a Cortex-M4F: QEMU's mps2-an386 board,
#                              output over semihosting (examples/bits_embedded.rs).
# On the three hosted targets (not thumbv7em: no std, no room for the weights) the real model
# too (examples/bits_model.rs, the file scripts/fetch_model.sh fetches): 16 greedy tokens after
# a fixed chat prompt, exact mode, portable arithmetic, `Sequential`, one line per variant:
# `model <triple> <variant> <the 16 ids, comma-separated> <hash of their 16 logit rows>`.
# The model runs are the slow ones (about 80 s of CPU per variant under qemu-aarch64): the two
# aarch64 ones run in the background, beside the others; the script prints each run's seconds.
# Fails unless every expected run printed its lines, the hashes of each kind are one and the
# model's ids are MODEL_IDS below.
# Installs what it needs: qemu-user, qemu-system-arm, the aarch64 cross gcc/libc (apt), node
# (apt, if missing), and the three rust targets (rustup). Runs on an x86_64 Linux host.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

if [ "$(uname -m)" != x86_64 ]; then
  echo "check_targets: runs on an x86_64 Linux host (this is $(uname -m))" >&2
  exit 1
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
missing=()
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
command -v qemu-system-arm >/dev/null || missing+=(qemu-system-arm)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || missing+=(libc6-dev-arm64-cross)
command -v node >/dev/null || missing+=(nodejs)
if [ ${#missing[@]} -gt 0 ]; then
  echo "check_targets: installing ${missing[*]} (apt)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
rustup target add aarch64-unknown-linux-gnu wasm32-wasip1 thumbv7em-none-eabihf 2>/dev/null

export CARGO_TERM_COLOR=never
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
model=$(scripts/fetch_model.sh | tail -n 1)
# A failed build fails the script (pipefail); only the progress lines are dropped.
build() { cargo "$@" 2>&1 | { grep -v '^ *\(Compiling\|Downloaded\|Downloading\)' || true; } >&2; }
echo "check_targets: building for four targets" >&2
# Both hosted examples in one build per target: `bits` needs no feature, but built apart from
# `bits_model` (feature `model`) the crate would compile twice for each target.
hosted=(--release --features model --example bits --example bits_model)
build build "${hosted[@]}"
build build "${hosted[@]}" --target aarch64-unknown-linux-gnu
build build "${hosted[@]}" --target wasm32-wasip1
# cortex-m-rt's linker script (it includes examples/bits/memory.x) for this one binary only.
build rustc --release --example bits_embedded --no-default-features --target thumbv7em-none-eabihf \
  -- -C link-arg=-Tlink.x -C "link-arg=-L$PWD/examples/bits"
built=$((SECONDS - start))

t=${CARGO_TARGET_DIR:-target}
bin=$t/release/examples/bits
a64=$t/aarch64-unknown-linux-gnu/release/examples/bits
wasm=$t/wasm32-wasip1/release/examples/bits.wasm
elf=$t/thumbv7em-none-eabihf/release/examples/bits_embedded
for f in "$bin" "$a64" "$wasm" "$elf" "${bin}_model" "${a64}_model" "${wasm%.wasm}_model.wasm"; do
  [ -f "$f" ] || { echo "check_targets: FAIL: $f was not built" >&2; exit 1; }
done

# Each run keeps its output, exit status and seconds under $tmp; a run that fails is reported
# and counted below, not fatal yet. `start` runs in the background, `run` waits.
tmp=$(mktemp -d)
# A background run still going when the script exits (an error above `wait`) is stopped.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
names=()
start() {
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  names+=("$name")
  {
    if timeout "$limit" "$@" >"$tmp/$name.out" 2>&1; then rc=0; else rc=$?; fi
    echo "$rc $((SECONDS - t0))" >"$tmp/$name.rc"
  } &
}
run() { start "$@"; wait $!; }
# node 20's parallel garbage collector crashes the process (V8 fatal error or SIGSEGV) when a
# WASI program grows its memory by ~100 MB, as the model's read does: one GC thread.
wasi=(node --no-warnings --single-threaded-gc scripts/run_wasi.mjs)
qemu_a64=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
# The model's runs: within 15 minutes each (a hang, not a slow machine, is what this catches).
slow=900
start model-aarch64-portable "$slow" "${qemu_a64[@]}" "${a64}_model" --model "$model" --variant portable
start model-aarch64-neon "$slow" "${qemu_a64[@]}" "${a64}_model" --model "$model" --variant neon
run x86_64 120 "$bin"
run aarch64 120 "${qemu_a64[@]}" "$a64"
run wasm32 120 "${wasi[@]}" "$wasm"
run thumbv7em 120 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$elf"
run model-x86_64 "$slow" "${bin}_model" --model "$model"
run model-wasm32 "$slow" "${wasi[@]}" --dir "$(dirname "$model")" "${wasm%.wasm}_model.wasm" --model "$model"
wait

lines=()
failed=0
times=""
for name in "${names[@]}"; do
  if ! read -r rc secs <"$tmp/$name.rc"; then rc=255 secs=?; fi
  times="$times $name ${secs}s,"
  if [ "$rc" -eq 0 ]; then
    while IFS= read -r l; do [ -n "$l" ] && lines+=("$l"); done <"$tmp/$name.out"
  else
    echo "check_targets: FAIL: the $name run exited with status $rc: $(cat "$tmp/$name.out")" >&2
    failed=1
  fi
done
echo "check_targets: run times:${times%,}" >&2
printf '%s\n' "${lines[@]}"

expected=(
  "x86_64-unknown-linux-gnu portable" "x86_64-unknown-linux-gnu sse2"
  "aarch64-unknown-linux-gnu portable" "aarch64-unknown-linux-gnu neon"
  "wasm32-wasip1 portable" "thumbv7em-none-eabihf portable"
)
grep -qw avx2 /proc/cpuinfo && expected+=("x86_64-unknown-linux-gnu avx2")
grep -qw avx512f /proc/cpuinfo && expected+=("x86_64-unknown-linux-gnu avx512")
# What comes between the variant and the hash: the model's line has its 16 ids.
declare -A fields=([target]="" [quant]="" [model]="[0-9]\+\(,[0-9]\+\)\{15\} ")
summary=""
for kind in target quant model; do
  for e in "${expected[@]}"; do
    if [ "$kind" = model ] && [ "${e%% *}" = thumbv7em-none-eabihf ]; then continue; fi
    # grep reads all its input (no -q): under pipefail, a grep that quits at the first match
    # can fail printf with SIGPIPE, and so the test.
    if ! printf '%s\n' "${lines[@]}" | grep "^$kind $e ${fields[$kind]}[0-9a-f]\{16\}$" >/dev/null; then
      echo "check_targets: FAIL: no $kind line for $e" >&2
      failed=1
    fi
  done
  hashes=$(printf '%s\n' "${lines[@]}" | awk -v k="$kind" '$1 == k { print $NF }' | sort -u)
  if [ "$(printf '%s\n' "$hashes" | grep -c .)" -ne 1 ]; then
    echo "check_targets: FAIL: the $kind hashes differ:" $hashes >&2
    failed=1
  fi
  summary="$summary $kind $hashes"
done

# The model's 16 greedy tokens on x86_64 (every variant), so a change of them is seen:
# "The capital of France is Paris.<|im_end|>\n<|im_start|>user\nWhat is the capital".
MODEL_IDS=504,3575,282,4649,314,7042,30,2,198,1,4093,198,1780,314,260,3575
ids=$(printf '%s\n' "${lines[@]}" | awk '$1 == "model" { print $4 }' | sort -u)
if [ "$ids" != "$MODEL_IDS" ]; then
  echo "check_targets: FAIL: the model's tokens are" $ids "where $MODEL_IDS was expected" >&2
  failed=1
fi
if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "check_targets: ${#lines[@]} lines, one hash of each kind:$summary (built in ${built}s, $((SECONDS - start))s in all)" >&2
