# bpe_nb — the two commands of the README, and the pieces of the development loop.
#   make demo   install the package in .venv and run the main job (train on the bundled sample)
#   make test   install the dev tools in .venv and run every check CI runs (.ci/run calls this)
#   make docs   build the docs site from the notebooks into _docs/ (offline; open _docs/index.html)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: demo test check export readme clean-nbs dev docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The main job: train on the bundled TinyStories sample, then encode and decode a sentence with the result.
DEMO_OUT ?= build/demo/tokenizer.bpe_nb.json
DEMO_TEXT ?= Once upon a time, there was a little dog named Max.
demo: $(BIN)/python
	$(BIN)/python -m pip install -q .
	mkdir -p $(dir $(DEMO_OUT))
	bpe-nb train --out $(DEMO_OUT)
	echo "$(DEMO_TEXT)" | bpe-nb encode --tokenizer $(DEMO_OUT)
	echo "$(DEMO_TEXT)" | bpe-nb encode --tokenizer $(DEMO_OUT) | bpe-nb decode --tokenizer $(DEMO_OUT)

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

# The docs site: notebooks executed, processed by nbdev, built by Jupyter Book into _docs/ (tools/build_docs.py).
# Installs the dev tools only if they are missing, so on a prepared .venv it runs with the network off.
docs: $(BIN)/python
	@$(BIN)/python -c 'import jupyter_book, nbdev, execnb' 2>/dev/null || $(MAKE) dev
	$(BIN)/python tools/build_docs.py

clean-nbs:
	nbdev_clean
