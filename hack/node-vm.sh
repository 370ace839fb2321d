#!/usr/bin/env bash
# A production-shaped node for tests: Debian 12 with systemd as PID 1 and
# pure cgroup v2, booted with QEMU. Software emulation (TCG) is the default
# because this machine's /dev/kvm does not boot a stock kernel; set
# NODE_VM_ACCEL=kvm where a guest is known to boot with it.
#
#   hack/node-vm.sh image   build (or reuse) the cached disk image in bin/node-vm
#   hack/node-vm.sh up      boot one in the background; prints how to reach it
#   hack/node-vm.sh down    power it off and remove its overlay
#
# The image is a root file system made by debootstrap from the mirror apt
# uses here, written into an ext4 file without a loop mount; each boot gets
# a copy-on-write overlay, so the cached image never changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${NODE_VM_DIR:-$ROOT/bin/.node-vm}" # a dot dir: `go ./...` does not walk it
SUITE=bookworm
# What the node needs beyond minbase: systemd as PID 1 and its bus, a
# kernel with virtio drivers in its initramfs, a network, ssh for the
# tests, python3 for the sample apps and nginx as the front end; for a
# kubelet (test/cluster): containerd, runc, the CNI plugins and iptables.
PACKAGES=systemd,systemd-sysv,dbus,linux-image-amd64,initramfs-tools,udev,iproute2,openssh-server,python3,nginx-light,procps,containerd,runc,containernetworking-plugins,iptables
# Bump RECIPE when configure() changes, so a cached image is rebuilt.
RECIPE=4
STAMP="$SUITE $PACKAGES $RECIPE"

log() { printf 'node-vm: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

need() {
  local missing=()
  for tool in qemu-system-x86_64 qemu-img debootstrap mkfs.ext4 ssh ssh-keygen; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: run hack/deps.sh (installs qemu-system-x86, qemu-utils, debootstrap, e2fsprogs, openssh-client) or apt-get install them"
}

# mirror is the Debian mirror apt uses here (NODE_VM_MIRROR overrides).
mirror() {
  if [ -n "${NODE_VM_MIRROR:-}" ]; then echo "$NODE_VM_MIRROR"; return; fi
  local m
  m="$(awk '/^URIs:/ {u=$2} /^Suites:/ && / '"$SUITE"'( |$)/ {print u; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [ -n "$m" ] || m="$(awk '$1=="deb" && $3=="'"$SUITE"'" {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  [ -n "$m" ] || die "no Debian $SUITE mirror in /etc/apt/sources.list*: set NODE_VM_MIRROR=http://…/debian"
  echo "$m"
}

bootstrap() {
  local rootfs="$DIR/rootfs"
  if [ -f "$rootfs/.unitlet-stamp" ] && [ "$(cat "$rootfs/.unitlet-stamp")" = "$STAMP" ]; then
    return
  fi
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  rm -rf "$rootfs"
  local m; m="$(mirror)"
  log "debootstrap $SUITE from $m (cold: ~2-3 min)"
  # No service may start inside the chroot while packages install.
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs.tmp" "$m" >"$DIR/debootstrap.log" 2>&1 ||
    { tail -20 "$DIR/debootstrap.log" >&2; die "debootstrap failed (log: $DIR/debootstrap.log)"; }
  configure "$rootfs.tmp"
  echo "$STAMP" >"$rootfs.tmp/.unitlet-stamp"
  mv "$rootfs.tmp" "$rootfs"
}

# configure makes the root file system boot unattended: network by DHCP,
# root over ssh with the harness's key, nothing started that a node does
# not need.
configure() {
  local r="$1"
  echo unitlet-node >"$r/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 unitlet-node\n' >"$r/etc/hosts"
  echo '/dev/vda / ext4 rw,relatime 0 1' >"$r/etc/fstab"
  : >"$r/etc/machine-id" # a fresh identity at every boot
  mkdir -p "$r/etc/systemd/network"
  printf '[Match]\nName=en*\n\n[Network]\nDHCP=ipv4\n' >"$r/etc/systemd/network/10-dhcp.network"
  ln -sf /lib/systemd/system/systemd-networkd.service "$r/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  # The front end and the container runtime are started by the tests that
  # need them, on their own configuration.
  rm -f "$r/etc/systemd/system/multi-user.target.wants/nginx.service" \
    "$r/etc/systemd/system/multi-user.target.wants/containerd.service"
  # Timers and apt jobs would compete with the tests for an emulated CPU.
  rm -f "$r"/etc/systemd/system/timers.target.wants/*
  mkdir -p "$r/etc/ssh/sshd_config.d"
  printf 'PermitRootLogin prohibit-password\nUseDNS no\n' >"$r/etc/ssh/sshd_config.d/unitlet.conf"
  # DNS is not needed (and not reachable): no resolver waits.
  : >"$r/etc/resolv.conf"
}

keys() {
  [ -f "$DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C unitlet-node-vm -f "$DIR/id_ed25519"
}

image() {
  need
  mkdir -p "$DIR"
  keys
  bootstrap
  local img="$DIR/base.img" want
  want="$STAMP $(sha256sum "$DIR/id_ed25519.pub" | cut -c1-16)"
  if [ -f "$img" ] && [ "$(cat "$img.stamp" 2>/dev/null)" = "$want" ]; then
    log "image present: $img"; return
  fi
  log "writing $img"
  install -d -m 0700 "$DIR/rootfs/root/.ssh"
  install -m 0600 "$DIR/id_ed25519.pub" "$DIR/rootfs/root/.ssh/authorized_keys"
  cp "$DIR/rootfs"/boot/vmlinuz-* "$DIR/vmlinuz"
  cp "$DIR/rootfs"/boot/initrd.img-* "$DIR/initrd.img"
  rm -f "$img.tmp"
  truncate -s 4G "$img.tmp"
  mkfs.ext4 -q -F -L unitlet-node -d "$DIR/rootfs" "$img.tmp"
  mv "$img.tmp" "$img"
  echo "$want" >"$img.stamp"
}

# up boots a VM in the background (`make node-vm`), for a person to use.
up() {
  image
  local run="$DIR/up" port
  [ ! -f "$run/qemu.pid" ] || ! kill -0 "$(cat "$run/qemu.pid")" 2>/dev/null || die "a VM is already up: $(cat "$run/ssh")"
  rm -rf "$run"; mkdir -p "$run"
  port="${NODE_VM_SSH_PORT:-2222}"
  qemu-img create -q -f qcow2 -F raw -b "$DIR/base.img" "$run/disk.qcow2"
  # Under TCG the kernel would take the emulated TSCs for unsynchronized
  # and read the HPET, a trap into QEMU per clock read
  # (internal/testkit/nodevm's kernelArgs).
  local accel="tcg,thread=multi" cmdline="root=/dev/vda rw console=ttyS0 quiet"
  if [ "${NODE_VM_ACCEL:-tcg}" = kvm ]; then accel=kvm; else cmdline+=" tsc=reliable"; fi
  qemu-system-x86_64 -accel "$accel" -cpu max -m "${NODE_VM_MEMORY:-2048}" -smp 2 \
    -display none -no-reboot -daemonize -pidfile "$run/qemu.pid" \
    -serial "file:$run/console.log" \
    -kernel "$DIR/vmlinuz" -initrd "$DIR/initrd.img" \
    -append "$cmdline" \
    -drive "file=$run/disk.qcow2,format=qcow2,if=virtio" \
    -nic "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:$port-:22"
  local ssh="ssh -i $DIR/id_ed25519 -p $port -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@127.0.0.1"
  echo "$ssh" >"$run/ssh"
  log "booting (TCG: ~30-60 s); console: $run/console.log"
  for _ in $(seq 1 180); do
    if $ssh -o ConnectTimeout=2 -o BatchMode=yes true 2>/dev/null; then
      log "up. Reach it with:"; echo "$ssh"; log "stop it with: make node-vm-down"; return
    fi
    sleep 1
  done
  tail -20 "$run/console.log" >&2 || true
  die "no ssh after 180 s (console above)"
}

down() {
  local run="$DIR/up"
  if [ -f "$run/qemu.pid" ] && kill -0 "$(cat "$run/qemu.pid")" 2>/dev/null; then
    kill "$(cat "$run/qemu.pid")"
    log "stopped"
  fi
  rm -rf "$run"
}

case "${1:-}" in
  image) image ;;
  up) up ;;
  down) down ;;
  *) die "usage: $0 image|up|down" ;;
esac
