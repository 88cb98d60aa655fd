# The two commands of the README: `make demo` and `make test`. Each creates its own virtualenv.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
EXTRAS ?= dev,hhem,consistency,plot,mlflow,bm25,ray,server,otel

.PHONY: demo test bench clean

# `make demo` installs only what the demo runs with (the package, the report's plots, ROUGE): the embedding metrics,
# BERTScore and HHEM report themselves unavailable without their extras and say what to install. `make test` adds
# every extra to the same virtualenv.
$(BIN)/.demo: setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[demo]'
	touch $@

$(BIN)/.installed: $(BIN)/.demo
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	$(BIN)/python -m compileall -q open_rag_eval  # an editable install has no bytecode: start-up compiles every module
	touch $@

demo: $(BIN)/.demo
	$(BIN)/open-rag-eval eval --config configs/demo.yaml

test: $(BIN)/.installed
	$(BIN)/lint-imports --no-cache  # the floors (.importlinter, docs/architecture.md)
	$(BIN)/mypy  # types (mypy.ini: the pydantic plugin, the strictness docs/architecture.md states)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/judge_bench.py --queries 20 --passages 5 --concurrency 32 --concurrency 64

clean:
	rm -rf $(VENV) results .open-rag-eval
