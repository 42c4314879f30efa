# The project's entry points. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
TOOLS_DIR := hack/tools
export LIQO_BIN_DIR := $(BIN)

# Tests that start real clusters take minutes; keep them under the CI budget.
# A package's bound: the install suite takes 11 minutes alone and passed
# 20 in a CI run where it shared the 2 cores with another suite.
E2E_TIMEOUT ?= 30m
GO_TEST_FLAGS ?=
# The version liqoctl reports, and the tag of the images of this commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION_LDFLAGS := -X github.com/liqo-go/liqo/internal/ctl/version.version=$(VERSION)

CONTROL_PLANE := kube-apiserver kube-controller-manager kube-scheduler
# What a playground runs: the control plane, etcd and kwok.
RUNTIME_BINS := $(addprefix $(BIN)/,$(CONTROL_PLANE) etcd kwok) $(BIN)/kwok-stages.yaml
TOOL_BINS := $(RUNTIME_BINS) $(addprefix $(BIN)/,kubectl controller-gen golangci-lint wireguard-go metrics-server)
TOOLS_DEPS := $(TOOLS_DIR)/go.mod $(TOOLS_DIR)/go.sum
# The module's Go sources: an image of a binary of this module is built
# again when any changed (a stale image would run yesterday's code).
MODULE_SOURCES := go.mod go.sum $(shell find api cmd deployments internal -name '*.go' -o -name '*.yaml' -o -name '*.json')
# Tool binaries carry no symbol table or DWARF: they link faster, and
# nobody debugs them.
TOOLS_LDFLAGS := -ldflags='-s -w'
# Kubernetes binaries report the version of the module they are built
# from, as released ones do (Helm checks a chart's kubeVersion against it;
# without these flags they say v0.0.0-master+$$Format:%H$$).
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' $(TOOLS_DIR)/go.mod)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_LDFLAGS := -ldflags='-s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(K8S_MINOR) -X $(p).gitTreeState=clean)'

# The end-to-end suites start several clusters each; every other package's
# tests run a reconciler against a real API server at most.
E2E_PKGS := ./test/...
# The install suite runs alone, after the others: with its real nodes it
# holds 78 of the machine's 128 inotify instances (fs.inotify.max_user_instances,
# a host sysctl the tests may not raise), and a suite with real nodes
# started beside it saw its kubelets fail ("too many open files"). So do
# the broker's policy suite (six control planes: each API server and
# controller manager holds six instances) and its direct data plane (real
# nodes): beside the policy suite, CI runs saw the direct suite's kubelet
# fail to start cAdvisor, and kwok in the broker suite fail an attach.
# The suites listed here run one at a time, after the others.
E2E_ALONE := github.com/liqo-go/liqo/test/e2e/install github.com/liqo-go/liqo/test/e2e/broker/direct github.com/liqo-go/liqo/test/e2e/broker/policy

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: tools
tools: $(TOOL_BINS) ## Build the pinned tools (control plane, etcd, kwok, controller-gen, golangci-lint, wireguard-go, metrics-server) into bin/, only those missing.

$(addprefix $(BIN)/,$(CONTROL_PLANE) kubectl): $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(K8S_LDFLAGS) -o $(BIN)/ k8s.io/kubernetes/cmd/$(notdir $@)

# A real node of the harness (localcluster's RealNodes): the kubelet and
# kube-proxy from the same Kubernetes module as the control plane, and
# the sandbox ("pause") image, built here since no image can be pulled.
NODE_BINS := $(addprefix $(BIN)/,kubelet kube-proxy pause-image.tar probe-image.tar harness-net)
HOST_ARCH := $(shell go env GOARCH)

.PHONY: node-tools
node-tools: $(NODE_BINS) ## Build what the harness's real nodes run: kubelet, kube-proxy, the pause image and the relay to the host.

$(addprefix $(BIN)/,kubelet kube-proxy): $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(K8S_LDFLAGS) -o $(BIN)/ k8s.io/kubernetes/cmd/$(notdir $@)

$(BIN)/harness-net: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/harness-net/main.go
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $(BIN)/ ./cmd/harness-net

# Small images built here: the sandbox (pause) and the tests' workload.
$(BIN)/%-image.tar: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/%/main.go $(TOOLS_DIR)/cmd/images/main.go
	cd $(TOOLS_DIR) && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w -buildid=' -o $(BIN)/.$*/linux_$(HOST_ARCH)/ ./cmd/$*
	cd $(TOOLS_DIR) && go run ./cmd/images --bin-dir $(BIN)/.$* --out $(BIN)/.$*/images \
	  --platforms linux/$(HOST_ARCH) --repository $(IMAGE_REPOSITORY_$*) --tag $(IMAGE_TAG_$*) --links '$(IMAGE_LINKS_$*)' $*
	mv $(BIN)/.$*/images/$*-linux-$(HOST_ARCH).tar $@ && rm -rf $(BIN)/.$*
IMAGE_LINKS_probe := cat,test,tar
IMAGE_REPOSITORY_pause := registry.k8s.io
IMAGE_TAG_pause := 3.10
IMAGE_REPOSITORY_probe := liqo.test
IMAGE_TAG_probe := v1

$(BIN)/etcd: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/etcd/main.go
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $(BIN)/ ./cmd/etcd

$(BIN)/kwok: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $(BIN)/ sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kwok-stages.yaml: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/kwok-stages/main.go
	cd $(TOOLS_DIR) && go run ./cmd/kwok-stages > $@.tmp && mv $@.tmp $@

# The reference the network benchmark measures the gateway against:
# wireguard-go's own program, from the version the gateway links.
$(BIN)/wireguard-go: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $@ golang.zx2c4.com/wireguard

$(BIN)/controller-gen: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $(BIN)/ sigs.k8s.io/controller-tools/cmd/controller-gen

# metrics-server, which the end-to-end suites run beside a cluster's
# control plane (localcluster StartMetricsServer) for kubectl top.
# Static, for its image too.
$(BIN)/metrics-server: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && CGO_ENABLED=0 go build $(TOOLS_LDFLAGS) -o $(BIN)/ sigs.k8s.io/metrics-server/cmd/metrics-server

# Its image, for the real nodes of the install suite, where it runs as a
# Deployment as operators run it: named as upstream names it.
METRICS_SERVER_VERSION := $(shell awk '$$1 == "sigs.k8s.io/metrics-server" { print $$2; exit }' $(TOOLS_DIR)/go.mod)
$(BIN)/metrics-server-image.tar: $(BIN)/metrics-server $(TOOLS_DIR)/cmd/images/main.go
	mkdir -p $(BIN)/.metrics-server/linux_$(HOST_ARCH) && cp $(BIN)/metrics-server $(BIN)/.metrics-server/linux_$(HOST_ARCH)/
	cd $(TOOLS_DIR) && go run ./cmd/images --bin-dir $(BIN)/.metrics-server --out $(BIN)/.metrics-server/images \
	  --platforms linux/$(HOST_ARCH) --repository registry.k8s.io/metrics-server --tag $(METRICS_SERVER_VERSION) metrics-server
	mv $(BIN)/.metrics-server/images/metrics-server-linux-$(HOST_ARCH).tar $@ && rm -rf $(BIN)/.metrics-server

$(BIN)/golangci-lint: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build $(TOOLS_LDFLAGS) -o $(BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: build
build: ## Build liqo-controller-manager, liqo-gateway, liqo-broker and liqoctl into bin/
	go build -ldflags '$(VERSION_LDFLAGS)' -o $(BIN)/ ./cmd/...

# The binaries that run in a cluster, as images (`make images`).
IMAGES ?= liqo-controller-manager liqo-gateway liqo-broker
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_REPOSITORY ?= ghcr.io/liqo-go
IMAGE_TAG ?= $(VERSION)
OUTPUT := $(CURDIR)/_output
# Static, reproducible binaries: no cgo, no build paths, no build ID.
IMAGE_GOFLAGS := -trimpath -ldflags='-s -w -buildid= $(VERSION_LDFLAGS)'

.PHONY: images
images: ## Build OCI images of $(IMAGES) for $(IMAGE_PLATFORMS) into _output/images (layout + tarballs), without Docker.
	for p in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
	  for i in $(IMAGES); do \
	    CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build $(IMAGE_GOFLAGS) -o $(OUTPUT)/bin/$${p%/*}_$${p#*/}/ ./cmd/$$i || exit 1; \
	  done; \
	done
	cd $(TOOLS_DIR) && go run ./cmd/images --bin-dir $(OUTPUT)/bin --out $(OUTPUT)/images \
	  --platforms $(IMAGE_PLATFORMS) --repository $(IMAGE_REPOSITORY) --tag $(IMAGE_TAG) \
	  --epoch $$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	  --labels org.opencontainers.image.source=https://github.com/liqo-go/liqo,org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null),org.opencontainers.image.version=$(IMAGE_TAG) \
	  $(IMAGES)

comma := ,

# The gateway's image for a playground with a network (`make demo` as
# root), for this machine only, tagged as internal/playground expects.
# Always rebuilt: go build and the image writer skip what did not change.
.PHONY: $(BIN)/liqo-gateway-image.tar
$(BIN)/liqo-gateway-image.tar: $(TOOLS_DEPS) $(MODULE_SOURCES)
	CGO_ENABLED=0 go build $(IMAGE_GOFLAGS) -o $(BIN)/.liqo-gateway/linux_$(HOST_ARCH)/ ./cmd/liqo-gateway
	cd $(TOOLS_DIR) && go run ./cmd/images --bin-dir $(BIN)/.liqo-gateway --out $(BIN)/.liqo-gateway/images \
	  --platforms linux/$(HOST_ARCH) --repository ghcr.io/liqo-go --tag playground liqo-gateway
	mv $(BIN)/.liqo-gateway/images/liqo-gateway-linux-$(HOST_ARCH).tar $@ && rm -rf $(BIN)/.liqo-gateway

##@ Development

.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deepcopy code, CRDs and RBAC from markers, and the ShadowPod admission policies from the pod ones.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=deployments/liqo/files/crds
	$(BIN)/controller-gen rbac:roleName=liqo-controller-manager paths=./internal/... output:rbac:artifacts:config=deployments/liqo/files/rbac
	go run ./hack/shadowpolicies

.PHONY: verify
verify: $(BIN)/controller-gen ## Fail when generated files are stale, code is unformatted or a package imports one above its layer.
	hack/verify-generated.sh
	hack/verify-gofmt.sh
	go run ./hack/layers

.PHONY: lint
lint: $(BIN)/golangci-lint ## Run golangci-lint with .golangci.yml.
	$(BIN)/golangci-lint run ./...

##@ Test

.PHONY: test-short
test-short: ## Run the unit tests only (no API server, no cluster started).
	go test -short -race $(GO_TEST_FLAGS) ./...
	cd $(TOOLS_DIR) && go test -short $(GO_TEST_FLAGS) ./cmd/...

.PHONY: test-controllers
test-controllers: $(RUNTIME_BINS) $(NODE_BINS) ## Run every test outside the end-to-end suites: unit tests and reconcilers against real API servers.
	go test -race -count=1 $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/test/')
	cd $(TOOLS_DIR) && go test -count=1 $(GO_TEST_FLAGS) ./cmd/...

.PHONY: test-e2e
# Without the race detector: what an end-to-end suite tests runs in
# processes of their own (the controller managers, the gateways, the
# virtual kubelets they run), built without it; in the suites' own
# process it checks mostly the harness, for 45% more CPU on suites bound
# by two cores (docs/decisions.md). The race detector runs where our
# code runs in the test's process: test-short and test-controllers.
test-e2e: $(RUNTIME_BINS) $(NODE_BINS) $(BIN)/kubectl $(BIN)/metrics-server $(BIN)/metrics-server-image.tar build ## Run the end-to-end suites (several clusters each, in random order).
	@pkgs=$$(go list $(E2E_PKGS)) || exit 1; \
	rest=$$(printf '%s\n' $$pkgs | grep -v -x -F $(addprefix -e ,$(E2E_ALONE)) || true); \
	alone=$$(printf '%s\n' $$pkgs | grep -x -F $(addprefix -e ,$(E2E_ALONE)) || true); \
	if [ -n "$$rest" ]; then \
	  echo go test -count=1 -shuffle=on $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) $$rest; \
	  go test -count=1 -shuffle=on $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) $$rest || exit $$?; \
	fi; \
	if [ -n "$$alone" ]; then \
	  echo go test -count=1 -shuffle=on -p 1 $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) $$alone; \
	  go test -count=1 -shuffle=on -p 1 $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) $$alone; \
	fi

##@ Conformance

CONFORMANCE_DIR := hack/conformance
CONFORMANCE_DEPS := $(CONFORMANCE_DIR)/go.mod $(CONFORMANCE_DIR)/go.sum

.PHONY: conformance-suite
conformance-suite: $(BIN)/e2e.test $(BIN)/ginkgo $(BIN)/conformance-images.tar ## Build what make conformance runs: bin/e2e.test (upstream's suite at the control plane's version, every test namespace offloaded), ginkgo, and the suite's images.

$(BIN)/e2e.test: $(CONFORMANCE_DEPS) $(CONFORMANCE_DIR)/e2e_test.go
	cd $(CONFORMANCE_DIR) && go test -c -o $(BIN)/e2e.test .

$(BIN)/ginkgo: $(CONFORMANCE_DEPS)
	cd $(CONFORMANCE_DIR) && go build -o $(BIN)/ github.com/onsi/ginkgo/v2/ginkgo

# The images the suite runs, under the names it gives them: agnhost from
# its Go package, busybox from Debian's busybox-static (see images/main.go);
# and CoreDNS (./coredns), the playground's cluster DNS.
$(BIN)/conformance-images.tar: $(CONFORMANCE_DEPS) $(CONFORMANCE_DIR)/images/main.go $(CONFORMANCE_DIR)/coredns/main.go
	cd $(CONFORMANCE_DIR) && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(BIN)/.conformance/agnhost k8s.io/kubernetes/test/images/agnhost
	cd $(CONFORMANCE_DIR) && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o $(BIN)/.conformance/coredns ./coredns
	cd $(CONFORMANCE_DIR) && go run ./images --agnhost $(BIN)/.conformance/agnhost --coredns $(BIN)/.conformance/coredns --out $@
	rm -rf $(BIN)/.conformance

# MAPPING: the test namespaces' namespaceMappingStrategy (DefaultName or
# EnforceSameName); PROCS: the suite's parallel processes; BROKER=1: the
# test namespaces go to a broker, which offloads them to the provider;
# POD_RANGES=distinct: each cluster a pod range of its own (nothing remapped);
# DNS_PROXY=0: without Liqo's DNS proxy (consumer namespace names unresolved
# under DefaultName).
MAPPING ?= DefaultName
PROCS ?= 4
BROKER ?=
POD_RANGES ?= shared
DNS_PROXY ?= 1

.PHONY: conformance
conformance: system-deps $(RUNTIME_BINS) $(NODE_BINS) build $(BIN)/kubectl $(BIN)/liqo-gateway-image.tar conformance-suite ## Run upstream conformance (hack/conformance/focus.txt) on offloaded pods, in a playground with real nodes (root); JUnit and a table in _output/conformance.
	MAPPING=$(MAPPING) PROCS=$(PROCS) BROKER=$(BROKER) POD_RANGES=$(POD_RANGES) DNS_PROXY=$(DNS_PROXY) BIN=$(BIN) OUT=$(OUTPUT)/conformance $(CONFORMANCE_DIR)/run.sh

# The fast subset of the list (hack/conformance/smoke.txt), one spec for
# each part of what offloading carries, so that a regression fails CI.
.PHONY: test-conformance
test-conformance: system-deps $(RUNTIME_BINS) $(NODE_BINS) build $(BIN)/kubectl $(BIN)/liqo-gateway-image.tar conformance-suite ## Run the fast subset of upstream conformance (hack/conformance/smoke.txt) on offloaded pods (root); a failure fails.
	MAPPING=$(MAPPING) PROCS=$(PROCS) BIN=$(BIN) OUT=$(OUTPUT)/conformance-smoke FOCUS=$(CURDIR)/$(CONFORMANCE_DIR)/smoke.txt TIMEOUT=15m $(CONFORMANCE_DIR)/run.sh

.PHONY: system-deps
system-deps: ## Install the Debian packages the tests run (iproute2, dnsmasq-base, bind9, containerd, runc, CNI plugins, nftables, wireguard-tools, iperf3, busybox-static, bind9-dnsutils, curl, netcat-openbsd, chromium, avahi-daemon, avahi-utils, nodejs, npm) when missing; needs root.
	hack/system-deps.sh

.PHONY: test
test: system-deps tools build verify lint ## Everything CI checks: verify, lint, unit, controller and end-to-end tests, conformance's fast subset, one benchmark pass.
	# What a run killed outright left (its namespaces, cgroups) is removed
	# first, so the check at the end judges this run alone.
	hack/remove-stale.sh
	$(MAKE) --no-print-directory test-controllers
	# Upstream's conformance suite (about 25 minutes of CPU, cold) builds
	# while the end-to-end suites run, at the lowest priority: they leave
	# about a core idle (waiting out grace periods, failovers, timeouts;
	# measured 49% of the machine idle in the serial ones), which the build
	# takes and nothing else loses; test-conformance then finds it built.
	@mkdir -p $(OUTPUT); echo "building the conformance suite meanwhile (log: $(OUTPUT)/conformance-suite.log)"; \
	nice -n 19 $(MAKE) --no-print-directory conformance-suite > $(OUTPUT)/conformance-suite.log 2>&1 & build=$$!; \
	$(MAKE) --no-print-directory test-e2e; rc=$$?; \
	if ! wait $$build; then echo "building the conformance suite failed:"; tail -n 40 $(OUTPUT)/conformance-suite.log; [ $$rc -ne 0 ] || rc=1; fi; \
	exit $$rc
	$(MAKE) --no-print-directory test-conformance
	# One pass of every benchmark; the broker's and offloading's at 100
	# pods at most (make bench runs their 1000), one failover of the
	# broker's (make bench runs 5) and one round of each network path's
	# (make bench runs 3 or 5), to keep make test's time.
	LIQO_BENCH_BROKER_PODS=100 LIQO_BENCH_OFFLOADING_PODS=1,100 LIQO_BENCH_FAILOVER_RUNS=1 LIQO_BENCH_NET_ROUNDS=1 go test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/...
	$(MAKE) --no-print-directory fuzz FUZZTIME=15s
	hack/check-no-leftovers.sh

FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every fuzz test of the module (found in the sources) for FUZZTIME each (default 1m).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: bench
bench: $(RUNTIME_BINS) $(BIN)/wireguard-go build ## Run the benchmarks (clusters, discovery, peering, offloading, the network fabric).
	go test -run '^$$' -bench . -benchtime 3x -timeout 60m ./bench/...

##@ Playground

PLAYGROUND_DIR ?= $(CURDIR)/.playground
CLUSTERS ?= 3

# As root, the playground has a network: a real node per cluster and the
# gateways' tunnels between their pod networks, which needs the Debian
# packages, the node's binaries and the gateway's image. Otherwise
# liqoctl says why the network is off and runs without it.
DEMO_NETWORK_DEPS := $(if $(filter 0,$(shell id -u)),system-deps $(NODE_BINS) $(BIN)/liqo-gateway-image.tar)

.PHONY: demo
demo: $(RUNTIME_BINS) build $(DEMO_NETWORK_DEPS) ## Start a playground of $(CLUSTERS) clusters and show them (with a network as root); DEMO_DOWN=1 tears it down after.
	$(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR) >/dev/null
	$(BIN)/liqoctl playground up --dir $(PLAYGROUND_DIR) --clusters $(CLUSTERS) --network
	@if [ -n "$(DEMO_DOWN)" ]; then $(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR); fi

# The broker's mode beside its catalog: orchestrator or aggregator.
MODE ?= orchestrator

.PHONY: demo-broker
demo-broker: $(RUNTIME_BINS) build $(DEMO_NETWORK_DEPS) ## Start a playground of $(CLUSTERS) clusters and a broker, and show the catalog and the orchestrator (MODE=aggregator: the aggregator), with a network as root the data plane (direct, or through the broker); DEMO_DOWN=1 tears it down after.
	$(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR) >/dev/null
	$(BIN)/liqoctl playground up --dir $(PLAYGROUND_DIR) --clusters $(CLUSTERS) --broker=catalog,$(MODE) --network
	@if [ -n "$(DEMO_DOWN)" ]; then $(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR); fi

.PHONY: down
down: ## Stop the playground started by `make demo`.
	$(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR)
