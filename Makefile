# iolens task runner. `make demo`, `make test` and `make lab` work on a fresh machine: they create
# .venv, install iolens with what it needs, and (as root) Debian's fio, sysstat, linux-perf,
# chromium and systemd (systemd-analyze verifies the shipped unit), and for the incident lab
# mpich, the autotools, zlib and FUSE, when missing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

LAB_PACKAGES := mpich libmpich-dev autoconf automake libtool zlib1g-dev fuse libfuse2 e2fsprogs faketime iproute2

.PHONY: demo test lint schema stop sysdeps labdeps lab clean bench docs dist

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

sysdeps:
	@if ! command -v fio >/dev/null 2>&1 || ! command -v sadf >/dev/null 2>&1 || ! command -v perf >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages fio, sysstat, linux-perf, chromium and systemd"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio sysstat linux-perf chromium systemd >/dev/null; \
	  else \
	    echo "fio/sysstat/perf/chromium/systemd-analyze missing: install them (sudo apt-get install fio sysstat linux-perf chromium systemd)"; \
	  fi; \
	fi

labdeps:
	@if ! command -v mpicc >/dev/null 2>&1 || ! command -v autoreconf >/dev/null 2>&1 || ! command -v libtoolize >/dev/null 2>&1 || ! command -v faketime >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! ldconfig -p | grep -q 'libfuse.so.2 '; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages $(LAB_PACKAGES)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(LAB_PACKAGES) >/dev/null; \
	  else \
	    echo "the incident lab needs root and: apt-get install $(LAB_PACKAGES)"; \
	  fi; \
	fi

demo: $(STAMP)
	$(BIN)/iolens demo

test: $(STAMP) sysdeps labdeps
	$(BIN)/pytest -q

# The incident lab (root): `make lab ARGS="--slow 2 --delay-ms 30"`; `make stop` stops its server.
lab: $(STAMP) sysdeps labdeps
	$(BIN)/iolens lab $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check pipeline tests bench examples scripts
	$(BIN)/ruff format --check pipeline tests bench examples scripts
	$(BIN)/python scripts/gen_records.py --check
	$(BIN)/mypy
	$(BIN)/mypy --strict scripts/shape.py scripts/gen_records.py
	$(BIN)/python scripts/shape.py
	$(BIN)/lint-imports

schema: $(STAMP)
	$(BIN)/iolens config schema > config/schemas/pipeline.schema.json

# The documentation site (var/site), built with --strict. Stale generated reference pages (and
# a stale pipeline/records/sources.py) are regenerated and fail the target, so that CI catches
# them: review, commit, run it again.
docs: $(STAMP)
	$(BIN)/python scripts/gen_docs.py --check || { $(BIN)/python scripts/gen_docs.py; exit 1; }
	$(BIN)/python scripts/gen_records.py --check || { $(BIN)/python scripts/gen_records.py; exit 1; }
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The wheel and sdist a site installs (dist/): everything iolens reads at run time is inside.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

stop: $(STAMP)
	$(BIN)/iolens server stop --data-dir var/noida-db --data-dir var/lab/noida-db

bench: $(STAMP) sysdeps
	$(BIN)/python bench/fio_hist.py
	$(BIN)/python bench/peer_diagnosis.py
	$(BIN)/python bench/sysstat_variants.py
	$(BIN)/python bench/darshan_ingest.py
	$(BIN)/python bench/requests.py
	$(BIN)/python bench/service_rate.py
	$(BIN)/python bench/soak.py
	$(BIN)/python bench/site.py

clean: stop
	rm -rf var dist build
