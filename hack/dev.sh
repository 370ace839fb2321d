#!/usr/bin/env bash
# dev.sh up|cluster|down: a local control plane for `make run`, on
# loopback only. up starts etcd and kube-apiserver in the background (pids
# in bin/dev), writes an admin kubeconfig to bin/dev/kubeconfig, installs
# the CRDs and waits until they are established. cluster starts what
# config/default runs once per cluster (the relay, registered as the
# aggregated API behind `kubectl unitlet`, and nodewatch with placement,
# moves and keys) as background processes. approve NODE approves that
# node's Enrollment once its agent made it (in the background). down
# stops exactly those pids and removes bin/dev's
# control-plane state.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/bin"
DEV="${DEV_DIR:-$BIN/dev}"
API_PORT="${DEV_API_PORT:-16443}"
ETCD_PORT="${DEV_ETCD_PORT:-12379}"
RELAY_PORT="${DEV_RELAY_PORT:-18443}"
KUBECTL="$BIN/kubectl"
KUBECONFIG_FILE="$DEV/kubeconfig"

log() { printf 'dev: %s\n' "$*" >&2; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() {
  local f="$1"
  if alive "$f"; then
    local pid; pid="$(cat "$f")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

certs() {
  local d="$DEV/pki"
  [ -f "$d/apiserver.crt" ] && return
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=unitlet-dev-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 365 -extfile "$d/san.ext" -out "$d/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  # The aggregator's trust: the relay believes the user the API server
  # names only on a request signed by this CA's front-proxy-client.
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=unitlet-dev-front-proxy-ca" \
    -keyout "$d/front-proxy-ca.key" -out "$d/front-proxy-ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=front-proxy-client" \
    -keyout "$d/front-proxy-client.key" -out "$d/front-proxy-client.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
  openssl x509 -req -in "$d/front-proxy-client.csr" -CA "$d/front-proxy-ca.crt" -CAkey "$d/front-proxy-ca.key" \
    -CAcreateserial -days 365 -extfile "$d/client.ext" -out "$d/front-proxy-client.crt" 2>/dev/null
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/admin.token"
  printf '%s,unitlet-admin,unitlet-admin,"system:masters"\n' "$(cat "$d/admin.token")" >"$d/tokens.csv"
}

kubeconfig() {
  cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: unitlet-dev
  cluster:
    server: https://127.0.0.1:${API_PORT}
    certificate-authority: ${DEV}/pki/ca.crt
users:
- name: unitlet-admin
  user:
    token: $(cat "$DEV/pki/admin.token")
contexts:
- name: unitlet-dev
  context: {cluster: unitlet-dev, user: unitlet-admin, namespace: default}
current-context: unitlet-dev
KC
  chmod 600 "$KUBECONFIG_FILE"
}

up() {
  mkdir -p "$DEV"
  certs
  if ! alive "$DEV/etcd.pid"; then
    "$BIN/etcd" --data-dir "$DEV/etcd" --name unitlet-dev \
      --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "unitlet-dev=http://127.0.0.1:$((ETCD_PORT + 1))" \
      --unsafe-no-fsync >"$DEV/etcd.log" 2>&1 &
    echo $! >"$DEV/etcd.pid"
    log "etcd started (pid $(cat "$DEV/etcd.pid"), log $DEV/etcd.log)"
  fi
  if ! alive "$DEV/kube-apiserver.pid"; then
    "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
      --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 \
      --tls-cert-file "$DEV/pki/apiserver.crt" --tls-private-key-file "$DEV/pki/apiserver.key" \
      --client-ca-file "$DEV/pki/ca.crt" --token-auth-file "$DEV/pki/tokens.csv" \
      --service-account-key-file "$DEV/pki/sa.pub" --service-account-signing-key-file "$DEV/pki/sa.key" \
      --service-account-issuer https://unitlet-dev.local --api-audiences unitlet-dev \
      --authorization-mode RBAC --service-cluster-ip-range 10.96.0.0/24 \
      --endpoint-reconciler-type none --allow-privileged=true --cert-dir "$DEV/pki" \
      --requestheader-client-ca-file "$DEV/pki/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
      --requestheader-username-headers X-Remote-User --requestheader-uid-headers X-Remote-Uid \
      --requestheader-group-headers X-Remote-Group --requestheader-extra-headers-prefix X-Remote-Extra- \
      --proxy-client-cert-file "$DEV/pki/front-proxy-client.crt" --proxy-client-key-file "$DEV/pki/front-proxy-client.key" \
      --enable-aggregator-routing=false >"$DEV/kube-apiserver.log" 2>&1 &
    echo $! >"$DEV/kube-apiserver.pid"
    log "kube-apiserver started (pid $(cat "$DEV/kube-apiserver.pid"), log $DEV/kube-apiserver.log)"
  fi
  kubeconfig
  for i in $(seq 120); do
    if "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" get --raw /readyz >/dev/null 2>&1; then break; fi
    alive "$DEV/kube-apiserver.pid" || { log "kube-apiserver died:"; tail -20 "$DEV/kube-apiserver.log" >&2; exit 1; }
    [ "$i" = 120 ] && { log "kube-apiserver not ready after 60 s"; exit 1; }
    sleep 0.5
  done
  "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" apply --server-side -f "$ROOT/config/crd/bases" >/dev/null
  "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" wait --for condition=Established --timeout=60s \
    crd/instances.hosting.unitlet.dev crd/generations.hosting.unitlet.dev crd/enrollments.hosting.unitlet.dev >/dev/null
  log "control plane up: export KUBECONFIG=$KUBECONFIG_FILE"
}

# cluster starts the cluster side beside the local agent. The relay
# listens on loopback; its Service is an ExternalName of localhost, so
# the API server (here, outside any cluster network) dials it at the
# APIService's port and still verifies its certificate for
# unitlet-relay.unitlet-system.svc. In a cluster the Service selects the
# relay's Pods (config/relay).
cluster() {
  local k=("$KUBECTL" --kubeconfig "$KUBECONFIG_FILE")
  "${k[@]}" create namespace unitlet-system --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  # The Instances' keys: the cluster side mints them here, the agent reads them.
  "${k[@]}" create namespace unitlet-keys --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" apply -f "$ROOT/config/rbac/user_roles.yaml" >/dev/null
  "${k[@]}" apply -f - >/dev/null <<SVC
apiVersion: v1
kind: Service
metadata: {name: unitlet-relay, namespace: unitlet-system}
spec: {type: ExternalName, externalName: localhost}
---
$(sed "s/port: 443/port: ${RELAY_PORT}/" "$ROOT/config/relay/apiservice.yaml")
SVC
  if ! alive "$DEV/relay.pid"; then
    "$BIN/unitlet-cluster" relay --kubeconfig "$KUBECONFIG_FILE" --listen "127.0.0.1:${RELAY_PORT}" \
      --namespace unitlet-system >"$DEV/relay.log" 2>&1 &
    echo $! >"$DEV/relay.pid"
    log "relay started (pid $(cat "$DEV/relay.pid"), log $DEV/relay.log)"
  fi
  if ! alive "$DEV/cluster.pid"; then
    "$BIN/unitlet-cluster" --kubeconfig "$KUBECONFIG_FILE" --lease-namespace unitlet-system --key-namespace unitlet-keys \
      --health-probe-bind-address 127.0.0.1:8091 --metrics-bind-address 0 >"$DEV/cluster.log" 2>&1 &
    echo $! >"$DEV/cluster.pid"
    log "cluster side (nodewatch, placement) started (pid $(cat "$DEV/cluster.pid"), log $DEV/cluster.log)"
  fi
  for i in $(seq 60); do
    "${k[@]}" get --raw "/apis/subresources.hosting.unitlet.dev/v1" >/dev/null 2>&1 && break
    alive "$DEV/relay.pid" || { log "relay died:"; tail -20 "$DEV/relay.log" >&2; exit 1; }
    [ "$i" = 60 ] && { log "the relay's API not served after 30 s:"; tail -20 "$DEV/relay.log" >&2; exit 1; }
    sleep 0.5
  done
  log "cluster side up: kubectl unitlet reaches the agent through the API server"
}

# sweep_instances kills what `make run`'s agent left running (its units
# outlive the agent by design) and removes the dev cgroup root and roots.
sweep_instances() {
  local root="${DEV_CGROUP_ROOT:-unitlet-dev}" dirs=()
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -d "$h$root" ] && dirs+=("$h$root")
  done
  [ ${#dirs[@]} -eq 0 ] && { rm -rf "$DEV/run" "$DEV/state"; return; }
  for _ in $(seq 20); do
    pids="$(find "${dirs[@]}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)"
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  find "${dirs[@]}" -depth -type d -exec rmdir {} + 2>/dev/null || true
  rm -rf "$DEV/run" "$DEV/state"
  log "dev instances stopped, cgroup root $root removed"
}

down() {
  stop_pid "$DEV/relay.pid"
  stop_pid "$DEV/cluster.pid"
  stop_pid "$DEV/kube-apiserver.pid"
  stop_pid "$DEV/etcd.pid"
  rm -rf "$DEV/etcd" "$DEV/pki" "$KUBECONFIG_FILE" "$DEV"/*.log
  log "control plane stopped"
  if [ -z "${DEV_KEEP_INSTANCES:-}" ]; then sweep_instances; fi
}

# approve NODE approves the dev agent's Enrollment once the agent made it,
# in the background: `make run`'s node hosts as a fleet's node does (its
# capacity reported, placement binding unpinned Instances to it), with
# the administrator's approval given for this one trusted machine. A
# second agent started by hand is approved the same way (`hack/dev.sh
# approve NAME`) or with `kubectl patch enr NAME`.
approve() {
  local node="$1" k=("$KUBECTL" --kubeconfig "$KUBECONFIG_FILE")
  (
    for _ in $(seq 120); do
      if "${k[@]}" get enrollment "$node" >/dev/null 2>&1; then
        "${k[@]}" patch enrollment "$node" --type=merge -p '{"spec":{"approved":true}}' >/dev/null &&
          log "Enrollment $node approved" && exit 0
      fi
      sleep 0.5
    done
    log "no Enrollment $node after 60 s: approve it with kubectl patch enr $node --type=merge -p '{\"spec\":{\"approved\":true}}'"
  ) &
}

case "${1:-}" in
  up) up ;;
  cluster) cluster ;;
  approve) approve "${2:?usage: $0 approve NODE}" ;;
  down) down ;;
  *) echo "usage: $0 up|cluster|approve NODE|down" >&2; exit 2 ;;
esac
