# tidemark: the two commands a new user needs are `make run` and `make test`.
export GOTOOLCHAIN := local
GO ?= go
BIN := bin/connect
EXAMPLES := $(wildcard config/examples/*.yaml)
CONFIGS := $(filter-out %_benthos_test.yaml,$(EXAMPLES))

.PHONY: run test build deps vet fmt-check staticcheck unit lint-configs sim fuzz bench docs clean

build: $(BIN)

$(BIN): go.mod go.sum $(shell find . -name '*.go' -not -path './node_modules/*')
	$(GO) build -o $(BIN) ./cmd/connect

deps:
	./scripts/install-deps

## run: the demo pipeline on embedded defaults (simulated source with faults,
## a local dynalite started and stopped here). Exits 0 when the run is done.
run: build
	./scripts/npm-install
	./scripts/with-dynalite ./scripts/demo $(BIN)

## test: everything (installs what is missing, starts its own servers).
test: deps vet fmt-check staticcheck build
	TIDEMARK_REQUIRE_DYNALITE=1 TIDEMARK_REQUIRE_SERVERS=1 ./scripts/with-dynalite $(GO) test -race -count=1 -timeout 40m ./...
	$(MAKE) lint-configs sim fuzz

vet:
	$(GO) vet ./...

## staticcheck: the pinned copy scripts/install-deps builds into bin/tools.
staticcheck: deps
	bin/tools/staticcheck ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint-configs: build
	$(BIN) lint $(CONFIGS) $(wildcard config/pagination/*.yaml)
	$(BIN) test ./config/examples/...

## sim: the full simulator run (2,000 schedules; under -race above it runs
## 300). Long mode: go test ./internal/sim -run 'TestSim$$' -schedules=100000 -timeout=3h
sim:
	$(GO) test -count=1 -run 'TestSim$$|TestVariantsAreCaught' ./internal/sim/

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzClassify$$' -fuzztime=15s ./internal/witness/

## docs: regenerate the component reference under docs/ (a test fails when
## it is stale). docs/design.md is written by hand and kept.
docs: build
	mkdir -p docs && find docs -mindepth 1 -maxdepth 1 ! -name design.md ! -name pagination.md -exec rm -rf {} +
	$(BIN) tidemark docs --out docs

bench: build
	./scripts/with-dynalite ./scripts/bench

clean:
	rm -rf bin .bench
