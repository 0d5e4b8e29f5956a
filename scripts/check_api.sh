#!/usr/bin/env bash
# The public API only grows: regenerates the API dump of each feature set that changes the
# surface and fails if a line of the committed dump in api/ is gone (a removed or changed item).
# Added lines pass and are printed as a notice.
#
#   scripts/check_api.sh           check (CI)
#   scripts/check_api.sh --bless   rewrite api/*.txt; commit them with the API change they record
#
# The dumps come from cargo-public-api on the dated nightly of scripts/nightly-toolchain: the tool
# version and the nightly must agree on the rustdoc JSON format (0.52.x reads format 57, which
# nightly-2026-05-20 writes), so bump both together.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

CARGO_PUBLIC_API_VERSION=0.52.0

# name of the dump in api/, then the cargo feature arguments it is built with.
FEATURE_SETS=(
  "no-default-features|--no-default-features"
  "default|"
  "parallel-rayon|--features parallel,rayon"
  "tracing|--features tracing"
  "model|--features model"
)

bless=false
case "${1:-}" in
  "") ;;
  --bless) bless=true ;;
  *)
    echo "usage: scripts/check_api.sh [--bless]" >&2
    exit 2
    ;;
esac

if ! rustup run "$PINNED_NIGHTLY" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$PINNED_NIGHTLY" --profile minimal
fi
if [ "$(cargo public-api --version 2>/dev/null || true)" != "cargo-public-api $CARGO_PUBLIC_API_VERSION" ]; then
  echo "installing cargo-public-api $CARGO_PUBLIC_API_VERSION (a few minutes, once)" >&2
  cargo install --locked "cargo-public-api@$CARGO_PUBLIC_API_VERSION"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

failed=false
for entry in "${FEATURE_SETS[@]}"; do
  name="${entry%%|*}"
  read -r -a feature_args <<<"${entry#*|}"
  fresh="$tmp/$name.txt"
  # One target dir for every feature set: the dependencies are documented once, and only this
  # crate's rustdoc JSON is rebuilt per feature set. Blanket impls (`Into`, `Borrow`, ...) are
  # omitted: they follow from the rest; auto-trait impls (`Send`, `Sync`) stay, losing one breaks
  # callers.
  if ! cargo "+$PINNED_NIGHTLY" public-api --target-dir target/api --color never \
    --omit blanket-impls "${feature_args[@]}" >"$fresh" 2>"$tmp/$name.log"; then
    echo "error: cargo public-api failed for the feature set '$name':" >&2
    cat "$tmp/$name.log" >&2
    exit 1
  fi

  committed="api/$name.txt"
  if $bless; then
    mkdir -p api
    cp "$fresh" "$committed"
    echo "blessed $committed ($(wc -l <"$committed") lines)"
    continue
  fi
  if [ ! -f "$committed" ]; then
    echo "error: $committed is missing; run scripts/check_api.sh --bless and commit it" >&2
    failed=true
    continue
  fi

  # Multiset difference, so a line that was there twice and is now there once counts as removed.
  removed="$(comm -23 <(LC_ALL=C sort "$committed") <(LC_ALL=C sort "$fresh"))"
  added="$(comm -13 <(LC_ALL=C sort "$committed") <(LC_ALL=C sort "$fresh"))"
  if [ -n "$removed" ]; then
    echo "error: public API removed or changed ($name: ${feature_args[*]:-default features}):"
    sed 's/^/-  /' <<<"$removed"
    failed=true
  fi
  if [ -n "$added" ]; then
    echo "notice: public API added ($name); run scripts/check_api.sh --bless to record it:"
    sed 's/^/+  /' <<<"$added"
  fi
  if [ -z "$removed" ] && [ -z "$added" ]; then
    echo "api/$name.txt: unchanged"
  fi
done

if $failed; then
  echo "check_api: the public API lost items; restore them, or bless a deliberate break" >&2
  exit 1
fi
$bless || echo "check_api: nothing removed"
