# Steward. `make help` lists the targets. Tools and control-plane binaries are built from source
# into the git-ignored _out/ by hack/toolchain.sh, cached by version.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
TOOLCHAIN := hack/toolchain.sh
ENVTEST_ASSETS := $(CURDIR)/_out/envtest
CONTROLLER_GEN = $(CURDIR)/_out/bin/controller-gen
GOLANGCI_LINT = $(CURDIR)/_out/bin/golangci-lint
# Packages of the main module; test/e2e needs a running cluster and has its own target.
UNIT_PKGS = $$(go list ./... | grep -v '/test/e2e$$')

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build controller-gen and golangci-lint (cached).
	$(TOOLCHAIN) tools

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for envtest (cached) into _out/envtest.
	$(TOOLCHAIN) envtest

.PHONY: generate
generate: tools ## Regenerate deepcopy, CRDs and RBAC from the Go markers.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd rbac:roleName=steward-manager-role webhook paths=./api/... paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
		git status --porcelain -- api config; git --no-pager diff --stat -- api config; \
		echo "generated files are stale: run 'make generate' and commit"; exit 1; fi

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet, including the e2e package.
	go vet ./...
	go vet -tags failpoints ./internal/...
	if [ -d test/e2e ]; then go vet -tags e2e,bench ./test/e2e/...; fi

.PHONY: lint
lint: tools ## golangci-lint with .golangci.yml.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	$(GOLANGCI_LINT) run --allow-parallel-runners --build-tags failpoints ./internal/...
	if [ -d test/e2e ]; then $(GOLANGCI_LINT) run --allow-parallel-runners --build-tags e2e,bench ./test/e2e/...; fi

.PHONY: build
build: ## Build the steward and steward-member binaries into _out/bin.
	CGO_ENABLED=0 go build -trimpath -o _out/bin/steward ./cmd/steward
	CGO_ENABLED=0 go build -trimpath -o _out/bin/steward-member ./cmd/steward-member

.PHONY: plugin
plugin: ## Build the kubectl etcd plugin into _out/bin (put it on PATH to use `kubectl etcd`).
	CGO_ENABLED=0 go build -trimpath -o _out/bin/kubectl-etcd ./cmd/kubectl-etcd

.PHONY: versitygw
versitygw: ## Build the S3 server the backup tests store into (cached).
	$(TOOLCHAIN) versitygw

.PHONY: promtool
promtool: ## Build promtool for the alert rules' unit tests (cached).
	$(TOOLCHAIN) promtool

.PHONY: helm
helm: ## Build helm for the chart's tests and the e2e install phase (cached).
	$(TOOLCHAIN) helm

.PHONY: render-install
render-install: envtest ## Render dist/install.yaml and the chart's copies of config/ (after make generate).
	KUBECTL=$(ENVTEST_ASSETS)/kubectl hack/render-install.sh

.PHONY: test
test: envtest versitygw promtool helm ## Unit and envtest integration tests (real kube-apiserver, etcd, S3 server).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -count=1 -timeout 15m $(UNIT_PKGS)
	go test -count=1 -tags failpoints ./internal/failpoint/ # the points only the campaign's build has
	cd hack/perfreport && GOWORK=off go test -count=1 . # the performance page's parser and chart (a module of its own)

.PHONY: run
run: envtest ## Run the operator against a throwaway envtest control plane (see README).
	hack/run-envtest.sh

##@ Local cluster and end to end

-include hack/localkube.mk
