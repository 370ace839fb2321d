#!/usr/bin/env bash
# A `go test -exec` wrapper for the suites: runs one test binary, then
# appends to $UNITLET_STEP_TIMES its wall time and the CPU that it and the
# children it waited for (QEMU, the API servers, agents) used. On two
# cores, make test's wall time can be no less than its CPU time over two.
# CPUTIME_LABEL names the line (default: the package's directory).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$(date +%s%N)
"$@"
rc=$?
if [ -n "${UNITLET_STEP_TIMES:-}" ]; then
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  # times prints this shell's CPU, then its waited children's: "XmY.Zs
  # XmY.Zs". In this shell: a pipe or $(...) would run it in a subshell,
  # whose children are none.
  t=$(mktemp)
  times >"$t"
  sed -n 2p "$t" | awk -v pkg="${CPUTIME_LABEL:-${PWD#"$root"/}}" -v wall="$wall" '
    function sec(t) { split(t, a, /[ms]/); return a[1] * 60 + a[2] }
    { u = sec($1); s = sec($2); w = (wall > 0 ? wall : 1) / 1000
      printf "%s: CPU %.1f s (user %.1f, sys %.1f) in %.1f s: %.2f cores\n", pkg, u + s, u, s, w, (u + s) / w }' \
    >>"$UNITLET_STEP_TIMES"
  rm -f "$t"
fi
exit "$rc"
