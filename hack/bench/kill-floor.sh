#!/usr/bin/env bash
# kill-floor.sh [N] [RUNS]: the kernel's own time to empty a cgroup of N
# sleeping processes through the unified hierarchy's cgroup.kill, measured
# from a shell with no unitlet code involved: the floor under
# BenchmarkKillAndEmpty/100procs on this machine. Root; loopback-free.
set -euo pipefail
n="${1:-100}" runs="${2:-10}"
unified=/sys/fs/cgroup/unified
[ -e "$unified/cgroup.procs" ] || unified=/sys/fs/cgroup
for r in $(seq "$runs"); do
  cg="$unified/unitlet-bench-floor-$$-$r"
  mkdir "$cg"
  for _ in $(seq "$n"); do sleep 1000 & echo $! >"$cg/cgroup.procs"; done
  sleep 0.3
  start=$(date +%s%N)
  echo 1 >"$cg/cgroup.kill"
  while grep -q "populated 1" "$cg/cgroup.events"; do :; done
  end=$(date +%s%N)
  echo "$(( (end - start) / 1000 ))"
  wait 2>/dev/null || true
  rmdir "$cg"
done 2>/dev/null | sort -n | awk -v n="$n" '{a[NR]=$1} END {printf "kill-floor: %d processes, %d runs: p50 %.1f ms, max %.1f ms\n", n, NR, a[int((NR+1)/2)]/1000, a[NR]/1000}'
