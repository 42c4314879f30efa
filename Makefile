# The project's entry points. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
TOOLS_DIR := hack/tools
export LIQO_BIN_DIR := $(BIN)

# Tests that start real clusters take minutes; keep them under the CI budget.
E2E_TIMEOUT ?= 20m
GO_TEST_FLAGS ?=

CONTROL_PLANE := kube-apiserver kube-controller-manager kube-scheduler
TOOL_BINS := $(addprefix $(BIN)/,$(CONTROL_PLANE) kubectl etcd kwok controller-gen golangci-lint) $(BIN)/kwok-stages.yaml
TOOLS_DEPS := $(TOOLS_DIR)/go.mod $(TOOLS_DIR)/go.sum

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: tools
tools: $(TOOL_BINS) ## Build the pinned tools (control plane, etcd, kwok, controller-gen, golangci-lint) into bin/, only those missing.

$(addprefix $(BIN)/,$(CONTROL_PLANE) kubectl): $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build -o $(BIN)/ k8s.io/kubernetes/cmd/$(notdir $@)

$(BIN)/etcd: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/etcd/main.go
	cd $(TOOLS_DIR) && go build -o $(BIN)/ ./cmd/etcd

$(BIN)/kwok: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build -o $(BIN)/ sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kwok-stages.yaml: $(TOOLS_DEPS) $(TOOLS_DIR)/cmd/kwok-stages/main.go
	cd $(TOOLS_DIR) && go run ./cmd/kwok-stages > $@.tmp && mv $@.tmp $@

$(BIN)/controller-gen: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build -o $(BIN)/ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/golangci-lint: $(TOOLS_DEPS)
	cd $(TOOLS_DIR) && go build -o $(BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: build
build: ## Build liqo-controller-manager and liqoctl into bin/.
	go build -o $(BIN)/ ./cmd/...

##@ Development

.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deepcopy code, CRDs and RBAC from markers.
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(BIN)/controller-gen rbac:roleName=liqo-controller-manager paths=./internal/... output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: $(BIN)/controller-gen ## Fail when generated files are stale, go.mod is untidy or code is unformatted.
	hack/verify-generated.sh
	hack/verify-gofmt.sh

.PHONY: lint
lint: $(BIN)/golangci-lint ## Run golangci-lint with .golangci.yml.
	$(BIN)/golangci-lint run ./...

##@ Test

.PHONY: test-short
test-short: ## Run the unit tests only (no clusters started).
	go test -short -race $(GO_TEST_FLAGS) ./...

.PHONY: system-deps
system-deps: ## Install the Debian packages the tests run (iproute2, dnsmasq-base, bind9) when missing; needs root.
	hack/system-deps.sh

.PHONY: test
test: system-deps tools build verify lint ## Everything CI checks: verify, lint, unit and end-to-end tests, one benchmark pass.
	go test -race -count=1 $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) ./...
	go test -run '^$$' -bench . -benchtime 1x -timeout 20m ./bench/...
	$(MAKE) --no-print-directory fuzz FUZZTIME=15s
	hack/check-no-leftovers.sh

FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every fuzz test for FUZZTIME each (default 1m).
	go test -run '^$$' -fuzz '^FuzzParseTXT$$' -fuzztime $(FUZZTIME) ./internal/discovery/dnssd/
	go test -run '^$$' -fuzz '^FuzzCollect$$' -fuzztime $(FUZZTIME) ./internal/discovery/dnssd/
	go test -run '^$$' -fuzz '^FuzzExchange$$' -fuzztime $(FUZZTIME) ./internal/auth/

.PHONY: bench
bench: tools build ## Run the benchmarks (cluster start time and memory).
	go test -run '^$$' -bench . -benchtime 3x -timeout 20m ./bench/...

##@ Playground

PLAYGROUND_DIR ?= $(CURDIR)/.playground
CLUSTERS ?= 3

.PHONY: demo
demo: tools build ## Start a playground of $(CLUSTERS) clusters and show them; DEMO_DOWN=1 tears it down after.
	$(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR) >/dev/null
	$(BIN)/liqoctl playground up --dir $(PLAYGROUND_DIR) --clusters $(CLUSTERS)
	@if [ -n "$(DEMO_DOWN)" ]; then $(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR); fi

.PHONY: down
down: ## Stop the playground started by `make demo`.
	$(BIN)/liqoctl playground down --dir $(PLAYGROUND_DIR)
