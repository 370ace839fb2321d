#!/usr/bin/env bash
# Applies the samples to a throw-away control plane and checks that
# `kubectl get` shows each kind's printer columns, as a user would see them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DEV_DIR="$ROOT/bin/check-columns" DEV_API_PORT=26443 DEV_ETCD_PORT=22379
# It runs no agent: a developer's `make run` instances are none of its business.
export DEV_KEEP_INSTANCES=1
trap '"$ROOT/hack/dev.sh" down >/dev/null 2>&1 || true; rm -rf "$DEV_DIR"' EXIT
"$ROOT/hack/dev.sh" down >/dev/null 2>&1 || true
"$ROOT/hack/dev.sh" up 2>/dev/null
k() { "$ROOT/bin/kubectl" --kubeconfig "$DEV_DIR/kubeconfig" "$@"; }
k apply -f "$ROOT/config/samples/" >/dev/null
k apply -f - >/dev/null <<'YAML'
apiVersion: hosting.unitlet.dev/v1alpha1
kind: Generation
metadata: {name: shop-1, namespace: default}
spec:
  instance: shop
  nodeName: vm
  number: 1
  template:
    command: ["/usr/bin/app"]
    tier: {memory: 64Mi, cpu: 100m, pids: 16}
---
apiVersion: hosting.unitlet.dev/v1alpha1
kind: HostClaim
metadata: {name: shop.example.com}
spec: {namespace: default, name: shop, uid: 00000000-0000-0000-0000-000000000001, nodeName: vm}
YAML
fail=0
expect() { # expect KIND "HEADER…" ROW-PATTERN
  local out; out="$(k get "$1")"
  echo "$out"
  if ! head -1 <<<"$out" | grep -Eq "$2"; then echo "FAIL: $1 header is not: $2" >&2; fail=1; fi
  if ! tail -n +2 <<<"$out" | grep -Eq "$3"; then echo "FAIL: $1 has no row like: $3" >&2; fail=1; fi
}
expect inst '^NAME +HOST +NODE +SERVING +ACTIVE +READY +REASON +AGE$' '^shop +shop\.example\.com +vm +'
expect gen  '^NAME +INSTANCE +NUMBER +PHASE +STARTED +READY +AGE$' '^shop-1 +shop +1 +'
expect enr  '^NAME +APPROVED +MODE +CORDONED +MEM USED +MEM ALLOCATABLE +AGE$' '^vm +true +'
expect ug   '^NAME +USER +NAMESPACES +NODES +GROUPS +AGE$' '^www-data-default +www-data +.*default'
expect hc   '^NAME +NAMESPACE +INSTANCE +NODE +AGE$' '^shop\.example\.com +default +shop +vm +'
if [ "$fail" = 0 ]; then echo "printer columns ok (inst, gen, enr, ug, hc)"; else echo "printer columns: failed"; exit 1; fi
