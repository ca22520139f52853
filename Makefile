# Two commands: `make demo` and `make test` (ruff, mypy, then pytest). Both create .venv when missing and are quick the second time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.stamp-run
TEST_STAMP := $(VENV)/.stamp-test
CORES := $(shell nproc 2>/dev/null || echo 2)
TEST_WORKERS ?= $(shell n=$$(( $(CORES) * 2 )); [ $$n -gt 8 ] && n=8; echo $$n)

.PHONY: demo test test-quick bench check samples clean

# The packages are installed with uv (from the registry, into the venv first): the test
# install takes about 5 s with it, 30 s with pip. Where uv cannot be had, pip installs them.
# pip stays in the venv (the wheel test builds with it) and is brought up to date.
INSTALL = if [ -x $(VENV)/bin/uv ]; then $(VENV)/bin/uv pip install --quiet --python $(PY) --upgrade pip $(1); \
	else $(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet $(1); fi

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv || echo "uv not available: installing with pip"

$(RUN_STAMP): pyproject.toml | $(PY)
	$(call INSTALL,-e .)
	touch $@

$(TEST_STAMP): pyproject.toml | $(PY)
	$(call INSTALL,-e '.[test]')
	touch $@ $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(VENV)/bin/eviscene-tui demo sample_runs

# the suite runs in two worker processes per core, at most 8 (pytest-xdist): its tests spend
# much of their time waiting on the processes, servers and timers they start (a gated driver,
# the fake vLLM, a pty), and one worker per core left a 2-core machine idle a third of the
# run (pytest 236 -> 181 s on 2 cores, quiet). The package is byte-compiled first, since the
# suite starts it in many processes (workers, the CLI, the pty and gate tests). mypy runs
# beside the suite (about 15 s of one core, in the time the suite's tests wait on the
# processes they start): its output is printed on lines of their own when it ends, amid the
# suite's progress (the suite's summary stays the last line), and either failing fails the
# target.
test: $(TEST_STAMP)
	$(VENV)/bin/ruff check eviscene_tui tests bench
	$(PY) -m compileall -q eviscene_tui
	@echo "$(VENV)/bin/mypy  (beside the suite)"; \
	( out=$$($(VENV)/bin/mypy 2>&1); typed=$$?; printf '\n%s\n' "mypy: $$out"; exit $$typed ) & mypy=$$!; \
	echo "$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal"; \
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal; tests=$$?; \
	wait $$mypy; typed=$$?; \
	test $$typed -eq 0 && test $$tests -eq 0

# the inner loop: the suite without its end-to-end tests (real processes in a pty, gated
# drivers, process pools; marked e2e in tests/conftest.py), with as many workers as `make test`
test-quick: $(TEST_STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m "not e2e"

bench: $(TEST_STAMP)
	$(PY) -m bench

check: $(RUN_STAMP)
	$(VENV)/bin/eviscene-tui check sample_runs

samples: $(RUN_STAMP)
	$(PY) -m eviscene_tui.scaffold.samples sample_runs

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
