#!/usr/bin/env bash
# Installs the Debian packages the tests and `make run` use, when missing:
# systemd and dbus (a real systemd booted in namespaces by the systemd
# backend's tests) and openssl (dev certificates).
set -euo pipefail
want=(systemd dbus openssl util-linux)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "deps: need root to install: ${missing[*]}" >&2; exit 1; fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
