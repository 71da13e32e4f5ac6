# sandplane: the two commands that matter are `make run` and `make test`.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BIN       := bin/sandplane
# Static, so the same binary runs on the host and inside a FROM-scratch image.
export CGO_ENABLED ?= 0

.PHONY: all run build test test-go test-deps ts-deps fuzz stress bench generate check-generate lint clean escape

all: build

## build: bin/sandplane, and beside it bin/sandplane-init and bin/sandplane-toolbox, the small init and toolbox that start native sandboxes faster
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/sandplane ./cmd/sandplane-init ./cmd/sandplane-toolbox

## run: the local control plane with its default workload and dashboard on 127.0.0.1:4025
run: build
	./$(BIN) serve $(ARGS)

## test: everything, with the race detector. Never from the test cache: the
## end-to-end tests run a daemon they build themselves, which the cache
## cannot see change.
test: test-deps
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m ./...
	@$(MAKE) --no-print-directory fuzz

## escape: the escape suite alone: a probe inside a sandbox tries every way out, on each runtime the
## machine has (native, native-bwrap, docker), and prints each entry's result per runtime
## (docs/security.md, "The escape suite")
escape:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m -v -run 'TestEscape|TestDocsHoldTheTable|TestProbeTriesEveryProbeEntry' ./escape/...

## fuzz: each fuzz target for FUZZTIME beyond its committed corpus (which
## the test run above already replays); a crasher lands in the package's
## testdata/fuzz, ready to commit with its fix
FUZZTIME ?= 3s
# A run whose only failure is "context deadline exceeded", with no failing
# input written, met a race in Go's fuzz coordinator rather than a bug: when
# -fuzztime ends, it can see its deadline before the workers' context is
# cancelled and report the deadline itself as the failure. Such a run is
# repeated once; any other failure stops make at once.
FUZZRACE = '^    context deadline exceeded$$'
fuzz:
	@set -e; out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	run() { $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1; rc=$$?; cat $$out; return $$rc; }; \
	for f in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort); do \
		pkg=./$$(dirname $$f); \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz: $$pkg $$t for $(FUZZTIME)"; \
			run && continue; \
			grep -q $(FUZZRACE) $$out && ! grep -q 'Failing input written' $$out || exit 1; \
			echo "fuzz: $$t: the coordinator reported its own deadline (no failing input); once more"; \
			run; \
		done; \
	done

# Node packages: the TypeScript client's (its generator, compiler and
# tests), and those of the tests that drive the official TypeScript SDK.
test-deps: ts-deps
	@for d in $$(find . -name node_modules -prune -o -name package-lock.json -path '*testdata*' -print | xargs -r -n1 dirname); do \
		if command -v npm >/dev/null; then (cd $$d && npm ci --no-audit --no-fund --loglevel=error) || exit 1; fi; \
	done

# The TypeScript client's node_modules, from its package-lock.json: npm ci
# again only when the lock changed. Without npm it does nothing, and then
# make generate fails at the client's go:generate, which needs npm.
TS_CLIENT := clients/typescript
ts-deps: $(TS_CLIENT)/node_modules/.package-lock.json
$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package-lock.json
	@if command -v npm >/dev/null; then cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json; fi

## stress: the most timing-dependent tests, -count=3, with every CPU kept busy; prints each failure with its package and test
stress: test-deps
	$(GO) run ./internal/stress $(ARGS)

## bench: each figure beside its baseline measured in the same run, as a ratio
# Lifecycle benchmarks spawn real workloads: a fixed count keeps them short.
# The simulator's are request loops: they run on time (SimWarmPoolCreate, a
# pool-served create beside a cold one, waits out the Daytona profile's). The relay's take a
# fixed number of interleaved samples per path, so one pass is the run. The
# pool's wait out Daytona's latencies (a fixed count), and play a day on a
# fake clock.
bench:
	{ $(GO) test -run '^$$' -bench . -benchtime 20x -timeout 30m ./local/... && \
	  $(GO) test -run '^$$' -bench . -benchtime 1s -timeout 30m ./simulator/... && \
	  $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m ./provider/relay/... && \
	  $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 10m ./toolbox/client/ && \
	  $(GO) test -run '^$$' -bench . -benchtime 2x -timeout 30m ./provider/pool/ ; } | tee /dev/stderr | $(GO) run ./internal/benchreport

## generate: regenerate code from openapi/controlplane.yaml (the TypeScript client's types too, which needs npm)
generate: ts-deps
	$(GO) generate ./...

## check-generate: fail when generated code (or an embedded upstream spec) is stale
check-generate: generate
	@git diff --exit-code -- '*.gen.go' simulator/internal/specs $(TS_CLIENT)/src/generated || (echo "generated code is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- simulator/internal/specs $(TS_CLIENT)/src/generated)" || (echo "generate made files that are not committed: commit them" >&2; exit 1)

## lint: vet and formatting
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:" $$out >&2; exit 1; fi

clean:
	rm -rf bin
