#!/usr/bin/env bash
# Same bits on four targets. Runs the fixed calls of examples/bits/suite.rs (grouped-query causal
# attention with a mask and a fully masked row, matmul, conv2d; portable arithmetic) and prints
# one line per run, `target <triple> <variant> <hash of every output bit>`, and one line
# `quant <triple> <variant> <hash>` for the quantized products (every block format, both
# activation modes, and the embedding lookup):
#   x86_64-unknown-linux-gnu   natively, every variant this CPU has (portable, sse2, avx2);
#   aarch64-unknown-linux-gnu  under qemu-aarch64 (portable, neon);
#   wasm32-wasip1              under node's built-in WASI (scripts/run_wasi.mjs);
#   thumbv7em-none-eabihf      the no_std core on a Cortex-M4F: QEMU's mps2-an386 board,
#                              output over semihosting (examples/bits_embedded.rs).
# Fails unless every expected run printed its two lines and the hashes of each kind are one.
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
# A failed build fails the script (pipefail); only the progress lines are dropped.
build() { cargo "$@" 2>&1 | { grep -v '^ *\(Compiling\|Downloaded\|Downloading\)' || true; } >&2; }
echo "check_targets: building for four targets" >&2
build build --release --example bits
build build --release --example bits --target aarch64-unknown-linux-gnu
build build --release --example bits --target wasm32-wasip1
# cortex-m-rt's linker script (it includes examples/bits/memory.x) for this one binary only.
build rustc --release --example bits_embedded --no-default-features --target thumbv7em-none-eabihf \
  -- -C link-arg=-Tlink.x -C "link-arg=-L$PWD/examples/bits"
built=$((SECONDS - start))

t=${CARGO_TARGET_DIR:-target}
bin=$t/release/examples/bits
a64=$t/aarch64-unknown-linux-gnu/release/examples/bits
wasm=$t/wasm32-wasip1/release/examples/bits.wasm
elf=$t/thumbv7em-none-eabihf/release/examples/bits_embedded
for f in "$bin" "$a64" "$wasm" "$elf"; do
  [ -f "$f" ] || { echo "check_targets: FAIL: $f was not built" >&2; exit 1; }
done

# Every run appends its lines; a run that fails is reported and counted, not fatal yet.
lines=()
failed=0
run() {
  local name=$1 out
  shift
  if out=$(timeout 120 "$@" 2>&1); then
    while IFS= read -r l; do [ -n "$l" ] && lines+=("$l"); done <<<"$out"
  else
    echo "check_targets: FAIL: the $name run exited with status $?: $out" >&2
    failed=1
  fi
}
run x86_64 "$bin"
run aarch64 qemu-aarch64 -L /usr/aarch64-linux-gnu "$a64"
run wasm32 node --no-warnings scripts/run_wasi.mjs "$wasm"
run thumbv7em qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$elf"

printf '%s\n' "${lines[@]}"

expected=(
  "x86_64-unknown-linux-gnu portable" "x86_64-unknown-linux-gnu sse2"
  "aarch64-unknown-linux-gnu portable" "aarch64-unknown-linux-gnu neon"
  "wasm32-wasip1 portable" "thumbv7em-none-eabihf portable"
)
grep -qw avx2 /proc/cpuinfo && expected+=("x86_64-unknown-linux-gnu avx2")
grep -qw avx512f /proc/cpuinfo && expected+=("x86_64-unknown-linux-gnu avx512")
summary=""
for kind in target quant; do
  for e in "${expected[@]}"; do
    # grep reads all its input (no -q): under pipefail, a grep that quits at the first match
    # can fail printf with SIGPIPE, and so the test.
    if ! printf '%s\n' "${lines[@]}" | grep "^$kind $e [0-9a-f]\{16\}$" >/dev/null; then
      echo "check_targets: FAIL: no $kind line for $e" >&2
      failed=1
    fi
  done
  hashes=$(printf '%s\n' "${lines[@]}" | awk -v k="$kind" '$1 == k { print $4 }' | sort -u)
  if [ "$(printf '%s\n' "$hashes" | grep -c .)" -ne 1 ]; then
    echo "check_targets: FAIL: the $kind hashes differ:" $hashes >&2
    failed=1
  fi
  summary="$summary $kind $hashes"
done
if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "check_targets: ${#lines[@]} lines, one hash of each kind:$summary (built in ${built}s, $((SECONDS - start))s in all)" >&2
