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

# Installed once per pyproject.toml (the install is editable: code changes need no reinstall), so
# a second `make demo` or `make test` goes straight to its job.
STAMP := $(VENV)/.adlrec-installed

install: $(STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: install
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profile $(DEMO_ARGS)

test: install
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/python -m pytest -q

# Re-measure the curves shipped in profiles/ (about half an hour on 2 cores) into their own store,
# then export them. Each line of PROFILE_MATRIX is "example device [--param K=V ...]"; the
# exported JSON records the exact command of each run. The cuda curves in profiles/ came from a GPU
# machine (bench/device_profiles.sh there, `adlrec profiles import` here: docs/profiling.md); this
# target keeps them, since it cannot re-measure them.
PROFILE_STORE ?= .adlrec/profiles-store
PROFILE_BUDGET ?= 3
define PROFILE_MATRIX
image cpu
image emulate:10
image emulate:30
text cpu
text emulate:10
text emulate:30
audio cpu
audio emulate:10
audio emulate:30
image emulate:5
image emulate:20
image emulate:5 --param aug=heavy
image emulate:20 --param aug=heavy
image emulate:5 --param aug=heavy --param batch_size=16
image emulate:20 --param aug=heavy --param batch_size=16
image emulate:5 --param image_size=96 --param crop_size=80
image emulate:20 --param image_size=96 --param crop_size=80
image emulate:5 --param image_size=48 --param crop_size=40 --param batch_size=64
image emulate:20 --param image_size=48 --param crop_size=40 --param batch_size=64
image cpu --param width=8
text emulate:5
text emulate:20
text emulate:5 --param seq_len=256
text emulate:20 --param seq_len=256
text emulate:5 --param seq_len=64 --param batch_size=64
text emulate:20 --param seq_len=64 --param batch_size=64
text cpu --param d_model=32
audio emulate:5
audio emulate:20
audio emulate:5 --param n_fft=1024
audio emulate:20 --param n_fft=1024
audio emulate:5 --param clip_seconds=2.0
audio emulate:20 --param clip_seconds=2.0
audio emulate:5 --param sample_rate=8000 --param batch_size=32
audio emulate:20 --param sample_rate=8000 --param batch_size=32
audio cpu --param width=8
endef
export PROFILE_MATRIX
profiles: install
	rm -rf $(PROFILE_STORE)
	$(BIN)/python -c "import json, pathlib; [f.unlink() for f in pathlib.Path('profiles').glob('*.json') \
	  if json.loads(f.read_text())['device']['kind'] != 'cuda']"
	echo "$$PROFILE_MATRIX" | while read -r ex dev rest; do \
	  MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profile examples/$$ex.py --device $$dev --budget $(PROFILE_BUDGET) \
	    --data-dir $(PROFILE_STORE) $$rest || exit 1; \
	done
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/adlrec profiles export --data-dir $(PROFILE_STORE) --out profiles

lint: install
	$(BIN)/ruff check adlrec tests examples bench

clean:
	rm -rf $(VENV) .adlrec
