# asya-serverless: every target sets up what it needs (venv + pinned packages) and is idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
PACKAGES := layers/sidecar/python/asya crew/asya_crew gateway/asya_gateway cdk/asya_cdk deploy/asya_deploy local/asya_local
PYTEST_ARGS ?=
# jsii prints a 12-line banner on every CDK import when Node 20 (this machine's) is past jsii's support date. Only
# that end-of-life notice for Node 20 is silenced (a comma-separated list of major versions); any other Node warning
# and every error still shows. Set it empty to see the notice again.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
# pytest's report of the slowest setups, calls and teardowns (where the suite's time goes)
DURATIONS ?= --durations=30
# xdist workers of the pytest phase. More than the 2 cores on purpose: much of the suite's wall time is spent waiting
# (long polls, visibility timeouts, real deadlines, child processes starting); the phase needs about 12 CPU-minutes
# (workers, Node, moto and pip children together), so two workers taking 11-16 minutes leave the cores idle half the
# time or more (the e2e and chaos tiers: 780 s of test time for 270 CPU-seconds). `--dist loadscope` keeps each module on one worker, so module fixtures are still built once; session
# fixtures (the worker's moto) are built once per worker. PYTEST_WORKERS=2 gives the old schedule.
PYTEST_WORKERS ?= 4
# Bytecode is written (a caller's PYTHONDONTWRITEBYTECODE is not passed on): every xdist worker and every child
# interpreter of the suite (`asya dev`, moto's server) then loads the packages and the assert-rewritten test modules
# compiled once, by `warm`, instead of compiling them again. `__pycache__` is ignored by git and never staged into
# an asset; the artifact mesh runs its functions with -B, as Lambda's read-only /var/task would.
unexport PYTHONDONTWRITEBYTECODE
WARM_PID := .asya/pytest-warm.pid
# `$(call timed,PHASE,COMMAND)`: runs COMMAND and prints how long PHASE took (also when it fails), so every run of
# `make test` says where its time went: install, lint, mypy, pytest, artifact suite.
comma := ,
timed = start=$$(date +%s%N); ( $(2) ); rc=$$?; \
	echo "make: $(1) took $$(( ($$(date +%s%N) - start) / 1000000000 )) s (exit $$rc)"; exit $$rc

.PHONY: install chromium demo demo-flow test warm coverage e2e-aws lint format synth lock bench capacity calibrate vectors chaos clean

install: $(STAMP)

## Debian's chromium for the browser tests (tests/browser): installed with apt-get when running as root and missing.
## Never `playwright install`: its browser download cannot be reached from these machines. Without root or apt-get
## the browser tier skips with a loud reason.
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
			|| echo "make: could not install chromium; the browser tests will skip" >&2; \
	fi

$(STAMP): pyproject.toml
	@$(call timed,install,set -e; \
		$(PYTHON) -c 'import sys; assert sys.version_info >= (3$(comma) 11)$(comma) "Python 3.11+ is required: " + sys.version'; \
		test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
		$(BIN)/python -m pip install --quiet --upgrade pip; \
		$(BIN)/python -m pip install --quiet -e ".[cdk$(comma)local$(comma)dev]"; \
		rm -f $(VENV)/.installed-* && touch $@)

## Run the example flow on a local mesh (moto + ESM emulators + gateway), live progress, final result.
## DEMO_ARGS passes options to `asya demo`, e.g. make demo DEMO_ARGS="--port 9000 --flow documents".
DEMO_ARGS ?=
demo: install
	$(BIN)/asya demo --manifest asya.yaml $(DEMO_ARGS)

## The same with the example flow written as Python (flows/triage.py, docs/flows.md), compiled when the manifest loads.
demo-flow: install
	$(BIN)/asya demo --manifest asya.yaml --flow triage

## Lint, type-check, then the whole test suite (unit, functional, infra, e2e, browser, fuzz), then the artifact suite
## (tests/e2e/artifact: one synth and one artifact mesh, 16 interpreters) on its own, so its pollers do not load the
## other tiers' timing.
test: install chromium warm lint
	@while [ -f $(WARM_PID) ] && kill -0 "$$(cat $(WARM_PID))" 2>/dev/null; do sleep 0.5; done; rm -f $(WARM_PID)
	@$(call timed,pytest,$(BIN)/python -m pytest -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadscope $(DURATIONS) $(PYTEST_ARGS) \
		--ignore=tests/e2e/artifact tests)
	@$(call timed,artifact suite,$(BIN)/python -m pytest -p no:cacheprovider -n 0 $(DURATIONS) $(PYTEST_ARGS) \
		tests/e2e/artifact)

## The suite's bytecode, compiled in the background while `lint` runs mypy on one core (`test` waits for it): the
## packages, and the test modules as pytest rewrites their asserts (collection writes them). Saves each xdist worker
## its own ~10 CPU-seconds of collection, and each child interpreter its compile.
warm: install
	@mkdir -p .asya; ( $(BIN)/python -m compileall -q -j 1 $(PACKAGES) functions >/dev/null 2>&1; \
		$(BIN)/python -m pytest -p no:cacheprovider --collect-only -q --ignore=tests/e2e/artifact tests \
		>.asya/pytest-warm.log 2>&1 ) & echo $$! > $(WARM_PID)

## Line and branch coverage of the pytest phase of `make test` (not the artifact suite, whose code runs in child
## interpreters): the total, and per file the lines and branches not run -> terminal, .coverage.
coverage: install chromium
	@$(call timed,pytest with coverage,$(BIN)/python -m pytest -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS) \
		--cov --cov-report=term-missing:skip-covered --ignore=tests/e2e/artifact tests)

## The artifact suite against a throwaway deployment in a real account (docs/deploy.md, "The real-AWS run"): AWS
## credentials and a region needed; without them it prints why and exits 0. Cleans up after itself.
e2e-aws: install
	@if $(BIN)/python -m tests.e2e.artifact.aws_target check; then \
		ASYA_E2E_TARGET=aws $(BIN)/python -m pytest -p no:cacheprovider -n 0 -rs -W ignore::ResourceWarning \
			$(PYTEST_ARGS) tests/e2e/artifact; \
	fi

lint: install
	@$(call timed,lint,$(BIN)/ruff check . && $(BIN)/ruff format --check .)
	@$(call timed,mypy,$(BIN)/mypy $(PACKAGES) cdk/app.py bench chaos tests/e2e/artifact/aws_target.py)

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## Synthesize the CloudFormation template of asya.yaml into cdk.out/ (offline, no AWS account needed).
synth: install
	$(BIN)/python cdk/app.py

## Re-resolve the dependency layers' lock files (cdk/asya_cdk/lockfiles/, with hashes) after a pin in pyproject.toml changed.
lock: install
	$(BIN)/python -c 'import sys; from asya_cdk.locks import main; sys.exit(main())'

## The capacity model (docs/capacity.md): demand against every AWS quota at 100 to 100,000 tasks/s and the manifest's
## declared target, the limits in order, a ramp, cost; pure arithmetic, seconds -> its section of bench/REPORT.md.
capacity: install
	$(BIN)/python -m bench.capacity

## Calibrate the capacity model on the local mesh: a stage throttle of 6 requests/s and an actor capped at
## max_concurrency 2, driven past both; predicted and observed 429s and backlog (under a minute; exits 1 outside the
## stated tolerances, docs/capacity.md).
calibrate: install
	POWERTOOLS_LOG_LEVEL=WARNING $(BIN)/python -m bench.calibrate --stage-rate 6 --sleep 0.5 --rate 12 --seconds 15

## Regenerate the per-task request vectors (asya/capacity/vectors/) after the requests a task makes changed: the
## in-memory recount plus the write units metered on moto (about five minutes).
vectors: install
	POWERTOOLS_LOG_LEVEL=WARNING $(BIN)/python -m bench.vectors

## Benchmarks (overhead, AWS requests and cost per million tasks, latency, cold start, memory) -> bench/REPORT.md.
bench: install
	$(BIN)/python -m bench

## Fault injection on the local mesh (RELIABILITY.md): each fault alone, then 1,000 tasks under all of them; the
## checker's verdict per property -> chaos/REPORT.md. Bounded to 15 minutes; exits 1 on any violation.
chaos: install
	$(BIN)/python -m chaos --budget 900

clean:
	rm -rf cdk.out .cdk.staging .asya/cdk-out .coverage .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/results
	find layers crew gateway cdk deploy local functions flows tests bench chaos -name __pycache__ -type d -prune -exec rm -rf {} +
