# The two README commands: `make demo` (set up and run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
# This machine's pip takes torch 2.13.0 as a local CPU build. GPU users: install your own torch
# into $(VENV) first; it is kept, since torch is only installed when the venv has none.
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
# The demo emulates a 20 ms accelerator step so the curve shows data stalls on any machine.
DEMO_ARGS ?= examples/image.py --device emulate:20

.PHONY: install demo test lint profiles clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev]'

demo: install
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profile $(DEMO_ARGS)

test: install
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/python -m pytest -q

# Re-measure the curves shipped in profiles/ (minutes) into their own store, then export them.
PROFILE_STORE ?= .adlrec/profiles-store
PROFILE_DEVICES ?= cpu emulate:10 emulate:30
profiles: install
	rm -rf $(PROFILE_STORE) && rm -f profiles/*.json
	set -e; for ex in image text audio; do for dev in $(PROFILE_DEVICES); do \
	  MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profile examples/$$ex.py --device $$dev --data-dir $(PROFILE_STORE); \
	done; done
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profiles export --data-dir $(PROFILE_STORE) --out profiles

lint: install
	$(BIN)/ruff check adlrec tests examples bench

clean:
	rm -rf $(VENV) .adlrec
