# distcache: `make demo` shows a cache node at work, `make test` runs everything.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
BIN := $(CURDIR)/bin
# Tests never need more than this; a hung test fails loudly instead of stalling CI.
TEST_TIMEOUT ?= 30m
GOTEST_FLAGS ?=

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build the operator and cachenode binaries into bin/.
	$(GO) build -o $(BIN)/cachenode ./cachenode
	$(GO) build -o $(BIN)/manager .

CONTROLLER_GEN := $(BIN)/controller-gen

$(CONTROLLER_GEN): hack/build-controller-gen.sh
	hack/build-controller-gen.sh

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types (api/).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs into config/crd/bases from the API types.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac

.PHONY: fmt vet
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')
vet: ## go vet every package.
	$(GO) vet ./...

##@ Tools and test servers (built from Go modules, cached in bin/)

bin/minio: hack/build-minio.sh
	hack/build-minio.sh

.PHONY: envtest-assets
envtest-assets: ## kube-apiserver + etcd (+ kubectl) for envtest, in bin/k8s/<version>.
	hack/envtest-assets.sh >/dev/null

.PHONY: verify-generated
verify-generated: generate manifests ## Fail if deepcopy, CRDs or RBAC differ from what controller-gen makes of api/.
	@git diff --exit-code -- api config || { echo "generated files are stale: run make generate manifests and commit"; exit 1; }

.PHONY: chdb
chdb: ## ClickHouse's engine (chdb, from PyPI) in a virtualenv at bin/chdb-venv.
	hack/chdb-venv.sh >/dev/null

bin/prometheus: hack/prometheus.sh
	hack/prometheus.sh >/dev/null

.PHONY: prometheus
prometheus: bin/prometheus ## Prometheus and promtool (Debian's package, unpacked, no service) in bin/, for e2e/monitoring.

.PHONY: tools
tools: bin/minio envtest-assets chdb prometheus

##@ Test

.PHONY: test
test: tools verify-generated ## Run the whole suite against real MinIO, TLS and kube-apiserver/etcd.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" MINIO_BIN=$(BIN)/minio \
		$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) ./...

.PHONY: bench
bench: bin/minio build ## Hit throughput vs MinIO direct vs the raw TLS ceiling (docs/benchmarks.md).
	$(BIN)/cachenode bench --minio-bin $(BIN)/minio

.PHONY: bench-go
bench-go: ## Go micro-benchmarks (store tiers, ring lookups).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

##@ Demo

.PHONY: demo
demo: bin/minio build ## MinIO + a cache node on loopback with real mTLS; shows misses, hits and metrics.
	hack/demo.sh

.PHONY: stack stack-down
stack: bin/minio build ## MinIO, 3 cache nodes and 2 gateways on loopback; writes .stack/env (S3_ENDPOINT=... to use another S3).
	S3_ENDPOINT="$(S3_ENDPOINT)" S3_ACCESS_KEY="$(S3_ACCESS_KEY)" S3_SECRET_KEY="$(S3_SECRET_KEY)" hack/stack.sh up
stack-down: ## Stop what make stack started.
	hack/stack.sh down

##@ Help

.PHONY: help
help: ## Show targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
