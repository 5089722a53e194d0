# `make` builds the tool and the plugins; `make demo` and `make test` are
# README's two commands; `make proto` regenerates the plugin contracts.

GO ?= go
BIN := bin
PLUGINS := $(BIN)/plugins/driver-cpu $(BIN)/plugins/sched-ws $(BIN)/plugins/driver-opencl $(BIN)/plugins/driver-cuda $(BIN)/plugins/sched-dmda $(BIN)/plugins/sched-eager $(BIN)/plugins/iface-csr $(BIN)/plugins/iface-coo $(BIN)/plugins/iface-bcsr $(BIN)/plugins/sched-prio $(BIN)/plugins/sched-random $(BIN)/plugins/sched-lws $(BIN)/plugins/sched-heteroprio
# Packages whose tests run under the race detector: the runtime and the
# contracts. The plugins' and tools' tests run without it (cgo BLAS under
# -race is slow and has no shared state to check).
RACE_PKGS := ./core/... ./pluginapi/... ./plugins/sched-ws/... ./plugins/sched-dmda/... ./plugins/sched-prio/... ./plugins/sched-random/... ./plugins/sched-lws/... ./plugins/sched-heteroprio/...
PLAIN_PKGS := ./plugins/driver-cpu/... ./plugins/driver-opencl/... ./plugins/driver-cuda/... ./plugins/iface-csr/... ./plugins/iface-coo/... ./plugins/iface-bcsr/... ./plugins/internal/... ./cmd/... ./examples/... ./internal/guide/...

.PHONY: all build demo test setup bench lint install uninstall faults
all: build

build:
	$(GO) build -o $(BIN)/starpu ./cmd/starpu
	$(GO) build -o $(BIN)/plugins/driver-cpu ./plugins/driver-cpu
	$(GO) build -o $(BIN)/plugins/sched-ws ./plugins/sched-ws
	$(GO) build -o $(BIN)/plugins/driver-opencl ./plugins/driver-opencl
	$(GO) build -o $(BIN)/plugins/driver-cuda ./plugins/driver-cuda
	$(GO) build -o $(BIN)/plugins/sched-dmda ./plugins/sched-dmda
	$(GO) build -o $(BIN)/plugins/sched-eager ./examples/sched-eager
	$(GO) build -o $(BIN)/plugins/iface-csr ./plugins/iface-csr
	$(GO) build -o $(BIN)/plugins/iface-coo ./plugins/iface-coo
	$(GO) build -o $(BIN)/plugins/iface-bcsr ./plugins/iface-bcsr
	$(GO) build -o $(BIN)/plugins/sched-prio ./plugins/sched-prio
	$(GO) build -o $(BIN)/plugins/sched-random ./plugins/sched-random
	$(GO) build -o $(BIN)/plugins/sched-lws ./plugins/sched-lws
	$(GO) build -o $(BIN)/plugins/sched-heteroprio ./plugins/sched-heteroprio
	@# The loader refuses group- or world-writable plugins (umask 002 makes them so).
	chmod go-w $(BIN)/plugins $(BIN)/plugins/*

# `make install PREFIX=DIR` puts the tool in DIR/bin and the plugins in
# DIR/lib/starpu/plugins, where programs look for them with no variable set
# (config.DefaultPluginPath): PREFIX=~/.local for one user, the default
# /usr/local for the machine, or any prefix whose bin/ is on PATH.
# Directories are made 0755 and binaries 0755 whatever the umask: the
# loader refuses plugins others could write.
PREFIX ?= /usr/local
install: build
	umask 022; install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/starpu/plugins
	install -m 0755 $(BIN)/starpu $(DESTDIR)$(PREFIX)/bin/starpu
	install -m 0755 $(PLUGINS) $(DESTDIR)$(PREFIX)/lib/starpu/plugins/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/starpu $(addprefix $(DESTDIR)$(PREFIX)/lib/starpu/plugins/,$(notdir $(PLUGINS)))
	-rmdir $(DESTDIR)$(PREFIX)/lib/starpu/plugins $(DESTDIR)$(PREFIX)/lib/starpu 2>/dev/null

setup:
	bash scripts/setup.sh

demo: setup build
	$(BIN)/starpu machine
	$(BIN)/starpu run cholesky --precision single --size 4096 --nblocks 16

test: setup build lint
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 20m $(PLAIN_PKGS)
	$(MAKE) fuzz FUZZTIME=5000x

# The lint gate: gofmt, go vet, staticcheck (its checks in staticcheck.conf; the
# pinned version is fetched from the module proxy) and the repository's own
# checks in internal/lint.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out=$$("$$($(GO) env GOROOT)/bin/gofmt" -l .) || exit 1; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -count=1 ./internal/lint

# Fuzzing: each target runs FUZZTIME (go test fuzzes one target at a time).
# Their seed corpora (and testdata/fuzz/) also run as ordinary tests in
# `make test`. A crash leaves its input in the package's testdata/fuzz/.
# `make test` gives a count, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report its own deadline as a failure when a worker is
# mid-input at the end (golang/go#75804, fixed in Go 1.27); a count sets no
# deadline to race.
FUZZTIME ?= 10s
FUZZ_TARGETS := \
	./pluginapi/wire:FuzzDecode \
	./pluginapi/wire:FuzzRoundTrip \
	./core/config:FuzzParse \
	./core/config:FuzzApplyEnv \
	./core/config:FuzzParseSize \
	./cmd/starpu:FuzzReadMTX \
	./plugins/iface-csr/csriface:FuzzCSR \
	./plugins/iface-bcsr/bcsriface:FuzzBCSR \
	./pluginapi/base:FuzzPluginInfoReply \
	./pluginapi/base:FuzzConfigSchemaReply \
	./pluginapi/driver:FuzzFingerprintReply \
	./pluginapi/driver:FuzzLoadKernelReply \
	./pluginapi/iface:FuzzDescribeReply \
	./pluginapi/iface:FuzzCopyPlanReply \
	./pluginapi/iface:FuzzPackReply \
	./pluginapi/iface:FuzzPartitionReply \
	./pluginapi/kernel:FuzzUnpack

.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name in $$pkg, $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

# The fault campaign, longer than the one `make test` runs (cmd/starpu's
# TestFaultCampaign): FAULT_RUNS runs from FAULT_SEED, every policy, plugins
# killed and stopped mid-run; it fails on a wrong result, an unclear error
# or a hang, and ends with the counts.
FAULT_RUNS ?= 200
FAULT_SEED ?= 1
faults: build
	$(BIN)/starpu bench faults --runs $(FAULT_RUNS) --seed $(FAULT_SEED) --plugin-dir $(BIN)/plugins

# Side-by-side figures with StarPU 1.3 from Debian (installs it if missing).
bench: build
	bash scripts/setup.sh --peers
	bash scripts/bench-vs-starpu.sh

#
# Tools: protoc (/usr/bin/protoc, Debian/Ubuntu package protobuf-compiler) and
# the two Go code generators, installed into $(go env GOPATH)/bin with (one
# module each, so two commands):
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@latest
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest

PROTOC ?= protoc
PROTOC_GEN := $(shell go env GOPATH)/bin

# Every plugin contract proto; add new ones here. Imports are relative to the
# repository root (import "pluginapi/base/proto/base.proto").
PROTOS := \
	pluginapi/base/proto/base.proto \
	pluginapi/driver/proto/driver.proto \
	pluginapi/sched/proto/sched.proto \
	pluginapi/iface/proto/iface.proto

.PHONY: proto
proto:
	PATH="$(PROTOC_GEN):$$PATH" $(PROTOC) -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$(PROTOS)
