# Model gateway: Envoy + Go ext_proc + Go accounting over PostgreSQL.
SHELL := /bin/bash
GO ?= go
TOOLS := $(GO) tool -modfile=$(CURDIR)/tools/go.mod
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gateway?sslmode=disable
export DATABASE_URL

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every binary into bin/ (the vtprotobuf tag: internal/vtcodec)
	$(GO) build -tags vtprotobuf -o bin/ ./accounting/cmd/... ./extproc/cmd/... ./console/cmd/... ./e2e/cmd/...

.PHONY: run
run: build ## Start the whole stack on loopback (Ctrl-C stops it; OIDC=1 adds a local OpenID provider to sign in to the console)
	./bin/localstack$(if $(OIDC), --oidc)

.PHONY: browser
browser: ## Install Debian's chromium for the web console's browser tests, when missing (CHROMIUM names another)
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then \
		echo "==> browser: $${CHROMIUM:-$$(command -v chromium || command -v chromium-browser)} for the console's browser test"; \
	else \
		echo "==> browser: installing Debian's chromium for the console's browser test (apt-get: needs root and the network)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# make test says each step as it starts (a first run compiles for many minutes before a
# test result shows: docs/performance.md#the-test-suite-make-test).
.PHONY: test
test: lint browser ## Lint, then run every test: unit, PostgreSQL-backed, gRPC replay, end-to-end (the web console in headless Chromium), manifests
	@echo "==> tests: every package once, with -tags vtprotobuf (a line per package as it ends; the e2e package takes the longest)"
	$(GO) test -tags vtprotobuf -count=1 -timeout 30m ./...
	@echo "==> manifests: the deploy module (every kustomize overlay, decoded strictly)"
	cd deploy && $(GO) test -count=1 ./...

.PHONY: chaos
chaos: ## The whole fault-injection suite, the 3-minute accounting outage included (make test runs it without that one)
	CHAOS_LONG=1 $(GO) test -tags vtprotobuf -count=1 -timeout 20m -v -run . ./e2e/chaos/

.PHONY: bench
bench: ## Run the benchmarks (figures: docs/performance.md)
	$(GO) test -tags vtprotobuf -run '^$$' -bench . -benchmem -count=1 ./...

.PHONY: loadtest
loadtest: ## Open-loop load through the gateway and straight to the mock (LOADTEST_ARGS: -rates, -duration, -keys, -prompt, -system, -runs, -baseline, -profile, -accounting, -hanging-webhook)
	$(GO) run ./e2e/cmd/loadtest $(LOADTEST_ARGS)

.PHONY: soak
soak: ## 1,000,000 reserve+commit pairs on a fresh database: throughput, table sizes, dead tuples, HOT updates (SOAK_ARGS: -n, -schema, …)
	$(GO) run ./accounting/cmd/ledgersoak $(SOAK_ARGS)

.PHONY: proto
proto: ## Regenerate the gRPC code from proto/
	cd proto && $(TOOLS) buf lint && $(TOOLS) buf generate

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (pinned in tools/go.mod)
	@echo "==> lint: gofmt, go vet and staticcheck (on a cold build cache go vet first compiles every package and its test dependencies)"
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed" >&2; exit 1)
	$(GO) vet -tags vtprotobuf ./...
	cd deploy && $(GO) vet ./...
	$(TOOLS) staticcheck -tags vtprotobuf ./...

.PHONY: verify
verify: ## Generated code up to date, then lint
	$(MAKE) proto
	git diff --exit-code -- proto || (echo "generated code is stale: run make proto and commit" >&2; exit 1)
	$(MAKE) lint

.PHONY: clean
clean: ## Remove build output
	rm -rf bin .run
