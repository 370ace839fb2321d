#!/usr/bin/env bash
# Writes a release into dist/ (`make release VERSION=vX.Y.Z`):
#   install.yaml                         config/default, the agent image pinned by digest
#   unitlet-image-VERSION.oci.tar        the agent image: one OCI archive, an index for linux/amd64 and linux/arm64
#   kubectl-unitlet-OS-ARCH              the plugin for linux/darwin x amd64/arm64
#   kubectl_complete-unitlet             its shell completion helper (a script, every platform)
#   kubectl-unitlet-OS-ARCH.tar.gz       each with the completion helper and LICENSE, for krew
#   plugin.yaml                          the krew manifest (sha256 of each archive)
#   SHA256SUMS                           of all of the above
# Archives carry no owners or times, so a release can be rebuilt and compared.
set -euo pipefail

VERSION="${1:?usage: hack/release.sh vX.Y.Z}"
if ! [[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release: VERSION=$VERSION is not a semantic version (vX.Y.Z[-pre]); run make release VERSION=vX.Y.Z" >&2
	exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
IMAGE_NAME="${IMAGE_NAME:-unitlet.dev/unitlet}"
# Where the krew manifest says the archives are downloaded from.
RELEASE_URL="${RELEASE_URL:-https://github.com/unitlet/unitlet/releases/download/$VERSION}"
# DIST: where the release goes (make test writes a test release elsewhere,
# so a release cut in dist/ is not overwritten).
DIST="${DIST:-$ROOT/dist}"
WORK="$ROOT/bin/release"
LDFLAGS="-s -w -X github.com/unitlet/unitlet/internal/version.Version=$VERSION"

rm -rf "$DIST" "$WORK"
mkdir -p "$DIST" "$WORK"

# Each link takes one core for seconds: the release's ten run two at a
# time (build queues one, builds_done waits for those queued).
queued=()
build() { # GOOS GOARCH LDFLAGS OUT PACKAGE
	if ((${#queued[@]} >= 2)); then builds_done; fi
	CGO_ENABLED=0 GOOS=$1 GOARCH=$2 go build -trimpath -ldflags "$3" -o "$4" "$5" &
	queued+=($!)
}
builds_done() {
	local pid
	for pid in "${queued[@]}"; do wait "$pid"; done
	queued=()
}

# The image: both arches' static binaries, each with its per-unit helper
# and the cluster side's binary beside it, in one index.
platforms=()
for arch in amd64 arm64; do
	build linux $arch "$LDFLAGS" "$WORK/unitlet-linux-$arch" .
	build linux $arch "-s -w" "$WORK/unitlet-shim-linux-$arch" ./cmd/unitlet-shim
	build linux $arch "$LDFLAGS" "$WORK/unitlet-cluster-linux-$arch" ./cmd/unitlet-cluster
	platforms+=(--platform "linux/$arch=$WORK/unitlet-linux-$arch,$WORK/unitlet-shim-linux-$arch,$WORK/unitlet-cluster-linux-$arch")
done
# The plugin, for each platform krew serves.
for os in linux darwin; do
	for arch in amd64 arm64; do
		build $os $arch "$LDFLAGS" "$DIST/kubectl-unitlet-$os-$arch" ./cmd/kubectl-unitlet
	done
done
builds_done

image="unitlet-image-$VERSION.oci.tar"
ref="$(go run ./hack/image "${platforms[@]}" --tag "$IMAGE_NAME:$VERSION" --out "$DIST/$image" | awk '{print $2}')"
digest="${ref##*@}"
[[ "$digest" == sha256:* ]] || { echo "release: hack/image printed no digest ($ref)" >&2; exit 1; }

make --no-print-directory build-installer IMG="$IMAGE_NAME@$digest" INSTALLER="$DIST/install.yaml"

# The plugin as krew archives (the binary, its completion helper
# kubectl_complete-unitlet, which kubectl runs from $PATH, and LICENSE).
install -m 0755 cmd/kubectl-unitlet/kubectl_complete-unitlet "$DIST/kubectl_complete-unitlet"
for os in linux darwin; do
	for arch in amd64 arm64; do
		name="kubectl-unitlet-$os-$arch"
		mkdir -p "$WORK/$name"
		cp "$DIST/$name" "$WORK/$name/kubectl-unitlet"
		cp "$DIST/kubectl_complete-unitlet" "$WORK/$name/kubectl_complete-unitlet"
		cp LICENSE "$WORK/$name/LICENSE"
		tar -C "$WORK/$name" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - kubectl-unitlet kubectl_complete-unitlet LICENSE |
			gzip -n >"$DIST/$name.tar.gz"
	done
done

krew_platform() { # os arch
	local sum
	sum="$(sha256sum "$DIST/kubectl-unitlet-$1-$2.tar.gz" | cut -d' ' -f1)"
	cat <<YAML
  - selector:
      matchLabels:
        os: $1
        arch: $2
    uri: $RELEASE_URL/kubectl-unitlet-$1-$2.tar.gz
    sha256: $sum
    bin: kubectl-unitlet
    files:
      - from: kubectl-unitlet
        to: .
      - from: kubectl_complete-unitlet
        to: .
      - from: LICENSE
        to: .
YAML
}

{
	cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: unitlet
spec:
  version: $VERSION
  homepage: https://github.com/unitlet/unitlet
  shortDescription: Logs and one-off commands of unitlet Instances
  description: |
    kubectl unitlet shows an Instance's logs and runs one-off commands in
    its environment, through the API server (the aggregated API
    subresources.hosting.unitlet.dev served by the unitlet relay), as
    kubectl logs and kubectl exec do for pods. For shell completion of its
    arguments, put kubectl_complete-unitlet (in the archive) on \$PATH.
  platforms:
YAML
	for os in linux darwin; do
		for arch in amd64 arm64; do
			krew_platform "$os" "$arch"
		done
	done
} >"$DIST/plugin.yaml"

(cd "$DIST" && sha256sum install.yaml "$image" plugin.yaml kubectl-unitlet-* kubectl_complete-unitlet >SHA256SUMS)
rm -rf "$WORK"
echo "release $VERSION in dist/ (image $IMAGE_NAME@$digest):"
ls -l "$DIST"
