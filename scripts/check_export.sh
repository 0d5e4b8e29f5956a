#!/usr/bin/env bash
# Checks the StableHLO export by hand, the way the README describes: export a grouped-query,
# causal, masked attention graph with its inputs and the eager result, compile it once with
# iree-compile, run the same .vmfb with 1 and 2 task groups, and compare with the eager result.
# Then the same for one decode step of the real model, every block, after a 40-token K/V prefix
# (examples/export_model.rs): normwise relative error <= 1e-4 and the same greedy token.
#
# usage: scripts/check_export.sh [OUT_DIR]
# IREE tools (and a python with numpy) from $IREE_BIN_DIR, else <repo>/.venv/bin; the model from
# $SKAINET_MODEL, else scripts/fetch_model.sh.
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

# The real model: 30 blocks, 336 inputs (the weights decoded to f32, about 520 MB of .npy).
model=${SKAINET_MODEL:-$(scripts/fetch_model.sh | tail -n 1)}
step="$out/step"
cargo run -q --release --features parallel,rayon,model --example export_model -- \
  --model "$model" --prefix 40 --out "$step" >/dev/null
cd "$step"
"$bin/iree-compile" --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
  --iree-llvmcpu-target-cpu=generic model.mlir -o model.vmfb
for groups in 1 2; do
  "$bin/iree-run-module" --device=local-task --task_topology_group_count="$groups" \
    --module=model.vmfb --function=main --flagfile=inputs.txt --flagfile=outputs.txt >/dev/null
  "$bin/python" - logits.npy expected.npy "$groups" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
same = int(got.argmax()) == int(want.argmax())
print(f"model step, task groups {sys.argv[3]}: normwise relative error {err:.3g}, "
      f"greedy token {int(got.argmax())} (eager {int(want.argmax())})")
sys.exit(0 if err <= 1e-4 and same else 1)
PY
done
