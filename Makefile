# knowbench: `make demo` installs everything and self-checks the built-in benchmark;
# `make test` runs the whole test suite (what CI runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install sandbox browser demo test test-quick lint bench clean

install: $(VENV)/.installed sandbox

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,ray]'
	touch $@

# Samples run inside bubblewrap; install it when missing (Debian/Ubuntu, as root).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "knowbench: install bubblewrap (e.g. sudo apt-get install bubblewrap); falling back to unshare" >&2; \
	  fi; }

# The report test opens the HTML report in headless Chromium (Debian/Ubuntu, as root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "knowbench: install chromium (apt-get install chromium) for the report test" >&2; \
	  fi; }

demo: install
	$(BIN)/knowbench validate examples/basic
	$(BIN)/knowbench run examples/basic --model reference --out runs/demo-reference --overwrite
	$(BIN)/knowbench run examples/basic --model null --out runs/demo-null --overwrite

test: install browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-quick: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python bench/engines.py
	$(BIN)/python bench/executor_overhead.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
