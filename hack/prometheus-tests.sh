#!/usr/bin/env bash
# Installs Debian's prometheus package (for promtool and the server the
# end-to-end alert test starts itself) when missing, then checks and unit-
# tests the alert rules in config/prometheus.
#
#   hack/prometheus-tests.sh            install if missing, then promtool check + test
#   hack/prometheus-tests.sh --install  install if missing, nothing else
#
# The package's maintainer scripts would start a server; this machine's
# PID 1 is not systemd and nothing may be started behind the tests' back,
# so a policy-rc.d that refuses every service action is in place while
# apt runs (an existing one is kept and restored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

install_prometheus() {
  if command -v promtool >/dev/null && command -v prometheus >/dev/null; then return 0; fi
  if [ "$(id -u)" != 0 ]; then echo "prometheus-tests: need root to install prometheus" >&2; exit 1; fi
  local policy=/usr/sbin/policy-rc.d backup=""
  if [ -e "$policy" ]; then backup="$(mktemp)"; cp -p "$policy" "$backup"; fi
  restore() {
    if [ -n "$backup" ]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
  }
  trap restore EXIT
  printf '#!/bin/sh\n# prometheus-tests.sh: no service starts while installing\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  echo "prometheus-tests: installing prometheus (service starts refused)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  restore
  trap - EXIT
  # The package may still have left a server running if a service manager
  # ignored the policy; the tests start their own, so say so loudly.
  if pgrep -x prometheus >/dev/null; then
    echo "prometheus-tests: warning: a prometheus process is running (not started by this script)" >&2
  fi
}

install_prometheus
[ "${1:-}" = "--install" ] && exit 0

cd "$ROOT/config/prometheus"
promtool check rules rules.yaml
promtool test rules tests/*.yaml
