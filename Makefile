# Two commands on a fresh machine with only Python 3.11+: `make demo` and `make test`.
# Each installs what it needs into ./.venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

PACKAGES := referee clients workers bench proto/gen/python

.PHONY: install bytecode demo test lint proto proto-check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The project's bytecode, compiled ahead: where PYTHONDONTWRITEBYTECODE is set (containers, CI) no process writes
# it, and every bot, worker and test process would compile the project's modules again as it starts.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q $(PACKAGES)

demo: bytecode
	$(BIN)/mus demo

test: bytecode
	$(BIN)/pytest -n auto --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/mus bench engine

proto: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH proto/generate.sh

proto-check: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH proto/check.sh

# The C++ example bot (clients/cpp/README.md): needs g++, pkg-config and grpc++, not the venv.
.PHONY: cpp-bot
cpp-bot:
	$(MAKE) -C clients/cpp

# The JavaScript example bot (clients/js/README.md): needs node (20+) and npm, not the venv. `npm ci` installs
# @grpc/grpc-js and @grpc/proto-loader from the lockfile and copies proto/mus/v1 into clients/js/proto.
.PHONY: js-bot
js-bot:
	npm ci --prefix clients/js --no-audit --no-fund
	node clients/js/scripts/copy-proto.js

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
