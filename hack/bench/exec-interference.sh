#!/usr/bin/env bash
# exec-interference.sh [N]: how much a concurrent start of the binary slows
# a raw start on this machine, even at SCHED_IDLE. Runs
# BenchmarkDirectStart/burst/raw alone, then beside a loop that starts
# `shim --warm` processes (each ends at once: no job pipe) under SCHED_IDLE,
# as the direct backend's pool refill does once per start. Root.
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-100}"
dir=$(mktemp -d)
loop=""
trap '[ -n "$loop" ] && kill "$loop" 2>/dev/null; rm -rf "$dir"' EXIT
go test -c -o "$dir/units.test" ./runtime/units/
cd runtime/units
bench() {
  "$dir/units.test" -test.run '^$' -test.bench 'DirectStart/burst/raw' -test.benchtime "${n}x" -test.count 2 | grep '^Benchmark'
}
echo "alone:"
bench
chrt --idle 0 bash -c "while :; do '$dir/units.test' shim --warm </dev/null >/dev/null 2>&1; done" &
loop=$!
sleep 1
echo "beside a SCHED_IDLE loop of warm-shim starts:"
bench
