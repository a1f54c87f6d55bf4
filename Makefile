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

.PHONY: apply check test refresh lock bench clean composed-test mutation-check gate drift help evidence drift-scan drift-ci bench-drift

help:
	@echo "make apply [PIN=..] [TARGETS=..]  compose the pinned trees with the series (default pin set)"
	@echo "make test                          run the test suite (fixtures only, no network)"
	@echo "make check                         validate series, patches, provenance and pins"
	@echo "make refresh [PIN=..]              regenerate patches/ from the composed branch"
	@echo "make lock [PIN=..]                 record composed tree ids in the pin file"
	@echo "make gate [PIN=..]                 contract gate on the composed trees"
	@echo "make drift PIN=.. ONTO=plugin=main rebase-drift report for the given upstream refs"
	@echo "make drift-scan [DRIFT_SCAN=plugin=main] [BISECT=1]  where along history each patch changed class"
	@echo "make drift-ci MIRROR=DIR           what the nightly workflow runs (fails on conflict)"
	@echo "make evidence [CLAIM=evidence/..]  decisions, analysis.md/.json and plots for a claim"
	@echo "make composed-test PIN=v0.23.0     plugin CPU unit tests on the composed tree (needs a mirror)"
	@echo "make mutation-check PIN=v0.25.0    revert each patch's change: its tests must fail (needs a mirror)"
	@echo "make bench                         benchmarks (ratios, side by side)"
	@echo "make clean                         remove composed trees and caches"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

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

ONTO ?= plugin=main
drift: $(VENV)/.installed
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --onto $(ONTO) $(ARGS)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_compose.py
	$(BIN)/python benchmarks/bench_drift.py
	$(BIN)/python benchmarks/bench_gate.py
	$(BIN)/python benchmarks/bench_evidence.py

CLAIM ?= evidence/mrv2-metadata-barrier
evidence: $(VENV)/.installed
	$(OVERLAY) evidence analyze $(CLAIM) $(ARGS)

# ---- rebase drift (docs/drift.md) -------------------------------------------------
MIRROR        ?= $(OVERLAY_MIRROR)
DRIFT_ONTO    ?= plugin=main
DRIFT_SCAN    ?= plugin=main
DRIFT_FAIL_ON ?= conflict,missing
REPORTS       ?= reports
MIRROR_ARG     = $(if $(MIRROR),--mirror $(MIRROR))

drift-scan: $(VENV)/.installed
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --scan $(DRIFT_SCAN) $(if $(BISECT),--bisect) $(ARGS)

drift-ci: $(VENV)/.installed
	@test -n "$(MIRROR)" || { echo "make drift-ci: set MIRROR=DIR (or OVERLAY_MIRROR)" >&2; exit 2; }
	mkdir -p $(REPORTS)
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --fetch --scan $(DRIFT_SCAN) --fail-on none \
	    --markdown $(REPORTS)/drift-scan.md --junit $(REPORTS)/drift-scan.xml
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --fetch --onto $(DRIFT_ONTO) --fail-on $(DRIFT_FAIL_ON) \
	    --markdown $(REPORTS)/drift.md --junit $(REPORTS)/drift.xml $(ARGS)

bench-drift: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_drift.py $(ARGS)

composed-test: $(VENV)/.installed
	$(BIN)/python scripts/composed-test $(if $(PIN),--pin $(PIN),--pin v0.23.0) $(ARGS)

mutation-check: $(VENV)/.installed
	$(BIN)/python scripts/mutation-check $(if $(PIN),--pin $(PIN),--pin v0.25.0) $(ARGS)

clean:
	rm -rf build .overlay .pytest_cache reports
