#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60), two at a time,
# and prints one summary line per target. Exits non-zero when any target crashes, leaks,
# times out or runs out of memory; the input that did it is named in the output
# (fuzz/artifacts/<target>/...). Replay one with
#   cargo +"$PINNED_NIGHTLY" fuzz run -a <target> <input>
# and, once fixed, save it under fuzz/regressions/<target>/ (tests/fuzz_regressions.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh

seconds="${1:-60}"
# libFuzzer's seed. CI fixes it (FUZZ_SEED=1 in .ci/run) so that a submission is judged by a
# reproducible run, not by which random path a run happened to take; unset, each run explores
# a new path (what a longer run by hand is for).
seed_args=()
[ -n "${FUZZ_SEED:-}" ] && seed_args+=(-seed="$FUZZ_SEED")
# The cargo-fuzz release the targets were written with; --locked for its own dependencies.
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# -a: debug assertions and overflow checks; the crate promises checked arithmetic, so an
# overflow on some input is a finding even where a release build would wrap silently.
fuzz=(cargo "+$PINNED_NIGHTLY" fuzz)
"${fuzz[@]}" build -a

# run_target TARGET: one target for SECONDS; its summary line (and, on failure, what failed
# and the input) into fuzz/artifacts/TARGET/summary; non-zero if it failed.
run_target() {
  local target=$1 corpus="fuzz/corpus/$1" log="fuzz/artifacts/$1/last-run.log" result
  local summary="fuzz/artifacts/$1/summary" seeds=() last execs cov ft rate
  mkdir -p "$corpus" "fuzz/artifacts/$target"
  # New inputs go to the first corpus directory; the regressions are read as seeds.
  [ -d "fuzz/regressions/$target" ] && seeds+=("fuzz/regressions/$target")
  if "${fuzz[@]}" run -a "$target" "$corpus" "${seeds[@]}" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 "${seed_args[@]}" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
  fi
  # libFuzzer's last status line: "#<execs> DONE cov: <N> ft: <N> ... exec/s: <N> ...".
  last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
  execs="$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")"
  cov="$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")"
  ft="$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")"
  rate="$(sed -nE 's/.* exec\/s: ([0-9]+).*/\1/p' <<<"$last")"
  echo "fuzz $target: ${execs:-?} execs (${rate:-?}/s), cov ${cov:-?}, ft ${ft:-?}: $result" >"$summary"
  if [ "$result" = FAILED ]; then
    {
      grep -E "panicked at|^[a-z].*(failed|overflow|by zero|out of bounds)|ERROR: |SUMMARY: " "$log" |
        head -n 12 || true
      sed -nE "s|.*Test unit written to ($PWD/)?(.*)$|  crashing input: \2|p" "$log" | sort -u
      echo "  full log: $log"
    } >>"$summary"
    return 1
  fi
}

# libFuzzer runs a target on one thread: two targets run at a time, one per core of a 2-core
# machine, each for its full SECONDS.
status=0
targets=($("${fuzz[@]}" list))
running=()
for target in "${targets[@]}"; do
  run_target "$target" &
  running+=($!)
  if [ "${#running[@]}" -ge 2 ]; then
    wait "${running[0]}" || status=1
    running=("${running[@]:1}")
  fi
done
for pid in "${running[@]}"; do
  wait "$pid" || status=1
done
for target in "${targets[@]}"; do
  cat "fuzz/artifacts/$target/summary"
done
exit "$status"
