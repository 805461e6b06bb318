# distcache: `make demo` runs the operator, a cache and ClickHouse on a local Kubernetes cluster; `make test` runs everything.
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

# The version stamped into both binaries (hack/version-ldflags.sh): the
# nearest tag or the commit unless VERSION=x.y.z is given.
VERSION ?=
LDFLAGS = $(shell VERSION=$(VERSION) hack/version-ldflags.sh)

.PHONY: build
build: ## Build the operator and cachenode binaries into bin/, with the version stamped (VERSION=x.y.z).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/cachenode ./cachenode
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/manager .

# The kubectl plugin (docs/kubectl-plugin.md). plugin-dist is the release's
# part: tarballs per platform, their sums and the krew manifest in dist/.
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: plugin plugin-dist
plugin: ## Build the kubectl plugin into bin/kubectl-distcache (bin/ on PATH: kubectl distcache ...).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-distcache ./cmd/kubectl-distcache
plugin-dist: ## Cross-build the kubectl plugin into dist/ (PLUGIN_PLATFORMS, VERSION=x.y.z): tarballs, checksums, krew manifest.
	VERSION="$(VERSION)" PLATFORMS="$(PLUGIN_PLATFORMS)" GO="$(GO)" hack/plugin-dist.sh

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
vet: ## go vet and staticcheck (staticcheck.conf) every package.
	$(GO) vet ./...
	hack/build-go-tool.sh staticcheck
	$(BIN)/staticcheck ./...

##@ Tools and test servers (built from Go modules, cached in bin/)

bin/minio: hack/build-minio.sh
	hack/build-minio.sh

.PHONY: envtest-assets
envtest-assets: ## kube-apiserver + etcd (+ kubectl) for envtest, in bin/k8s/<version>.
	hack/envtest-assets.sh >/dev/null

.PHONY: verify-generated api-docs
api-docs: ## Write docs/api-reference.md from the API types (crd-ref-docs).
	hack/build-go-tool.sh crd-ref-docs
	$(BIN)/crd-ref-docs --source-path=./api --config=hack/api-docs/config.yaml --renderer=markdown \
		--output-path=docs/api-reference.md --log-level=ERROR

verify-generated: generate manifests api-docs ## Fail if deepcopy, CRDs, RBAC or the API reference differ from what api/ makes.
	@git diff --exit-code -- api config docs/api-reference.md || { echo "generated files are stale: run make generate manifests api-docs and commit"; exit 1; }

.PHONY: helm-chart verify-helm-chart
helm-chart: $(KUBECTL) ## Write charts/distcache's templates and values from config/default (kubebuilder's helm plugin).
	KUBECTL="$(KUBECTL)" hack/helm-chart.sh
verify-helm-chart: helm-chart ## Fail if the chart differs from what config/default makes of it, or helm lint fails.
	@git diff --exit-code -- charts || { echo "charts/distcache is stale: run make helm-chart and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- charts)" || { git status --short -- charts; echo "charts/distcache has files make helm-chart did not write or would remove"; exit 1; }
	hack/build-go-tool.sh helm
	$(BIN)/helm lint --strict charts/distcache

.PHONY: chdb
chdb: ## ClickHouse's engine (chdb, from PyPI) in a virtualenv at bin/chdb-venv.
	hack/chdb-venv.sh >/dev/null

.PHONY: boto3
boto3: ## boto3 (the AWS SDK for Python, from PyPI) in a virtualenv at bin/boto3-venv, for e2e/gateway.
	hack/boto3-venv.sh >/dev/null

bin/prometheus: hack/prometheus.sh
	hack/prometheus.sh >/dev/null

.PHONY: prometheus
prometheus: bin/prometheus ## Prometheus and promtool (Debian's package, unpacked, no service) in bin/, for e2e/monitoring.

bin/nginx: hack/nginx.sh
	hack/nginx.sh >/dev/null

.PHONY: nginx
nginx: bin/nginx ## nginx (Debian's package, unpacked, no service) in bin/, the proxy_cache column of bench b1.

.PHONY: tools
tools: bin/minio envtest-assets chdb boto3 prometheus nginx cluster-build

##@ Test

.PHONY: test
test: tools verify-generated verify-helm-chart ## Run the whole suite against real MinIO, TLS and kube-apiserver/etcd.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	GO="$(GO)" hack/check-test-deps.sh
	$(MAKE) vet
	KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" MINIO_BIN=$(BIN)/minio \
		$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) ./...

# Parts of make bench: micro (Go benchmarks), b1 (hit path), b2 (ClickHouse
# table), b3 (scale-out), b4 (hit ratio), b5 (write-through). The chosen
# parts' chapters of docs/benchmarks.md and their plots in docs/img/ are
# rewritten.
BENCH_PARTS ?=

.PHONY: bench
bench: bin/minio bin/nginx chdb build ## Every benchmark side by side in one run; writes docs/benchmarks.md and docs/img/ (BENCH_PARTS=b1,b2 for some).
	$(GO) run ./tools/benchmark $(if $(BENCH_PARTS),-parts $(BENCH_PARTS))

.PHONY: bench-go
bench-go: ## Go micro-benchmarks only, printed (store tiers, node hit path, client, ring, SigV4).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

##@ Reliability (docs/reliability.md)

FUZZTIME ?= 30s
SOAK_DURATION ?= 30m

.PHONY: fuzz soak
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s); a crasher is left in testdata/fuzz.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh
# The long forms: the soak (figures and plots into docs/img/soak*), then 30
# kill -9 cycles of the process-fault suite.
soak: bin/minio ## Mixed gateway load against a tiny cache for SOAK_DURATION, then the fault suites' long forms.
	DISTCACHE_SOAK_DURATION=$(SOAK_DURATION) DISTCACHE_SOAK_OUT=$(CURDIR)/docs/img MINIO_BIN=$(BIN)/minio \
		$(GO) test -count=1 -v -timeout 2h -run '^TestSoak$$' ./e2e/soak/
	DISTCACHE_PROCESS_FAULT_CYCLES=30 MINIO_BIN=$(BIN)/minio $(GO) test -count=1 -timeout 60m ./e2e/processfaults/

##@ Demo

.PHONY: demo demo-down demo-local
demo: ## Local cluster, operator, cache, tenant, gateway; ClickHouse (chdb) queries S3 vs distcache. Needs root.
	hack/demo.sh
demo-down: ## Remove what make demo left running: the whole local cluster, its S3 latency link and Prometheus.
	hack/demo.sh down
demo-local: bin/minio build ## No Kubernetes: MinIO + one cache node on loopback with mTLS; misses, hits, metrics.
	hack/demo/local.sh

.PHONY: stack stack-down
stack: bin/minio build ## MinIO, 3 cache nodes and 2 gateways on loopback; writes .stack/env (S3_ENDPOINT=... to use another S3; WRITE_MODE=write-back or transient for tenant A's bucket).
	S3_ENDPOINT="$(S3_ENDPOINT)" S3_ACCESS_KEY="$(S3_ACCESS_KEY)" S3_SECRET_KEY="$(S3_SECRET_KEY)" WRITE_MODE="$(WRITE_MODE)" hack/stack.sh up
stack-down: ## Stop what make stack started.
	hack/stack.sh down

##@ Local cluster (a real single-node Kubernetes on this machine, as root; docs/development.md)

.PHONY: cluster-up cluster-down images cluster-build
cluster-up: ## Build what it needs and bring the cluster up (idempotent); prints export KUBECONFIG=...
	@hack/cluster.sh up >/dev/null
cluster-down: ## Tear the cluster down and leave the machine as found.
	hack/cluster.sh down
images: ## Rebuild the distcache.local/*:dev images with ko (bin/images/) and import them into the running cluster.
	hack/cluster.sh images
# As root only (it installs Debian packages); e2e/cluster skips without root.
cluster-build: ## Install and build what the local cluster needs (packages, Kubernetes, etcd, CoreDNS, image tarballs).
	@if [ "$$(id -u)" = 0 ]; then hack/cluster.sh build; else echo "cluster-build: not root, skipping (e2e/cluster will skip too)"; fi

##@ Deploy (to the cluster of the current kubeconfig; docs/operator.md)

KUBECTL := $(BIN)/kubectl
# The operator image, and the cachenode image of caches without spec.image.
IMG ?= ghcr.io/distcache/operator:latest
CACHENODE_IMG ?= ghcr.io/distcache/cachenode:latest
# IGNORE_NOT_FOUND=true: uninstall and undeploy skip what is already gone.
IGNORE_NOT_FOUND ?= false
# Extra flags for make run, e.g. RUN_ARGS="--metrics-bind-address=:9080".
RUN_ARGS ?=
# Server-side: the DistributedCache CRD is too big for client-side apply's
# last-applied annotation. make deploy is authoritative over what it sets.
KUBECTL_APPLY := $(KUBECTL) apply --server-side --force-conflicts
DEPLOY_MANIFESTS := IMG="$(IMG)" CACHENODE_IMG="$(CACHENODE_IMG)" KUBECTL="$(KUBECTL)" hack/deploy-manifests.sh

# Quiet, and to stderr: make deploy-manifests > file gets YAML only.
$(KUBECTL): hack/build-kube.sh
	@KUBE_BINARIES=kubectl hack/build-kube.sh >&2

.PHONY: install uninstall
install: $(KUBECTL) ## Install the CRDs (config/crd).
	$(KUBECTL_APPLY) -k config/crd
uninstall: $(KUBECTL) ## Delete the CRDs, and with them every DistributedCache and CacheTenant.
	$(KUBECTL) delete --ignore-not-found=$(IGNORE_NOT_FOUND) -k config/crd

.PHONY: deploy undeploy deploy-manifests
deploy: $(KUBECTL) ## Install CRDs, RBAC and the operator in distcache-system (IMG=..., CACHENODE_IMG=...).
	$(DEPLOY_MANIFESTS) | $(KUBECTL_APPLY) -f -
undeploy: $(KUBECTL) ## Delete what make deploy installed, the CRDs (so every cache and tenant) included.
	$(DEPLOY_MANIFESTS) | $(KUBECTL) delete --ignore-not-found=$(IGNORE_NOT_FOUND) -f -
deploy-manifests: $(KUBECTL) ## Print what make deploy applies (IMG=..., CACHENODE_IMG=...).
	@$(DEPLOY_MANIFESTS)

.PHONY: run
run: ## Run the operator from source against the cluster (after make install); CACHENODE_IMG for its caches.
	$(GO) run -ldflags "$(LDFLAGS)" . --cachenode-image="$(CACHENODE_IMG)" --metrics-secure=false --metrics-bind-address=:8080 $(RUN_ARGS)

##@ Release (docs/install.md)

# Where the release's images live: the manifest and the chart name
# $(IMAGE_REPO)/{operator,cachenode}:vVERSION. KO_DOCKER_REPO=registry/path
# pushes them there (and replaces IMAGE_REPO).
IMAGE_REPO ?= ghcr.io/distcache

.PHONY: release
release: $(KUBECTL) ## dist/: install manifest, Helm chart, images (OCI archives, SBOMs), kubectl plugin; VERSION=x.y.z required.
	@test -n "$(VERSION)" || { echo "make release needs VERSION=x.y.z"; exit 1; }
	VERSION="$(VERSION)" IMAGE_REPO="$(IMAGE_REPO)" KUBECTL="$(KUBECTL)" hack/release.sh
	@if $(MAKE) -n plugin-dist >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory plugin-dist VERSION="$(VERSION)"; \
	else echo "release: no plugin-dist target, no kubectl plugin binaries"; fi

##@ Help

.PHONY: help
help: ## Show targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
