# The README's test command is `go test -race ./...`; CI (.ci/run) runs it
# plus `make lint`.
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test race lint bench bench-all fuzz demo capi

build:
	$(GO) build -o bin/pdc ./cmd/pdc

# libpdc.so, its headers, pdc.pc, and the pdc binary with PDC's
# pdc_server.exe and close_server scripts and the C VPIC-IO and BD-CATS
# (pdc_vpicio, pdc_bdcats), in one folder (CAPI_PREFIX).
# Build a C program against it with
#   PKG_CONFIG_PATH=build/capi/lib/pkgconfig cc prog.c $(pkg-config --cflags --libs pdc)
CAPI_PREFIX ?= build/capi
capi:
	PDC_MPI=$(PDC_MPI) GO=$(GO) capi/install.sh $(CAPI_PREFIX)

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	scripts/check-house-rules

# Benchmarks print each figure next to a ceiling measured in the same run.
bench: build
	bin/pdc bench rpc
	bin/pdc bench meta
	bin/pdc bench dtl
	bin/pdc bench io
	bin/pdc bench vpic
	bin/pdc bench search --objects 100000
	bin/pdc bench stage
	bin/pdc bench query
	$(GO) test -run XXX -bench . -benchtime 1x ./internal/bench/

# Every benchmark at reduced sizes, 5 rounds, in one report compared with
# the committed baseline (docs/BENCHMARKS.md). Run it on a quiet machine.
REV = $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)
BENCH_OUT ?= bench-report.json
bench-all:
	$(GO) build -ldflags "-X github.com/pdcgo/pdc/internal/bench.Revision=$(REV)" -o bin/pdc ./cmd/pdc
	bin/pdc bench all --out $(BENCH_OUT)
	bin/pdc bench compare docs/bench/baseline.json $(BENCH_OUT)

# Run every fuzz target for FUZZTIME each (CI runs them for 3s each).
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz

demo:
	$(GO) run ./cmd/pdc demo
