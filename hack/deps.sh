#!/usr/bin/env bash
# Installs the Debian packages a target uses, when missing.
#
#   hack/deps.sh run   what `make run` uses: openssl (the dev control
#                      plane's certificates) and curl (the quick start).
#   hack/deps.sh test  what `make test` uses besides: systemd and dbus (a
#                      real systemd booted in namespaces by the systemd
#                      backend's tests), nginx (the front end of the
#                      zero-downtime test; started by that test alone, on
#                      loopback), QEMU, debootstrap, e2fsprogs and ssh for
#                      the node VM (hack/node-vm.sh), gcc with the C library
#                      for `make bench`'s static app, and iproute2 (the
#                      metadata guard's test builds its addresses in a
#                      namespace of its own).
set -euo pipefail
run=(openssl curl util-linux)
test=(systemd dbus iproute2 nginx qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client gcc libc6-dev)
case "${1:-test}" in
  run) want=("${run[@]}") ;;
  test) want=("${run[@]}" "${test[@]}") ;;
  *) echo "usage: hack/deps.sh run|test" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "deps: need root to install: ${missing[*]}" >&2; exit 1; fi
echo "deps: installing ${missing[*]}" >&2
# PID 1 here is not systemd: no package may start its service (nginx would
# otherwise listen on port 80). policy-rc.d refuses every start meanwhile.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; own_policy=1
fi
trap '[ "$own_policy" = 1 ] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
