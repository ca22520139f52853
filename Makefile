# Two commands: `make demo` and `make test` (ruff, mypy, then pytest). Both create .venv when missing and are quick the second time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.stamp-run
TEST_STAMP := $(VENV)/.stamp-test

.PHONY: demo test bench check samples clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@ $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(VENV)/bin/eviscene-tui demo sample_runs

# the suite runs on every core (pytest-xdist); the package is byte-compiled first, since the
# suite starts it in many processes (workers, the CLI, the pty and gate tests)
test: $(TEST_STAMP)
	$(VENV)/bin/ruff check eviscene_tui tests bench
	$(VENV)/bin/mypy
	$(PY) -m compileall -q eviscene_tui
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist worksteal

bench: $(TEST_STAMP)
	$(PY) -m bench

check: $(RUN_STAMP)
	$(VENV)/bin/eviscene-tui check sample_runs

samples: $(RUN_STAMP)
	$(PY) -m eviscene_tui.scaffold.samples sample_runs

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
