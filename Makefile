# nlicl: build the book, test the library. Needs only python3 (3.11) on a fresh machine;
# `make browser-test` also installs Debian's chromium with apt-get when it is missing.
#
#   make book          set up .venv, execute (cached) and build the HTML: _build/html/index.html
#   make test          set up .venv, run the unit tests (not the browser test)
#   make browser-test  open every built page in headless chromium (needs `make book` first)
#   make notebook-test run the chapters' downloaded notebooks in fresh kernels (after `make book`)
#   make reproduce     recompute every measured number into results/
#   make lint          ruff
#   make clean         remove the build, the caches and the set-up stamps (keeps .venv)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .stamps
SETUP_STAMP := $(STAMPS)/setup
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: help setup book test browser-test notebook-test chromium reproduce lint clean

help:
	@sed -n 's/^#   //p' Makefile

# --- set-up: the virtualenv and the pinned packages, reinstalled only when the pins change --
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(SETUP_STAMP): requirements.txt pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet -e .
	@mkdir -p $(STAMPS) && touch $@

setup: $(SETUP_STAMP)

# --- the book ----------------------------------------------------------------------------
# NLICL_BOOK_BUILD=1 makes nlicl_lib.book.display.show write figures for the static site.
book: setup
	NLICL_BOOK_BUILD=1 $(BIN)/python tools/build_book.py

# --- tests -------------------------------------------------------------------------------
test: setup
	$(BIN)/python -m pytest -m "not browser and not built"

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "Installing Debian's chromium (for the browser test)"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core >/dev/null; \
	fi

browser-test: setup chromium
	$(BIN)/python -m pytest -m browser tests/test_browser.py

# The executed notebooks the site offers for download, run as a reader would (fresh kernel, CPU).
notebook-test: setup
	$(BIN)/python -m pytest -m built -s tests/test_notebooks.py

# --- results -----------------------------------------------------------------------------
reproduce: setup
	$(BIN)/python -m nlicl_lib reproduce --all --json-dir results/

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf _build $(STAMPS) .pytest_cache .ruff_cache
