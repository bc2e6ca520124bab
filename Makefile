# knowbench: `make demo` installs everything, self-checks the built-in benchmark, then shows
# the whole job on a real library (examples/demo/demo.py); `make test` runs the whole test
# suite (what CI runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install sandbox browser demo test test-quick lint bench report-screenshot clean

install: $(VENV)/.installed sandbox

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,ray,dense,hf,train,mini-swe-agent]'
	touch $@

# $(call need,COMMAND,DEBIAN_PACKAGE,WHY): install the package when the command is missing
# (as root, with apt-get); otherwise say what to install.
need = command -v $(1) >/dev/null 2>&1 || { \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
	else \
	  echo "knowbench: please install $(2): $(3)" >&2; \
	fi; }

sandbox:
	@$(call need,bwrap,bubblewrap,samples run inside it)

browser:
	@$(call need,chromium,chromium,the report test opens reports in it)

demo: install
	$(BIN)/python examples/demo/demo.py --out runs/demo

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
	$(BIN)/python bench/crossing.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/mine.py
	$(BIN)/python bench/knn.py

# docs/images/report-1400.png: the report of four replay runs at 1400 px (docs/diagnosis.md).
report-screenshot: install browser
	$(BIN)/python bench/report_screenshot.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
