#!/usr/bin/env bash
# Runs each fuzz target briefly; the committed seed corpora run first.
set -euo pipefail
t="${1:-200000x}" # a count; see FUZZTIME in the Makefile
cd "$(dirname "${BASH_SOURCE[0]}")/.."
targets=(
  "./runtime/instancefs FuzzParseEnv"
  "./runtime/launch FuzzDecode"
)
for tgt in "${targets[@]}"; do
  set -- $tgt
  echo "fuzz: $1 $2 for $t"
  go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$t"
done
