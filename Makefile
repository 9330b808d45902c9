# One target per habit. Every target sets up its own virtualenv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test lint synth demo dev bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared/lambdajobs infra app.py demo.py

demo: $(STAMP)
	$(PY) demo.py

bench: $(STAMP)
	$(PY) bench/bench.py

dev: $(STAMP)
	$(VENV)/bin/lambdajobs dev

synth: $(STAMP)
	rm -rf cdk.out
	CDK_OUTDIR=cdk.out $(PY) app.py
	@ls cdk.out/*.template.json

clean:
	rm -rf $(VENV) cdk.out build .pytest_cache .mypy_cache .ruff_cache
