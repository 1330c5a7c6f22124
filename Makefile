# The whole set-up lives here so that a fresh machine needs nothing but Python 3.10+, a C compiler and make.
#   make demo   — create .venv, install, build the Cython core, run the demo
#   make test   — the same set-up, then the whole test suite (every tier, in parallel)
#   make check  — the same set-up, then the unit tier (seconds: run it for every change)
#   make docs   — the documentation site (mkdocs.yml, docs/) built with --strict into site/
#   make image  — the kip714 image, built with podman without any registry; make test-image runs it
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kip714-installed
EXTRAS ?= test,demo,docs,lint

.PHONY: all setup build check lint test demo docs bench bench-quick clean java prometheus haproxy snappy-java chromium systemd

# pytest-xdist workers. The unit tier is CPU-bound: one worker per core. The whole suite mostly waits (on
# sockets, clients, JVMs, compilers): more workers than cores keep both busy. The tiers and the grouping of
# the Spark tests onto one worker (one JVM) are in tests/conftest.py.
# The suite starts hundreds of Python processes (xdist workers, the command line, Spark's Python workers): they
# reuse the bytecode the first one compiled, also on a machine that sets PYTHONDONTWRITEBYTECODE (each process
# would otherwise compile every module it imports, and pytest rewrite every test module's asserts, anew; the
# .pyc files are git-ignored).
unexport PYTHONDONTWRITEBYTECODE

NPROC         := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
CHECK_WORKERS ?= $(NPROC)
TEST_WORKERS  ?= $(shell echo $$(( $(NPROC) * 2 )))

all: test

# Spark and the JDK differential test need a JDK (17+); install Debian's when none is on the machine.
java:
	@command -v javac >/dev/null 2>&1 || { \
	  echo "installing a JDK (openjdk-17-jdk-headless) for Spark and the JDK tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    openjdk-17-jdk-headless >/dev/null; }

# The exporter tests scrape kip714 with a real Prometheus server; install Debian's when none is there.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
	  echo "installing Prometheus (prometheus) for the exporter tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    prometheus >/dev/null; }

# The fleet test (tests/test_fleet.py) puts a real load balancer in front of three proxy replicas: Debian's
# HAProxy, installed when missing on a machine with apt-get.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	  echo "installing HAProxy (haproxy) for the fleet test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    haproxy >/dev/null; }

# The snappy differential test (tests/test_snappy_java.py) runs the real snappy-java: Debian's
# libsnappy-java, installed when missing on a machine with apt-get.
SNAPPY_JAVA_JAR ?= /usr/share/java/snappy-java.jar
snappy-java:
	@test -f $(SNAPPY_JAVA_JAR) || ! command -v apt-get >/dev/null 2>&1 || { \
	  echo "installing snappy-java (libsnappy-java) for the snappy differential test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    libsnappy-java >/dev/null; }

# The report test renders report.html in headless Chromium; install Debian's when it is missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing chromium (headless) for the report page test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core >/dev/null; }

# The systemd units in deploy/systemd/ are checked with systemd-analyze verify (tests/test_service.py); install
# Debian's systemd package (which carries it; no running systemd needed) when it is missing.
systemd:
	@command -v systemd-analyze >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	  echo "installing systemd-analyze (systemd) for the unit checks"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    systemd >/dev/null; }

# The editable install compiles no extension (pip would compile them one at a time, then make build again):
# build (which setup, check, test, demo and docs run) compiles them in place with a job per core.
$(STAMP): pyproject.toml setup.py | java
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel "Cython>=3.1,<4"
	KIP714_ONLY=none $(PY) -m pip install --quiet --no-build-isolation -e ".[$(EXTRAS)]"
	touch $(STAMP)

setup: build

# Recompile the extensions in place (cythonize only rebuilds what changed).
build: $(STAMP)
	$(PY) setup.py --quiet build_ext --inplace --parallel $(NPROC)

check: build
	KIP714_EXAMPLES=0.25 $(PY) -m pytest -m unit -n $(CHECK_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# ruff (lint and format), mypy (strict on the library, looser on tools and CLI: pyproject.toml says why) and
# import-linter's layer contracts (docs/architecture.md)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: build prometheus haproxy snappy-java chromium systemd
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

demo: build
	$(VENV)/bin/kip714 demo $(DEMO_ARGS)

# --strict: a broken link or anchor, a page missing from the nav or a docstring griffe cannot read fails the
# build. The API pages read the compiled modules' docstrings, hence build.
docs: build
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: build
	$(PY) -m pytest bench --benchmark-only $(PYTEST_ARGS)

bench-quick: build
	$(VENV)/bin/kip714 bench --quick

clean:
	rm -rf build src/kip714/*.so src/_native/*/*.c src/_native/*/*.html

# ------------------------------------------------------------------------------------------ hardening
# make fuzz      — coverage-guided fuzzing of every harness in fuzz/ (FUZZ_SECONDS each, default 60;
#                  FUZZ_TARGETS="frames codec_zstd" for some); extensions built with clang coverage in
#                  build/fuzz-tree; findings in fuzz/findings/ (see fuzz/README.md)
# make sanitize  — ASan + UBSan build in build/asan-tree, then the test suite and the fuzz corpora under it
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

.PHONY: fuzz sanitize

fuzz: $(STAMP)
	@$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install --quiet atheris
	PY="$(abspath $(PY))" fuzz/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

sanitize: $(STAMP)
	PY="$(abspath $(PY))" fuzz/sanitize.sh $(PYTEST_ARGS)

# ------------------------------------------------------------------------------------------ the image
# make image       — the kip714 image (deploy/image/: a Debian root filesystem from mmdebstrap imported with
#                    podman, the wheel built from this checkout, its dependencies from the package index)
# make test-image  — make image, then the image tier alone (tests/test_image.py): the proxy in the image in
#                    front of the mock cluster, kip714 conformance --listen, podman stop's drain
# make image-clean — remove the image and its base (the next make image makes the base again)
# podman runs with deploy/image/containers.conf: runc, cgroupfs, no default ulimits, the host's network, so
# that it works without systemd and with few capabilities (a CI container).
IMAGE      ?= localhost/kip714
IMAGE_CONF := $(abspath deploy/image/containers.conf)

.PHONY: image test-image image-clean image-tools

image-tools:
	@{ command -v podman && command -v buildah && command -v mmdebstrap && command -v runc; } >/dev/null 2>&1 || { \
	  echo "installing podman, buildah, mmdebstrap and runc for the image"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    podman buildah mmdebstrap runc >/dev/null; }

image: build image-tools
	CONTAINERS_CONF=$(IMAGE_CONF) PY=$(PY) IMAGE=$(IMAGE) deploy/image/build.sh

test-image: image
	CONTAINERS_CONF=$(IMAGE_CONF) KIP714_IMAGE=$(IMAGE):latest $(PY) -m pytest -m image -n 0 $(PYTEST_ARGS) \
	  tests/test_image.py

image-clean:
	-CONTAINERS_CONF=$(IMAGE_CONF) podman rmi --force $(IMAGE):latest $(IMAGE):$$(sed -n \
	  's/^__version__ = "\(.*\)"/\1/p' src/kip714/__init__.py) localhost/kip714-base:bookworm
