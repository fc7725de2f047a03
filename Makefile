# bpe_nb — the two commands of the README, and the pieces of the development loop.
#   make demo   install the package in .venv and run the main job (train on the bundled sample)
#   make test   install the dev tools in .venv and run every check CI runs (.ci/run calls this)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: demo test check export readme clean-nbs dev

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The main job.
demo: $(BIN)/python
	$(BIN)/python -m pip install -q .
	$(BIN)/python tools/demo.py

# Everything CI checks, in a fresh or existing .venv.
test: dev
	bash tools/check.sh

dev: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"

# Only the checks, without (re)installing.
check:
	bash tools/check.sh

# After editing a notebook: regenerate the library and the README.
export:
	nbdev_export

readme:
	python tools/make_readme.py

clean-nbs:
	nbdev_clean
