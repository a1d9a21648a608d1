# The two README commands: `make demo` (set up and run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
# This machine's pip takes torch 2.13.0 as a local CPU build. GPU users: install your own torch
# into $(VENV) first; it is kept, since torch is only installed when the venv has none.
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
DEMO_ARGS ?= examples/image.py

.PHONY: install demo test lint clean

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

lint: install
	$(BIN)/ruff check adlrec tests examples bench

clean:
	rm -rf $(VENV) .adlrec
