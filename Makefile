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
TGT_ARG   = $(if $(TARGETS),--targets $(TARGETS))

.PHONY: apply check test refresh lock bench clean composed-test gate drift help

help:
	@echo "make apply [PIN=..] [TARGETS=..]  compose the pinned trees with the series (default pin set)"
	@echo "make test                          run the test suite (fixtures only, no network)"
	@echo "make check                         validate series, patches, provenance and pins"
	@echo "make refresh [PIN=..]              regenerate patches/ from the composed branch"
	@echo "make lock [PIN=..]                 record composed tree ids in the pin file"
	@echo "make gate [PIN=..]                 contract gate on the composed trees"
	@echo "make drift PIN=.. ONTO=plugin=main rebase-drift report"
	@echo "make composed-test PIN=v0.23.0     plugin CPU unit tests on the composed tree (needs a mirror)"
	@echo "make bench                         benchmarks (ratios, side by side)"
	@echo "make clean                         remove composed trees and caches"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test,evidence]'
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
	$(OVERLAY) drift $(PIN_ARG) --onto $(ONTO) $(ARGS)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_compose.py
	$(BIN)/python benchmarks/bench_gate.py

composed-test: $(VENV)/.installed
	$(BIN)/python scripts/composed-test $(if $(PIN),--pin $(PIN),--pin v0.23.0) $(ARGS)

clean:
	rm -rf build .overlay .pytest_cache
