# unitlet. `make run` runs it on this machine; `make test` tests it. Both
# build what they need (kube-apiserver and etcd from source) into bin/.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT        := $(CURDIR)
BIN         := $(ROOT)/bin
DEV         := $(BIN)/dev
TOOLS_MOD   := $(ROOT)/hack/tools/go.mod
CONTROLLER_GEN := go tool -modfile=$(TOOLS_MOD) controller-gen
KUSTOMIZE      := go tool -modfile=$(TOOLS_MOD) kustomize
GOIMPORTS      := go tool -modfile=$(TOOLS_MOD) goimports -local github.com/unitlet/unitlet
export KUBEBUILDER_ASSETS := $(BIN)
# Generated files, compared by `make verify`.
GENERATED   := api/v1alpha1/zz_generated.deepcopy.go config/crd config/rbac/role.yaml config/nodewatch/role.yaml \
	config/grafana/unitlet-agent.json config/prometheus/prometheusrule.yaml config/argocd/argocd-cm.yaml
# A count, not a duration: a duration's deadline can fail a fuzz run with a
# bare "context deadline exceeded" on a loaded machine (golang/go#75804,
# fixed only in go1.27). ~10 s here when the machine is quiet.
FUZZTIME    ?= 200000x
# The version every binary reports (`unitlet version`, `kubectl unitlet
# version`, the agent's Enrollment and unitlet_agent_info); `make build
# VERSION=v1.2.3` overrides it. A build without it (go build, go run) falls
# back to the VCS revision Go records (internal/version).
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/unitlet/unitlet/internal/version.Version=$(VERSION)
# The agent image install.yaml and `make deploy` set (a tag or @sha256:...).
IMG         ?= unitlet.dev/unitlet:dev
# Where build-installer writes config/default with IMG set.
INSTALLER   ?= dist/install.yaml
# The release `make test` cuts and checks (test/release) and installs
# (test/cluster): in bin/, so a release cut in dist/ is never overwritten.
TEST_RELEASE_VERSION ?= v0.0.0-test
TEST_RELEASE_DIR     := $(BIN)/release-test
KUBECTL     ?= $(shell command -v kubectl 2>/dev/null || echo $(BIN)/kubectl)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and the agent's and nodewatch's roles from markers.
	$(CONTROLLER_GEN) rbac:roleName=unitlet-agent crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=unitlet-nodewatch paths="./cluster/..." output:rbac:artifacts:config=config/nodewatch

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: dashboards
dashboards: ## Regenerate the Grafana dashboard, the PrometheusRule and the argocd-cm snippet.
	go generate ./config/grafana ./config/prometheus ./config/argocd

.PHONY: verify
verify: manifests generate dashboards ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated files are stale; run 'make manifests generate' and commit:"; \
		git status --porcelain -- $(GENERATED); git diff --stat -- $(GENERATED); exit 1; fi
	go vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@# Imports in three groups: standard library, others, this module
	@# (controller-gen's output aside).
	@bad="$$($(GOIMPORTS) -l $$(git ls-files '*.go' ':!:**/zz_generated*'))"; \
		test -z "$$bad" || { echo "$$bad"; echo "goimports needed: go tool -modfile=hack/tools/go.mod goimports -local github.com/unitlet/unitlet -w FILE"; exit 1; }
	$(KUSTOMIZE) build config/default >/dev/null
	@go mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run 'go mod tidy'"; go mod tidy -diff; exit 1; }
	@# What each room may import (runtime/ no Kubernetes, api/ nothing of
	@# the module, the node side not nodewatch...): hack/import-restrictions.yaml.
	go run ./hack/importcheck
	@# Links in the docs resolve inside the repository (files, anchors).
	go run ./hack/checklinks README.md $$(find docs -name '*.md' | sort)

# The per-unit helper is built as the image and the release ship it:
# static and stripped. Every start execs it twice (shim, trampoline), and
# a dynamically linked build costs each exec the loader's work
# (docs/reports/benchmarks.md).
SHIM_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w"

.PHONY: build
build: plugin ## Build the node's binary (unitlet), its small per-unit helper (unitlet-shim), the cluster side's binary (unitlet-cluster) and the kubectl plugin (kubectl-unitlet).
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/unitlet .
	$(SHIM_BUILD) -o $(BIN)/unitlet-shim ./cmd/unitlet-shim
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/unitlet-cluster ./cmd/unitlet-cluster

.PHONY: plugin
plugin: ## Build only the kubectl plugin (kubectl-unitlet) and its completion helper (kubectl_complete-unitlet) into BIN.
	mkdir -p $(BIN)
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-unitlet ./cmd/kubectl-unitlet
	install -m 0755 cmd/kubectl-unitlet/kubectl_complete-unitlet $(BIN)/kubectl_complete-unitlet

.PHONY: control-plane
control-plane: ## Build kube-apiserver, etcd and kubectl from source into bin/ (cached).
	hack/build-control-plane.sh

.PHONY: cluster-binaries
cluster-binaries: ## Build kubelet, kube-controller-manager and kube-scheduler from source into bin/ (cached).
	hack/build-control-plane.sh cluster

.PHONY: deps
deps: ## Install the Debian packages the tests use (systemd, dbus, nginx, QEMU, debootstrap, prometheus...) when missing.
	hack/deps.sh test
	hack/prometheus-tests.sh --install

.PHONY: deps-run
deps-run: ## Install only what `make run` uses (openssl, curl) when missing.
	hack/deps.sh run

##@ Test

.PHONY: test
test: deps control-plane cluster-binaries build node-vm-image ## Everything: unit, envtest, fuzz smoke, kubectl checks, a release, the node VM, the cluster, the docs' commands.
	@rm -f $(STEP_TIMES)
	@# Two lanes at once, each line prefixed with its lane: the suites that
	@# run in the emulated node VM spend this machine's CPU in QEMU while
	@# the host's suites mostly wait on API servers and timers (a 2-core
	@# machine sat ~46% idle with the suites one at a time). test/node
	@# starts at once; the release test/cluster installs is cut meanwhile,
	@# at the head of the host lane.
	$(MAKE) --no-print-directory -j2 test-lane-vm test-lane-host
	@# Where the suites' time and CPU went (each step of test/node,
	@# cluster, fleet; each suite's CPU with its children, QEMU included).
	@cat $(STEP_TIMES)

# Each step's time and each suite's CPU (hack/cputime.sh) land here.
STEP_TIMES := $(BIN)/step-times.txt
CPUTIME    := $(ROOT)/hack/cputime.sh
# The suites whose agent runs in the node VM, one after the other.
VM_SUITES   := ./test/node ./test/cluster
# The suites that mostly wait (on API servers, timers, a reader's
# commands), so run side by side: together they take about one core.
# test/fleet is not one: it boots a VM of its own, which next to
# test/node's reboot slowed both.
WAIT_SUITES := ./test/chaos ./test/docs ./test/e2e ./test/release ./test/systemd

test-lane-vm test-vm-node test-lane-host: export UNITLET_STEP_TIMES := $(STEP_TIMES)

.PHONY: test-lane-vm test-vm-node
test-lane-vm: test-vm-node image test-release-dist
	go test -count=1 -timeout 30m -exec $(CPUTIME) ./test/cluster 2>&1 | sed -u 's/^/vm   | /'
test-vm-node:
	go test -count=1 -timeout 30m -exec $(CPUTIME) ./test/node 2>&1 | sed -u 's/^/vm   | /'

# Unit and envtest, then the suites that wait side by side, then every
# other suite one at a time (a new suite under test/ lands there by
# itself), then the quick checks. At a lower priority than the vm lane:
# the two cores are saturated, and the emulated guest pays most for
# waiting for one.
HOST_NICE := nice -n 5
.PHONY: test-lane-host
test-lane-host: image test-release-dist
	CPUTIME_LABEL="unit and envtest, with their build" $(HOST_NICE) $(CPUTIME) \
		go test -count=1 -timeout 20m $$(go list ./... | grep -v '/test/') 2>&1 | sed -u 's/^/host | /'
	$(HOST_NICE) go test -count=1 -timeout 40m -p $(words $(WAIT_SUITES)) -exec $(CPUTIME) $(WAIT_SUITES) 2>&1 | sed -u 's/^/host | /'
	$(HOST_NICE) go test -count=1 -timeout 40m -p 1 -exec $(CPUTIME) \
		$$(go list ./test/... | grep -v $(foreach s,$(VM_SUITES) $(WAIT_SUITES),-e '/$(notdir $(s))$$')) 2>&1 | sed -u 's/^/host | /'
	CPUTIME_LABEL="fuzz, printer columns, verify" $(HOST_NICE) $(CPUTIME) bash -c \
		'$(MAKE) --no-print-directory fuzz && hack/check-printer-columns.sh && $(MAKE) --no-print-directory verify' \
		2>&1 | sed -u 's/^/host | /'

.PHONY: test-cluster
test-cluster: deps control-plane cluster-binaries image test-release-dist node-vm-image ## Only test/cluster: a release's install.yaml and image deployed on a kubelet in the node VM.
	go test -count=1 -timeout 40m -v ./test/cluster/

.PHONY: test-release-dist
test-release-dist: ## Cut a release (TEST_RELEASE_VERSION) into bin/release-test for test/release and test/cluster.
	DIST=$(TEST_RELEASE_DIR) hack/release.sh $(TEST_RELEASE_VERSION) >/dev/null

.PHONY: test-release
test-release: test-release-dist ## Only test/release: the release's artifacts, digests, platforms and versions.
	go test -count=1 -v ./test/release/

.PHONY: test-fleet
test-fleet: deps control-plane build ## Only test/fleet: three agents and the cluster side on this machine; placement, drain under load, a lost node, the instance key.
	go test -count=1 -timeout 20m -v ./test/fleet/

.PHONY: test-docs
test-docs: deps control-plane build ## Only test/docs: every sh block of README's quick start and docs/app-developer-guide.md, run against `make run` as a reader would.
	go test -count=1 -timeout 45m -v ./test/docs/

.PHONY: test-node
test-node: deps control-plane build node-vm-image ## Only test/node: the agent with the DaemonSet's flags in the Debian node VM.
	go test -count=1 -timeout 30m -v -run TestNode ./test/node/

# The chaos suite's size; `make test` runs its short form (30 cycles, a
# 10 s outage). CHAOS_SEED=N replays a run (the seed is printed first).
CHAOS_CYCLES ?= 240
CHAOS_OUTAGE ?= 60s

.PHONY: chaos
chaos: deps control-plane build ## Faults against real agents: SIGKILLs over create/swap/suspend/delete cycles, an API outage, an unkillable kill, a full disk, two agents on one node name; prints a report.
	CHAOS_CYCLES=$(CHAOS_CYCLES) CHAOS_OUTAGE=$(CHAOS_OUTAGE) go test -count=1 -timeout 90m -v ./test/chaos/

# The bench's size: N Instances applied in one go (BENCH_ARGS adds flags,
# e.g. -idle 10s -raw=false).
BENCH_N ?= 1000

.PHONY: bench
bench: deps control-plane build ## Whole-system figures: N Instances applied, swapped and deleted; the raw primitives beside them (docs/reports/benchmarks.md).
	go run ./hack/bench -n $(BENCH_N) $(BENCH_ARGS)

.PHONY: fuzz
fuzz: ## Short runs of every fuzz target (seeds are in testdata/fuzz).
	@hack/fuzz.sh $(FUZZTIME)

##@ Node VM (Debian 12, systemd PID 1, cgroup v2)

.PHONY: node-vm-image
node-vm-image: deps ## Build (or reuse) the node VM's disk image in bin/.node-vm (cold: ~3-5 min).
	hack/node-vm.sh image

.PHONY: node-vm
node-vm: node-vm-image ## Boot a node VM in the background and print the ssh command that reaches it.
	hack/node-vm.sh up

.PHONY: node-vm-down
node-vm-down: ## Power off the VM that `make node-vm` booted.
	hack/node-vm.sh down

##@ Run

.PHONY: dev-up
dev-up: deps-run control-plane ## Start a local kube-apiserver + etcd and install the CRDs.
	hack/dev.sh up

.PHONY: dev-down
dev-down: ## Stop what dev-up started and remove its state.
	hack/dev.sh down

# The node make run's agent runs as (this machine's name, as the samples
# assume).
DEV_NODE ?= $(shell hostname)

.PHONY: run
run: dev-up build ## dev-up, the cluster side (relay, nodewatch) in the background, then the agent in the foreground as this node.
	hack/dev.sh cluster
	hack/dev.sh approve $(DEV_NODE)
	$(BIN)/unitlet --kubeconfig $(DEV)/kubeconfig --node-name $(DEV_NODE) \
		--state-root $(DEV)/state --run-root $(DEV)/run --cgroup-root unitlet-dev \
		--unit-backend direct --require-enrollment=true --lease-namespace unitlet-system \
		--health-probe-bind-address 127.0.0.1:10262 --metrics-bind-address 127.0.0.1:10261 --metrics-secure=false \
		--serve-address 127.0.0.1:10260

.PHONY: image
image: ## Build the agent's container image as a tarball, bin/unitlet-image.tar (no container engine needed).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/unitlet-static .
	$(SHIM_BUILD) -o $(BIN)/unitlet-shim-static ./cmd/unitlet-shim
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/unitlet-cluster-static ./cmd/unitlet-cluster
	go run ./hack/image --binary $(BIN)/unitlet-static --shim $(BIN)/unitlet-shim-static --cluster $(BIN)/unitlet-cluster-static --tag $${IMG:-unitlet.dev/unitlet:dev} --out $(BIN)/unitlet-image.tar
	@# The test cluster's sandbox image: no registry is reachable here.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/pause ./hack/pause
	go run ./hack/image --binary $(BIN)/pause --path /pause --tag unitlet.dev/pause:dev --out $(BIN)/pause-image.tar

.PHONY: deploy-render
deploy-render: ## Render config/default (what a cluster would get).
	$(KUSTOMIZE) build config/default

##@ Deployment (the cluster of the current kubeconfig)

ignore-not-found ?= false

.PHONY: install
install: ## Install the CRDs into the cluster.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: ## Uninstall the CRDs from the cluster (ignore-not-found=true to ignore missing ones).
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: build-installer ## Deploy config/default with the agent image IMG (dist/install.yaml) to the cluster.
	$(KUBECTL) apply --server-side -f dist/install.yaml

.PHONY: undeploy
undeploy: ## Remove what deploy applied (ignore-not-found=true to ignore missing objects).
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

##@ Release

.PHONY: build-installer
build-installer: ## Write dist/install.yaml: config/default with the agent image set to IMG.
	@# An overlay outside config/, so the tree is not edited.
	rm -rf $(BIN)/installer && mkdir -p $(BIN)/installer $(dir $(INSTALLER))
	printf 'resources:\n  - ../../config/default\n' >$(BIN)/installer/kustomization.yaml
	cd $(BIN)/installer && $(KUSTOMIZE) edit set image unitlet.dev/unitlet=$(IMG)
	$(KUSTOMIZE) build $(BIN)/installer >$(INSTALLER).tmp && mv $(INSTALLER).tmp $(INSTALLER)
	rm -rf $(BIN)/installer

.PHONY: release
release: ## Write a release into dist/ (VERSION=vX.Y.Z): install.yaml, the agent image archive, the plugin and its krew manifest, SHA256SUMS.
	hack/release.sh $(VERSION)

