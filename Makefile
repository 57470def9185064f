# The README's two commands: `make demo` and `make test`. Everything else hangs off them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all venv demo test lint typecheck unit bench faults clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m scheduler.demo

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(PY) -m mypy events projections scheduler replay

unit: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

test: $(STAMP) lint typecheck
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/core.py

clean:
	rm -rf $(VENV) evsched-data demo-data .pytest_cache .mypy_cache .ruff_cache
