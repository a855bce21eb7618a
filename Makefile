# nlicl: build the book, test the library. Needs only python3 (3.11) on a fresh machine;
# `make browser-test` also installs Debian's chromium with apt-get when it is missing.
#
#   make book          set up .venv, execute (cached) and build the HTML: _build/html/index.html
#   make book-digest   print the digest of what the pages' outputs depend on besides their code
#   make extension-digest print the digest of the build's own Sphinx extensions (book/_ext)
#   make test          set up .venv, run the unit tests (not the slow ones, not the browser test) and the in-page trainer's (node --test)
#   make test-slow     the slow unit tests: reruns of the stored studies, trained models (minutes)
#   make pdf           print the built site into one PDF, _build/html/nlicl-book.pdf (after `make book`)
#   make browser-test  open every built page in headless chromium, train every chapter's panel in the page, check the built HTML and count the numbers in its prose (needs `make book` first)
#   make notebook-test the downloaded notebooks and the Colab copies, read and run as their readers would (after `make book`)
#   make live-test     every chapter's built notebook in a venv built from binder/ alone, as on Binder (after `make book`)
#   make binder-lock   rewrite binder/requirements.txt (every package pinned) from binder/requirements.in
#   make reproduce     recompute every measured number into results/ and the Results page's table
#   make lint          ruff
#   make clean         remove the build, the caches and the set-up stamps (keeps .venv)

SHELL := /bin/bash
, := ,
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .stamps
SETUP_STAMP := $(STAMPS)/setup
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: help setup book book-digest in-page-digest extension-digest book-cache pdf test test-slow browser-test notebook-test live-test binder-lock chromium reproduce lint clean

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
# MyST-NB's execution cache (jupyter-cache, `execute_notebooks: cache`) runs a page again only
# when its code cells change, not when what they import does (MyST-NB #299, jupyter-book #1633).
# So the pages' other inputs (every file of nlicl_lib but the build's own extensions, the pins,
# the configuration) have one digest, `make book-digest`, kept in _build/.book-inputs: when it
# changes, the execution cache goes, and the doctrees with it (Sphinx re-reads only pages whose
# source changed). The extensions (book/_ext) change how pages are read and written,
# not what they compute: their digest, in _build/.extension-inputs, clears the doctrees only.
# Content digests, not timestamps: a fresh clone has new mtimes. CI's cache is keyed on them.
BOOK_INPUTS_STAMP := _build/.book-inputs
EXTENSION_INPUTS_STAMP := _build/.extension-inputs
JUPYTER_CACHE := _build/.jupyter_cache
IN_PAGE := _build/in-page
BOOK_CACHES := $(JUPYTER_CACHE) _build/.doctrees
EXTENSIONS := book/_ext
digest = { $(1); } | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
source_files = find $(1) -type f ! -path '*/__pycache__/*' ! -name '*.pyc'

# (not nlicl_lib/pages/in_page.py, which no page runs: the in-page export has its own stamp)
book-digest:
	@$(call digest,$(call source_files,nlicl_lib) ! -name in_page.py; \
	  echo requirements.txt; echo pyproject.toml; echo _config.yml)

extension-digest:
	@$(call digest,$(call source_files,$(EXTENSIONS)))

# $(call refresh,stamp,digest target,what changed,what to clear)
refresh = digest=$$($(MAKE) -s --no-print-directory $(2)); \
	if [ "$$(cat $(1) 2>/dev/null)" != "$$digest" ]; then \
	  echo "nlicl: $(3) changed (digest $$digest): clearing $(4)"; \
	  rm -rf $(4); mkdir -p $(dir $(1)); echo "$$digest" > $(1); \
	fi

book-cache:
	@$(call refresh,$(BOOK_INPUTS_STAMP),book-digest,the library$(,) the pins or the configuration,$(BOOK_CACHES))
	@$(call refresh,$(EXTENSION_INPUTS_STAMP),extension-digest,the build's extensions,_build/.doctrees)

# Strict: every Sphinx warning (a cell's stderr among them, `execute.stderr_output: warn`),
# broken cross-reference and failing cell fails the build, with the cell's traceback printed.
# NLICL_BOOK_BUILD=1 makes nlicl_lib.pages.display.show write figures for the static site. The
# HTML build is followed by the `jupyter` builder over the same doctrees: the reader notebooks
# (book/_ext/nlicl_notebooks.py).
# Before Sphinx reads the pages, the pages whose code changed run two at a time (one per
# core: the chapters train on one thread) by jupyter-cache's own parallel executor, into the
# cache MyST-NB reads (it finds a page there by its code cells, read with MyST-NB's reader);
# the build then only renders. A page that fails there runs again in the build, which prints
# its traceback and fails. The cell timeout is the configuration's.
BOOK_BUILD := NLICL_BOOK_BUILD=1 $(BIN)/jupyter-book build . -W -n --keep-going
NOTEBOOK_PAGES = $(shell grep -l '^kernelspec:' book/*.md)
CELL_TIMEOUT = $(shell sed -n 's/^  timeout: *\([0-9]*\).*/\1/p' _config.yml)
# The in-page trainer's data (book/_static/in-page/): every chapter panel's configs and theory
# levels from the library (nlicl_lib/pages/in_page.py, about 45 s), into _static/in-page/ of
# the site, made again when any file of nlicl_lib changes (its stamp: their digest).
in-page-digest:
	@$(call digest,$(call source_files,nlicl_lib))

book: setup book-cache
	@digest=$$($(MAKE) -s --no-print-directory in-page-digest); \
	if [ "$$(cat $(IN_PAGE)/.digest 2>/dev/null)" != "$$digest" ]; then \
	  echo "nlicl: exporting the panels for the in-page trainer (digest $$digest)"; \
	  rm -rf $(IN_PAGE).tmp && $(BIN)/python -m nlicl_lib.pages.in_page export $(IN_PAGE).tmp/in-page \
	  && echo "$$digest" > $(IN_PAGE).tmp/.digest && rm -rf $(IN_PAGE) && mv $(IN_PAGE).tmp $(IN_PAGE); fi
	@mkdir -p $(JUPYTER_CACHE)
	$(BIN)/jcache notebook -p $(JUPYTER_CACHE) add --reader myst_nb_md $(NOTEBOOK_PAGES) >/dev/null
	NLICL_BOOK_BUILD=1 $(BIN)/jcache project -p $(JUPYTER_CACHE) execute \
	  --executor local-parallel --timeout $(CELL_TIMEOUT)
	$(BOOK_BUILD)
	$(BOOK_BUILD) --builder custom --custom-builder jupyter

# The whole book as one PDF, printed from the built site by Chromium (the site links to it),
# then checked: every page of the table of contents, every figure.
pdf: setup chromium
	$(BIN)/python tools/make_pdf.py
	$(BIN)/python -m pytest -m built -q tests/test_pdf.py

# --- tests -------------------------------------------------------------------------------
# One pytest worker per core (pytest-xdist). The unit tests keep a file's tests on one worker
# (they share fixtures); the slow ones, a few long tests of one file, go to any free worker.
test: setup
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not slow and not browser and not built and not live"
	node --test tests/js/

test-slow: setup
	$(BIN)/python -m pytest -n auto --dist load --durations=10 -m "slow and not browser and not built and not live"

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "Installing Debian's chromium (for the browser test)"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core >/dev/null; \
	fi

browser-test: setup chromium
	$(BIN)/python -m pytest -m browser tests/test_browser.py
	$(BIN)/python -m pytest -m browser -s tests/test_in_page_browser.py
	$(BIN)/python -m pytest -m built -q tests/test_figure_captions.py tests/test_chapter_openings.py tests/test_prose_numbers.py

# The notebooks the site offers: each download read as plain Markdown and drawn by nbconvert's
# HTML in Chromium; each Colab copy run in a venv of Colab's versions (tests/envs/).
notebook-test: setup chromium
	$(BIN)/python -m pytest -m built -s tests/test_book_cache.py tests/test_notebooks.py tests/test_colab.py

# Binder: a venv from binder/ alone (requirements, then postBuild), every chapter run in it.
live-test: setup
	$(BIN)/python -m pytest -m live -s tests/test_binder.py

binder-lock: setup
	$(BIN)/python tools/lock_binder.py

# --- results -----------------------------------------------------------------------------
reproduce: setup
	$(BIN)/python -m nlicl_lib reproduce --all --store --json-dir results/

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf _build $(STAMPS) .pytest_cache .ruff_cache .envs
