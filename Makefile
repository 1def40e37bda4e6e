# shoal — every target builds or installs what it needs first (fresh clone friendly).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Another Kubernetes release than hack/k8s/versions.env's default: `make test KUBE_VERSION=1.38.0-beta.0`
# (also demo, bench, cluster-bin); its binaries are built and cached beside the default's.
ifneq ($(KUBE_VERSION),)
export SHOAL_KUBE_VERSION := v$(patsubst v%,%,$(KUBE_VERSION))
endif
# The folder operator/ would shadow the standard library's `operator` for `python -m ...` run from
# here (sys.path[0] is the current directory); Python 3.11's safe-path mode leaves it out.
export PYTHONSAFEPATH := 1

.PHONY: help venv cluster-bin lint test test-next unit integration demo cluster-up cluster-down crds \
        bench-core bench-fleet bench-viewers soak bench bench-next bench-large bench-profile clean chart-readme image image-test image-lock

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "shoal: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "shoal: installing shoal (editable) and test tools into $(VENV)"
	@$(PY) -m pip install -q -e '.[test]'
	@touch $@

$(BENCH_STAMP): $(STAMP)
	@$(PY) -m pip install -q -e '.[test,bench]'
	@touch $@

venv: $(STAMP) ## create .venv with shoal and the test tools

cluster-bin: ## build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and helm from Go modules (only what is missing)
	@hack/k8s/build.sh

lint: $(STAMP) ## ruff, mypy --strict (product, tests, bench), import-linter layers
	@$(PY) tools/linkfarm.py
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	MYPYPATH=.typecheck $(VENV)/bin/mypy -p shoal -p tests -p bench
	PYTHONPATH=.typecheck $(VENV)/bin/lint-imports

test: $(STAMP) cluster-bin lint ## the one command: install, build, lint, run every test (real control plane)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

KUBE_VERSION_NEXT := $(shell sed -n 's/^KUBE_VERSION_NEXT=//p' hack/k8s/versions.env)
test-next: $(STAMP) ## the cluster-level tests (tests/integration) against the next release too (hack/k8s/versions.env: KUBE_VERSION_NEXT)
	SHOAL_KUBE_VERSION=$(KUBE_VERSION_NEXT) hack/k8s/build.sh kube-apiserver kube-scheduler kube-controller-manager
	SHOAL_KUBE_VERSION=$(KUBE_VERSION_NEXT) $(VENV)/bin/pytest tests/integration -m cluster $(PYTEST_ARGS)

unit: $(STAMP) ## unit tests only (no control plane)
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

demo: $(STAMP) cluster-bin ## start a local control plane, run shoal on a GPU fleet, print placements (KEEP=1 keeps it)
	$(PY) -m shoal.demo $(if $(KEEP),--keep,)

cluster-up: $(STAMP) cluster-bin ## start etcd + kube-apiserver in .cluster/ and print the KUBECONFIG line
	@$(PY) -m shoal.testing.cluster_cli up --dir .cluster

cluster-down: $(STAMP) ## stop the control plane started by cluster-up
	@$(PY) -m shoal.testing.cluster_cli down --dir .cluster

crds: $(STAMP) ## regenerate crds/ from the pydantic models
	$(PY) -m shoal.cli crds --out crds
	$(PY) -m shoal.cli crds --out helm/shoal/files/crds

chart-readme: $(STAMP) ## regenerate helm/shoal/README.md from values.yaml's `# --` comments
	$(PY) tools/chart_readme.py

bench-core: $(BENCH_STAMP) ## per-pod cycle time at 1,000 / 5,000 / 15,000 nodes, topology gang search (no API server)
	$(PY) bench/core.py
	$(PY) bench/topology_core.py

bench-fleet: $(BENCH_STAMP) ## the fleet page at 5,000 nodes: document build time, first view in Chromium
	$(PY) bench/fleet_page.py

bench-viewers: $(BENCH_STAMP) cluster-bin ## shoal's basic throughput with the fleet page closed and open, alternating runs
	$(PY) bench/viewer_ab.py

soak: $(BENCH_STAMP) cluster-bin ## SOAK_MINUTES (default 60) of churn and faults on KWOK nodes, shoal and kube-scheduler at once: RSS, p99, invariants, lost pods
	$(PY) bench/soak.py --minutes $(or $(SOAK_MINUTES),60)

bench: $(BENCH_STAMP) cluster-bin ## shoal vs kube-scheduler on the real control plane, then the race against the next release
	$(PY) bench/e2e.py
	$(MAKE) --no-print-directory bench-next

bench-next: $(BENCH_STAMP) cluster-bin ## the race against kube-scheduler of the next release (KUBE_VERSION_NEXT): its topology gang workloads, gang preemption in one rack, CompositePodGroup jobs, basic
	SHOAL_KUBE_VERSION=$(KUBE_VERSION_NEXT) hack/k8s/build.sh kube-apiserver kube-scheduler kube-controller-manager
	SHOAL_KUBE_VERSION=$(KUBE_VERSION_NEXT) $(PY) bench/e2e_next.py

bench-large: $(BENCH_STAMP) cluster-bin ## bench plus scale (5,000 nodes / 50,000 pods: unpaced, paced at 200/s, with a CPU hog) and 15,000 / 100,000; the backlog in 5 rounds
	$(PY) bench/e2e.py --large --backlog-rounds 5

bench-profile: $(BENCH_STAMP) cluster-bin ## where shoal's CPU goes per bench scenario (py-spy): docs/profiles.md
	$(PY) bench/e2e.py --profile

# The image (docs/image.md): built without a container engine, rebuilt when an input changes.
IMAGE_OUT    := build/image/oci
IMAGE_INPUTS := Dockerfile pyproject.toml README.md requirements/image.lock hack/image/install.sh \
                tools/image_build.py $(shell git ls-files operator plugins 2>/dev/null)
PIP_TOOLS    := $(HOME)/.cache/shoal/image/pip-tools
PIP_TOOLS_VERSION := 7.6.2
# crane (go-containerregistry) from the Go module proxy: the image test pushes the layout to a local
# registry and validates it with crane, a reader that is not ours.
CRANE_VERSION := v0.22.1
CRANE := $(or $(SHOAL_BIN_DIR),$(HOME)/.cache/shoal/bin)/crane-$(CRANE_VERSION)/crane

$(CRANE):
	@echo "shoal: building crane $(CRANE_VERSION) from Go modules"
	@GOBIN=$(@D) CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' \
	  github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION) \
	  || { echo "image: building crane $(CRANE_VERSION) failed (is the Go module proxy reachable?)" >&2; exit 1; }

$(IMAGE_OUT)/index.json: $(STAMP) $(IMAGE_INPUTS)
	@$(PY) tools/image_build.py --out $(IMAGE_OUT)

image: $(IMAGE_OUT)/index.json ## build the OCI image into build/image/oci without Docker (Debian base via debootstrap, cached)

image-test: image $(CRANE) ## build the image if stale, check its OCI layout, push it to a local registry, run shoal from it
	SHOAL_IMAGE_LAYOUT=$(IMAGE_OUT) SHOAL_CRANE=$(CRANE) SHOAL_IMAGE_REQUIRED=1 $(VENV)/bin/pytest tests/image -p no:cacheprovider $(PYTEST_ARGS)

image-lock: ## refresh requirements/image.lock and build.lock with hashes (pip-tools; needs PyPI)
	@test -x $(PIP_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(PIP_TOOLS) && \
	  $(PIP_TOOLS)/bin/pip install -q -U pip 'pip-tools==$(PIP_TOOLS_VERSION)'; }
	$(PIP_TOOLS)/bin/pip-compile -q --upgrade --generate-hashes --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links -o requirements/image.lock pyproject.toml
	$(PIP_TOOLS)/bin/pip-compile -q --upgrade --generate-hashes --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links -o requirements/build.lock requirements/build.in

clean: ## remove the virtualenv and build artefacts (the Go binary cache stays)
	rm -rf $(VENV) .typecheck build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
