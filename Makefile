# The targets the README names. CI (.ci/run) runs `make test`.

GO ?= go
# Extra flags for `make bench`, e.g. BENCH_FLAGS='--concurrency 64 --batch 100'.
BENCH_FLAGS ?=

.PHONY: build test test-short vet bench soak run

# The release binary in bin/spent: without build paths (-trimpath) and
# without the symbol table and DWARF (-s -w). The commit is stamped for
# `spent version` also where Go records no VCS information (a git worktree).
COMMIT ?= $(shell git describe --always --dirty --abbrev=40 --match 'no-tag' 2>/dev/null)
build:
	$(GO) build -trimpath -ldflags='-s -w -X main.stampedCommit=$(COMMIT)' -o bin/spent ./cmd/spent
	@ls -l bin/spent

# Every package under the race detector; 20 minutes is a generous bound
# for the 2-core CI machine.
test:
	$(GO) test -race -timeout 20m ./...

# The quick lane for a developer: every package with -short (tests that
# honour it run fewer rounds) and without the race detector. 363 s on the
# 2-core machine on 2026-12-03, most of it cmd/spent's process tests and the
# shared stores' suites; `make test` still runs everything.
test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

# Go benchmarks, then the load generator against an embedded store in a
# temporary directory. Record figures in BENCHMARKS.md with the command.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./cmd/spent bench --embedded --duration 10s $(BENCH_FLAGS)

# A 30-minute soak of mixed load on the embedded store: a row of latency,
# RSS, goroutines and records each minute. Tune with SOAK_DURATION,
# SOAK_INTERVAL, SOAK_RATE and the other knobs bench/soak.sh lists.
soak:
	bench/soak.sh

# The server on the embedded store in ./spent-data, on 127.0.0.1:7070.
run:
	$(GO) run ./cmd/spent serve
