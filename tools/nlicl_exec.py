"""Sphinx extension of the nlicl book: pages executed inline, with a cache that tells the truth.

Loaded from ``_config.yml`` (``sphinx.local_extensions``), before ``nlicl_sphinx``.

**Why inline.** The pages quote their numbers with MyST-NB's ``{eval}`` inline role
(``{eval}`f"{prose.ratio:.4f}"```), which evaluates an expression in the page's kernel where the
text stands. That is the ecosystem's one syntax that the book build (MyST-NB), JupyterLab with
``jupyterlab-myst`` (Binder) and the build's plain-Markdown notebooks (download, Colab) all
read. MyST-NB evaluates it only in its ``inline`` execution mode, which has no cache.

**The cache.** :class:`CachedInlineClient` (it replaces MyST-NB's client for inline pages) keeps
each page's execution in ``_build/.nlicl_cache/<page>.json``: every code cell's outputs, every
``{eval}`` result and the run time. The entry is used again only when its key still matches:
a SHA-256 of the page's code cells, of its ``{eval}`` expressions (in order), of the kernel, and
of everything the outputs depend on outside the page (:func:`inputs_digest`: every file of
``nlicl_lib``, ``requirements.txt``, ``pyproject.toml``). So editing prose re-renders from the
cache, while a change to the library, the pins, a code cell or a quoted expression executes
the page again. A page whose source did not change is read again when the library did
(``env-get-outdated``), since Sphinx would otherwise keep its old doctree.

**What the notebooks carry.** Each ``{eval}`` result is written into its markdown cell's
metadata as ``user_expressions`` (the format ``jupyterlab-myst`` and ``mystmd`` read), so the
executed notebook MyST-NB writes (``_build/jupyter_execute/<page>.ipynb``, the source of the
download and of the Colab copy, see ``nlicl_live``) holds the values the page shows.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import nbformat

CACHE_DIR_NAME = ".nlicl_cache"
"""The cache's folder, beside the HTML output (``_build/.nlicl_cache``)."""
CACHE_FORMAT = 2  # 2: each cell's seconds and source

ROOT = Path(__file__).resolve().parents[1]

EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")
"""An ``{eval}`` inline role in a markdown cell; group 1 is the expression."""


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over what every page's outputs depend on besides the page: the library's files
    (sources and packaged data), the pinned requirements and the package metadata."""
    digest = hashlib.sha256()
    library = root / "nlicl_lib"
    files = sorted(p for p in library.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix != ".pyc" and "sphinxext" not in p.parts)  # the build's, not the pages'
    files += [root / name for name in ("requirements.txt", "pyproject.toml")
              if (root / name).exists()]
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def eval_expressions(notebook: Any) -> list[tuple[int, str]]:
    """``(markdown cell index, expression)`` of every ``{eval}`` role, in reading order."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            found += [(index, m.group(1)) for m in EVAL_ROLE.finditer(cell.source)]
    return found


def page_key(notebook: Any, expressions: list[tuple[int, str]], digest: str) -> str:
    """The cache key of a page: its code, its quoted expressions, its kernel, the inputs."""
    key = hashlib.sha256()
    kernel = (notebook.metadata.get("kernelspec") or {}).get("name", "")
    for part in [f"format {CACHE_FORMAT}", digest, kernel]:
        key.update(part.encode() + b"\0")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            key.update(b"code\0" + cell.source.encode() + b"\0")
    for _, expression in expressions:
        key.update(b"eval\0" + expression.encode() + b"\0")
    return key.hexdigest()


def cache_file(cache_dir: Path, docname: str) -> Path:
    return cache_dir / (docname.replace("/", "__") + ".json")


def load_entry(cache_dir: Path, docname: str) -> dict | None:
    """The cached execution of ``docname`` (any key), or None."""
    path = cache_file(cache_dir, docname)
    if not path.exists():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if entry.get("format") == CACHE_FORMAT else None


def user_expression(expression: str, outputs: list) -> dict:
    """One entry of a markdown cell's ``user_expressions`` (jupyterlab-myst's format)."""
    for output in outputs:
        if output.get("output_type") == "error":
            return {"expression": expression,
                    "result": {"status": "error", "ename": output.get("ename", ""),
                               "evalue": output.get("evalue", ""),
                               "traceback": output.get("traceback", [])}}
        if output.get("output_type") in ("execute_result", "display_data"):
            return {"expression": expression,
                    "result": {"status": "ok", "data": dict(output.get("data", {})),
                               "metadata": dict(output.get("metadata", {}))}}
    return {"expression": expression, "result": {"status": "ok", "data": {}, "metadata": {}}}


def cell_seconds(cell: Any) -> float | None:
    """How long a code cell ran: from the kernel's start of it to its reply (the timestamps
    nbclient records in ``metadata.execution``); None for other cells."""
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if cell.get("cell_type") != "code" or not start or not end:
        return None
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def slowest_cells(cache_dir: Path, count: int = 5) -> list[tuple[float, str, int, str]]:
    """The ``count`` slowest code cells of every cached page: (seconds, page, cell index, the
    cell's first line), slowest first."""
    found = []
    for path in sorted(Path(cache_dir).glob("*.json")):
        entry = load_entry(path.parent, path.stem.replace("__", "/"))
        if entry is None:
            continue
        sources = entry.get("sources") or []
        for index, seconds in enumerate(entry.get("cell_seconds") or []):
            if seconds is not None:
                first = (sources[index] if index < len(sources) else "").strip().split("\n")[0]
                found.append((seconds, entry["docname"], index, first))
    return sorted(found, reverse=True)[:count]


# --- the client -----------------------------------------------------------------------------

_STATE: dict[str, Any] = {"cache_dir": None, "srcdir": None, "digest": None}


def _client_class() -> type:
    from myst_nb.core.execute.base import NotebookClientBase
    from myst_nb.core.execute.inline import NotebookClientInline

    class CachedInlineClient(NotebookClientInline):
        """MyST-NB's inline client, with outputs and ``{eval}`` results taken from, or saved
        to, the page's cache entry (see the module docstring)."""

        def start_client(self) -> None:
            self._expressions = eval_expressions(self.notebook)
            self._key = page_key(self.notebook, self._expressions, _STATE["digest"])
            self._docname = _docname(self.path)
            self._evals: list[tuple[str, list]] = []
            entry = load_entry(_STATE["cache_dir"], self._docname)
            self._stored = entry if entry and entry.get("key") == self._key else None
            self._started = time.perf_counter()
            if self._stored is None:
                self.logger.info(f"nlicl: executing {self._docname} (no valid cache entry)")
                super().start_client()
                return
            self.logger.info(f"nlicl: {self._docname} from the execution cache")
            for cell, stored in zip(self.notebook.cells, self._stored["cells"], strict=True):
                if cell.cell_type == "code":
                    cell.outputs = [nbformat.from_dict(o) for o in stored["outputs"]]
                    cell.execution_count = stored["execution_count"]
            self.notebook.metadata.update(self._stored.get("metadata", {}))

        def code_cell_outputs(self, cell_index: int) -> tuple[int | None, list]:
            if self._stored is not None:
                return NotebookClientBase.code_cell_outputs(self, cell_index)
            # each cell's start and end (for cell_seconds); only for cells: nbclient would also
            # time an {eval} expression's stand-in cell, which has no place for the record
            self._client.record_timing = True
            try:
                return super().code_cell_outputs(cell_index)
            finally:
                self._client.record_timing = False

        def eval_variable(self, name: str) -> list:
            index = len(self._evals)
            if self._stored is not None:
                evals = self._stored["evals"]
                if index >= len(evals) or evals[index]["expression"] != name:
                    raise RuntimeError(f"{self._docname}: {{eval}} {name!r} is not the cached "
                                       f"expression number {index + 1}; delete "
                                       f"{cache_file(_STATE['cache_dir'], self._docname)}")
                outputs = [nbformat.from_dict(o) for o in evals[index]["outputs"]]
            else:
                outputs = super().eval_variable(name)
            self._evals.append((name, outputs))
            return outputs

        def finalise_client(self) -> None:
            if self._stored is None:
                super().finalise_client()

        def close_client(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
            if self._stored is not None:
                self.exec_metadata = {
                    "mtime": self._stored["mtime"], "runtime": self._stored["runtime"],
                    "method": "nlicl-cache", "succeeded": True, "error": None,
                    "traceback": None}
            else:
                if exc_type is None and not self._cell_error:
                    # cells after the last one the page renders (a removed cell) run too
                    self.code_cell_outputs(len(self.notebook.cells) - 1)
                super().close_client(exc_type, exc_val, exc_tb)
            self._write_user_expressions()
            if self._stored is None and exc_type is None and self.exec_metadata \
                    and self.exec_metadata["succeeded"]:
                self._save()

        def _write_user_expressions(self) -> None:
            by_cell: dict[int, list[dict]] = {}
            expected = list(self._expressions)
            for position, (name, outputs) in enumerate(self._evals):
                if position < len(expected) and expected[position][1] == name:
                    by_cell.setdefault(expected[position][0], []).append(
                        user_expression(name, outputs))
                else:
                    self.logger.warning(f"nlicl: {{eval}} {name!r} of {self._docname} is not "
                                        "in a markdown cell's text; not written to the notebook")
            for index, cell in enumerate(self.notebook.cells):
                if cell.cell_type == "markdown":
                    if index in by_cell:
                        cell.metadata["user_expressions"] = by_cell[index]
                    else:
                        cell.metadata.pop("user_expressions", None)

        def _save(self) -> None:
            cells = [{"outputs": [nbformat.from_dict(o) for o in c.get("outputs", [])],
                      "execution_count": c.get("execution_count")} if c.cell_type == "code"
                     else None for c in self.notebook.cells]
            metadata = {k: self.notebook.metadata[k] for k in ("language_info", "widgets")
                        if k in self.notebook.metadata}
            entry = {
                "format": CACHE_FORMAT, "key": self._key, "docname": self._docname,
                "mtime": datetime.now().timestamp(), "runtime": self.exec_metadata["runtime"],
                "cells": cells, "metadata": metadata,
                "cell_seconds": [cell_seconds(c) for c in self.notebook.cells],
                "sources": [c.source if c.cell_type == "code" else "" for c in self.notebook.cells],
                "evals": [{"expression": n, "outputs": o} for n, o in self._evals],
            }
            path = cache_file(_STATE["cache_dir"], self._docname)
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(entry), encoding="utf-8")
            temporary.replace(path)  # never a half-written entry

    return CachedInlineClient


def _docname(path: Path | None) -> str:
    if path is None:
        return "<string>"
    relative = Path(path).resolve().relative_to(Path(_STATE["srcdir"]).resolve())
    return relative.with_suffix("").as_posix()


def _install_client(app: Any) -> None:
    """Have MyST-NB create :class:`CachedInlineClient` for pages executed inline.

    MyST-NB 1.4 picks its client in ``myst_nb.core.execute.create_client``, imported by name into
    ``myst_nb.sphinx_``; that name is replaced, and the original handles every other case
    (another execution mode, an excluded page, a string source)."""
    import myst_nb.sphinx_ as nb_sphinx

    original = getattr(nb_sphinx.create_client, "__wrapped__", nb_sphinx.create_client)
    client_class = _client_class()

    def create_client(notebook: Any, source: str, nb_config: Any, logger: Any,
                      read_fmt: dict | None = None) -> Any:
        path = Path(source)
        excluded = any(PurePosixPath(path.as_posix()).match(pattern)
                       for pattern in nb_config.execution_excludepatterns or ())
        if nb_config.execution_mode != "inline" or excluded or not path.is_file():
            return original(notebook, source, nb_config, logger, read_fmt)
        return client_class(notebook, path, nb_config, logger)

    create_client.__wrapped__ = original
    nb_sphinx.create_client = create_client


def prepare(app: Any) -> None:
    _STATE["cache_dir"] = Path(app.outdir).parent / CACHE_DIR_NAME
    _STATE["srcdir"] = app.srcdir
    _STATE["digest"] = f"format {CACHE_FORMAT}: {inputs_digest()}"  # either change: read again
    _install_client(app)


def record_digest(app: Any, doctree: Any) -> None:
    if not hasattr(app.env, "nlicl_exec_digest"):
        app.env.nlicl_exec_digest = {}
    app.env.nlicl_exec_digest[app.env.docname] = _STATE["digest"]


def outdated_by_inputs(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Pages read with another library or pins than today's: read (so execute) them again."""
    digests = getattr(env, "nlicl_exec_digest", {})
    return sorted(d for d, digest in digests.items()
                  if digest != _STATE["digest"] and d in env.found_docs
                  and d not in added | changed | removed)


def purge(app: Any, env: Any, docname: str) -> None:
    getattr(env, "nlicl_exec_digest", {}).pop(docname, None)


def merge(app: Any, env: Any, docnames: set, other: Any) -> None:
    if not hasattr(env, "nlicl_exec_digest"):
        env.nlicl_exec_digest = {}
    for docname in docnames:
        if docname in getattr(other, "nlicl_exec_digest", {}):
            env.nlicl_exec_digest[docname] = other.nlicl_exec_digest[docname]


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", prepare)
    app.connect("doctree-read", record_digest)
    app.connect("env-get-outdated", outdated_by_inputs)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
