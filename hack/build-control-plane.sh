#!/usr/bin/env bash
# Builds kube-apiserver and etcd from source through the Go module proxy into
# bin/, because neither can be downloaded as a binary here. Each binary is
# rebuilt only when the version it reports differs from the pinned one.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/bin}"
WORK="${WORK_DIR:-$BIN/.build}"
mkdir -p "$BIN" "$WORK"

log() { printf 'build-control-plane: %s\n' "$*" >&2; }

build_etcd() {
  if [ -x "$BIN/etcd" ] && "$BIN/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}$"; then
    log "etcd $ETCD_VERSION present"; return
  fi
  log "building etcd $ETCD_VERSION (cold: ~35 s)"
  local dir="$WORK/etcd"
  rm -rf "$dir"; mkdir -p "$dir"
  (
    cd "$dir"
    # server/v3 carries replace directives, so `go install mod@v` refuses it;
    # a scratch module that requires it builds its main package.
    go mod init unitlet.dev/scratch/etcd >/dev/null 2>&1
    go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null
    CGO_ENABLED=0 go build -trimpath -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  )
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

# build_kube NAME builds k8s.io/kubernetes/cmd/NAME (kube-apiserver, kubectl)
# from one scratch module, so the two share its build cache.
build_kube() {
  local name="$1"
  if [ -x "$BIN/$name" ] && "$BIN/$name" version --client 2>/dev/null | grep -q "Client Version: ${KUBE_VERSION}$"; then
    log "$name $KUBE_VERSION present"; return
  fi
  if [ -x "$BIN/$name" ] && "$BIN/$name" --version 2>/dev/null | grep -q "Kubernetes ${KUBE_VERSION}$"; then
    log "$name $KUBE_VERSION present"; return
  fi
  log "building $name $KUBE_VERSION (cold kube-apiserver: ~4.5 min, ~2.5 GB of memory)"
  local dir="$WORK/kube" staging="v0.${KUBE_VERSION#v1.}"
  mkdir -p "$dir"
  local gomod
  gomod="$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$gomod" ] || { log "cannot find go.mod of k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
  {
    echo "module unitlet.dev/scratch/kube-apiserver"
    echo
    echo "go $(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    echo "replace ("
    # Every `k8s.io/x => ./staging/...` of kubernetes' own go.mod becomes the
    # published module of the same release.
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod" |
      grep -v -e '^k8s.io/sample-controller$' -e '^k8s.io/sample-cli-plugin$' |
      while read -r m; do echo "	$m => $m $staging"; done
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  local major="${KUBE_VERSION#v}"; major="${major%%.*}"
  local minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  local ld=""
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=${major} -X $p.gitMinor=${minor}"
  done
  (
    cd "$dir"
    GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ld" -o "$BIN/$name.tmp" "k8s.io/kubernetes/cmd/$name"
  )
  mv "$BIN/$name.tmp" "$BIN/$name"
}

# cluster: what test/cluster adds to the control plane: the controllers
# (a DaemonSet needs its controller and the scheduler) and the node's kubelet.
case "${1:-all}" in
  etcd) build_etcd ;;
  kube-apiserver|kubectl|kubelet|kube-controller-manager|kube-scheduler) build_kube "$1" ;;
  all) build_etcd; build_kube kube-apiserver; build_kube kubectl ;;
  cluster) build_kube kube-controller-manager; build_kube kube-scheduler; build_kube kubelet ;;
  *) echo "usage: $0 [all|cluster|etcd|kube-apiserver|kubectl|kubelet|kube-controller-manager|kube-scheduler]" >&2; exit 2 ;;
esac
