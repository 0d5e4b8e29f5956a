#!/usr/bin/env bash
# Checks the StableHLO export by hand, the way the README describes: export a grouped-query,
# causal, masked attention graph with its inputs and the eager result, compile it once with
# iree-compile, run the same .vmfb with 1 and 2 task groups, and compare with the eager result.
#
# usage: scripts/check_export.sh [OUT_DIR]
# IREE tools (and a python with numpy) from $IREE_BIN_DIR, else <repo>/.venv/bin.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${IREE_BIN_DIR:-$root/.venv/bin}
out=${1:-$(mktemp -d)}
for tool in iree-compile iree-run-module python; do
  [[ -x "$bin/$tool" ]] || {
    echo "missing $bin/$tool: python3 -m venv .venv && .venv/bin/pip install iree-base-compiler iree-base-runtime" >&2
    exit 1
  }
done

cd "$root"
cargo run -q --example export -- --heads 8 --kv-heads 2 --seq-q 5 --seq-k 9 --head-dim 16 \
  --causal --mask --out "$out" >/dev/null
"$bin/iree-compile" --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
  --iree-llvmcpu-target-cpu=generic "$out/model.mlir" -o "$out/model.vmfb"
for groups in 1 2; do
  "$bin/iree-run-module" --device=local-task --task_topology_group_count="$groups" \
    --module="$out/model.vmfb" --function=main \
    --input=@"$out/q.npy" --input=@"$out/k.npy" --input=@"$out/v.npy" --input=@"$out/mask.npy" \
    --output=@"$out/out$groups.npy" >/dev/null
  "$bin/python" - "$out/out$groups.npy" "$out/expected.npy" "$groups" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.abs(got - want).max())
print(f"task groups {sys.argv[3]}: max abs error {err:.3g}")
sys.exit(0 if err <= 1e-4 else 1)
PY
done
