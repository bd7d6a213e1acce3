# iolens task runner. `make demo` and `make test` work on a fresh machine: they create .venv,
# install iolens with what it needs, and (as root) Debian's fio, sysstat, linux-perf and chromium
# when missing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint schema stop sysdeps clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

sysdeps:
	@if ! command -v fio >/dev/null 2>&1 || ! command -v sadf >/dev/null 2>&1 || ! command -v perf >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages fio, sysstat, linux-perf and chromium"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio sysstat linux-perf chromium >/dev/null; \
	  else \
	    echo "fio/sysstat/perf/chromium missing: install them (sudo apt-get install fio sysstat linux-perf chromium)"; \
	  fi; \
	fi

demo: $(STAMP) sysdeps
	$(BIN)/iolens --config config/demo.yaml run --once --keep-server

test: $(STAMP) sysdeps
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check pipeline tests bench examples
	$(BIN)/ruff format --check pipeline tests bench examples
	$(BIN)/mypy

schema: $(STAMP)
	$(BIN)/python -m pipeline.settings > config/schemas/pipeline.schema.json

stop: $(STAMP)
	$(BIN)/python -c "from pipeline.sink.embedded import stop_detached; stop_detached('var/noida-db')"

bench: $(STAMP) sysdeps
	$(BIN)/python bench/fio_hist.py
	$(BIN)/python bench/peer_diagnosis.py
	$(BIN)/python bench/darshan_ingest.py
	$(BIN)/python bench/requests.py
	$(BIN)/python bench/service_rate.py
	$(BIN)/python bench/soak.py

clean: stop
	rm -rf var
