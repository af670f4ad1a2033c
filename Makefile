# Two entry points for a fresh clone (see README): `make demo` runs the main job, `make test` the tests.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memprobe-installed

.PHONY: demo demo-live demo-paradigms test test-extras install install-cognee bench clean quick-args live-args

# The quick run (make demo): the paper's user_001 on its own released dialogues (fixed-dialogue run:
# no simulator or assistant call), three dimensions (knowledge, preference, skill), nomem and
# longctx_full, both access modes, attribution, on the embedded model with the embedded framing.
QUICK_DIMS := geographic_knowledge,directness_preference,writing_skill
QUICK_RUN  := recordings/quick-$(shell date +%Y%m%d-%H%M%S)
QUICK_ARGS := --config sessions/quick.toml --sessions sessions/release-a --dialogues sessions/release-a/dialogues \
              --users user_001 --dims $(QUICK_DIMS) --systems nomem,longctx_full --framing embedded \
              --judge-max-tokens 150

# The live on-policy quick run (make demo-live): one sample user played by the embedded model (in-role
# framing), three dimensions (preference, knowledge, episodic), 3-turn cap, nomem and longctx_full.
LIVE_DIMS := reply_layout,regional_geography_knowledge,low_point_episode
LIVE_RUN  := recordings/quick-live-$(shell date +%Y%m%d-%H%M%S)
LIVE_ARGS := --config sessions/quick.toml --users sim_01 --dims $(LIVE_DIMS) --systems nomem,longctx_full \
             --max-turns 3 --agent-max-tokens 150 --simulator-max-tokens 120 --judge-max-tokens 150 \
             --preference-judge-max-tokens 400 --framing embedded

# The protocol-B quick run: 2 episodes of the shipped paradigm suite (suite56-embedded once it is
# realized, else the 2 upstream episodes) with full_context, naive_rag and amem on the embedded models
# (sessions/quick-paradigms.toml), then the report's tables. Sessions reach amem as one transcript each
# (--ingest session), so it writes one note per session instead of one per user turn; the reader sees
# 5 memories or 3 sessions per probe, which keeps its prompts short on a CPU.
PARADIGM_SUITE ?= $(if $(wildcard sessions/paradigms/suite56-embedded/episodes.jsonl),sessions/paradigms/suite56-embedded,sessions/paradigms/upstream-sample)
PARADIGM_RUN   := recordings/paradigms-quick-$(shell date +%Y%m%d-%H%M%S)
PARADIGM_LIMIT ?= 2
PARADIGM_ARGS  := --suite paradigms --sessions $(PARADIGM_SUITE) --limit $(PARADIGM_LIMIT) \
                  --systems amem,full_context,naive_rag \
                  --config sessions/quick-paradigms.toml --concurrency 4 --ingest session --reader-max-tokens 200 \
                  --k 5 --session-k 3

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=/path/to/python3.11"; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned inside the `local` extra, in this same command, so pip takes the CPU build.
	$(BIN)/python -m pip install --quiet -e ".[local,dev]"
	touch $(STAMP)

install: $(STAMP)

# The quick run's arguments, for bench/quick_run.py (one definition for the demo and its benchmark).
quick-args:
	@echo $(QUICK_ARGS)

live-args:
	@echo $(LIVE_ARGS)

demo: $(STAMP)
	$(BIN)/memprobe doctor --tier 1.5b
	$(BIN)/memprobe run --record $(QUICK_RUN) $(QUICK_ARGS)
	$(BIN)/memprobe report $(QUICK_RUN) --csv $(QUICK_RUN)/report
	@if [ -t 0 ] && [ -t 1 ]; then $(BIN)/memprobe replay $(QUICK_RUN); \
	else echo "replay it in a terminal: $(BIN)/memprobe replay $(QUICK_RUN)"; fi

demo-live: $(STAMP)
	$(BIN)/memprobe run --record $(LIVE_RUN) $(LIVE_ARGS)
	$(BIN)/memprobe report $(LIVE_RUN) --csv $(LIVE_RUN)/report
	@if [ -t 0 ] && [ -t 1 ]; then $(BIN)/memprobe replay $(LIVE_RUN); \
	else echo "replay it in a terminal: $(BIN)/memprobe replay $(LIVE_RUN)"; fi

demo-paradigms: $(STAMP)
	$(BIN)/memprobe run --record $(PARADIGM_RUN) $(PARADIGM_ARGS)
	$(BIN)/memprobe report $(PARADIGM_RUN) --csv $(PARADIGM_RUN)/report
	@echo "replay it in a terminal: $(BIN)/memprobe replay $(PARADIGM_RUN)"

# The tests need the three pip-installable memory libraries (pinned extras, installed into this venv
# once): the scripted adapter tests (tests/unit/test_adapters_scripted.py) run mem0ai's, graphiti-core's
# and langmem's own code against a scripted model, and MEMPROBE_REQUIRE_EXTRAS=1 makes a missing
# library fail them instead of skipping. `otel` is the protobuf encoding of `memprobe export otel`.
EXTRAS       := mem0ai,graphiti,langmem,otel
EXTRAS_STAMP := $(VENV)/.memprobe-extras
$(EXTRAS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[local,dev,$(EXTRAS)]"
	touch $@

# The authority the Every Eval Ever export is checked against (tests/functional/test_export_eee.py): the
# every-eval-ever 0.3.0 wheel from PyPI, whose JSON Schemas the test reads out of the zip. Fetched once
# into .test-cache/ (ignored by git; sha256 pinned in tests/eee_wheel.py), never copied into the repository.
EEE_WHEEL := .test-cache/every-eval-ever/every_eval_ever-0.3.0-py3-none-any.whl
$(EEE_WHEEL): | $(STAMP)
	$(BIN)/python tests/eee_wheel.py

# The OpenTelemetry receiver the export is sent to (tests/functional/test_export_phoenix.py): Phoenix, in a
# venv of its own under .test-cache/ (ignored by git) because no Phoenix release installs beside our pins
# without changing one (14.6.0: wrapt 2 -> 1; later ones tenacity, python-dateutil, anthropic), and its
# pytest plugin would load its server into every test process. Its strawberry-graphql 0.314.3 allows
# graphql-core 3.3, which it cannot import: graphql-core is pinned to 3.2.
PHOENIX_VENV  := .test-cache/phoenix-venv
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
$(PHOENIX_STAMP):
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet "arize-phoenix==14.6.0" "graphql-core==3.2.14"
	touch $@

test: $(EXTRAS_STAMP) $(EEE_WHEEL) $(PHOENIX_STAMP)
	MEMPROBE_REQUIRE_EXTRAS=1 MEMPROBE_PHOENIX_PYTHON=$(abspath $(PHOENIX_VENV))/bin/python $(BIN)/python -m pytest -q

# The slow part of the libraries' acceptance (pytest marker `extras`): cognee in its own venv,
# .venv-cognee (its pins conflict with ours; about 1.6 GB), its scripted worker test, and for each
# library a protocol-A mini session (SIGKILL + resume) on the embedded model; the protocol-B sample
# episodes only with MEMPROBE_EXTRAS_PROTOCOL_B=1 (their skip reasons give the cost). See README.
COGNEE_VENV ?= .venv-cognee
test-extras: $(EXTRAS_STAMP) install-cognee
	MEMPROBE_COGNEE_VENV=$(abspath $(COGNEE_VENV)) $(BIN)/python -m pytest -q -m extras tests/unit/test_cognee_worker.py
	MEMPROBE_COGNEE_VENV=$(abspath $(COGNEE_VENV)) $(BIN)/python -m pytest -q -rs -m extras tests/functional/test_library_adapters.py

# cognee's own environment (about 1.6 GB); `memprobe systems install cognee` does the same.
install-cognee: $(COGNEE_VENV)/.memprobe-cognee
$(COGNEE_VENV)/.memprobe-cognee: memprobe_engine/memory/adapters/cognee.py | $(STAMP)
	MEMPROBE_COGNEE_VENV=$(abspath $(COGNEE_VENV)) $(BIN)/memprobe systems install cognee
	touch $@

bench: $(STAMP)
	$(BIN)/python bench/recording.py
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/paradigm_ingest.py

clean:
	rm -rf $(VENV) .pytest_cache .test-cache
