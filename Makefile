# One entry point for set-up, the local demo, tests and benchmarks.
#   make demo   - set up what the demo needs, deploy into a local moto sandbox and start a job there
#   make demo-queue - the same in queue mode: three jobs into a 4-instance queue, one waits
#   make demo-chain - a capacity chain: no spot, on-demand on another preferred type, then the
#                 team's training plan, finishing from the checkpoint; every attempt's cost
#   make demo-sweep - a hyperparameter sweep: its dry run's worst case, six trials two at a time
#                 under the tuner stand-in, `ftl wait`'s progress, the best trial's registered
#                 model version and its evaluation job
#   make test   - set up everything (the training stack and checkov too) and run lint plus every
#                 test (what .ci/run calls)
#   make test-fast - lint (ruff, mypy) and every test that needs no sandbox deploy
#   make soak   - the fault-injection soak (bench/soak.py): both schedulers at 10% and 25% of
#                 the deployed functions' AWS calls failing, a few minutes each, in the sandbox;
#                 jobs and hyperparameter sweeps (bench/soak_sweeps.py)
# Set-up per command: `setup` (demo, sandbox, synth, lint) installs the CDK, moto and the test
# tools; `setup-test` (test, bench) adds the training stack (requirements-train.txt: torch,
# transformers, ...) and checkov's own environment, which only the tests and benchmarks use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1

.PHONY: setup setup-test demo demo-queue demo-chain demo-sweep sandbox sandbox-teams sandbox-queue sandbox-queue-teams test test-fast lint format synth bench soak clean

setup: $(VENV)/.installed node_modules/.installed

setup-test: setup $(VENV)/.installed-train $(VENV)/checkov/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-images.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	$(VENV)/bin/pip install -q --no-deps -r requirements-images.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $@

# The training entrypoint's dependencies (tests/training, bench): not needed by the demo.
$(VENV)/.installed-train: $(VENV)/.installed requirements-train.txt
	$(VENV)/bin/pip install -q -r requirements-dev.txt -r requirements-train.txt
	touch $@

# checkov pins an older boto3, so it gets a virtual environment of its own
$(VENV)/checkov/.installed: requirements-checkov.txt
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install -q -r requirements-checkov.txt
	touch $@

# mypy 2 type-checks for Python 3.10 and newer only; training/ runs on the images' Pythons,
# the oldest 3.9, so it gets the last mypy that targets 3.9, in its own environment.
MYPY_PY39 := 1.20.2
$(VENV)/mypy-py39/.installed-$(MYPY_PY39):
	rm -rf $(VENV)/mypy-py39
	$(PYTHON) -m venv $(VENV)/mypy-py39
	$(VENV)/mypy-py39/bin/pip install -q mypy==$(MYPY_PY39)
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

demo: setup
	$(PY) -m sandbox.demo

demo-queue: setup
	$(PY) -m sandbox.demo --queue

demo-chain: setup
	$(PY) -m sandbox.demo --chain

demo-sweep: setup
	$(PY) -m sandbox.demo --sweep

# make sandbox [PORT=N]; the variants: sandbox-teams, sandbox-queue [RUN_SECONDS=S], sandbox-queue-teams
SANDBOX_ARGS = $(if $(PORT),--port $(PORT)) $(if $(RUN_SECONDS),--run-seconds $(RUN_SECONDS))

sandbox: setup
	$(PY) -m sandbox.demo --serve $(SANDBOX_ARGS)

sandbox-teams: setup
	$(PY) -m sandbox.demo --serve --teams $(SANDBOX_ARGS)

sandbox-queue: setup
	$(PY) -m sandbox.demo --serve --queue $(SANDBOX_ARGS)

sandbox-queue-teams: setup
	$(PY) -m sandbox.demo --serve --queue --teams $(SANDBOX_ARGS)

lint: setup $(VENV)/mypy-py39/.installed-$(MYPY_PY39)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	# strict on jobmodel/ and the Lambdas' packages ([tool.mypy] in pyproject.toml)
	$(VENV)/bin/mypy
	# training/ for Python 3.9, the oldest of the training images (training/mypy.ini)
	$(VENV)/mypy-py39/bin/mypy --config-file training/mypy.ini

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: setup-test lint
	$(VENV)/bin/pytest -n 2 --dist loadgroup -q --durations=25

# Everything but tests/sandbox (the deploys into moto_server take most of the suite's time).
test-fast: setup-test lint
	$(VENV)/bin/pytest -n 2 --dist loadgroup -q -m "not sandbox" --ignore=tests/sandbox

synth: setup
	npx --no-install cdk synth --quiet

bench: setup-test
	$(PY) -m bench.run_all

# SOAK_SECONDS per scheduler and fault rate (default 150); loopback only, bounded in time.
soak: setup
	$(PY) -m bench.soak --seconds $(or $(SOAK_SECONDS),150) --faults 0.10 0.25

clean:
	rm -rf cdk.out .pytest_cache .hypothesis
