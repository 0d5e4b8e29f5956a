# Sourced by .ci/run and the scripts: the one place that says which nightly the crate uses.
#
# Miri and rustdoc JSON (the public-API check) both need a nightly; a dated one keeps their
# output, and the rustdoc JSON format the API tool understands, from changing under us. It is
# installed next to the machine's own `nightly`, never instead of it.
PINNED_NIGHTLY="$(tr -d '[:space:]' < "$(dirname "${BASH_SOURCE[0]}")/nightly-toolchain")"
export PINNED_NIGHTLY
