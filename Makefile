# Two entry points for a fresh clone (see README): `make demo` runs the main job, `make test` the tests.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memprobe-installed

.PHONY: demo test install bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run make PYTHON=/path/to/python3.11"; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned inside the `local` extra, in this same command, so pip takes the CPU build.
	$(BIN)/python -m pip install --quiet -e ".[local,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/memprobe doctor --tier fast
	$(BIN)/memprobe llm ask --model local:fast --record recordings/demo-ask \
		"In one sentence: why should an assistant's long-term memory be audited?"

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/recording.py

clean:
	rm -rf $(VENV) .pytest_cache
