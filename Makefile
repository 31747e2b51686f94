# Kedge — the two commands a newcomer needs:
#   make dev    a local lab: Temporal server + Web UI + worker + SSH test hosts
#   make test   every unit and integration test (installs what it needs)

GO        ?= go
# Builds name files by module path, not by where the tree lies
# (-trimpath): a fresh clone reuses everything Go's build cache holds
# from another clone (compiled packages, linked test binaries) instead of
# compiling Kedge and linking every test binary again.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
BIN       := $(CURDIR)/bin
TOOLS     := $(shell $(GO) env GOPATH)/bin
LAB_DIR   ?= $(CURDIR)/.lab
LAB_HOSTS ?= 3

STATICCHECK_VERSION   := v0.8.2
WORKFLOWCHECK_VERSION := v0.6.0

.PHONY: all build dev team chaos test test-tools test-report unit integration lint bench fuzz deps tools clean record-histories kube-tools vault-tools s3-tools temporal-tools kedge-temporal prometheus-tools

all: build

## build: bin/kedge (the CLI, worker and embedded dev server) and bin/kedge-lab
build:
	$(GO) build -o $(BIN)/kedge ./cmd/kedge
	$(GO) build -o $(BIN)/kedge-lab ./integration/cmd/kedge-lab

## dev: start the local lab (Ctrl-C stops it); then, in another shell:
##   bin/kedge run examples/hello.yaml --inventory .lab/inventory.yaml --wait
dev: deps build kube-tools vault-tools s3-tools
	KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_S3_TOOLS=$$(bash scripts/s3-tools.sh) $(BIN)/kedge-lab --dir $(LAB_DIR) --hosts $(LAB_HOSTS)

## team: the lab's hosts with the team install of docker-compose.yml run
## as local processes (Temporal on PostgreSQL with mutual TLS, Web UI, codec
## server, two workers, webhook); then, in another shell:
##   set -a; . .lab/team.env; set +a; bin/kedge list
team: deps build kube-tools vault-tools s3-tools temporal-tools kedge-temporal
	KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_S3_TOOLS=$$(bash scripts/s3-tools.sh) KEDGE_TEMPORAL_TOOLS=$$(bash scripts/temporal-tools.sh) KEDGE_SERVER_TOOLS=$$(bash scripts/kedge-temporal.sh) $(BIN)/kedge-lab --team --dir $(LAB_DIR) --hosts $(LAB_HOSTS)

# The test world's hosts listen on fixed loopback addresses: one run at a
# time per machine (the lock waits for the other).
IT_LOCK ?= /tmp/kedge-it.lock

## test: lint, unit tests, integration tests against real servers; ends
## with each package's wall time and the 20 slowest tests, and fails when a
## test runs past its budget (integration/budget.txt). One build after
## another, lint first: it compiles Kedge's packages, the embedded Temporal
## server among them, which the Temporal tools then find in Go's build
## cache. (Built side by side, the builds compile the same packages twice
## at once: the tools alone took 47 minutes on a fresh 2-core machine.)
test: deps lint test-tools
	$(GO) build -o $(BIN)/testreport ./internal/testreport/cmd/testreport
	KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_KUBE_NEXT_TOOLS=$$(bash scripts/kube-tools.sh next) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_S3_TOOLS=$$(bash scripts/s3-tools.sh) KEDGE_PROM_TOOLS=$$(bash scripts/prometheus-tools.sh) KEDGE_TEMPORAL_TOOLS=$$(bash scripts/temporal-tools.sh) KEDGE_SERVER_TOOLS=$$(bash scripts/kedge-temporal.sh) flock -o $(IT_LOCK) $(BIN)/testreport run --budget integration/budget.txt -- $(GO) test -json -count=1 -timeout 80m ./...

## test-tools: every server binary the test world runs
test-tools: kedge-temporal temporal-tools kube-tools vault-tools s3-tools prometheus-tools

## test-report: the last `make test`'s tables again (OUTPUT=json for scripts)
OUTPUT ?= text
test-report:
	@$(GO) run ./internal/testreport/cmd/testreport show --output $(OUTPUT)

## chaos: the full set of seeded fault runs against the team install; prints
## a table (fault, runs, completed, paused, violations), fails on a violation.
## KEDGE_CHAOS_SEED=N picks the fault points (default 1).
chaos: deps kube-tools vault-tools temporal-tools kedge-temporal
	KEDGE_CHAOS=full KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_TEMPORAL_TOOLS=$$(bash scripts/temporal-tools.sh) KEDGE_SERVER_TOOLS=$$(bash scripts/kedge-temporal.sh) flock -o $(IT_LOCK) $(GO) test -count=1 -v -run '^TestChaos$$' -timeout 90m ./integration/team/

unit:
	$(GO) test -count=1 -short ./...

integration: deps kube-tools vault-tools s3-tools prometheus-tools temporal-tools kedge-temporal
	KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_KUBE_NEXT_TOOLS=$$(bash scripts/kube-tools.sh next) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_S3_TOOLS=$$(bash scripts/s3-tools.sh) KEDGE_PROM_TOOLS=$$(bash scripts/prometheus-tools.sh) KEDGE_TEMPORAL_TOOLS=$$(bash scripts/temporal-tools.sh) KEDGE_SERVER_TOOLS=$$(bash scripts/kedge-temporal.sh) flock -o $(IT_LOCK) $(GO) test -count=1 -timeout 80m ./integration/...

## kube-tools: build etcd and the Kubernetes control plane for the test world,
## and the next minor's control plane and kubelet (what clusters are
## upgraded to); cached per pinned version, minutes the first time
kube-tools:
	@bash scripts/kube-tools.sh >/dev/null
	@bash scripts/kube-tools.sh next >/dev/null

## vault-tools: build the HashiCorp Vault server for the test world
## (cached per pinned version; minutes the first time on a machine)
vault-tools:
	@bash scripts/vault-tools.sh >/dev/null

## s3-tools: build SeaweedFS, the S3-compatible object store of the test
## world (cached per pinned version; minutes the first time on a machine)
s3-tools:
	@bash scripts/s3-tools.sh >/dev/null

## prometheus-tools: build the Prometheus server of the test world (the
## alert gate's tests)
prometheus-tools:
	@bash scripts/prometheus-tools.sh >/dev/null

## temporal-tools: build temporal-server, temporal-sql-tool and the Web UI
## server at go.mod's versions for the team topology (cached)
temporal-tools:
	@bash scripts/temporal-tools.sh >/dev/null

## kedge-temporal: build Kedge's Temporal server (cmd/kedge-temporal, which
## authorizes calls by certificate role) for the team topology (cached per
## server version and source hash)
kedge-temporal:
	@bash scripts/kedge-temporal.sh >/dev/null

## lint: gofmt, go vet, staticcheck, workflowcheck (determinism of workflows/)
lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/workflowcheck -config workflowcheck.config.yaml ./workflows/...
	GO=$(GO) bash scripts/layers.sh
	bash scripts/errtext.sh
	bash scripts/causes.sh
	$(GO) run ./internal/lint/samebody .
	$(GO) run ./internal/lint/funclen .

## record-histories: re-record the replay-test histories from real runs (after a deliberate workflow change)
## (into workflows/testdata/replay/retries: the histories of runs on which Temporal retries
## actions; those in workflows/testdata/replay are kept as recorded before, for runs in flight)
record-histories: deps kube-tools vault-tools
	mkdir -p workflows/testdata/replay/retries && cp workflows/testdata/replay/codec.key workflows/testdata/replay/retries/codec.key
	KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_VAULT_TOOLS=$$(bash scripts/vault-tools.sh) KEDGE_RECORD_HISTORY=$(CURDIR)/workflows/testdata/replay/retries flock -o $(IT_LOCK) $(GO) test -count=1 -run "Hello|Flaky|FailsTwice|Undoes|Approval|Cancel|RolloutPausedByABlockedDrain|UI|ContinuesAsNew" ./integration/

## bench: one table, every row measured in the same run beside its baseline
## (name | kedge | baseline | ratio | target | met | baseline is); the other
## benchmarks (go test -bench NAME) are single measurements
bench: deps kube-tools s3-tools
	KEDGE_BENCH_PROFILE=$(CURDIR)/.test/bench KEDGE_KUBE_TOOLS=$$(bash scripts/kube-tools.sh) KEDGE_S3_TOOLS=$$(bash scripts/s3-tools.sh) flock -o $(IT_LOCK) $(GO) test -run '^$$' -bench '^BenchmarkTable$$' -benchtime 1x -timeout 30m ./integration/

# Every fuzz target (package:Func). `make test` runs each on its seed
# corpus; `make fuzz` mutates each for FUZZTIME.
FUZZTIME ?= 1m
FUZZ_TARGETS := ./runbooks/source:FuzzParse ./runbooks/source:FuzzExpandedSize ./runbooks:FuzzLoadRunbook ./runbooks:FuzzDecodeInventory \
	./runbooks/expr:FuzzEval ./internal/window:FuzzParse ./chatops:FuzzConfig ./chatops:FuzzHook ./chatops:FuzzParseCommand ./fleetlock:FuzzRequest

## fuzz: run each fuzz target for FUZZTIME (default 1m); a crash stops it and is kept under testdata/fuzz
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn in $$pkg for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

## deps: system packages the test world needs (OpenSSH server, pssh)
deps:
	@bash scripts/deps.sh

tools:
	@test -x $(TOOLS)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -x $(TOOLS)/workflowcheck || $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

clean:
	rm -rf $(BIN) $(LAB_DIR)
